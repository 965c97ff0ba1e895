//! `?`: every key, in a box over the dashboard.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::tui::render::Ctx;
use crate::tui::render::layout::centered;

pub const KEYS: &[(&str, &str)] = &[
    ("q, Ctrl-C, F10", "quit; Ctrl-Z suspends (fg resumes)"),
    ("?, h, F1", "this help; Esc closes a view, then clears the filter"),
    ("j k, Down Up", "select the next / previous process"),
    ("PgDn PgUp", "a page down / up"),
    ("Home End", "first / last process"),
    ("Tab, Shift-Tab", "focus the next / previous GPU or MIG device"),
    ("0 .. 9", "focus GPU N (the index shown); again: all GPUs"),
    ("s, S, F6", "sort by the next column; reverse the order; F6: a menu"),
    ("w, J, t F5", "group by workload (pod, container, Slurm) / DDP job; tree"),
    ("/, F4", "filter by user, command, PID, workload; Enter keeps it"),
    ("F3, n", "search: select the next match, hiding no row; F3 again: next"),
    ("Enter", "the process in full; j k, PgDn Space, g G scroll it"),
    ("a, e", "every alert in full; the process's GPU environment"),
    ("m", "its allocator's live segment map (PyTorch; +/- size asked)"),
    ("M, A", "its PyTorch memory snapshot; start a probe in it (3.14+)"),
    ("p, Space", "pause the view (collection goes on)"),
    ("K, Del, F9", "send SIGTERM (confirm), then offer SIGKILL"),
    ("+, -", "double / halve the interval (100ms .. 60s)"),
    ("click, wheel", "select a row, focus a GPU (again: all); scroll"),
];

/// In `gpuscope replay`, these come first; pause and +/- act on playback.
pub const REPLAY_KEYS: &[(&str, &str)] = &[
    ("Space, p", "play / pause the recording"),
    ("Right Left", "10 s forward / back"),
    ("] [", "1 minute forward / back"),
    ("n, N", "next / previous alert"),
    ("+, -", "faster / slower (0.5x .. 32x)"),
];

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let t = &ctx.theme;
    let keys: Vec<&(&str, &str)> = match ctx.state.replay {
        Some(_) => REPLAY_KEYS
            .iter()
            .chain(KEYS.iter().filter(|(k, _)| !matches!(*k, "p, Space" | "+, -" | "K, Del, F9" | "m" | "M, A")))
            .collect(),
        // What a mode refuses is not offered (and the box fits 80x24).
        None => KEYS.iter().collect(),
    };
    let key_w = keys.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut lines: Vec<Line> = keys
        .iter()
        .map(|(k, what)| Line::from(vec![Span::styled(format!(" {k:<key_w$}  "), t.key), Span::raw(*what)]))
        .collect();
    lines.push(Line::raw(""));
    // UTIL% is NVML's per-process sample, not the GPU's SM activity.
    lines.push(Line::styled(" > selected  ! alert  ? quiet probe  UTIL% time a kernel ran, not SM activity", t.dim));
    if ctx.state.replay.is_some() {
        // One line: with the replay's keys the box has no row to spare at 80x24.
        lines.push(Line::styled(" replay: no signal is ever sent; the exec hook never runs", t.warn));
    } else if ctx.state.read_only {
        lines.push(Line::styled(" read-only: K and Delete are off", t.warn));
    }
    let width = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 3;
    let height = lines.len() as u16 + 2;
    let popup = centered(area, width, height);
    let block =
        Block::bordered().border_set(ctx.sym.border).border_style(t.rule).title(Span::styled(" keys ", t.title));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}
