//! History charts: a GPU's (or all GPUs') memory, utilisation, power draw
//! and, where it has activity counters, SM, tensor and DRAM activity; and
//! one process's allocator figures, over the retained window.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::history::{Bucket, Series, gpu as g, lock, process as pr};
use crate::tui::render::Ctx;
use crate::tui::render::chart::{Layer, Merge, columns, plot};
use crate::tui::render::format::{bytes_short, duration_short};
use crate::tui::render::text::{right, spread, width};
use crate::tui::rows::RowKey;
use crate::tui::term::Lines;

const LEFT_AXIS: usize = 7;
const RIGHT_AXIS: usize = 5;

/// The window the charts cover, `[history] window`, ending at the data on
/// screen.
fn window(ctx: &Ctx) -> (u64, u64, u64) {
    let to = ctx.snap.map_or(ctx.now_ms, |s| s.time.time_unix_ms);
    let span = u64::try_from(ctx.state.span.as_millis()).unwrap_or(u64::MAX).max(1);
    (to.saturating_sub(span), to, span)
}

/// The buckets a chart from `from` to `to` draws, and the slot each covers.
/// Copies: the series assembles them from its columns.
struct Points<const N: usize> {
    buckets: Vec<Bucket<N>>,
    width_ms: u64,
}

impl<const N: usize> Points<N> {
    fn of(series: Option<&Series<N>>, from: u64, to: u64) -> Self {
        let buckets = series.map(|s| s.since(from).filter(|b| b.t_ms <= to).collect()).unwrap_or_default();
        Self { buckets, width_ms: series.map_or(0, |s| s.width_since(from)) }
    }

    /// From the start of a bucket's slot to its newest sample.
    fn slot(&self, b: &Bucket<N>) -> (u64, u64) {
        (b.t_ms - b.t_ms.checked_rem(self.width_ms).unwrap_or(0), b.t_ms)
    }

    fn columns(
        &self,
        (from, to): (u64, u64),
        w: usize,
        value: impl Fn(&Bucket<N>) -> Option<f64>,
        m: Merge,
    ) -> Vec<Option<f64>> {
        columns(self.buckets.iter(), from, to, w, |b| self.slot(b), |b| value(b), m)
    }

    /// Memory is drawn by each bucket's max, so a peak shorter than a
    /// bucket still shows.
    fn peaks(&self, window: (u64, u64), w: usize, field: usize) -> Vec<Option<f64>> {
        self.columns(window, w, |b| b.get(field).max(), Merge::Max)
    }
}

pub fn gpu(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let (from, to, span) = window(ctx);
    let focus = ctx.state.focus;
    let store = lock(&ctx.state.history);
    let series = store.gpu(focus);
    let points = Points::of(series, from, to);
    let has =
        |field| series.is_some_and(|s| s.records(field)) && points.buckets.iter().any(|b| b.get(field).count() > 0);
    let probed = has(g::RESERVED);
    let max = points.buckets.iter().filter_map(|b| b.get(g::TOTAL).max().or(b.get(g::USED).max())).fold(0.0, f64::max);
    let w = (area.width as usize).saturating_sub(LEFT_AXIS + RIGHT_AXIS);
    let col = |field| points.peaks((from, to), w, field);
    let used_symbol = if probed { sym.other } else { sym.used };
    // Activity and power, where recorded, in the order they give way to
    // the width.
    let activity: Vec<(usize, &'static str, &'static str, Style)> = [
        (g::SM_ACTIVE, sym.sm, "SM", t.sm),
        (g::TENSOR_ACTIVE, sym.tensor, "TC", t.tensor),
        (g::DRAM_ACTIVE, sym.dram, "DRAM", t.dram),
        (g::POWER, sym.power, "power", t.power),
    ]
    .into_iter()
    .filter(|(field, ..)| has(*field))
    .collect();
    // Power on the percent axis as a share of the enforced limit (100%:
    // drawing all the board may), else of the window's peak.
    let power_top = power_limit(ctx, focus)
        .or_else(|| points.buckets.iter().filter_map(|b| b.get(g::POWER).max()).reduce(f64::max))
        .filter(|w| *w > 0.0);
    // With activity to name too, the memory's names in short.
    let counters = activity.iter().any(|(field, ..)| *field != g::POWER);
    let (reserved, allocated) = if counters { ("resv", "alloc") } else { ("reserved", "allocated") };
    let mut layers = vec![Layer { values: col(g::USED), symbol: used_symbol, style: t.other, fill: true }];
    let mut legend = vec![(used_symbol, "used", t.other)];
    if probed {
        layers.push(Layer { values: col(g::RESERVED), symbol: sym.cached, style: t.cached, fill: true });
        layers.push(Layer { values: col(g::ALLOCATED), symbol: sym.allocated, style: t.allocated, fill: true });
        legend.extend([(sym.cached, reserved, t.cached), (sym.allocated, allocated, t.allocated)]);
    }
    let percent = |field| {
        let full = if field == g::POWER { power_top.unwrap_or(f64::INFINITY) } else { 100.0 };
        points.columns((from, to), w, |b| b.get(field).mean().map(|u| (u / full).min(1.0) * max), Merge::Mean)
    };
    let util = percent(g::UTIL);
    legend.push((sym.util, "util", t.util));
    let name = focus.map_or_else(|| "all GPUs".to_string(), |i| format!("GPU {i}"));
    let title = format!(" History {name} {} {} ", sym.dot, duration_short(span));
    let top = bytes_short(max as u64);
    // Drawn last, so SM activity shows in front where marks meet: each
    // only with its name in the legend.
    let mut marks = Vec::with_capacity(activity.len());
    for (field, symbol, label, style) in activity {
        // `spread` keeps the top only with a rule between it and the legend.
        if title_width(&title, &legend, &top) + legend_width(&[(symbol, label, style)]) >= usize::from(area.width) {
            break;
        }
        legend.push((symbol, label, style));
        marks.push((field, Layer { values: percent(field), symbol, style, fill: false }));
    }
    drop(store);
    // Power behind utilisation: a board's draw is often flat, and a flat
    // line in front would hide the utilisation it runs along.
    let (power, marks): (Vec<_>, Vec<_>) = marks.into_iter().partition(|(field, _)| *field == g::POWER);
    layers.extend(power.into_iter().map(|(_, l)| l));
    layers.push(Layer { values: util, symbol: sym.util, style: t.util, fill: false });
    layers.extend(marks.into_iter().rev().map(|(_, l)| l));
    draw(frame, area, ctx, Chart { title, legend, layers, max, top, percent: true, span });
}

/// The enforced power limit of the GPU in focus, or of all GPUs added up,
/// as the snapshot on screen says.
fn power_limit(ctx: &Ctx, focus: Option<u32>) -> Option<f64> {
    let gpus = ctx.snap.map(|s| s.gpus.iter().filter(|g| focus.is_none_or(|i| g.index == i)))?;
    gpus.filter_map(|g| g.power_limit_w).reduce(|a, b| a + b)
}

/// The columns `draw`'s title line takes: rules, title, legend, the top.
fn title_width(title: &str, legend: &[(&str, &str, Style)], top: &str) -> usize {
    1 + width(title) + 1 + legend_width(legend) + 1 + width(" top ") + width(top) + 1 + 1
}

/// " ▒ used ▓ reserved": a space, the symbol, a space and the name each.
fn legend_width(legend: &[(&str, &str, Style)]) -> usize {
    legend.iter().map(|(symbol, name, _)| 2 + width(symbol) + width(name)).sum()
}

pub fn process(frame: &mut Frame, area: Rect, ctx: &Ctx, key: RowKey) {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let (from, to, span) = window(ctx);
    let store = lock(&ctx.state.history);
    let points = Points::of(store.process_row(key.pid, key.gpu), from, to);
    // A fifth of headroom, so a flat line does not look like a full GPU.
    let max = points
        .buckets
        .iter()
        .flat_map(|b| [pr::NVML, pr::RESERVED, pr::ALLOCATED].map(|f| b.get(f).max()))
        .flatten()
        .fold(0.0, f64::max)
        * 1.25;
    let probed = points.buckets.iter().any(|b| b.get(pr::RESERVED).count() > 0 || b.get(pr::ALLOCATED).count() > 0);
    let w = (area.width as usize).saturating_sub(LEFT_AXIS + RIGHT_AXIS);
    let col = |field| points.peaks((from, to), w, field);
    let mut layers = vec![Layer { values: col(pr::NVML), symbol: sym.other, style: t.other, fill: true }];
    let mut legend = vec![(sym.other, "NVML", t.other)];
    if probed {
        layers.push(Layer { values: col(pr::RESERVED), symbol: sym.cached, style: t.cached, fill: true });
        layers.push(Layer { values: col(pr::ALLOCATED), symbol: sym.allocated, style: t.allocated, fill: true });
        legend.extend([(sym.cached, "reserved", t.cached), (sym.allocated, "allocated", t.allocated)]);
    }
    drop(store);
    let title = format!(" Memory of PID {} on GPU {} {} {} ", key.pid, key.gpu, sym.dot, duration_short(span));
    draw(frame, area, ctx, Chart { title, legend, layers, max, top: bytes_short(max as u64), percent: false, span });
}

struct Chart {
    title: String,
    legend: Vec<(&'static str, &'static str, Style)>,
    layers: Vec<Layer>,
    max: f64,
    top: String,
    /// A right-hand axis for utilisation.
    percent: bool,
    span: u64,
}

fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, chart: Chart) {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let w = area.width as usize;
    let plot_w = w.saturating_sub(LEFT_AXIS + RIGHT_AXIS);
    let plot_h = (area.height as usize).saturating_sub(2);
    let mut title =
        vec![Span::styled(sym.rule, t.rule), Span::styled(chart.title, t.title), Span::styled(sym.rule, t.rule)];
    for (s, name, style) in chart.legend {
        title.push(Span::raw(" "));
        title.push(Span::styled(s, style));
        title.push(Span::raw(format!(" {name}")));
    }
    title.push(Span::raw(" "));
    // The scale's top is said in the title: as an axis label it sat
    // against the GPU list beside the chart and read as a GPU's figure.
    let top = vec![Span::styled(format!(" top {} ", chart.top), t.dim), Span::styled(sym.rule, t.rule)];
    let mut lines = vec![spread(title, top, w, sym.rule, t.rule)];
    let rows = plot(&chart.layers, chart.max, plot_w, plot_h);
    let last = rows.len().saturating_sub(1);
    for (i, row) in rows.into_iter().enumerate() {
        let (l, r) = match i {
            0 => ("", "100%"),
            i if i == last => ("0", "0%"),
            _ => ("", ""),
        };
        let mut spans =
            vec![Span::styled(right(l, LEFT_AXIS - 1, sym.cut), t.dim), Span::styled(sym.border.vertical_left, t.rule)];
        spans.extend(row.spans);
        if chart.percent {
            spans.push(Span::styled(format!(" {}", right(r, RIGHT_AXIS - 1, sym.cut)), t.dim));
        }
        lines.push(Line::from(spans));
    }
    let half = format!("-{}", duration_short(chart.span / 2));
    let end = if ctx.state.paused() { "paused" } else { "now" };
    let oldest = format!("{}-{}", " ".repeat(LEFT_AXIS), duration_short(chart.span));
    let mid_at = LEFT_AXIS + plot_w / 2;
    let mut axis = format!("{oldest:<mid_at$}{half}");
    let end_at = (LEFT_AXIS + plot_w).saturating_sub(end.len());
    if axis.len() + 1 < end_at {
        axis = format!("{axis:<end_at$}{end}");
    }
    lines.push(Line::styled(axis, t.dim));
    frame.render_lines(Lines(lines), area);
}
