//! History charts: a GPU's (or all GPUs') memory and utilisation, and one
//! process's allocator figures, over the retained window.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::tui::history::{GpuPoint, ProcessPoint, RowKey};
use crate::tui::render::Ctx;
use crate::tui::render::chart::{Layer, Merge, columns, plot};
use crate::tui::render::format::{bytes_short, duration_short};
use crate::tui::render::paint::Lines;
use crate::tui::render::text::{right, spread};

const LEFT_AXIS: usize = 7;
const RIGHT_AXIS: usize = 5;

/// The window the charts cover, ending at the data on screen.
fn window(ctx: &Ctx) -> (u64, u64, u64) {
    let to = ctx.snap.map_or(ctx.now_ms, |s| s.time.time_unix_ms);
    let span = u64::try_from(ctx.state.history.window(ctx.state.interval).as_millis()).unwrap_or(u64::MAX);
    (to.saturating_sub(span), to, span)
}

pub fn gpu(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let (from, to, span) = window(ctx);
    let focus = ctx.state.focus;
    let points: Vec<&GpuPoint> =
        ctx.state.history.gpu(focus).iter().filter(|p| p.t_ms >= from && p.t_ms <= to).collect();
    let probed = points.iter().any(|p| p.reserved.is_some());
    let max = points.iter().filter_map(|p| p.total.or(p.used)).max().unwrap_or(0) as f64;
    let w = (area.width as usize).saturating_sub(LEFT_AXIS + RIGHT_AXIS);
    let col = |f: fn(&GpuPoint) -> Option<u64>| {
        columns(points.iter().copied(), from, to, w, |p| p.t_ms, |p| f(p).map(|v| v as f64), Merge::Max)
    };
    let used_symbol = if probed { sym.other } else { sym.used };
    let mut layers = vec![Layer { values: col(|p| p.used), symbol: used_symbol, style: t.other, fill: true }];
    let mut legend = vec![(used_symbol, "used", t.other)];
    if probed {
        layers.push(Layer { values: col(|p| p.reserved), symbol: sym.cached, style: t.cached, fill: true });
        layers.push(Layer { values: col(|p| p.allocated), symbol: sym.allocated, style: t.allocated, fill: true });
        legend.extend([(sym.cached, "reserved", t.cached), (sym.allocated, "allocated", t.allocated)]);
    }
    let util =
        columns(points.iter().copied(), from, to, w, |p| p.t_ms, |p| p.util.map(|u| u / 100.0 * max), Merge::Mean);
    layers.push(Layer { values: util, symbol: sym.util, style: t.util, fill: false });
    legend.push((sym.util, "util", t.util));
    let name = focus.map_or_else(|| "all GPUs".to_string(), |i| format!("GPU {i}"));
    let title = format!(" History {name} {} {} ", sym.dot, duration_short(span));
    draw(frame, area, ctx, Chart { title, legend, layers, max, top: bytes_short(max as u64), percent: true, span });
}

pub fn process(frame: &mut Frame, area: Rect, ctx: &Ctx, key: RowKey) {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let (from, to, span) = window(ctx);
    let points: Vec<&ProcessPoint> =
        ctx.state.history.process(key).iter().filter(|p| p.t_ms >= from && p.t_ms <= to).collect();
    // A fifth of headroom, so a flat line does not look like a full GPU.
    let max = points.iter().flat_map(|p| [p.nvml, p.reserved, p.allocated]).flatten().max().unwrap_or(0) as f64 * 1.25;
    let probed = points.iter().any(|p| p.reserved.is_some() || p.allocated.is_some());
    let w = (area.width as usize).saturating_sub(LEFT_AXIS + RIGHT_AXIS);
    let col = |f: fn(&ProcessPoint) -> Option<u64>| {
        columns(points.iter().copied(), from, to, w, |p| p.t_ms, |p| f(p).map(|v| v as f64), Merge::Max)
    };
    let mut layers = vec![Layer { values: col(|p| p.nvml), symbol: sym.other, style: t.other, fill: true }];
    let mut legend = vec![(sym.other, "NVML", t.other)];
    if probed {
        layers.push(Layer { values: col(|p| p.reserved), symbol: sym.cached, style: t.cached, fill: true });
        layers.push(Layer { values: col(|p| p.allocated), symbol: sym.allocated, style: t.allocated, fill: true });
        legend.extend([(sym.cached, "reserved", t.cached), (sym.allocated, "allocated", t.allocated)]);
    }
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
    let mut lines = vec![spread(title, Vec::new(), w, sym.rule, t.rule)];
    let rows = plot(&chart.layers, chart.max, plot_w, plot_h);
    let last = rows.len().saturating_sub(1);
    for (i, row) in rows.into_iter().enumerate() {
        let (l, r) = match i {
            0 => (chart.top.as_str(), "100%"),
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
    frame.render_widget(Lines(lines), area);
}
