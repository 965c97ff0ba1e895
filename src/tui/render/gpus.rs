//! The GPU list: two lines per GPU (readings, then the stacked memory bar
//! with its figures) or, when that does not fit, one compact line each;
//! a GPU's MIG devices a line each under it (`mig.rs`). Where some GPU
//! has activity counters (GPM), SM, tensor and DRAM activity stand beside
//! utilisation, as far as the width allows, SM first.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::model::{Activity, Gpu, GpuState, HealthCode, HealthVerdict, Snapshot};
use crate::sources::OnScreen;
use crate::tui::mouse::{Hits, Target};
use crate::tui::render::Ctx;
use crate::tui::render::bar::{self, Segment};
use crate::tui::render::format::{activity, bytes_short, percent};
use crate::tui::render::mig;
use crate::tui::render::text::{left, right, spans_width, spread, width, wrap};
use crate::tui::term::Lines;
use crate::util::units::{bytes_pair, push_fixed};

/// Rows wanted at width `w`: (two lines per GPU, one line per GPU).
pub fn heights(snap: &Snapshot, w: usize) -> (u16, u16) {
    let n = u16::try_from(snap.gpus.len()).unwrap_or(u16::MAX);
    let notes = u16::try_from(notes(snap, w).len()).unwrap_or(u16::MAX).saturating_add(mig::count(snap));
    (n.saturating_mul(2).saturating_add(1 + notes), n.saturating_add(2 + notes))
}

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, snap: &Snapshot, compact: bool, hits: &mut Hits) {
    let w = area.width as usize;
    let mut lines = vec![title(ctx, snap, w)];
    for note in notes(snap, w) {
        lines.push(Line::from(Span::styled(ctx.clean(&note), ctx.theme.crit)));
    }
    let iw = snap.gpus.iter().map(|g| g.index.to_string().len()).max().unwrap_or(1);
    // Every bar ends in the same column, whatever its figures' width.
    let text_w = snap.gpus.iter().map(|g| width(&memory_text(g))).max().unwrap_or(0);
    // A GPU without activity beside one with says n/a; where none has
    // any (before Hopper, a one-shot's first reading) nothing is said.
    let active = snap.gpus.iter().any(|g| g.activity.is_some());
    if compact {
        lines.push(compact_header(ctx, iw, active, w));
    }
    let columns = memory_columns(ctx, snap, 3 + iw, w);
    for gpu in &snap.gpus {
        let first = lines.len();
        if compact {
            lines.push(compact_line(ctx, snap, gpu, (iw, text_w, active), w));
        } else {
            lines.extend(full_lines(ctx, snap, gpu, (iw, columns, active), w, &mut hits.on_screen));
        }
        hit(hits, area, first, lines.len(), Target::Gpu(gpu.index));
        lines.extend(mig::lines(ctx, snap, gpu, iw, w));
    }
    frame.render_lines(Lines(lines), area);
}

/// Records lines `from..to` of `area` as `target`'s, as far as they were
/// drawn inside it.
pub fn hit(hits: &mut Hits, area: Rect, from: usize, to: usize, target: Target) {
    let bottom = area.y.saturating_add(area.height);
    let y = |n: usize| area.y.saturating_add(u16::try_from(n).unwrap_or(u16::MAX)).min(bottom);
    let (top, end) = (y(from), y(to));
    if end > top && area.width > 0 {
        hits.targets.push((Rect { y: top, height: end - top, ..area }, target));
    }
}

/// What is wrong with the GPU source as a whole, wrapped to the width.
fn notes(snap: &Snapshot, w: usize) -> Vec<String> {
    match (&snap.sources.nvml.error, snap.gpus.is_empty()) {
        (Some(e), _) => wrap(&format!("! NVML: {e} (retrying)"), w),
        (None, true) => vec!["no GPUs".into()],
        (None, false) => Vec::new(),
    }
}

fn title<'a>(ctx: &Ctx, snap: &Snapshot, w: usize) -> Line<'a> {
    let (s, t) = (ctx.sym, &ctx.theme);
    let mut spans = vec![Span::styled(s.rule, t.rule), Span::styled(" GPUs ", t.title)];
    if let Some(n) = Some(mig::count(snap)).filter(|n| *n > 0) {
        spans.push(Span::styled(format!("({n} MIG) "), t.label));
    }
    let legend: &[(&str, &str, _)] = if snap.gpus.iter().any(|g| g.allocator.is_some()) {
        &[
            (s.allocated, "alloc", t.allocated),
            (s.cached, "cached", t.cached),
            (s.other, "other", t.other),
            (s.free, "free", t.free),
        ]
    } else {
        &[(s.used, "used", t.used), (s.free, "free", t.free)]
    };
    spans.push(Span::styled(s.rule, t.rule));
    for (sym, name, style) in legend {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(*sym, *style));
        spans.push(Span::raw(format!(" {name}")));
    }
    spans.push(Span::raw(" "));
    let focus = match mig::focus_label(ctx) {
        None => " focus: all GPUs ".to_string(),
        Some(label) => format!(" focus: {label} "),
    };
    spread(spans, vec![Span::styled(focus, t.label), Span::styled(s.rule, t.rule)], w, s.rule, t.rule)
}

fn marker<'a>(ctx: &Ctx, snap: &Snapshot, gpu: &Gpu) -> Vec<Span<'a>> {
    let focused = ctx.state.focus == Some(gpu.index) && ctx.state.focus_mig.is_none();
    let alarmed = gpu.state != GpuState::Ok || snap.alerts.iter().any(|a| a.gpu == Some(gpu.index));
    // Room for the rest of a GPU's first line: its number, name and up to
    // nineteen readings' spans, without growing on the way.
    let mut spans = Vec::with_capacity(24);
    spans.push(Span::styled(if focused { ">" } else { " " }, ctx.theme.title));
    spans.push(Span::styled(if alarmed { "!" } else { " " }, ctx.theme.crit));
    spans
}

fn name(ctx: &Ctx, gpu: &Gpu, short: bool) -> String {
    let n = ctx.clean(gpu.name.as_deref().unwrap_or("n/a"));
    if short { n.strip_prefix("NVIDIA ").map(str::to_string).unwrap_or(n) } else { n }
}

fn trouble(gpu: &Gpu) -> Option<(&'static str, String)> {
    match gpu.state {
        GpuState::Ok => None,
        GpuState::Lost => Some(("LOST", "fell off the bus: needs a GPU reset or a reboot".into())),
        GpuState::Error => Some(("ERROR", gpu.error.clone().unwrap_or_else(|| "cannot be queried".into()))),
    }
}

fn temperature(ctx: &Ctx, gpu: &Gpu) -> Span<'static> {
    match gpu.temperature_c {
        Some(c) if c >= 85 => Span::styled(format!("{c}{}!", ctx.sym.degree), ctx.theme.crit),
        Some(c) => Span::raw(format!("{c}{}", ctx.sym.degree)),
        None => Span::raw("n/a"),
    }
}

/// "312/700 W", in whole watts, rounded as `{:.0}` rounds.
fn power(gpu: &Gpu) -> String {
    let mut out = String::with_capacity(12);
    match (gpu.power_draw_w, gpu.power_limit_w) {
        (Some(d), limit) => {
            push_fixed(&mut out, d, false);
            if let Some(l) = limit {
                out.push('/');
                push_fixed(&mut out, l, false);
            }
        }
        _ => out.push_str("n/a"),
    }
    out.push_str(" W");
    out
}

/// Columns a GPU's name keeps before a reading beyond SM activity is
/// shown beside it.
const NAME_ROOM: usize = 20;

/// NVML's utilisation counts the GPU busy whenever a kernel runs, on one
/// SM or on all of them; SM activity counts how many work. Issue 57's
/// example of a GPU that is "busy but idle": utilisation at least this...
const BUSY_UTIL: u32 = 80;
/// ...and SM activity under this (DCGM calls under 50 % poor use).
const IDLE_SM: f64 = 25.0;

/// The GPU looks busy to utilisation while most of its SMs wait.
fn busy_but_idle(gpu: &Gpu) -> bool {
    let sm = gpu.activity.as_ref().and_then(|a| a.sm_active);
    gpu.utilization.gpu.is_some_and(|u| u >= BUSY_UTIL) && sm.is_some_and(|sm| sm < IDLE_SM)
}

/// SM, tensor and DRAM activity: "  SM   6%", "  TC   0%", "  DRAM   3%",
/// each figure in four columns so that the lines align. A figure the
/// board lacks (or all, without activity) is a dim `n/a`; SM activity far
/// below a busy GPU's utilisation is a warning, marked `!`.
pub(super) fn activity_spans(ctx: &Ctx, a: Option<&Activity>, idle: bool) -> [[Span<'static>; 2]; 3] {
    let t = &ctx.theme;
    let cell = |label: &'static str, v: Option<f64>, warn: bool| {
        let mut text = activity(v);
        let style = match v {
            None => t.dim,
            Some(_) if warn => {
                text.push('!');
                t.warn
            }
            Some(_) => Style::new(),
        };
        [Span::styled(label, t.label), Span::styled(right(&text, 4, ctx.sym.cut), style)]
    };
    [
        cell("  SM ", a.and_then(|a| a.sm_active), idle),
        cell("  TC ", a.and_then(|a| a.tensor_active), false),
        cell("  DRAM ", a.and_then(|a| a.dram_active), false),
    ]
}

/// A GPU's two lines; what of the readings asked only while shown they
/// have room for, added to `on_screen`.
fn full_lines<'a>(
    ctx: &Ctx,
    snap: &Snapshot,
    gpu: &Gpu,
    layout: (usize, Columns, bool),
    w: usize,
    on_screen: &mut OnScreen,
) -> [Line<'a>; 2] {
    let (iw, columns, active) = layout;
    let t = &ctx.theme;
    let mut first = marker(ctx, snap, gpu);
    first.push(Span::styled(format!("{:>iw$} ", gpu.index), t.title));
    let indent = " ".repeat(3 + iw);
    if let Some((word, why)) = trouble(gpu) {
        first.push(Span::raw(name(ctx, gpu, false)));
        first.push(Span::styled(format!("  {word}"), t.crit));
        return [Line::from(first), Line::from(vec![Span::raw(indent), Span::styled(ctx.clean(&why), t.crit)])];
    }
    let util = [Span::styled("  util ", t.label), Span::raw(right(&percent(gpu.utilization.gpu), 4, ctx.sym.cut))];
    let power = power(gpu);
    // The power counted at its usual width ("600/700 W"), so that an idle
    // GPU's "70/700 W" does not widen its name out of line with the rest.
    let power_gap = 9usize.saturating_sub(width(&power));
    let rest = [
        Span::styled("  mem ", t.label),
        Span::raw(right(&percent(gpu.utilization.memory), 4, ctx.sym.cut)),
        Span::raw("  "),
        temperature(ctx, gpu),
        Span::raw("  "),
        Span::raw(power),
        Span::styled(format!("  {}", gpu.performance_state.as_deref().unwrap_or("")), t.dim),
    ];

    // Made only where some GPU has activity: six strings a GPU a frame.
    let activity = active.then(|| activity_spans(ctx, gpu.activity.as_ref(), busy_but_idle(gpu)));
    let activity_w = |i: usize| activity.as_ref().map_or(0, |a| spans_width(&a[i]));
    let link = nvlink(ctx, gpu);
    let link_w = link.as_ref().map_or(0, |(span, _)| span.width());
    // SM activity whenever some GPU has it; then, each where it leaves a
    // readable name, tensor, DRAM and NVLink, or NVLink first when a link
    // is down.
    let (tensor_w, dram_w) = (activity_w(1), activity_w(2));
    let mut used = spans_width(&util) + spans_width(&rest) + power_gap + activity_w(0);
    // A health that is not ok comes first, the board needing attention:
    // beside a shorter name than the rest are allowed.
    let health = health(ctx, gpu);
    let health_w = health.as_ref().map_or(0, Span::width);
    let show_health = health_w > 0 && w >= 3 + iw + used + health_w + 12;
    used += if show_health { health_w } else { 0 };
    let fits = |used: &mut usize, extra_w: usize| {
        let room = extra_w > 0 && w >= 3 + iw + *used + extra_w + NAME_ROOM;
        *used += if room { extra_w } else { 0 };
        room
    };
    let (show_link, show_tensor, show_dram) = if link.as_ref().is_some_and(|(_, down)| *down) {
        (fits(&mut used, link_w), fits(&mut used, tensor_w), fits(&mut used, dram_w))
    } else {
        let (tensor, dram) = (fits(&mut used, tensor_w), fits(&mut used, dram_w));
        (fits(&mut used, link_w), tensor, dram)
    };
    // Then the clocks and the PCIe rates, on a line wide enough; the
    // detail view has them always.
    let room = room(w, 3 + iw + used);
    *on_screen = on_screen.or(room);
    let clocks = clocks(ctx, gpu).filter(|_| room.clocks);
    let pcie = pcie(ctx, gpu).filter(|_| room.pcie);
    let show_clocks = fits(&mut used, clocks.as_ref().map_or(0, Span::width));
    let show_pcie = fits(&mut used, pcie.as_ref().map_or(0, Span::width));
    let name_w = w.saturating_sub(3 + iw + used).clamp(8, 28);
    first.push(Span::raw(left(&name(ctx, gpu, false), name_w, ctx.sym.cut)));
    first.extend(util);
    if let Some([sm, tensor, dram]) = activity {
        first.extend(sm);
        if show_tensor {
            first.extend(tensor);
        }
        if show_dram {
            first.extend(dram);
        }
    }
    first.extend(rest);
    if let Some(span) = health.filter(|_| show_health) {
        first.push(span);
    }
    if let Some((span, _)) = link.filter(|_| show_link) {
        first.push(span);
    }
    first.extend(clocks.filter(|_| show_clocks));
    first.extend(pcie.filter(|_| show_pcie));
    [Line::from(first), memory_line(ctx, gpu, indent, columns)]
}

/// Columns the clocks take at their usual figures: "  1980/2619 MHz".
/// A GDDR board's five-digit memory clock needs one more column, and is
/// left out where only these fit.
const CLOCKS_W: usize = 15;
/// And the PCIe rates at their widest: "  PCIe rx 1023M/s tx 63.9G/s".
const PCIE_W: usize = 28;

/// Which of the clocks and the PCIe rates a GPU line `w` columns wide has
/// room for, `taken` of them taken by what comes before: at the widths
/// above, whether known or not. The poller is asked for them where a line
/// has room (`tui::steer`), so what it is asked follows the width alone:
/// a figure that came in wider or narrower than the last cannot turn the
/// asking off and on, and a reading not asked yet is shown from its first
/// tick where it then fits.
pub fn room(w: usize, taken: usize) -> OnScreen {
    let fits = |extra_w: usize| w >= taken + extra_w + NAME_ROOM;
    OnScreen { clocks: fits(CLOCKS_W), pcie: fits(CLOCKS_W + PCIE_W) }
}

/// "  1980/2619 MHz": the SM and memory clocks, where known.
fn clocks(ctx: &Ctx, gpu: &Gpu) -> Option<Span<'static>> {
    let sm = gpu.clocks.sm_mhz?;
    let mem = gpu.clocks.memory_mhz.map_or_else(|| "n/a".to_string(), |m| m.to_string());
    Some(Span::styled(format!("  {sm}/{mem} MHz"), ctx.theme.dim))
}

/// "  PCIe rx 2M/s tx 1000K/s": bytes a second each way (rx: host to GPU).
fn pcie(ctx: &Ctx, gpu: &Gpu) -> Option<Span<'static>> {
    let (rx, tx) = (gpu.pcie.rx_bytes_per_s?, gpu.pcie.tx_bytes_per_s?);
    let t = &ctx.theme;
    Some(Span::styled(format!("  PCIe rx {}/s tx {}/s", bytes_short(rx), bytes_short(tx)), t.dim))
}

/// "CRIT remap failed +1": the worst reason of a GPU whose health is not
/// ok, and how many more; the detail view has them all.
fn health(ctx: &Ctx, gpu: &Gpu) -> Option<Span<'static>> {
    let h = gpu.health.as_ref().filter(|h| h.verdict != HealthVerdict::Ok)?;
    let worst = h.reasons.first()?;
    let (word, style) =
        if h.verdict == HealthVerdict::Critical { ("CRIT", ctx.theme.crit) } else { ("WARN", ctx.theme.warn) };
    let more = match h.reasons.len() {
        0 | 1 => String::new(),
        n => format!(" +{}", n - 1),
    };
    Some(Span::styled(format!("  {word} {}{more}", short(worst.code)), style))
}

/// A health reason in a few words, for the GPU's line.
fn short(code: HealthCode) -> &'static str {
    match code {
        HealthCode::GpuLost => "lost",
        HealthCode::RowRemapFailed => "remap failed",
        HealthCode::RowRemapPending => "remap pending",
        HealthCode::EccUncorrected => "ECC uncorrected",
        HealthCode::RetiredPagesPending => "pages pending",
        HealthCode::RecoveryAction => "recovery action",
        HealthCode::Xid => "Xid",
        HealthCode::HwSlowdown => "HW slowdown",
        HealthCode::HwThermalSlowdown => "HW thermal",
        HealthCode::HwPowerBrake => "power brake",
        HealthCode::NvlinkErrors => "NVLink errors",
        HealthCode::PcieReplays => "PCIe replays",
        HealthCode::DriverEvents => "no events",
        HealthCode::Unknown => "health",
    }
}

/// "NVLink 18/18 332G/s": links up of all, and the traffic both ways once
/// two readings give a rate; a link down is a warning (`true`).
fn nvlink(ctx: &Ctx, gpu: &Gpu) -> Option<(Span<'static>, bool)> {
    let n = gpu.nvlink.as_ref()?;
    let up = n.links.iter().filter(|l| l.active).count();
    let mut text = format!("  NVLink {up}/{}", n.links.len());
    if let (Some(tx), Some(rx)) = (n.tx_bytes_per_s, n.rx_bytes_per_s) {
        text.push_str(&format!(" {}/s", bytes_short(tx.saturating_add(rx))));
    }
    let down = up < n.links.len();
    Some((Span::styled(text, if down { ctx.theme.warn } else { ctx.theme.label }), down))
}

/// One bar length for every GPU, and the figures after it in the same
/// columns, so that bars compare at a glance; the figures go for every
/// GPU when the bars would be too short with them.
#[derive(Debug, Clone, Copy)]
struct Columns {
    text_w: usize,
    bar_w: usize,
    figures: bool,
}

fn memory_columns(ctx: &Ctx, snap: &Snapshot, indent: usize, w: usize) -> Columns {
    let (mut text_w, mut figures_w) = (0, 0);
    for gpu in &snap.gpus {
        if let Some((segments, _)) = bar::gpu_segments(gpu, ctx.sym, &ctx.theme) {
            text_w = text_w.max(width(&memory_text(gpu)) + 1);
            figures_w = figures_w.max(figures(&segments, gpu.allocator.is_some()).iter().map(Span::width).sum());
        }
    }
    let bar_w = w.saturating_sub(indent + 2 + text_w + figures_w);
    let figures = bar_w >= 8;
    let bar_w = if figures { bar_w } else { w.saturating_sub(indent + 2 + text_w) };
    Columns { text_w, bar_w: bar_w.clamp(4, 60), figures }
}

fn memory_line<'a>(ctx: &Ctx, gpu: &Gpu, indent: String, columns: Columns) -> Line<'a> {
    let Some((segments, total)) = bar::gpu_segments(gpu, ctx.sym, &ctx.theme) else {
        return Line::from(vec![Span::raw(indent), Span::styled("memory n/a", ctx.theme.dim)]);
    };
    let text = format!(" {}", memory_text(gpu));
    let mut spans = vec![Span::raw(indent), Span::raw("[")];
    spans.extend(bar::bar(&segments, total, columns.bar_w));
    spans.push(Span::raw("]"));
    if columns.figures {
        spans.push(Span::raw(left(&text, columns.text_w, ctx.sym.cut)));
        spans.extend(figures(&segments, gpu.allocator.is_some()));
    } else {
        spans.push(Span::raw(text));
    }
    Line::from(spans)
}

/// "28.0G/119G", and on a board that shares the host's memory (GB10)
/// "unified" after it: the figures are the machine's, CPU and GPU
/// together, not a framebuffer's.
fn memory_text(gpu: &Gpu) -> String {
    let pair = bytes_pair(gpu.memory.used, gpu.memory.total);
    if gpu.unified_memory == Some(true) { format!("{pair} unified") } else { pair }
}

/// Each segment's size, behind its own symbol: "█40.1G ▓10.2G …".
fn figures<'a>(segments: &[Segment], probed: bool) -> Vec<Span<'a>> {
    let shown: Vec<&Segment> = if probed { segments.iter().collect() } else { segments.iter().skip(1).collect() };
    let mut spans = vec![Span::raw(" ")];
    for s in shown {
        spans.push(Span::raw(" "));
        spans.push(Span::styled(s.symbol, s.style));
        spans.push(Span::raw(bytes_short(s.value)));
    }
    if !probed {
        spans.push(Span::raw(" free"));
    }
    spans
}

fn compact_header<'a>(ctx: &Ctx, iw: usize, active: bool, w: usize) -> Line<'a> {
    let nw = if w >= 100 { 24 } else { 14 };
    let util = if active { format!("{:>4} {:>4}", "UTIL", "SM") } else { "UTIL".into() };
    let text = format!("  {:>iw$} {:<nw$} {util} {:>4} {:>5} {:>9} MEMORY", "#", "NAME", "MEM", "TEMP", "POWER");
    Line::from(Span::styled(text, ctx.theme.header_row))
}

fn compact_line<'a>(ctx: &Ctx, snap: &Snapshot, gpu: &Gpu, widths: (usize, usize, bool), w: usize) -> Line<'a> {
    let (iw, text_w, active) = widths;
    let t = &ctx.theme;
    let nw = if w >= 100 { 24 } else { 14 };
    let mut spans = marker(ctx, snap, gpu);
    spans.push(Span::styled(format!("{:>iw$} ", gpu.index), t.title));
    spans.push(Span::raw(left(&name(ctx, gpu, true), nw, ctx.sym.cut)));
    if let Some((word, why)) = trouble(gpu) {
        spans.push(Span::styled(format!(" {word}: {}", ctx.clean(&why)), t.crit));
        return Line::from(spans);
    }
    spans.push(Span::raw(format!(" {:>4}", percent(gpu.utilization.gpu))));
    if active {
        let [[_, sm], ..] = activity_spans(ctx, gpu.activity.as_ref(), busy_but_idle(gpu));
        spans.push(Span::raw(" "));
        spans.push(sm);
    }
    spans.push(Span::raw(format!(" {:>4} ", percent(gpu.utilization.memory))));
    let temp = temperature(ctx, gpu);
    spans.push(Span::raw(" ".repeat(5usize.saturating_sub(temp.width()))));
    spans.push(temp);
    spans.push(Span::raw(format!(" {:>9} ", power(gpu))));
    let text = memory_text(gpu);
    let used = spans_width(&spans);
    let bar_w = w.saturating_sub(used + 3 + text_w);
    if let Some((segments, total)) = bar::gpu_segments(gpu, ctx.sym, t).filter(|_| bar_w >= 4) {
        spans.push(Span::raw("["));
        spans.extend(bar::bar(&segments, total, bar_w.min(40)));
        spans.push(Span::raw("] "));
    }
    spans.push(Span::raw(right(&text, text_w, ctx.sym.cut)));
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_room_for_the_clocks_then_the_pcie_rates_as_it_widens() {
        let taken = 3 + 1 + 60;
        let clocks_from = taken + CLOCKS_W + NAME_ROOM;
        assert_eq!(room(clocks_from - 1, taken), OnScreen::NONE);
        assert_eq!(room(clocks_from, taken), OnScreen { clocks: true, pcie: false });
        assert_eq!(room(clocks_from + PCIE_W - 1, taken), OnScreen { clocks: true, pcie: false });
        assert_eq!(room(clocks_from + PCIE_W, taken), OnScreen { clocks: true, pcie: true });
        assert_eq!(room(80, 80), OnScreen::NONE, "nothing where the readings before them fill the line");
    }

    #[test]
    fn busy_but_idle_needs_both_figures() {
        let gpu = |util: Option<u32>, sm: Option<f64>| {
            let mut g = Gpu::blank(0, GpuState::Ok);
            g.utilization.gpu = util;
            g.activity = Some(Activity { period_ms: 1000, sm_active: sm, ..Activity::default() });
            g
        };
        assert!(busy_but_idle(&gpu(Some(100), Some(6.0))));
        assert!(busy_but_idle(&gpu(Some(80), Some(24.9))));
        assert!(!busy_but_idle(&gpu(Some(79), Some(6.0))), "not busy");
        assert!(!busy_but_idle(&gpu(Some(100), Some(25.0))), "enough SMs work");
        assert!(!busy_but_idle(&gpu(None, Some(0.0))), "unknown utilisation");
        assert!(!busy_but_idle(&gpu(Some(100), None)), "no SM figure is not an idle one");
        assert!(!busy_but_idle(&Gpu { activity: None, ..gpu(Some(100), None) }));
    }
}
