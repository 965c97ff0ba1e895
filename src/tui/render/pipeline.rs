//! The detail view's "where the time goes": how much of each step the
//! training thread waits for its DataLoader (the probe's measure inside
//! `__next__`), why (`analysis::input_cause`, the reasoning the `starved`
//! rule and `gpuscope doctor` use) and what to change, the loader's
//! settings, `/dev/shm` with what the batches in flight need, the last
//! loader failure, and the numeric environment the job runs in. Every
//! part in full, wrapped: the detail view scrolls.

use std::time::Duration;

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::analysis::config::{ShmFullConfig, StarvedConfig};
use crate::analysis::input_cause;
use crate::model::{
    AlertKind, DataLoaderStats, FrameworkEnvironment, InputPipeline, LoaderFailure, LoaderFailureKind, LoaderSettings,
    Process, Severity, SharedMemory, Snapshot, TaskState,
};
use crate::tui::render::Ctx;
use crate::tui::render::bar::{Segment, bar};
use crate::tui::render::format::{NA, duration_short, interval, or_na};
use crate::tui::render::text::{spans_width, wrap};
use crate::util::units::bytes;

/// The label column, as the rest of the detail view has it.
pub const LABEL: usize = 10;

/// The cells of the data-wait and `/dev/shm` bars.
const BAR: usize = 20;

/// The section's lines for `p` on GPU `gpu`, at most `w` columns each;
/// nothing where the process's probe reports neither its input nor its
/// environment (no probe, JAX, a probe older than these figures).
/// `why` is `cause_of`'s answer for the same process and GPU.
pub fn lines(
    ctx: &Ctx,
    snap: &Snapshot,
    p: &Process,
    gpu: u32,
    w: usize,
    why: Option<&input_cause::Explained>,
) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(input) = p.input.as_deref() {
        input_lines(&mut out, ctx, snap, p, input, why, w);
    }
    if let Some(env) = p.environment.as_deref() {
        environment_lines(&mut out, ctx, p, env, gpu, w);
    }
    out
}

fn input_lines(
    out: &mut Vec<Line<'static>>,
    ctx: &Ctx,
    snap: &Snapshot,
    p: &Process,
    input: &InputPipeline,
    why: Option<&input_cause::Explained>,
    w: usize,
) {
    let t = &ctx.theme;
    let loader = shown_loader(p, input);
    match loader {
        Some(l) => out.extend(wait_line(ctx, input, l, w)),
        None => {
            let why = if input.hooked {
                "no DataLoader iterated lately"
            } else {
                "no DataLoader in this process (torch.utils.data not loaded)"
            };
            out.extend(wrapped(ctx, "data wait", &format!("{NA}: {why}"), Style::new(), w));
        }
    }
    if let Some(why) = why {
        let style = if why.cause == input_cause::Cause::SharedMemory { t.crit } else { t.warn };
        let evidence = ctx.clean(&why.evidence);
        let fix = ctx.clean(&why.fix);
        out.extend(wrapped(ctx, "cause", &evidence, style, w));
        out.extend(wrapped(ctx, "fix", &fix, Style::new(), w));
    }
    if let Some(l) = loader {
        out.extend(wrapped(ctx, "loader", &loader_text(ctx, input, l), Style::new(), w));
        if let Some(workers) = host_workers(p) {
            out.extend(wrapped(ctx, "workers", &workers, Style::new(), w));
        }
    }
    if let Some(shm) = input.shm.as_ref() {
        out.extend(shm_line(ctx, shm, w));
    }
    if let Some(f) = input.failures.last() {
        let ago = duration_short(snap.time.time_unix_ms.saturating_sub(f.time_unix_ms));
        let text = format!("{ago} ago: {}", failure_text(ctx, f));
        let style = if f.kind.is_shm() { t.crit } else { t.warn };
        out.extend(wrapped(ctx, "failure", &text, style, w));
    }
}

/// The loader the section shows: the one the thread waits for most.
fn shown_loader<'a>(p: &'a Process, input: &'a InputPipeline) -> Option<&'a DataLoaderStats> {
    input_cause::slowest_loader(p).map(|(_, l)| l).or_else(|| input.loaders.first())
}

/// The cause the section names for `p` on `gpu`, worked out once a frame
/// for both the section (`lines`) and the hints (`said`).
pub fn cause_of(snap: &Snapshot, p: &Process, gpu: u32) -> Option<input_cause::Explained> {
    let input = p.input.as_deref()?;
    cause(snap, p, shown_loader(p, input), gpu)
}

/// The cause is worth a line where the thread waits at least the
/// `starved` rule's default share, where that rule (or `shm_full`) fired
/// for it under the user's own thresholds, or where `/dev/shm` fills
/// whatever the wait: the workers die when it does.
fn cause(snap: &Snapshot, p: &Process, loader: Option<&DataLoaderStats>, gpu: u32) -> Option<input_cause::Explained> {
    let full = ShmFullConfig::default().used_share;
    let alerted = |kind: AlertKind, severity: Severity| {
        snap.alerts.iter().any(|a| {
            // `starved` is the GPU's, naming its biggest probed process;
            // `shm_full` the process's.
            a.kind == kind && a.severity == severity && a.pid.is_none_or(|pid| pid == p.pid) && a.gpu == Some(gpu)
        })
    };
    // Under the user's own threshold, where it is lower than the default.
    let shm_full = if alerted(AlertKind::ShmFull, Severity::Warning) { 0.0 } else { full };
    if let Some(shm) = input_cause::shared_memory(p, shm_full) {
        return Some(shm);
    }
    let loader = loader?;
    let alerted = alerted(AlertKind::Starved, Severity::Warning);
    let waits = loader.wait_share.is_some_and(|s| s >= StarvedConfig::default().min_data_wait);
    if !(alerted || waits) {
        return None;
    }
    let gpu = snap.gpus.iter().find(|g| g.index == gpu);
    Some(input_cause::explain(snap, p, loader, gpu, full))
}

/// The alert kinds the section says in full for `p` on `gpu`: the
/// hints need not repeat them. A `shm_full` that says workers died stays
/// there: it is the post-mortem's headline.
/// `why` is `cause_of`'s answer.
pub fn said(snap: &Snapshot, p: &Process, why: Option<&input_cause::Explained>) -> Vec<AlertKind> {
    match why {
        Some(why) if why.cause == input_cause::Cause::SharedMemory => {
            let died = snap
                .alerts
                .iter()
                .any(|a| a.kind == AlertKind::ShmFull && a.severity == Severity::Critical && a.pid == Some(p.pid));
            if died { vec![AlertKind::Starved] } else { vec![AlertKind::Starved, AlertKind::ShmFull] }
        }
        Some(_) => vec![AlertKind::Starved],
        None => Vec::new(),
    }
}

/// `data wait` and its bar: the share of wall time inside `__next__`, the
/// rest of the bar the time the step has for everything else.
fn wait_line(ctx: &Ctx, input: &InputPipeline, l: &DataLoaderStats, w: usize) -> Vec<Line<'static>> {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let Some(share) = l.wait_share.filter(|s| s.is_finite()) else {
        let why = if l.live { "measuring (under a second of batches)" } else { "no batch in the window" };
        return wrapped(ctx, "data wait", &format!("{NA}: {why}"), Style::new(), w);
    };
    let share = share.clamp(0.0, 1.0);
    let min = StarvedConfig::default().min_data_wait;
    let style = if share >= min { t.warn } else { t.used };
    let n = BAR;
    let cells = (share * 1000.0).round() as u64;
    let mut spans = vec![label("data wait", t.label)];
    spans.extend(bar(
        &[
            Segment { value: cells, symbol: sym.used, style },
            Segment { value: 1000 - cells, symbol: sym.free, style: t.free },
        ],
        1000,
        n,
    ));
    let mut text = format!(" {:.0}%", share * 100.0);
    if let Some(rate) = l.batches_per_s.filter(|r| r.is_finite()) {
        text.push_str(&format!("  {rate:.1} batches/s"));
    }
    if let Some(per) = seconds(l.wait_per_batch_s) {
        text.push_str(&format!("  {per} a batch"));
    }
    if let Some(now) = l.waiting_s.filter(|s| *s >= 1.0).and_then(|s| seconds(Some(s))) {
        // A thread stuck in `__next__` right now: a hung worker, a slow
        // first batch.
        text.push_str(&format!("  waiting {now} now"));
    }
    if let Some(first) = seconds(l.first_batch_wait_s) {
        text.push_str(&format!("  first batch {first}"));
    }
    if input.loaders.len() > 1 || input.loaders_left_out > 0 {
        let n = input.loaders.len() + input.loaders_left_out as usize;
        text.push_str(&format!("  (loader {} of {n})", l.id));
    }
    after_bar(spans, &text, w)
}

/// `/dev/shm`, used | what the loaders need beyond it | free; the need is
/// marked where it is more than is free.
fn shm_line(ctx: &Ctx, shm: &SharedMemory, w: usize) -> Vec<Line<'static>> {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let name = shm.path.as_deref().map_or_else(|| "/dev/shm".into(), |p| ctx.clean(p));
    let (Some(total), Some(used)) = (shm.total.filter(|t| *t > 0), shm.used) else {
        return wrapped(ctx, "/dev/shm", &format!("{NA}: the probe could not read {name}"), Style::new(), w);
    };
    let free = total.saturating_sub(used.min(total));
    let need = shm.need.unwrap_or(0);
    let short = shm.need.is_some_and(|n| n > free);
    let full = shm.used_share().is_some_and(|s| s >= ShmFullConfig::default().used_share);
    let used_style = if short || full { t.crit } else { t.used };
    let segments = [
        Segment { value: used.min(total), symbol: sym.used, style: used_style },
        Segment { value: need.min(free), symbol: sym.other, style: if short { t.crit } else { t.other } },
        Segment { value: free.saturating_sub(need), symbol: sym.free, style: t.free },
    ];
    let mut spans = vec![label("/dev/shm", t.label)];
    spans.extend(bar(&segments, total, BAR));
    let mut text = format!(" {:.0}%  {} of {}", used as f64 / total as f64 * 100.0, bytes(used), bytes(total));
    if let Some(need) = shm.need.filter(|n| *n > 0) {
        let more = if short { ", more than is free" } else { "" };
        text.push_str(&format!("  the loaders need {} in flight{more}", bytes(need)));
    }
    if let Some(s) = &shm.sharing_strategy {
        text.push_str(&format!("  {}", ctx.clean(s)));
    }
    after_bar(spans, &text, w)
}

fn flag(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "on",
        Some(false) => "off",
        None => NA,
    }
}

fn workers_text(n: Option<u32>) -> String {
    match n {
        Some(1) => "1 worker".into(),
        Some(n) => format!("{n} workers"),
        None => format!("workers {NA}"),
    }
}

fn settings_text(s: &LoaderSettings) -> String {
    let mut parts = vec![workers_text(s.num_workers)];
    parts.push(format!("pin_memory {}", flag(s.pin_memory)));
    // Without workers there is nothing to prefetch or keep.
    if s.num_workers != Some(0) {
        parts.push(format!("prefetch {}", or_na(s.prefetch_factor, |p| p.to_string())));
        parts.push(format!("persistent {}", flag(s.persistent_workers)));
    }
    parts.join("  ")
}

fn loader_text(ctx: &Ctx, input: &InputPipeline, l: &DataLoaderStats) -> String {
    let mut parts = vec![settings_text(&l.settings)];
    if let Some(ready) = l.batches_ready {
        parts.push(format!("{ready} batches ready"));
    }
    if let Some(b) = l.batch_bytes {
        parts.push(format!("batches of {}", bytes(b)));
    }
    if l.pin_memory_thread == Some(false) && l.settings.pin_memory == Some(true) {
        parts.push("no pin-memory thread".into());
    }
    if let Some(d) = &l.dataset {
        parts.push(ctx.clean(d));
    }
    if !l.live {
        parts.push("between epochs".into());
    }
    if input.loaders_left_out > 0 {
        parts.push(format!("{} more loaders not listed", input.loaders_left_out));
    }
    parts.join("  ")
}

/// The workers as the host sees them, where it does (PIDs the probe
/// published or PyTorch's worker names): how busy, and how many wait on
/// disk.
fn host_workers(p: &Process) -> Option<String> {
    let host = p.host_input.as_deref()?;
    let live: Vec<_> = host.workers.iter().filter(|w| w.alive).collect();
    let dead = host.workers.len() - live.len();
    if host.workers.is_empty() {
        return None;
    }
    let mut parts = vec![format!("{} alive", live.len())];
    let cpu: Vec<f64> = live.iter().filter_map(|w| w.figures.cpu_percent).filter(|c| c.is_finite()).collect();
    if !cpu.is_empty() {
        let mean = cpu.iter().sum::<f64>() / cpu.len() as f64;
        let (lo, hi) = cpu.iter().fold((f64::MAX, f64::MIN), |(lo, hi), c| (lo.min(*c), hi.max(*c)));
        parts.push(format!("CPU {mean:.0}% each ({lo:.0}-{hi:.0}%)"));
    }
    let disk = live.iter().filter(|w| w.figures.state == Some(TaskState::DiskSleep)).count();
    if disk > 0 {
        parts.push(format!("{disk} waiting on disk"));
    }
    if dead > 0 {
        parts.push(format!("{dead} ended"));
    }
    if let Some(pct) = host.cgroup_cpu.as_ref().and_then(|c| c.throttled_periods_percent).filter(|p| *p > 0.0) {
        parts.push(format!("cgroup throttled {pct:.0}% of periods"));
    }
    Some(parts.join("  "))
}

fn failure_text(ctx: &Ctx, f: &LoaderFailure) -> String {
    let what = match f.kind {
        LoaderFailureKind::ShmExhausted => "shared memory exhausted",
        LoaderFailureKind::BusError => "worker killed by a bus error",
        LoaderFailureKind::WorkerKilled => "worker killed",
        LoaderFailureKind::WorkerExited => "worker exited",
        LoaderFailureKind::TooManyOpenFiles => "too many open files",
        LoaderFailureKind::WorkerException => "exception in a worker",
        LoaderFailureKind::Timeout => "timed out",
        LoaderFailureKind::Other => "failed",
    };
    let mut text = what.to_string();
    if let Some(pid) = f.worker_pid {
        text.push_str(&format!(" (worker {pid})"));
    }
    if let (Some(total), Some(free)) = (f.shm_total, f.shm_free) {
        text.push_str(&format!("; /dev/shm {} free of {} then", bytes(free), bytes(total)));
    }
    if let Some(m) = &f.message {
        text.push_str(&format!(": {}", ctx.clean(m)));
    }
    text
}

fn environment_lines(
    out: &mut Vec<Line<'static>>,
    ctx: &Ctx,
    p: &Process,
    env: &FrameworkEnvironment,
    gpu: u32,
    w: usize,
) {
    let t = &ctx.theme;
    let s = |v: &Option<String>| v.as_deref().map_or_else(|| NA.into(), |v| ctx.clean(v));
    let mut versions = format!("torch {}", s(&env.torch_version));
    match (&env.cuda_version, &env.hip_version) {
        (None, Some(hip)) => versions.push_str(&format!("  HIP {}", ctx.clean(hip))),
        (cuda, _) => versions.push_str(&format!("  CUDA {}", s(cuda))),
    }
    versions.push_str(&format!("  cuDNN {}", s(&env.cudnn_version)));
    if env.cudnn_compiled_version.is_some() && env.cudnn_compiled_version != env.cudnn_version {
        versions.push_str(&format!(" (built with {})", s(&env.cudnn_compiled_version)));
    }
    // The device on this row: its ordinal from the allocator's placing.
    let ordinal =
        p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(gpu))).and_then(|d| d.ordinal);
    let device = env.devices.iter().find(|d| Some(d.ordinal) == ordinal);
    let unsupported = device.and_then(|d| d.arch_supported) == Some(false);
    if let Some(d) = device {
        let cap = d.capability.as_deref().map_or_else(|| NA.into(), |c| ctx.clean(c));
        versions.push_str(&match d.arch_supported {
            Some(true) => format!("  capability {cap}: in the wheel"),
            Some(false) => format!("  capability {cap}: NOT in the wheel's arch list"),
            None => format!("  capability {cap}"),
        });
    }
    let style = if unsupported { t.crit } else { Style::new() };
    out.extend(wrapped(ctx, "env", &versions, style, w));
    if unsupported && let Some(flags) = &env.arch_flags {
        out.extend(wrapped(ctx, "", &format!("the wheel has code for {}", ctx.clean(flags)), style, w));
    }
    out.extend(wrapped(ctx, "", &numerics_text(ctx, env), Style::new(), w));
}

/// TF32, the fp32 precision, cuDNN's choices, autocast and GradScaler.
fn numerics_text(ctx: &Ctx, env: &FrameworkEnvironment) -> String {
    let s = |v: &Option<String>| v.as_deref().map_or_else(|| NA.into(), |v| ctx.clean(v));
    let mut parts = Vec::new();
    // 2.9+ says it with fp32_precision; earlier releases with the TF32
    // flags and float32_matmul_precision.
    if env.fp32_precision_matmul.is_some() || env.fp32_precision_conv.is_some() {
        parts.push(format!("fp32 matmul {} conv {}", s(&env.fp32_precision_matmul), s(&env.fp32_precision_conv)));
    } else {
        parts.push(format!("TF32 matmul {} cuDNN {}", flag(env.matmul_tf32), flag(env.cudnn_tf32)));
        if let Some(p) = &env.float32_matmul_precision {
            parts.push(format!("fp32 matmul precision {}", ctx.clean(p)));
        }
    }
    parts.push(format!("cudnn.benchmark {}", flag(env.cudnn_benchmark)));
    if env.cudnn_deterministic == Some(true) {
        parts.push("deterministic".into());
    }
    parts.push(match &env.autocast {
        Some(a) if a.entries > 0 => {
            let dtype = a.dtype.as_deref().map(|d| d.strip_prefix("torch.").unwrap_or(d));
            let dtype = dtype.map_or_else(|| NA.into(), |d| ctx.clean(d));
            match &a.device_type {
                Some(dev) => format!("autocast {dtype} on {}", ctx.clean(dev)),
                None => format!("autocast {dtype}"),
            }
        }
        Some(a) if a.hooked => "no autocast".into(),
        _ => format!("autocast {NA}"),
    });
    parts.push(match &env.grad_scaler {
        Some(g) => match (g.count, g.enabled) {
            (Some(0), _) => "no GradScaler".into(),
            (Some(n), Some(false)) => format!("GradScaler x{n} disabled"),
            (Some(n), _) => format!("GradScaler x{n}"),
            (None, _) => format!("GradScaler {NA}"),
        },
        None => format!("GradScaler {NA}"),
    });
    parts.join("  ")
}

/// A duration in seconds as people say it; `None` for what is not one.
fn seconds(s: Option<f64>) -> Option<String> {
    Duration::try_from_secs_f64(s?).ok().map(interval)
}

fn label(text: &str, style: Style) -> Span<'static> {
    Span::styled(format!("{text:<LABEL$}"), style)
}

/// `text` after the label and bar in `spans`, wrapped at word
/// boundaries: the first part beside the bar, the rest under the value
/// column.
fn after_bar(mut spans: Vec<Span<'static>>, text: &str, w: usize) -> Vec<Line<'static>> {
    let used = spans_width(&spans);
    let room = w.saturating_sub(LABEL).max(1);
    // The bar stands for the first line's indent, as wide as it is.
    let indent = " ".repeat((used.saturating_sub(LABEL) + 1).min(room.saturating_sub(1)));
    let options = textwrap::Options::new(room).initial_indent(&indent).break_words(true);
    let mut parts = textwrap::wrap(text.trim_start(), options).into_iter();
    let first = parts.next().map(|p| p.get(indent.len()..).unwrap_or_default().to_string()).unwrap_or_default();
    spans.push(Span::raw(format!(" {first}")));
    let mut lines = vec![Line::from(spans)];
    lines.extend(parts.map(|p| Line::from(vec![label("", Style::new()), Span::raw(p.into_owned())])));
    lines
}

/// A label and a value wrapped beside it, at word boundaries.
fn wrapped(ctx: &Ctx, name: &str, value: &str, style: Style, w: usize) -> Vec<Line<'static>> {
    let room = w.saturating_sub(LABEL);
    wrap(value, room)
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            Line::from(vec![label(if i == 0 { name } else { "" }, ctx.theme.label), Span::styled(part, style)])
        })
        .collect()
}
