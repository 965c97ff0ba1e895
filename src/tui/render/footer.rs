//! The bottom line: the filter or search prompt while typing, else the
//! latest status message, else the keys that matter most.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::tui::render::Ctx;
use crate::tui::state::View;
use crate::tui::term::Lines;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let (t, s) = (&ctx.theme, ctx.state);
    let line = if s.editing_filter {
        Line::from(vec![
            Span::styled("/", t.key),
            Span::raw(ctx.clean(&s.filter)),
            Span::styled("_", t.key),
            Span::styled("   Enter keeps the filter, Esc clears it", t.dim),
        ])
    } else if s.searching {
        search_prompt(ctx)
    } else if let Some(msg) = &s.status {
        Line::styled(ctx.clean(msg), t.warn)
    } else {
        hints(ctx, area.width as usize)
    };
    frame.render_lines(Lines(vec![line]), area);
}

/// F3's prompt, and whether the text matches any row at all.
fn search_prompt<'a>(ctx: &Ctx) -> Line<'a> {
    let (t, s) = (&ctx.theme, ctx.state);
    let missed = crate::tui::rows::find(&ctx.rows, &s.search, 0).is_none() && !s.search.trim().is_empty();
    let mut spans = vec![Span::styled("search: ", t.key), Span::raw(ctx.clean(&s.search)), Span::styled("_", t.key)];
    if missed {
        spans.push(Span::styled("  no match", t.warn));
    }
    spans.push(Span::styled("   F3 next, Enter keeps the selection, Esc closes", t.dim));
    Line::from(spans)
}

/// As many key hints as fit whole.
fn hints<'a>(ctx: &Ctx, width: usize) -> Line<'a> {
    let s = ctx.state;
    let mut keys: Vec<(&str, &str)> = match s.top() {
        Some(View::Detail(_)) => vec![("Esc", "back"), ("j/k", "scroll")],
        _ => vec![("?", "help"), ("q", "quit"), ("/", "filter"), ("s", "sort"), ("Tab", "GPU"), ("Enter", "details")],
    };
    if let Some(View::Environ { .. }) = s.top() {
        keys = vec![("Esc", "back"), ("q", "quit")];
    } else if let Some(View::SortMenu { .. }) = s.top() {
        keys = vec![("j/k", "move"), ("Enter", "sort by it"), ("S", "reverse"), ("Esc", "close")];
    } else if let Some(View::Alerts { .. }) = s.top() {
        keys = vec![("Esc", "back"), ("j/k", "scroll"), ("q", "quit")];
    } else if let Some(View::Segments(_)) = s.top() {
        // The map's own keys: +/- size the allocation asked about there.
        keys = vec![("Esc", "back"), ("+/-", "allocation size"), ("j/k", "scroll"), ("q", "quit")];
    } else if s.replay.is_some() {
        keys.splice(
            0..0,
            [("Space", "play/pause"), ("<-/->", "10s"), ("[/]", "1min"), ("n/N", "alert"), ("+/-", "speed")],
        );
    } else {
        if !s.read_only {
            keys.push(("K", "kill"));
        }
        keys.push(("p", if s.paused() { "resume" } else { "pause" }));
        keys.push(("+/-", "interval"));
    }
    let mut spans = Vec::new();
    let mut used = 0;
    for (k, what) in keys {
        let text = format!(" {what}  ");
        used += k.len() + text.trim_end().len();
        if used > width {
            break;
        }
        used += 2;
        spans.push(Span::styled(k, ctx.theme.key));
        spans.push(Span::styled(text, ctx.theme.dim));
    }
    Line::from(spans)
}
