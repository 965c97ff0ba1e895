//! `gpuscope -1`: a plain-text table in the spirit of `nvidia-smi`, ASCII
//! only and within 80 columns, fit to paste into a ticket.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::model::{
    Activity, ActivityUnavailable, Alert, DeviceAllocator, Gpu, GpuState, PidNamespace, ProbeState, Process,
    ProcessAllocator, ProcessGpu, Severity, Snapshot,
};
use crate::sources::visible;
use crate::util::units::{bytes, bytes_pair, opt};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

pub const WIDTH: usize = 80;

/// Said once, under the processes, rather than on every row.
pub const CONTAINER_NOTE: &str = "note: gpuscope runs in a container: [host] PIDs are the host's, not seen here";

pub fn write(snap: &Snapshot, out: &mut impl Write) -> io::Result<()> {
    let text = render(snap);
    out.write_all(text.as_bytes())?;
    out.flush()
}

pub fn render(snap: &Snapshot) -> String {
    let mut lines = Vec::new();
    header(snap, &mut lines);
    for a in &snap.alerts {
        lines.extend(alert_text(a, WIDTH).lines().map(str::to_string));
    }
    lines.push("-".repeat(WIDTH));
    if let Some(err) = &snap.sources.nvml.error {
        lines.push(format!("NVML: {err}"));
    }
    lines.push(format!(
        "{:>3} {:<24} {:>4} {:>5} {:>11} {:>5} {:>4}  {}",
        "GPU", "NAME", "TEMP", "FAN", "POWER", "UTIL", "MEM", "MEMORY USED/TOT"
    ));
    for gpu in &snap.gpus {
        gpu_lines(gpu, &mut lines);
        mig_lines(gpu, &snap.processes, &mut lines);
    }
    if snap.gpus.is_empty() && snap.sources.nvml.ok {
        lines.push("  No GPUs.".into());
    }
    lines.push("-".repeat(WIDTH));
    process_lines(snap, &mut lines);
    if let Some(err) = &snap.sources.host.error {
        lines.push(format!("host: {err}"));
    }
    if snap.sources.host.pid_namespace == Some(PidNamespace::Container) {
        lines.push(CONTAINER_NOTE.into());
    }
    let mut text = String::new();
    for line in lines {
        text.push_str(&fit(&line));
        text.push('\n');
    }
    text
}

fn header(snap: &Snapshot, lines: &mut Vec<String>) {
    let mut first = format!("gpuscope {}", env!("CARGO_PKG_VERSION"));
    if snap.simulated {
        first.push_str(" (simulated GPUs)");
    }
    let h = &snap.host;
    let _ = write!(first, "  {}  {}", h.hostname.as_deref().unwrap_or("n/a"), snap.time.time);
    lines.push(first);
    let d = &snap.driver;
    lines.push(format!(
        "driver {}  CUDA {}  NVML {}",
        d.driver_version.as_deref().unwrap_or("n/a"),
        d.cuda_driver_version.as_deref().unwrap_or("n/a"),
        d.nvml_version.as_deref().unwrap_or("n/a"),
    ));
    lines.push(format!(
        "CPU {} of {}  RAM {} used, {} available  swap {}",
        opt(h.cpu_percent, |p| format!("{p:.0}%")),
        opt(h.cpu_count, |n| n.to_string()),
        bytes_pair(h.memory_used, h.memory_total),
        opt(h.memory_available, bytes),
        bytes_pair(h.swap_used, h.swap_total),
    ));
}

fn gpu_lines(gpu: &Gpu, lines: &mut Vec<String>) {
    let name = gpu.name.as_deref().unwrap_or("n/a");
    let short_name = cell(name, 24);
    if gpu.state == GpuState::Lost {
        lines.push(format!("{:>3} {} LOST: fell off the bus (reset the GPU or reboot)", gpu.index, short_name));
        return;
    }
    let pct = |v: Option<u32>| opt(v, |v| format!("{v}%"));
    let power = match (gpu.power_draw_w, gpu.power_limit_w) {
        (Some(d), Some(l)) => format!("{d:.0}/{l:.0}W"),
        (Some(d), None) => format!("{d:.0}W"),
        _ => "n/a".into(),
    };
    lines.push(format!(
        "{:>3} {} {:>4} {:>5} {:>11} {:>5} {:>4}  {}",
        gpu.index,
        short_name,
        opt(gpu.temperature_c, |t| format!("{t}C")),
        pct(gpu.fan_percent),
        power,
        pct(gpu.utilization.gpu),
        pct(gpu.utilization.memory),
        bytes_pair(gpu.memory.used, gpu.memory.total),
    ));
    if gpu.unified_memory == Some(true) {
        // GB10: NVML counts no memory of its own; the figures are the machine's.
        lines.push("    unified memory: the machine's, shared by CPU and GPU (/proc/meminfo)".into());
    }
    let rate = |v: Option<u64>| opt(v, |b| format!("{}/s", bytes(b)));
    lines.push(format!(
        "    {}  SM {}  mem {}  PCIe tx {} rx {}  enc {} dec {}",
        gpu.performance_state.as_deref().unwrap_or("P?"),
        opt(gpu.clocks.sm_mhz, |c| format!("{c} MHz")),
        opt(gpu.clocks.memory_mhz, |c| format!("{c} MHz")),
        rate(gpu.pcie.tx_bytes_per_s),
        rate(gpu.pcie.rx_bytes_per_s),
        pct(gpu.utilization.encoder),
        pct(gpu.utilization.decoder),
    ));
    lines.extend(activity_line(gpu.activity.as_ref(), gpu.activity_unavailable));
    if let Some(reasons) = gpu.throttle_reasons.as_ref().filter(|r| !r.is_empty()) {
        lines.push(format!("    clocks held down by: {}", reasons.join(", ")));
    }
    if let Some(line) = ecc_line(&gpu.ecc) {
        lines.push(line);
    }
    lines.extend(nvlink_line(gpu.nvlink.as_ref()));
    lines.extend(remap_line(&gpu.remapped_rows));
    lines.extend(health_lines(gpu));
    if let Some(m) = gpu.mig_mode.filter(|m| m.current || m.pending) {
        lines.push(format!(
            "    MIG {}{}",
            on_off(m.current),
            if m.pending != m.current { " (change pending)" } else { "" }
        ));
    }
    if let Some(a) = &gpu.allocator {
        lines.push(format!(
            "    probed {}: alloc {}  resv {}  ovh {}  unprobed {}",
            a.probed_processes,
            opt(a.allocated, bytes),
            opt(a.reserved, bytes),
            opt(a.overhead, bytes),
            opt(a.unprobed, bytes),
        ));
    }
    if let Some(err) = &gpu.error {
        lines.push(format!("    error: {err}"));
    }
}

/// One line per MIG device, under its GPU: "GPU:MIG" (as in the process
/// rows), profile, memory, processes and the UUID `--gpus` takes.
fn mig_lines(gpu: &Gpu, processes: &[Process], lines: &mut Vec<String>) {
    for m in &gpu.mig_devices {
        let on = |g: &ProcessGpu| g.index == gpu.index && g.mig_device == Some(m.index);
        let count = processes.iter().filter(|p| p.gpus.iter().any(on)).count();
        lines.push(format!(
            "  {:>3} {:<10} {:>13}  {:<7} {}",
            format!("{}:{}", gpu.index, m.index),
            m.profile.as_deref().unwrap_or("n/a"),
            bytes_pair(m.memory.used, m.memory.total),
            format!("{count} proc"),
            m.uuid.as_deref().unwrap_or("n/a"),
        ));
        lines.extend(activity_line(m.activity.as_ref(), m.activity_unavailable).map(|l| format!("  {l}")));
    }
}

/// What the GPU's SMs, tensor pipes and memory really did (GPM), under
/// its readings: "SM active 6%" where utilisation says 100%. Nothing
/// where it was not read (a one-shot that did not wait for a second
/// sample) or cannot be (a board before Hopper: a line on every A100
/// would say only that); why, where reading it failed.
fn activity_line(a: Option<&Activity>, why: Option<ActivityUnavailable>) -> Option<String> {
    let pct = |v: Option<f64>| opt(v, |v| format!("{v:.0}%"));
    match (a, why) {
        (Some(a), _) => Some(format!(
            "    SM active {}  occupancy {}  tensor {}  DRAM {}  over {:.1}s (GPM)",
            pct(a.sm_active),
            pct(a.sm_occupancy),
            pct(a.tensor_active),
            pct(a.dram_active),
            a.period_ms as f64 / 1000.0
        )),
        (None, None | Some(ActivityUnavailable::NotRead | ActivityUnavailable::NotSupported)) => None,
        (None, Some(why)) => Some(format!("    activity n/a: {}", why.describe())),
    }
}

/// "0", or "0:4" on MIG device 4 of GPU 0.
fn gpu_cell(g: &ProcessGpu) -> String {
    match g.mig_device {
        Some(m) => format!("{}:{m}", g.index),
        None => g.index.to_string(),
    }
}

/// The allocator's view of one process on one GPU, under its row.
fn allocator_line(a: &ProcessAllocator, gpu: u32) -> Option<String> {
    let d = a.devices.iter().find(|d| d.gpu == Some(gpu))?;
    let state = match a.state {
        ProbeState::Fresh => String::new(),
        ProbeState::Stale => format!(" (stale {}s)", a.age_ms / 1000),
        ProbeState::Gone => " (exited)".into(),
    };
    Some(format!(
        "{:>8}alloc {}  resv {}  frag {}  ovh {}  retry {}  oom {}{state}",
        "",
        opt(d.allocated, bytes),
        opt(d.reserved, bytes),
        opt(d.fragmentation, |f| format!("{:.0}%", f * 100.0)),
        opt(d.overhead, bytes),
        opt(d.alloc_retries, |n| n.to_string()),
        opt(d.ooms, |n| n.to_string()),
    ))
}

/// The DDP rank, the allocator's peaks and pinned host memory, where the
/// probe reports any of them.
fn rank_line(a: &ProcessAllocator, gpu: u32) -> Option<String> {
    let d = a.devices.iter().find(|d| d.gpu == Some(gpu));
    let (alloc_peak, resv_peak) = (d.and_then(|d| d.allocated_peak), d.and_then(|d| d.reserved_peak));
    if a.rank.is_none() && alloc_peak.is_none() && resv_peak.is_none() && a.pinned_host.is_none() {
        return None;
    }
    let rank = match (a.rank, a.world_size) {
        (Some(r), Some(w)) => format!("{r}/{w}"),
        (Some(r), None) => r.to_string(),
        (None, _) => "n/a".into(),
    };
    Some(format!(
        "{:>8}rank {rank}  peak alloc {}  peak resv {}  pinned {}",
        "",
        opt(alloc_peak, bytes),
        opt(resv_peak, bytes),
        opt(a.pinned_host, bytes),
    ))
}

/// An alert and its hint, wrapped (not cut) to `width`: the hint is the
/// part people act on.
pub fn alert_text(a: &Alert, width: usize) -> String {
    let severity = match a.severity {
        Severity::Critical => "CRITICAL",
        Severity::Warning => "WARNING",
        Severity::Info => "INFO",
    };
    let kind = serde_json::to_value(a.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    // `check` prints this as it is: invisible characters made visible here.
    let head = visible(&format!("{severity} {kind}: {}", a.message)).into_owned();
    let mut out = String::new();
    for line in textwrap::wrap(&head, textwrap::Options::new(width).subsequent_indent("    ")) {
        out.push_str(&line);
        out.push('\n');
    }
    let hint = visible(&format!("hint: {}", a.hint)).into_owned();
    for line in
        textwrap::wrap(&hint, textwrap::Options::new(width).initial_indent("    ").subsequent_indent("          "))
    {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn process_lines(snap: &Snapshot, lines: &mut Vec<String>) {
    if snap.processes.is_empty() {
        lines.push("No GPU processes.".into());
        return;
    }
    lines.push(format!(
        "{:>7} {:<10} {:>3} {:<4} {:>9} {:>6} {:>9}  {}",
        "PID", "USER", "GPU", "TYPE", "GPU MEM", "CPU%", "HOST MEM", "COMMAND"
    ));
    for p in &snap.processes {
        let user = cell(p.user.as_deref().unwrap_or("n/a"), 10);
        let command = p.command.as_deref().or(p.name.as_deref()).unwrap_or("n/a");
        for g in &p.gpus {
            let row = format!(
                "{:>7} {} {:>3} {:<4} {:>9} {:>6} {:>9}  ",
                p.pid,
                user,
                gpu_cell(g),
                g.kind.short(),
                opt(g.used_memory, bytes),
                opt(p.cpu_percent, |c| format!("{c:.1}")),
                opt(p.host_memory, bytes),
            );
            lines.extend(with_command(row, p));
            lines.extend(p.allocator.as_ref().and_then(|a| allocator_line(a, g.index)));
            lines.extend(p.allocator.as_ref().and_then(|a| rank_line(a, g.index)));
        }
        let unmatched = p.allocator.iter().flat_map(|a| a.devices.iter().filter(|d| d.gpu.is_none()));
        for (i, d) in unmatched.enumerate() {
            if i == 0 && p.gpus.is_empty() {
                lines.push(format!("{:>7} {:<10} {:>3}  {}", p.pid, user, "-", command));
            }
            lines.extend(unmatched_lines(d));
        }
    }
}

/// A device the probe reports that is on no GPU gpuscope can name: its
/// figures, and why.
fn unmatched_lines(d: &DeviceAllocator) -> Vec<String> {
    let mut lines = vec![format!(
        "{:>8}cuda:{} gpu n/a  alloc {}  resv {}",
        "",
        opt(d.ordinal, |o| o.to_string()),
        opt(d.allocated, bytes),
        opt(d.reserved, bytes)
    )];
    let reason = d.unmatched_reason.as_deref().unwrap_or("not matched");
    let indent = " ".repeat(10);
    let options = textwrap::Options::new(WIDTH).initial_indent(&indent).subsequent_indent(&indent);
    lines.extend(textwrap::wrap(reason, options).into_iter().map(|l| l.into_owned()));
    lines
}

/// The command after the figures, then the workload's tag (`[host]` for a
/// PID of another namespace) where both fit in the width; else the tag
/// gets a line of its own under the row, since the command is what the
/// row is read by.
fn with_command(mut row: String, p: &Process) -> Vec<String> {
    let command = p.command.as_deref().or(p.name.as_deref()).unwrap_or("n/a");
    let tag = match (&p.workload, p.other_namespace) {
        (_, true) => "[host]".to_string(),
        (Some(w), false) => format!("[{}]", w.tag()),
        (None, false) => {
            row.push_str(command);
            return vec![row];
        }
    };
    let room = WIDTH.saturating_sub(row.chars().count() + 1 + tag.chars().count());
    row.push_str(command);
    if command.chars().count() <= room {
        row.push(' ');
        row.push_str(&tag);
        return vec![row];
    }
    vec![row, format!("{:>8}in {tag}", "")]
}

/// A line as the table shows it: invisible formatting characters made
/// visible, cut to the table width by display width (a CJK character or
/// an emoji takes two columns), marking the cut.
fn fit(line: &str) -> String {
    let shown = visible(line);
    let line = shown.trim_end();
    if line.width() <= WIDTH {
        return line.to_string();
    }
    let mut cut = take_columns(line, WIDTH - 3);
    cut.push_str("...");
    cut
}

/// The longest start of `s` that fits in `columns`.
fn take_columns(s: &str, columns: usize) -> String {
    let mut used = 0;
    s.chars()
        .take_while(|c| {
            used += c.width().unwrap_or(0);
            used <= columns
        })
        .collect()
}

/// `s` in exactly `columns` columns: cut, then padded.
fn cell(s: &str, columns: usize) -> String {
    let s = take_columns(&visible(s), columns);
    let pad = columns.saturating_sub(s.width());
    s + &" ".repeat(pad)
}

/// Memory the board could not correct, or pages waiting to be retired:
/// only then, as a healthy board has nothing to say here.
fn ecc_line(ecc: &crate::model::Ecc) -> Option<String> {
    let uncorrected = ecc.uncorrected_volatile.unwrap_or(0).max(ecc.uncorrected_aggregate.unwrap_or(0));
    let pending = ecc.retired_pages_pending == Some(true);
    if uncorrected == 0 && !pending {
        return None;
    }
    let count = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), |n| n.to_string());
    let mut line = format!(
        "    ECC uncorrected {} (lifetime {}), corrected {}",
        count(ecc.uncorrected_volatile),
        count(ecc.uncorrected_aggregate),
        count(ecc.corrected_volatile)
    );
    if pending {
        line.push_str("; pages to retire at reboot");
    }
    Some(line)
}

/// NVLink once there is something to read: traffic (from the second
/// reading on) or a link down. A one-shot of healthy links says nothing.
fn nvlink_line(nvlink: Option<&crate::model::NvLink>) -> Option<String> {
    let n = nvlink?;
    let up = n.links.iter().filter(|l| l.active).count();
    let down: Vec<String> = n.links.iter().filter(|l| !l.active).map(|l| l.link.to_string()).collect();
    if down.is_empty() && n.tx_bytes_per_s.is_none() {
        return None;
    }
    let rate = |v: Option<u64>| v.map_or_else(|| "n/a".to_string(), |b| format!("{}/s", bytes(b)));
    let mut line =
        format!("    NVLink {up}/{} up  tx {} rx {}", n.links.len(), rate(n.tx_bytes_per_s), rate(n.rx_bytes_per_s));
    if !down.is_empty() {
        line.push_str(&format!("; down: link {}", down.join(", ")));
    }
    Some(line)
}

/// The health verdict, a line per reason, when it is not ok; and the
/// newest Xid, which may be an application's fault that leaves the board
/// healthy.
fn health_lines(gpu: &Gpu) -> Vec<String> {
    let mut lines = Vec::new();
    for r in gpu.health.iter().flat_map(|h| &h.reasons) {
        let level = match r.severity {
            Severity::Critical => "CRITICAL",
            Severity::Warning => "warning",
            Severity::Info => "info",
        };
        lines.push(format!("    health {level}: {}", r.message));
    }
    let xids = || gpu.driver_events.iter().filter(|e| e.kind == crate::model::DriverEventKind::Xid);
    if let Some(last) = xids().next_back() {
        let number = last.xid.map_or_else(|| "?".into(), |x| x.to_string());
        let what = last.meaning.as_deref().unwrap_or("not in NVIDIA's Xid catalogue");
        let todo = last.action.map_or("", |a| a.describe());
        lines.push(format!("    Xid {number} at {} ({} heard): {what}; {todo}", last.time.time, xids().count()));
    }
    lines
}

/// Remapped rows only when there are any, or one is pending or failed.
fn remap_line(r: &crate::model::RemappedRows) -> Option<String> {
    let any = r.correctable.unwrap_or(0) > 0 || r.uncorrectable.unwrap_or(0) > 0;
    let (pending, failure) = (r.pending == Some(true), r.failure == Some(true));
    if !any && !pending && !failure {
        return None;
    }
    let count = |v: Option<u32>| v.map_or_else(|| "n/a".to_string(), |n| n.to_string());
    let mut line =
        format!("    remapped rows: {} correctable, {} uncorrectable", count(r.correctable), count(r.uncorrectable));
    if pending {
        line.push_str("; pending a GPU reset");
    }
    if failure {
        line.push_str("; remapping FAILED: replace the board");
    }
    Some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        AlertKind, Driver, Host, HostStatus, PidNamespace, ProcessGpu, ProcessType, SCHEMA_VERSION, Sources, Timestamp,
        Workload, WorkloadKind,
    };

    fn process(pid: u32, command: &str, workload: Option<Workload>) -> Process {
        Process {
            pid,
            gpus: vec![ProcessGpu {
                index: 0,
                kind: ProcessType::Compute,
                used_memory: Some(1 << 30),
                mig_device: None,
                mig_uuid: None,
            }],
            gpu_memory_total: Some(1 << 30),
            name: Some("python3".into()),
            user: Some("alice".into()),
            command: Some(command.into()),
            workload: workload.map(std::sync::Arc::new),
            ..Process::bare(pid)
        }
    }

    fn snap(processes: Vec<Process>, ns: Option<PidNamespace>) -> Snapshot {
        Snapshot {
            schema_version: SCHEMA_VERSION,
            time: Timestamp::from_unix_secs(1_700_000_000),
            interval_ms: 1000,
            collection_ms: 1.0,
            simulated: false,
            host: Host::default(),
            driver: Driver::default(),
            gpus: Vec::new(),
            processes,
            alerts: Vec::new(),
            events: Vec::new(),
            sources: Sources { host: HostStatus { ok: true, error: None, pid_namespace: ns }, ..Sources::default() },
        }
    }

    fn slurm() -> Workload {
        Workload {
            kind: WorkloadKind::Slurm,
            container_id: None,
            pod_uid: None,
            qos: None,
            slurm_job: Some(4242),
            slurm_step: Some("batch".into()),
            slurm_uid: None,
            pod: crate::model::PodNames::default(),
        }
    }

    #[test]
    fn a_workload_tag_follows_the_command_or_its_row_within_80_columns() {
        let long = format!("python3 train.py {}", "--flag value ".repeat(10));
        let mut docker = slurm();
        (docker.kind, docker.slurm_job, docker.container_id) = (WorkloadKind::Docker, None, Some("ab".repeat(32)));
        let procs = vec![process(6, "top", Some(docker)), process(8, &long, Some(slurm()))];
        let text = render(&snap(procs, None));
        let lines: Vec<&str> = text.lines().collect();
        let at = |pid: &str| lines.iter().position(|l| l.trim_start().starts_with(pid)).unwrap();
        assert!(lines[at("6 ")].ends_with("  top [abababababab]"), "{text}");
        // Where both do not fit, the tag has a line of its own.
        assert!(lines[at("8 ")].ends_with("..."), "{text}");
        assert_eq!(lines[at("8 ") + 1], "        in [slurm:4242.batch]", "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert!(!render(&snap(vec![process(9, "x", None)], None)).contains('['), "no tag without a workload");
    }

    #[test]
    fn in_a_container_host_pids_are_marked_and_the_note_said_once() {
        let mut host_pid = process(7, "ignored", None);
        (host_pid.command, host_pid.user, host_pid.other_namespace) = (None, None, true);
        let text = render(&snap(vec![host_pid.clone(), Process { pid: 8, ..host_pid }], Some(PidNamespace::Container)));
        assert_eq!(text.matches(CONTAINER_NOTE).count(), 1, "{text}");
        assert_eq!(text.matches("python3 [host]").count(), 2, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert!(!render(&snap(Vec::new(), Some(PidNamespace::Host))).contains("container"));
    }

    #[test]
    fn rank_peaks_and_pinned_only_where_the_probe_has_them() {
        let json = serde_json::json!({
            "framework": "torch", "framework_version": null, "backend": "native", "alloc_conf": null,
            "alloc_conf_var": null, "alloc_conf_source": null, "rank": 3, "local_rank": 3, "world_size": 8,
            "pinned_host": 2147483648u64, "pinned_host_peak": null, "state": "fresh", "age_ms": 100,
            "devices": [{"gpu": 0, "allocated_peak": 1073741824u64}]
        });
        let mut a: ProcessAllocator = serde_json::from_value(json).unwrap();
        assert_eq!(rank_line(&a, 0).unwrap(), "        rank 3/8  peak alloc 1.0 GiB  peak resv n/a  pinned 2.0 GiB");
        (a.rank, a.pinned_host, a.devices) = (None, None, Vec::new());
        assert_eq!(rank_line(&a, 0), None);
    }

    #[test]
    fn nvlink_and_remapped_rows_show_only_with_something_to_say() {
        use crate::model::{NvLink, NvLinkState, RemappedRows};
        let links = |down: bool| (0..4).map(|l| NvLinkState { link: l, active: !(down && l == 3) }).collect();
        let quiet = NvLink { links: links(false), tx_bytes_per_s: None, rx_bytes_per_s: None };
        assert_eq!(nvlink_line(Some(&quiet)), None, "a one-shot of healthy links");
        assert_eq!(nvlink_line(None), None);
        let busy = NvLink { tx_bytes_per_s: Some(2 << 30), rx_bytes_per_s: Some(1 << 30), ..quiet.clone() };
        assert_eq!(nvlink_line(Some(&busy)).unwrap(), "    NVLink 4/4 up  tx 2.0 GiB/s rx 1.0 GiB/s");
        let down = NvLink { links: links(true), ..quiet };
        assert_eq!(nvlink_line(Some(&down)).unwrap(), "    NVLink 3/4 up  tx n/a rx n/a; down: link 3");
        let none =
            RemappedRows { correctable: Some(0), uncorrectable: Some(0), pending: Some(false), failure: Some(false) };
        assert_eq!(remap_line(&none), None);
        assert_eq!(remap_line(&RemappedRows::default()), None, "not supported says nothing");
        let bad = RemappedRows { uncorrectable: Some(1), failure: Some(true), ..none };
        assert_eq!(
            remap_line(&bad).unwrap(),
            "    remapped rows: 0 correctable, 1 uncorrectable; remapping FAILED: replace the board"
        );
    }

    #[test]
    fn activity_shows_where_read_and_why_not_where_it_failed() {
        let a = Activity {
            period_ms: 1000,
            sm_active: Some(6.2),
            sm_occupancy: Some(3.0),
            tensor_active: Some(0.0),
            dram_active: None,
            ..Activity::default()
        };
        let line = activity_line(Some(&a), None).unwrap();
        assert_eq!(line, "    SM active 6%  occupancy 3%  tensor 0%  DRAM n/a  over 1.0s (GPM)");
        assert_eq!(activity_line(None, Some(ActivityUnavailable::NotRead)), None, "a one-shot not asked for it");
        assert_eq!(activity_line(None, Some(ActivityUnavailable::NotSupported)), None, "an A100 says nothing");
        assert_eq!(activity_line(None, None), None);
        let refused = activity_line(None, Some(ActivityUnavailable::NoPermission)).unwrap();
        assert_eq!(refused, "    activity n/a: the driver refused (no permission); asking again later");
        let mut gpu = Gpu::blank(0, GpuState::Ok);
        gpu.activity = Some(a);
        let text = render(&Snapshot { gpus: vec![gpu], ..snap(Vec::new(), None) });
        assert!(text.contains(&line) && text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
    }

    #[test]
    fn health_reasons_and_the_newest_xid_each_get_a_line() {
        let mut g = Gpu::blank(0, GpuState::Ok);
        assert!(health_lines(&g).is_empty(), "nothing judged, nothing said");
        g.health = Some(crate::model::Health::from_reasons(
            vec![crate::model::HealthReason {
                code: crate::model::HealthCode::RowRemapFailed,
                severity: Severity::Critical,
                message: "a row remapping failed: replace the board".into(),
            }],
            Vec::new(),
        ));
        g.driver_events.push(crate::model::DriverEvent {
            time: crate::model::Timestamp::from_unix_secs(1_700_000_000),
            kind: crate::model::DriverEventKind::Xid,
            xid: Some(13),
            mnemonic: None,
            meaning: Some("graphics engine exception".into()),
            action: Some(crate::model::XidAction::RestartApp),
            severity: Severity::Warning,
            gpu_instance_id: None,
            compute_instance_id: None,
        });
        assert_eq!(
            health_lines(&g),
            [
                "    health CRITICAL: a row remapping failed: replace the board",
                "    Xid 13 at 2023-11-14T22:13:20.000Z (1 heard): graphics engine exception; restart the application",
            ]
        );
    }

    #[test]
    fn ecc_shows_only_when_memory_went_bad() {
        let mut ecc =
            crate::model::Ecc { corrected_volatile: Some(4), uncorrected_volatile: Some(0), ..Default::default() };
        assert_eq!(ecc_line(&ecc), None, "corrected errors alone are the board doing its job");
        ecc.uncorrected_aggregate = Some(2);
        ecc.retired_pages_pending = Some(true);
        assert_eq!(
            ecc_line(&ecc).unwrap(),
            "    ECC uncorrected 0 (lifetime 2), corrected 4; pages to retire at reboot"
        );
        assert!(ecc_line(&ecc).unwrap().len() <= WIDTH);
    }

    #[test]
    fn alerts_and_lines_show_invisible_characters_and_fit_by_width() {
        let a = Alert {
            kind: AlertKind::GpuLost,
            severity: Severity::Critical,
            gpu: Some(0),
            pid: None,
            since: Timestamp::from_unix_secs(1_700_000_000),
            value: None,
            threshold: None,
            message: "GPU 0 (H100\u{202E}) fell off the bus".into(),
            hint: "reset\u{200B} it".into(),
        };
        let text = alert_text(&a, 100);
        assert!(text.contains("H100\u{FFFD})") && text.contains("reset\u{FFFD} it"), "{text}");
        let wide = format!("  0 {}", "数".repeat(60));
        let cut = fit(&wide);
        assert!(cut.ends_with("...") && cut.width() <= WIDTH && cut.width() >= WIDTH - 1, "{cut}");
        assert_eq!(cell("数据处理", 5), "数据 ");
        assert_eq!(cell("ab", 4), "ab  ");
    }
}
