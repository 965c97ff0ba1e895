//! `a`: every active alert in full, most severe first: what it is about,
//! since when, the whole message and the hint, wrapped. The strip over the
//! dashboard has room for one line each (one alert at 80x24).

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::model::{Alert, Severity, Snapshot};
use crate::tui::render::Ctx;
use crate::tui::render::alerts::severity_word;
use crate::tui::render::format::duration_short;
use crate::tui::render::text::{fit, spread, wrap};
use crate::tui::term::Lines;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, snap: &Snapshot, scroll: usize) {
    let w = area.width as usize;
    let mut alerts: Vec<&Alert> = snap.alerts.iter().collect();
    alerts.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.since.time_unix_ms.cmp(&b.since.time_unix_ms)));
    let mut body: Vec<Line> = Vec::new();
    for a in &alerts {
        body.extend(entry(ctx, a, w));
    }
    if alerts.is_empty() {
        body.push(Line::styled("  no active alerts", ctx.theme.dim));
    }
    let room = (area.height as usize).saturating_sub(1);
    let start = scroll.min(body.len().saturating_sub(room));
    let mut lines = vec![title(ctx, alerts.len(), w)];
    lines.extend(body.into_iter().skip(start).take(room));
    frame.render_lines(Lines(lines), area);
}

fn title<'a>(ctx: &Ctx, n: usize, w: usize) -> Line<'a> {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let left = vec![Span::styled(sym.rule, t.rule), Span::styled(format!(" Alerts {n} "), t.title)];
    let right = vec![Span::styled(" j/k: scroll  Esc: back ", t.dim), Span::styled(sym.rule, t.rule)];
    spread(left, right, w, sym.rule, t.rule)
}

fn entry<'a>(ctx: &Ctx, a: &Alert, w: usize) -> Vec<Line<'a>> {
    let t = &ctx.theme;
    let style = match a.severity {
        Severity::Critical => t.crit,
        Severity::Warning => t.warn,
        Severity::Info => t.info,
    };
    let mut about = serde_json::to_value(a.kind).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default();
    if let Some(g) = a.gpu {
        about.push_str(&format!("  GPU {g}"));
    }
    if let Some(p) = a.pid {
        about.push_str(&format!("  PID {p}"));
    }
    let since = duration_short(ctx.now_ms.saturating_sub(a.since.time_unix_ms));
    let head = format!(" {} ", severity_word(a.severity));
    let mut lines = vec![Line::from(vec![
        Span::styled(head, style),
        Span::styled(fit(&format!("{about}  (for {since})"), w.saturating_sub(6), ctx.sym.cut), t.label),
    ])];
    let indent = "      ";
    let text_w = w.saturating_sub(indent.len());
    lines.extend(wrap(&ctx.clean(&a.message), text_w).into_iter().map(|l| Line::raw(format!("{indent}{l}"))));
    lines.extend(wrap(&ctx.clean(&a.hint), text_w).into_iter().map(|l| Line::styled(format!("{indent}{l}"), t.dim)));
    lines
}
