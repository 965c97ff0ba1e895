//! Enter: one process on one GPU in full — command line, host figures,
//! what that GPU (or MIG device) really does (its activity counters), the
//! allocator's backend and configuration, rank, every figure on this
//! GPU, its memory over time, and what to do about what it shows. All of
//! it, wrapped at word boundaries: what a screen cannot hold scrolls, and
//! the last line says how much more there is.

use std::sync::Arc;

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::model::{
    Activity, DeviceAllocator, DriverEventKind, Gpu, HealthVerdict, ProbeState, Process, ProcessAllocator, Severity,
    Snapshot, Workload,
};
use crate::sources::OnScreen;
use crate::tui::mouse::Scroll;
use crate::tui::render::format::{activity, duration_short, interval, or_na};
use crate::tui::render::layout::WIDE;
use crate::tui::render::pipeline::{self, LABEL};
use crate::tui::render::text::{spread, wrap};
use crate::tui::render::{Ctx, hints, trend};
use crate::tui::rows::RowKey;
use crate::tui::state::DetailView;
use crate::tui::term::Lines;
use crate::util::units::bytes;

/// Draws the details scrolled to `view.scroll` (as far as their end
/// allows); says how they scroll.
/// Also says which readings asked only while shown the details show: the
/// board line's clocks and PCIe rates, asked while the details are open
/// (scrolled out of sight, they are a key away).
pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, snap: &Snapshot, view: DetailView) -> (Scroll, OnScreen) {
    let key = view.key;
    let process = snap.processes.iter().find(|p| p.pid == key.pid && p.gpus.iter().any(|g| g.index == key.gpu));
    let wide = area.width >= WIDE;
    let text_w = if wide { area.width / 2 } else { area.width } as usize;
    let mut body = Vec::new();
    match process {
        Some(p) => {
            let why = pipeline::cause_of(snap, p, key.gpu);
            let (head, tail) = fields(ctx, snap, p, key, why.as_ref());
            for (label, value) in head {
                body.extend(field(ctx, label, &value, text_w));
            }
            body.extend(pipeline::lines(ctx, snap, p, key.gpu, text_w, why.as_ref()));
            for (label, value) in tail {
                body.extend(field(ctx, label, &value, text_w));
            }
        }
        None => body.push(Line::styled(format!("PID {} is no longer on GPU {}.", key.pid, key.gpu), ctx.theme.warn)),
    }
    // Narrow: the chart under the text where all of it fits with room
    // for a chart; else the text has the whole height, and scrolls.
    let (text, chart) = if wide {
        let half = area.width / 2;
        (Rect { width: half, ..area }, Some(Rect { x: area.x + half + 1, width: area.width - half - 1, ..area }))
    } else {
        let want = u16::try_from(body.len() + 3).unwrap_or(u16::MAX);
        let chart_h = area.height.saturating_sub(want);
        let chart_h = if chart_h >= 7 { chart_h } else { 0 };
        let text = Rect { height: area.height - chart_h, ..area };
        let chart = Rect { y: area.y + text.height, height: chart_h, ..area };
        (text, (chart_h > 0).then_some(chart))
    };
    // Under the title: the body, and where it does not all fit, a last
    // line that says how much more there is either way.
    let room = usize::from(text.height).saturating_sub(1);
    let overflow = body.len() > room;
    let page = if overflow { room.saturating_sub(1) } else { room };
    let last = body.len().saturating_sub(page);
    let start = view.scroll.min(last);
    let below = body.len().saturating_sub(start + page);
    let mut lines = vec![title(ctx, process, key, text_w)];
    lines.extend(body.into_iter().skip(start).take(page));
    if overflow && room > 0 {
        lines.push(more(ctx, start, below, text_w));
    }
    frame.render_lines(Lines(lines), text);
    if let Some(chart) = chart {
        trend::process(frame, chart, ctx, key);
    }
    let board = process.is_some() && snap.gpus.iter().any(|g| g.index == key.gpu);
    (Scroll { page, last }, OnScreen { clocks: board, pcie: board })
}

/// The last line of details that do not fit: how many lines are above
/// and below the screen, and the keys that get there.
fn more<'a>(ctx: &Ctx, above: usize, below: usize, w: usize) -> Line<'a> {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let lines = |n: usize| if n == 1 { "line" } else { "lines" };
    let mut said = Vec::new();
    if below > 0 {
        said.push(format!("{} {below} more {}", sym.down, lines(below)));
    }
    if above > 0 {
        said.push(format!("{} {above} {} above", sym.up, lines(above)));
    }
    let left = vec![Span::styled(sym.rule, t.rule), Span::styled(format!(" {} ", said.join("  ")), t.title)];
    let keys = if below > 0 { " j/k PgDn/PgUp End " } else { " k PgUp Home " };
    spread(left, vec![Span::styled(keys, t.dim), Span::styled(sym.rule, t.rule)], w, sym.rule, t.rule)
}

fn title<'a>(ctx: &Ctx, p: Option<&Process>, key: RowKey, w: usize) -> Line<'a> {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let name = p.and_then(|p| p.name.as_deref()).map(|n| ctx.clean(n)).unwrap_or_default();
    let left = vec![
        Span::styled(sym.rule, t.rule),
        Span::styled(format!(" PID {} on GPU {} {} {name} ", key.pid, key.gpu, sym.dot), t.title),
    ];
    spread(left, vec![Span::styled(" Esc: back ", t.dim), Span::styled(sym.rule, t.rule)], w, sym.rule, t.rule)
}

/// Every id in full: the table has room only for a short tag.
fn workload_text(w: &Workload) -> String {
    let mut parts = vec![w.kind.name().to_string()];
    parts.extend(w.container_id.as_ref().map(|id| format!("container {id}")));
    if let Some(name) = &w.pod.pod_name {
        let ns = w.pod.pod_namespace.as_deref().map(|ns| format!("{ns}/")).unwrap_or_default();
        let source = match w.pod.pod_source {
            Some(crate::model::PodSource::Kubelet) => " (kubelet)",
            Some(crate::model::PodSource::Container) => " (container's own files)",
            None => "",
        };
        parts.push(format!("pod {ns}{name}{source}"));
        parts.extend(w.pod.container_name.as_ref().map(|c| format!("container {c}")));
    }
    let uid = if w.pod.pod_name.is_some() { "UID" } else { "pod" };
    parts.extend(w.pod_uid.as_ref().map(|id| format!("{uid} {id}")));
    parts.extend(w.qos.and_then(|q| serde_json::to_value(q).ok()?.as_str().map(|q| format!("QoS {q}"))));
    parts.extend(w.slurm_job.map(|job| format!("job {job}")));
    parts.extend(w.slurm_step.as_ref().map(|step| format!("step {step}")));
    parts.extend(w.slurm_uid.map(|uid| format!("uid {uid}")));
    parts.join("  ")
}

/// A label, and the value wrapped beside it.
fn field<'a>(ctx: &Ctx, label: &str, value: &str, w: usize) -> Vec<Line<'a>> {
    wrap(value, w.saturating_sub(LABEL))
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let label = if i == 0 { label } else { "" };
            Line::from(vec![Span::styled(format!("{label:<LABEL$}"), ctx.theme.label), Span::raw(part)])
        })
        .collect()
}

/// The fields before where the time goes (the process, its GPU's
/// activity), and those after it.
type Fields = Vec<(&'static str, String)>;

fn fields(
    ctx: &Ctx,
    snap: &Snapshot,
    p: &Process,
    key: RowKey,
    why: Option<&crate::analysis::input_cause::Explained>,
) -> (Fields, Fields) {
    let mut lines = vec![("command", ctx.clean(p.command.as_deref().or(p.name.as_deref()).unwrap_or("n/a")))];
    let started = p.start_time.as_ref().map(|t| duration_short(ctx.now_ms.saturating_sub(t.time_unix_ms)));
    lines.push((
        "host",
        format!(
            "user {}  parent {}  running {}  CPU {}  memory {}",
            ctx.clean(p.user.as_deref().unwrap_or("n/a")),
            or_na(p.parent_pid, |v| v.to_string()),
            started.unwrap_or_else(|| "n/a".into()),
            or_na(p.cpu_percent, |c| format!("{c:.1}%")),
            or_na(p.host_memory, bytes),
        ),
    ));
    let gpus: Vec<String> = p
        .gpus
        .iter()
        .map(|g| {
            let share = share(snap, g.index, p.pid).unwrap_or_default();
            format!("GPU {} {} ({}){share}", g.index, or_na(g.used_memory, bytes), g.kind.short())
        })
        .collect();
    lines.push(("NVML", gpus.join("   ")));
    lines.extend(gpu_activity(snap, p, key));
    // The board's power, energy, clocks and PCIe.
    if let Some(gpu) = snap.gpus.iter().find(|g| g.index == key.gpu) {
        lines.push(("board", board(gpu)));
    }
    let head = std::mem::take(&mut lines);
    if let Some(w) = &p.workload {
        lines.push(("workload", workload_text(w)));
    }
    if let Some(gpu) = snap.gpus.iter().find(|g| g.index == key.gpu) {
        lines.extend(health(ctx, gpu));
    }
    let device = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(key.gpu)));
    if let Some(a) = &p.allocator {
        let state = match a.state {
            ProbeState::Fresh => format!("fresh ({})", duration_short(a.age_ms)),
            ProbeState::Stale => format!("QUIET for {}", duration_short(a.age_ms)),
            ProbeState::Gone => "process exited".into(),
        };
        let s = |v: &Option<Arc<str>>| v.as_deref().map_or_else(|| "n/a".into(), |v| ctx.clean(v));
        let n = |v: Option<u32>| or_na(v, |v| v.to_string());
        lines.push((
            "allocator",
            format!(
                "{} {}  backend {}  {}",
                ctx.clean(&a.framework),
                s(&a.framework_version),
                s(&a.backend),
                conf(ctx, a)
            ),
        ));
        lines.extend(env_line(ctx, a).map(|l| ("", l)));
        lines.push((
            "",
            format!(
                "rank {} local {} world {}  probe {state}  pinned host {} (peak {})",
                n(a.rank),
                n(a.local_rank),
                n(a.world_size),
                or_na(a.pinned_host, bytes),
                or_na(a.pinned_host_peak, bytes)
            ),
        ));
        if let Some(d) = device {
            lines.extend(figures(a, d));
        }
        for d in a.devices.iter().filter(|d| d.gpu.is_none()) {
            lines.push(("unmatched", unmatched(ctx, d)));
        }
        lines.extend(post_mortem(ctx, snap, a, key.gpu));
    }
    let hints = hints::for_process(snap, p, device, key, &pipeline::said(snap, p, why));
    for (i, h) in hints.iter().enumerate() {
        lines.push((if i == 0 { "hints" } else { "" }, format!("{} {}", ctx.sym.dot, ctx.clean(h))));
    }
    (head, lines)
}

/// The board's readings the GPU's line has no room for: power and its
/// limit, the energy counter (since the driver loaded), clocks, PCIe.
fn board(gpu: &Gpu) -> String {
    let watts = |w: Option<f64>| or_na(w, |w| format!("{w:.0}"));
    let mhz = |m: Option<u32>| or_na(m, |m| format!("{m} MHz"));
    let rate = |b: Option<u64>| or_na(b, |b| format!("{}/s", bytes(b)));
    format!(
        "GPU {}: power {}/{} W  energy {} since the driver loaded  SM clock {}  memory clock {}  PCIe rx {} tx {}",
        gpu.index,
        watts(gpu.power_draw_w),
        watts(gpu.power_limit_w),
        or_na(gpu.energy_mj, |mj| format!("{:.3} kWh", mj as f64 / 3.6e9)),
        mhz(gpu.clocks.sm_mhz),
        mhz(gpu.clocks.memory_mhz),
        rate(gpu.pcie.rx_bytes_per_s),
        rate(gpu.pcie.tx_bytes_per_s),
    )
}

/// The activity counters of the GPU the row is on, or of its MIG device's
/// GPU instance: every one with what it counts; why there are none where
/// there are none.
fn gpu_activity(snap: &Snapshot, p: &Process, key: RowKey) -> Vec<(&'static str, String)> {
    let Some(gpu) = snap.gpus.iter().find(|g| g.index == key.gpu) else { return Vec::new() };
    let mig = p.gpus.iter().find(|g| g.index == key.gpu).and_then(|g| g.mig_device);
    let (whose, a, why) = match mig.and_then(|m| gpu.mig_devices.iter().find(|d| d.index == m)) {
        Some(m) => (
            format!("GPU {} MIG {} (its GPU instance)", gpu.index, m.index),
            m.activity.as_ref(),
            m.activity_unavailable,
        ),
        None => (format!("GPU {}", gpu.index), gpu.activity.as_ref(), gpu.activity_unavailable),
    };
    let Some(a) = a else {
        // A recording made before gpuscope read the counters has no
        // reason, and nothing to say.
        return why.map(|why| ("activity", format!("{whose}: n/a, {}", why.describe()))).into_iter().collect();
    };
    let period = interval(std::time::Duration::from_millis(a.period_ms));
    activity_lines(a, &whose, &period)
}

/// Every activity counter, with a few words on what it counts; each
/// line within 70 columns, the value's at 80.
fn activity_lines(a: &Activity, whose: &str, period: &str) -> Vec<(&'static str, String)> {
    let rate = |v: Option<u64>| or_na(v, |b| format!("{}/s", bytes(b)));
    let sm = format!(
        "SM active {} (time with a warp)  occupancy {} (warps of the maximum)",
        activity(a.sm_active),
        activity(a.sm_occupancy)
    );
    let tensor = format!(
        "tensor any {}  HMMA {} (fp16/bf16)  IMMA {} (int)  DFMA {} (fp64)",
        activity(a.tensor_active),
        activity(a.tensor_hmma),
        activity(a.tensor_imma),
        activity(a.tensor_dfma)
    );
    let pipes = format!(
        "DRAM {} (memory bandwidth)  pipes FP64 {}  FP32 {}  FP16 {}",
        activity(a.dram_active),
        activity(a.fp64_active),
        activity(a.fp32_active),
        activity(a.fp16_active)
    );
    let links = format!(
        "PCIe tx {} rx {}  NVLink tx {} rx {}",
        rate(a.pcie_tx_bytes_per_s),
        rate(a.pcie_rx_bytes_per_s),
        rate(a.nvlink_tx_bytes_per_s),
        rate(a.nvlink_rx_bytes_per_s)
    );
    vec![
        ("activity", format!("{whose} over {period} (NVML GPM), share of the time:")),
        ("", sm),
        ("", tensor),
        ("", pipes),
        ("", links),
    ]
}

/// The GPU's health where it is not ok, every reason; and its newest
/// driver events (Xid, ECC), newest first, each with what it means and
/// what to do.
fn health(ctx: &Ctx, gpu: &Gpu) -> Vec<(&'static str, String)> {
    let mut lines = Vec::new();
    if let Some(h) = gpu.health.as_ref().filter(|h| h.verdict != HealthVerdict::Ok) {
        for (i, r) in h.reasons.iter().enumerate() {
            let level = if r.severity == Severity::Critical { "CRIT" } else { "WARN" };
            lines.push((if i == 0 { "health" } else { "" }, format!("{level} {}", ctx.clean(&r.message))));
        }
    }
    for (i, e) in gpu.driver_events.iter().rev().take(DRIVER_EVENTS_SHOWN).enumerate() {
        let what = match (e.kind, e.xid) {
            (DriverEventKind::Xid, Some(x)) => format!("Xid {x}"),
            (DriverEventKind::EccDoubleBit, _) => "ECC double-bit".into(),
            (DriverEventKind::EccSingleBit, _) => "ECC single-bit".into(),
            _ => "event".into(),
        };
        let meaning = e.meaning.as_deref().map(|m| ctx.clean(m)).unwrap_or_else(|| "not in the Xid catalogue".into());
        let todo = e.action.map(|a| format!("; {}", a.describe())).unwrap_or_default();
        let at = duration_short(ctx.now_ms.saturating_sub(e.time.time_unix_ms));
        lines.push((if i == 0 { "events" } else { "" }, format!("{what} {at} ago: {meaning}{todo}")));
    }
    lines
}

/// How many of a GPU's driver events the detail view lists.
const DRIVER_EVENTS_SHOWN: usize = 3;

/// NVML's newest sample of the process on that GPU, where it samples:
/// the share of the period a kernel of it ran (UTIL%, NVML's `smUtil`)
/// and it read or wrote memory, worded so that no one reads it as the
/// SM activity GPM counts.
fn share(snap: &Snapshot, gpu: u32, pid: u32) -> Option<String> {
    let samples = snap.gpus.iter().find(|g| g.index == gpu)?.process_utilization.as_ref()?;
    let u = samples.iter().find(|u| u.pid == pid)?;
    let media =
        if u.encoder + u.decoder > 0 { format!(" enc {}% dec {}%", u.encoder, u.decoder) } else { String::new() };
    Some(format!(
        "  util {}% mem {}%{media} of the time (NVML's per-process sample: a kernel ran, not SM activity)",
        u.sm, u.memory
    ))
}

/// The settings in effect, named by the variable this version reads, and
/// where they came from.
fn conf(ctx: &Ctx, a: &ProcessAllocator) -> String {
    if &*a.framework == "jax" {
        return String::new();
    }
    let value = a.alloc_conf.as_deref().map_or_else(|| "(unset)".into(), |v| ctx.clean(v));
    let source = match a.alloc_conf_source.as_deref() {
        Some("runtime") => " (runtime)".to_string(),
        Some("environment") => " (environment)".to_string(),
        Some(other) => format!(" ({})", ctx.clean(other)),
        None => String::new(),
    };
    format!("{}={value}{source}", ctx.clean(a.conf_var()))
}

/// Both variables as the environment has them, where one that is set says
/// something else than the settings in effect (the other variable wins, or
/// the settings were changed at run time).
fn env_line(ctx: &Ctx, a: &ProcessAllocator) -> Option<String> {
    let env = a.alloc_conf_env.as_ref().filter(|e| {
        [&e.pytorch_alloc_conf, &e.pytorch_cuda_alloc_conf].into_iter().any(|v| v.is_some() && *v != a.alloc_conf)
    })?;
    let v = |v: &Option<Arc<str>>| v.as_deref().map_or_else(|| "(unset)".into(), |v| ctx.clean(v));
    Some(format!(
        "env PYTORCH_ALLOC_CONF={}  PYTORCH_CUDA_ALLOC_CONF={}",
        v(&env.pytorch_alloc_conf),
        v(&env.pytorch_cuda_alloc_conf)
    ))
}

fn figures(a: &ProcessAllocator, d: &DeviceAllocator) -> Vec<(&'static str, String)> {
    let b = |v: Option<u64>| or_na(v, bytes);
    let c = |v: Option<u64>| or_na(v, |v| v.to_string());
    let seen = a.oom_events.filter(|n| *n > 0).map(|n| format!(" (probe saw {n})")).unwrap_or_default();
    let mut lines = vec![
        (
            "this GPU",
            format!(
                "allocated {} (peak {})  reserved {} (peak {})  cached {}{}",
                b(d.allocated),
                b(d.allocated_peak),
                b(d.reserved),
                b(d.reserved_peak),
                b(d.cached),
                d.releasable.map(|r| format!(" (releasable {})", bytes(r))).unwrap_or_default()
            ),
        ),
        (
            "",
            format!(
                "inactive split {}  fragmentation {}  overhead {}  segments {}  retries {}  OOMs {}{seen}",
                b(d.inactive_split),
                or_na(d.fragmentation, |f| format!("{:.0}%", f * 100.0)),
                b(d.overhead),
                c(d.segments),
                c(d.alloc_retries),
                c(d.ooms)
            ),
        ),
    ];
    if &*a.framework == "jax" {
        lines.push(("", format!("largest free block {}  limit {}", b(d.largest_free_block), b(d.bytes_limit))));
    }
    if let Some(why) = uncounted(a) {
        lines.push(("", why.into()));
    }
    lines
}

/// Why counters read n/a, where the backend is the reason.
/// The newest OOM post-mortem on this GPU: its one-line reading, when it
/// happened, and the pools behind it (largest free block, free bytes in
/// blocks too small for the request), then the largest segments.
fn post_mortem(ctx: &Ctx, snap: &Snapshot, a: &ProcessAllocator, gpu: u32) -> Vec<(&'static str, String)> {
    let Some(r) = a.last_oom.iter().rev().find(|r| r.gpu == Some(gpu) || r.gpu.is_none()) else {
        return Vec::new();
    };
    let ago = snap.time.time_unix_ms.saturating_sub(r.time_unix_ms);
    let reading = r.verdict.clone().unwrap_or_else(|| r.read());
    let mut lines = vec![("last OOM", format!("{} ago: {}", duration_short(ago), ctx.clean(&reading)))];
    for pool in r.pools.iter().flatten() {
        lines.push((
            "",
            format!(
                "{} pool: {} segments {}  allocated {}  free {}  largest free {}  free in smaller blocks {}",
                ctx.clean(&pool.pool),
                pool.segments,
                bytes(pool.total),
                bytes(pool.allocated),
                bytes(pool.free),
                bytes(pool.largest_free_block),
                or_na(pool.free_below_request, bytes)
            ),
        ));
    }
    for seg in r.segments.iter().flatten().take(4) {
        let kind = if seg.split { "split" } else { "whole" };
        lines.push((
            "",
            format!(
                "  segment {} ({}, {kind}): allocated {}  free {}  largest free {}",
                bytes(seg.total),
                ctx.clean(&seg.pool),
                bytes(seg.allocated),
                bytes(seg.free),
                bytes(seg.largest_free_block)
            ),
        ));
    }
    lines
}

fn uncounted(a: &ProcessAllocator) -> Option<&'static str> {
    match (&*a.framework, a.backend.as_deref()) {
        ("jax", _) => Some("XLA does not count inactive split, segments, retries or OOMs"),
        (_, Some("cudaMallocAsync")) => {
            Some("cudaMallocAsync does not count inactive split, segments, retries, OOMs or requested bytes")
        }
        (_, None) => Some("the probe does not name the allocator backend: fragmentation unknown"),
        _ => None,
    }
}

/// A device of this process that is on no GPU gpuscope can name.
fn unmatched(ctx: &Ctx, d: &DeviceAllocator) -> String {
    format!(
        "cuda:{} gpu n/a: {}  allocated {}  reserved {}",
        or_na(d.ordinal, |o| o.to_string()),
        ctx.clean(d.unmatched_reason.as_deref().unwrap_or("not matched")),
        or_na(d.allocated, bytes),
        or_na(d.reserved, bytes)
    )
}
