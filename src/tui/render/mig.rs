//! A GPU's MIG devices, a line each under it: "MIG 4 1g.10gb", its GPU
//! instance's SM, tensor and DRAM activity where some MIG device of the
//! GPU has them, the memory bar and figures, the processes on it. NVML
//! keeps utilization, clocks and power for the parent.

use ratatui::text::{Line, Span};

use crate::model::{Gpu, MigDevice, Snapshot};
use crate::tui::render::bar::{self, Segment};
use crate::tui::render::text::{left, spans_width, width};
use crate::tui::render::{Ctx, gpus};
use crate::util::units::bytes_pair;

/// Lines the MIG devices of every GPU take.
pub fn count(snap: &Snapshot) -> u16 {
    u16::try_from(snap.gpus.iter().map(|g| g.mig_devices.len()).sum::<usize>()).unwrap_or(u16::MAX)
}

/// The focus label: "GPU 0 MIG 4", or "GPU 0".
pub fn focus_label(ctx: &Ctx) -> Option<String> {
    let gpu = ctx.state.focus?;
    Some(match ctx.state.focus_mig {
        Some(m) => format!("GPU {gpu} MIG {m}"),
        None => format!("GPU {gpu}"),
    })
}

pub fn lines<'a>(ctx: &Ctx, snap: &Snapshot, gpu: &Gpu, iw: usize, w: usize) -> Vec<Line<'a>> {
    let profile_w = gpu.mig_devices.iter().map(|m| width(m.profile.as_deref().unwrap_or("n/a"))).max().unwrap_or(0);
    let text_w = gpu.mig_devices.iter().map(|m| width(&figures(m))).max().unwrap_or(0);
    let active = gpu.mig_devices.iter().any(|m| m.activity.is_some());
    gpu.mig_devices.iter().map(|m| line(ctx, snap, (gpu, m, active), (iw, profile_w.min(12), text_w), w)).collect()
}

fn figures(m: &MigDevice) -> String {
    bytes_pair(m.memory.used, m.memory.total)
}

fn line<'a>(
    ctx: &Ctx,
    snap: &Snapshot,
    on: (&Gpu, &MigDevice, bool),
    widths: (usize, usize, usize),
    w: usize,
) -> Line<'a> {
    let ((gpu, m, active), (iw, profile_w, text_w)) = (on, widths);
    let t = &ctx.theme;
    let focused = ctx.state.focus == Some(gpu.index) && ctx.state.focus_mig == Some(m.index);
    let on = |g: &crate::model::ProcessGpu| g.index == gpu.index && g.mig_device == Some(m.index);
    let procs = snap.processes.iter().filter(|p| p.gpus.iter().any(on)).count();
    let mut spans = vec![
        Span::styled(if focused { ">" } else { " " }, t.title),
        Span::raw(" ".repeat(iw + 2)),
        Span::styled(format!("MIG {} ", m.index), t.label),
        Span::raw(left(&ctx.clean(m.profile.as_deref().unwrap_or("n/a")), profile_w, ctx.sym.cut)),
        Span::raw(" "),
    ];
    let text = format!(" {:>text_w$}", figures(m));
    let count = format!("  {procs} proc");
    let rest = 2 + width(&text) + width(&count);
    if active {
        // As many as leave the bar its least, SM first; utilisation is
        // the parent's, so nothing here is "busy but idle".
        for cell in gpus::activity_spans(ctx, m.activity.as_ref(), false) {
            let used = spans_width(&spans);
            if spans_width(&cell) + used + rest + 4 <= w {
                spans.extend(cell);
            }
        }
        spans.push(Span::raw(" "));
    }
    let used = spans_width(&spans);
    let bar_w = w.saturating_sub(used + rest);
    if let Some((segments, total)) = segments(ctx, m).filter(|_| bar_w >= 4) {
        spans.push(Span::raw("["));
        spans.extend(bar::bar(&segments, total, bar_w.min(40)));
        spans.push(Span::raw("]"));
    }
    spans.push(Span::raw(text));
    spans.push(Span::styled(count, t.dim));
    Line::from(spans)
}

fn segments(ctx: &Ctx, m: &MigDevice) -> Option<(Vec<Segment>, u64)> {
    let total = m.memory.total?;
    let used = m.memory.used?.min(total);
    let seg = |value, symbol, style| Segment { value, symbol, style };
    Some((vec![seg(used, ctx.sym.used, ctx.theme.used), seg(total - used, ctx.sym.free, ctx.theme.free)], total))
}
