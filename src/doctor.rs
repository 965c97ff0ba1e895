//! `gpuscope doctor [PID...]`: a one-shot diagnosis of running jobs (every
//! probed one by default). It watches for two seconds at a tick of at most
//! a second, so that CPU percentages, the activity counters and the
//! cgroup's throttling have two readings, then ranks what it finds, each finding with the figures that
//! show it and what to change: the job's data wait and its cause,
//! `/dev/shm`, DataLoader workers that died, the wheel against the GPU,
//! the allocator (retries, OOMs, fragmentation, a full GPU), a GPU that
//! looks busy while its SMs idle, and the alerts already active.

use serde::Serialize;

use crate::analysis::config::{AlertsConfig, FragmentationConfig, SmIdleConfig};
use crate::analysis::input_cause;
use crate::model::{Gpu, Process, Severity, Snapshot};
use crate::util::units::bytes;

/// The data-wait share at which the finding is critical (the warning's
/// is the `starved` alert's, as configured).
const DATA_WAIT_CRITICAL: f64 = 0.50;

/// One thing worth changing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// A short stable name (`data_wait`, `shm_full`, ...), for scripts.
    pub code: &'static str,
    pub pid: Option<u32>,
    pub gpu: Option<u32>,
    pub title: String,
    /// The figures that show it.
    pub evidence: String,
    pub fix: String,
}

/// The diagnosis: what was examined and what was found, worst first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The processes examined.
    pub pids: Vec<u32>,
    /// PIDs asked for that run nothing on a GPU gpuscope can see (or do
    /// not run at all): a typo must not read as a healthy job.
    pub not_found: Vec<u32>,
    pub findings: Vec<Finding>,
    /// What could not be judged, and why: "nothing found" covers only
    /// what was looked at.
    pub not_judged: Vec<String>,
}

impl Report {
    /// 0 with nothing worse than info, 1 with a warning, 2 with a
    /// critical finding: `check`'s codes; 2 (bad usage) too where a PID
    /// asked for is not a GPU process.
    pub fn exit_code(&self) -> u8 {
        let found = match self.findings.iter().map(|f| f.severity).max() {
            Some(Severity::Critical) => crate::exit::CHECK_CRITICAL,
            Some(Severity::Warning) => crate::exit::CHECK_WARNING,
            _ => crate::exit::OK,
        };
        if self.not_found.is_empty() { found } else { found.max(crate::exit::USAGE) }
    }
}

/// Diagnoses the processes `pids` name (every probed process, and every
/// GPU process where none is probed, when empty), at the alerts' default
/// thresholds.
pub fn diagnose(snap: &Snapshot, pids: &[u32]) -> Report {
    diagnose_with(snap, pids, &AlertsConfig::default())
}

/// As `diagnose`, at the thresholds the user set for the alerts: a finding
/// and the alert it stands beside (`same_as_alert`) judge alike.
pub fn diagnose_with(snap: &Snapshot, pids: &[u32], config: &AlertsConfig) -> Report {
    let chosen: Vec<&Process> = if pids.is_empty() {
        let probed: Vec<&Process> =
            snap.processes.iter().filter(|p| p.allocator.is_some() || p.input.is_some()).collect();
        if probed.is_empty() { snap.processes.iter().filter(|p| !p.gpus.is_empty()).collect() } else { probed }
    } else {
        snap.processes.iter().filter(|p| pids.contains(&p.pid)).collect()
    };
    let mut findings = Vec::new();
    for p in &chosen {
        let gpu = p.gpus.first().and_then(|g| snap.gpus.iter().find(|x| x.index == g.index));
        input(snap, p, gpu, config, &mut findings);
        environment(p, &mut findings);
        memory(p, &config.fragmentation, &mut findings);
    }
    let gpus: Vec<u32> = chosen.iter().flat_map(|p| p.gpus.iter().map(|g| g.index)).collect();
    for gpu in snap.gpus.iter().filter(|g| gpus.contains(&g.index)) {
        activity(gpu, &config.sm_idle, &mut findings);
    }
    let mut not_judged = Vec::new();
    let unprobed: Vec<u32> =
        chosen.iter().filter(|p| p.allocator.is_none() && p.input.is_none()).map(|p| p.pid).collect();
    if !unprobed.is_empty() {
        not_judged.push(format!(
            "{}: data wait and allocator (no probe: start the job under `gpuscope run`, or `gpuscope attach` \
             on Python 3.14+)",
            pid_list(&unprobed)
        ));
    }
    let mut judged_gpus = gpus.clone();
    judged_gpus.sort_unstable();
    judged_gpus.dedup();
    for gpu in snap.gpus.iter().filter(|g| judged_gpus.contains(&g.index)) {
        if gpu.activity.as_ref().is_none_or(|a| a.sm_active.is_none()) {
            let why = gpu.activity_unavailable.map_or("not reported", |u| u.describe());
            not_judged.push(format!("GPU {}: busy-but-idle SMs (SM activity {why})", gpu.index));
        }
    }
    for a in &snap.alerts {
        let ours = a.pid.is_none_or(|pid| chosen.iter().any(|p| p.pid == pid));
        if ours && a.gpu.is_none_or(|g| gpus.contains(&g)) && !findings.iter().any(|f| same_as_alert(f, a)) {
            findings.push(Finding {
                severity: a.severity,
                code: a.kind.name(),
                pid: a.pid,
                gpu: a.gpu,
                title: a.message.clone(),
                evidence: String::new(),
                fix: a.hint.clone(),
            });
        }
    }
    // Worst first; then by process and GPU, for a stable order.
    findings.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.pid.cmp(&b.pid)).then(a.gpu.cmp(&b.gpu)));
    let not_found = pids.iter().copied().filter(|pid| !chosen.iter().any(|p| p.pid == *pid)).collect();
    Report { pids: chosen.iter().map(|p| p.pid).collect(), not_found, findings, not_judged }
}

/// "PID 1, 2 and 3 more": a job may have hundreds of processes.
fn pid_list(pids: &[u32]) -> String {
    const SHOWN: usize = 8;
    let head: Vec<String> = pids.iter().take(SHOWN).map(u32::to_string).collect();
    let more = pids.len().saturating_sub(SHOWN);
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("PID {}{tail}", head.join(", "))
}

/// An alert already said by a finding of its own.
fn same_as_alert(f: &Finding, a: &crate::model::Alert) -> bool {
    let code = match a.kind.name() {
        "starved" => "data_wait",
        other => other,
    };
    // A per-GPU alert (starved, sm_idle) names no PID: the finding on its
    // GPU says it.
    f.code == code && (f.pid == a.pid || (a.pid.is_none() && f.gpu == a.gpu))
}

fn input(snap: &Snapshot, p: &Process, gpu: Option<&Gpu>, config: &AlertsConfig, out: &mut Vec<Finding>) {
    let shm_full = config.shm_full.used_share;
    let at = |severity, code, title: String, evidence: String, fix: String| Finding {
        severity,
        code,
        pid: Some(p.pid),
        gpu: gpu.map(|g| g.index),
        title,
        evidence,
        fix,
    };
    let Some(pipeline) = p.input.as_deref() else { return };
    if let Some(f) = pipeline.failures.iter().rev().find(|f| f.kind.is_shm()) {
        out.push(at(
            Severity::Critical,
            "workers_died",
            format!("PID {}: DataLoader workers died of a full /dev/shm", p.pid),
            f.message.clone().unwrap_or_default(),
            input_cause::SHM_FIX.into(),
        ));
    } else if let Some(e) = input_cause::shared_memory(p, shm_full) {
        out.push(at(
            Severity::Warning,
            "shm_full",
            format!("PID {}: /dev/shm is about to fill", p.pid),
            e.evidence,
            e.fix,
        ));
    }
    if let Some(f) = pipeline.failures.iter().rev().find(|f| !f.kind.is_shm()) {
        out.push(at(
            Severity::Warning,
            "loader_failed",
            format!("PID {}: a DataLoader failed ({:?})", p.pid, f.kind),
            f.message.clone().unwrap_or_default(),
            "Read the worker's traceback in the job's log; a worker killed by SIGKILL is often the OOM killer \
             (dmesg)."
                .into(),
        ));
    }
    let Some((share, loader)) = input_cause::slowest_loader(p) else { return };
    if share < config.starved.min_data_wait {
        return;
    }
    let why = input_cause::explain(snap, p, loader, gpu, shm_full);
    let severity = if share >= DATA_WAIT_CRITICAL { Severity::Critical } else { Severity::Warning };
    let rate = loader.batches_per_s.map(|r| format!("{r:.1} batches/s; ")).unwrap_or_default();
    out.push(at(
        severity,
        "data_wait",
        format!("PID {}: waits for data {:.0}% of the time", p.pid, share * 100.0),
        format!("{rate}{}", why.evidence),
        why.fix,
    ));
}

fn environment(p: &Process, out: &mut Vec<Finding>) {
    let Some(env) = p.environment.as_deref() else { return };
    for d in env.devices.iter().filter(|d| d.arch_supported == Some(false)) {
        out.push(Finding {
            severity: Severity::Critical,
            code: "arch_unsupported",
            pid: Some(p.pid),
            gpu: None,
            title: format!("PID {}: the PyTorch wheel has no kernels for device {}", p.pid, d.ordinal),
            evidence: format!(
                "compute capability {}, the wheel's arch list {}",
                d.capability.as_deref().unwrap_or("?"),
                env.arch_flags.as_deref().unwrap_or("?")
            ),
            fix: "Install a PyTorch build whose CUDA version supports this GPU (pip install torch --index-url \
                  https://download.pytorch.org/whl/cu128 or newer)."
                .into(),
        });
    }
}

fn memory(p: &Process, config: &FragmentationConfig, out: &mut Vec<Finding>) {
    let Some(alloc) = p.allocator.as_ref() else { return };
    for d in &alloc.devices {
        let finding = |severity, code, title: String, evidence: String, fix: &str| Finding {
            severity,
            code,
            pid: Some(p.pid),
            gpu: d.gpu,
            title,
            evidence,
            fix: fix.into(),
        };
        if d.ooms.is_some_and(|n| n > 0) {
            out.push(finding(
                Severity::Critical,
                "oom",
                format!("PID {}: {} CUDA out-of-memory errors", p.pid, d.ooms.unwrap_or(0)),
                format!("reserved {}", d.reserved.map_or_else(|| "?".into(), bytes)),
                "See the OOM post-mortem in the dashboard (Enter on the process); smaller batches, activation \
                 checkpointing, or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
            ));
        } else if d.alloc_retries.is_some_and(|n| n > 0) {
            out.push(finding(
                Severity::Warning,
                "alloc_retry",
                format!("PID {}: the allocator flushed its cache {} times to satisfy a request", p.pid, d.alloc_retries.unwrap_or(0)),
                "cudaMalloc failed and succeeded only after empty_cache: one step from an OOM".into(),
                "Lower the peak (smaller batches, checkpointing) or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
            ));
        }
        if let (Some(frag), Some(reserved)) = (d.fragmentation, d.reserved)
            && frag >= config.enter
            && reserved >= config.min_reserved_mib << 20
        {
            out.push(finding(
                Severity::Warning,
                "fragmentation",
                format!("PID {}: {:.0}% of its reserved memory is fragmented", p.pid, frag * 100.0),
                format!("reserved {}", bytes(reserved)),
                "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PyTorch's own OOM message suggests it).",
            ));
        }
    }
}

fn activity(gpu: &Gpu, config: &SmIdleConfig, out: &mut Vec<Finding>) {
    let (Some(util), Some(a)) = (gpu.utilization.gpu, gpu.activity.as_ref()) else { return };
    let Some(sm) = a.sm_active else { return };
    if f64::from(util) >= config.min_utilization && sm < config.max_sm_active {
        out.push(Finding {
            severity: Severity::Warning,
            code: "sm_idle",
            pid: None,
            gpu: Some(gpu.index),
            title: format!("GPU {}: utilisation {util}% but SM activity {sm:.0}%", gpu.index),
            evidence: "a kernel is nearly always running, but few SMs work: the time goes to launching small kernels"
                .into(),
            fix: "Run larger batches, capture the step in CUDA graphs (torch.compile(mode=\"reduce-overhead\")), fuse \
                  small kernels."
                .into(),
        });
    }
}

/// The report as text, a finding a paragraph.
pub fn render(report: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    if !report.not_found.is_empty() {
        let _ = writeln!(
            out,
            "Not a GPU process: {} (no such process, or it runs nothing on a GPU gpuscope can see).",
            pid_list(&report.not_found)
        );
    }
    if report.pids.is_empty() {
        out.push_str("No GPU process to diagnose.\n");
        return out;
    }
    let _ = writeln!(out, "Examined {}.", pid_list(&report.pids));
    if report.findings.is_empty() {
        out.push_str("Nothing found: no data wait, shared memory, allocator or activity problem.\n");
    }
    for (n, f) in report.findings.iter().enumerate() {
        let sev = match f.severity {
            Severity::Critical => "CRITICAL",
            Severity::Warning => "WARNING",
            Severity::Info => "info",
        };
        let _ = writeln!(out, "\n{}. [{sev}] {}", n + 1, f.title);
        if !f.evidence.is_empty() {
            let _ = writeln!(out, "   evidence: {}", f.evidence);
        }
        if !f.fix.is_empty() {
            let _ = writeln!(out, "   fix: {}", f.fix);
        }
    }
    if !report.not_judged.is_empty() {
        out.push_str("\nNot judged:\n");
        for line in &report.not_judged {
            let _ = writeln!(out, "  - {line}");
        }
    }
    out
}

#[cfg(test)]
mod tests;
