//! The process table: one row per (process, GPU), the selection marked
//! with `>` (and reversed), a `!` where an alert names the process; in
//! tree mode, children indented under their parent with tree glyphs.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::model::{PidNamespace, Snapshot};
use crate::tui::mouse::{Hits, Target};
use crate::tui::render::Ctx;
use crate::tui::render::columns::{self, MARKER, Spec};
use crate::tui::render::text::{clean_cow, push_left, push_right, spread};
use crate::tui::rows::{Column, Row};
use crate::tui::term::Lines;
use crate::tui::tree::{self, Entry};

/// Draws the table; returns how many rows it had room for (a page).
pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, snap: &Snapshot, hits: &mut Hits) -> usize {
    let w = area.width as usize;
    let rows = &ctx.rows[..];
    let (specs, command_w) = columns::choose(w, columns::Present::of(rows));
    let page = (area.height as usize).saturating_sub(2);
    let in_container = snap.sources.host.pid_namespace == Some(PidNamespace::Container);
    let mut lines = vec![title(ctx, rows.len(), w, in_container), header(ctx, &specs, command_w)];
    let selected = ctx.state.selected_index(rows);
    let entries = if ctx.state.sort.tree {
        tree::entries(rows)
    } else {
        (0..rows.len()).map(|index| Entry::Row { index, last: Vec::new() }).collect()
    };
    let at = |e: &Entry| matches!(e, Entry::Row { index, .. } if Some(*index) == selected);
    let offset = entries.iter().position(at).map_or(0, |s| (s + 1).saturating_sub(page));
    hits.near = Some(near(rows, &entries, offset, page));
    for entry in entries.iter().skip(offset).take(page) {
        lines.push(match entry {
            Entry::Parent { pid, name } => parent_line(ctx, *pid, name.as_deref(), &specs, command_w),
            Entry::Row { index, last } => {
                super::gpus::hit(hits, area, lines.len(), lines.len() + 1, Target::Row(rows[*index].key));
                let branch = branch(ctx, last);
                line(ctx, snap, &rows[*index], (&specs, command_w), &branch, selected == Some(*index))
            }
        });
    }
    if rows.is_empty() {
        lines.push(Line::styled(empty_reason(ctx, snap), ctx.theme.dim));
    }
    frame.render_lines(Lines(lines), area);
    page
}

/// The PIDs of the rows on screen and of those a page above and below:
/// the processes whose CPU time and resident memory the collector reads
/// for the dashboard (`tui::steer`), so that a row a key brings into view
/// has its figures at once. Sorted.
fn near(rows: &[Row], entries: &[Entry], offset: usize, page: usize) -> Vec<u32> {
    let from = offset.saturating_sub(page);
    let to = offset.saturating_add(page.saturating_mul(2));
    let span = entries.iter().take(to).skip(from);
    let mut pids: Vec<u32> = (span.filter_map(|e| match e {
        Entry::Row { index, .. } => rows.get(*index).map(|r| r.key.pid),
        Entry::Parent { .. } => None,
    }))
    .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

fn empty_reason(ctx: &Ctx, snap: &Snapshot) -> String {
    let s = ctx.state;
    match () {
        _ if !s.filter.is_empty() => {
            format!("  no process matches \"{}\" (Esc clears the filter)", ctx.clean(&s.filter))
        }
        _ if s.focus_mig.is_some() => format!("  no process on this MIG device ({})", unfocus(s.focus, true)),
        _ if s.focus.is_some() => format!("  no process on this GPU ({})", unfocus(s.focus, false)),
        _ if !snap.sources.nvml.ok => "  no process list without NVML".into(),
        _ => "  no GPU processes".into(),
    }
}

/// The keys that show every GPU again (`update::focus_index`): the
/// focused GPU's digit (the whole GPU first, from one of its MIG
/// devices), or Tab past the last GPU where the index has no digit.
fn unfocus(focus: Option<u32>, mig: bool) -> String {
    match focus {
        Some(g @ 0..=9) if mig => format!("{g} shows the whole GPU, {g} again all GPUs"),
        Some(g @ 0..=9) => format!("{g} again shows all GPUs"),
        _ => "Tab past the last GPU shows all GPUs".into(),
    }
}

/// Said once, over the table, rather than on every row of a host PID.
pub const CONTAINER_NOTE: &str = " in a container: PIDs are the host's ";

fn title<'a>(ctx: &Ctx, n: usize, w: usize, in_container: bool) -> Line<'a> {
    let (sym, t, s) = (ctx.sym, &ctx.theme, ctx.state);
    let arrow = if s.sort.descending { sym.descending } else { sym.ascending };
    let mut spans = vec![
        Span::styled(sym.rule, t.rule),
        Span::styled(format!(" Processes {n} "), t.title),
        Span::styled(sym.rule, t.rule),
        Span::raw(format!(" sort {} {arrow} ", s.sort.column.title())),
    ];
    if in_container {
        spans.push(Span::styled(sym.rule, t.rule));
        spans.push(Span::styled(CONTAINER_NOTE, t.warn));
    }
    if s.sort.tree {
        spans.push(Span::styled(sym.rule, t.rule));
        spans.push(Span::raw(" tree "));
    }
    if s.sort.by_job {
        spans.push(Span::styled(sym.rule, t.rule));
        spans.push(Span::raw(" by job "));
    }
    if s.sort.by_workload {
        spans.push(Span::styled(sym.rule, t.rule));
        spans.push(Span::raw(" by workload "));
    }
    let only = &s.only;
    if !only.users.is_empty() || !only.pids.is_empty() {
        let mut said = Vec::new();
        if !only.users.is_empty() {
            said.push(format!("-u {}", ctx.clean(&only.users.join(","))));
        }
        if !only.pids.is_empty() {
            said.push(format!("-p {}", only.pids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")));
        }
        spans.push(Span::styled(sym.rule, t.rule));
        spans.push(Span::styled(format!(" {} ", said.join(" ")), t.warn));
    }
    if !s.filter.is_empty() || s.editing_filter {
        spans.push(Span::styled(sym.rule, t.rule));
        spans.push(Span::styled(format!(" filter \"{}\" ", ctx.clean(&s.filter)), t.warn));
    }
    let focus = super::mig::focus_label(ctx)
        .map(|label| vec![Span::styled(format!(" {label} only "), t.label), Span::styled(sym.rule, t.rule)]);
    spread(spans, focus.unwrap_or_default(), w, sym.rule, t.rule)
}

fn header<'a>(ctx: &Ctx, specs: &[Spec], command_w: usize) -> Line<'a> {
    let s = ctx.state;
    let arrow = if s.sort.descending { ctx.sym.descending } else { ctx.sym.ascending };
    let title = |c: Column| if c == s.sort.column { format!("{}{arrow}", c.title()) } else { c.title().to_string() };
    let mut text = " ".repeat(MARKER);
    for spec in specs {
        let t = title(spec.column);
        push_cell(&mut text, &t, spec, "");
    }
    push_left(&mut text, &title(Column::Command), command_w, "");
    Line::styled(text, ctx.theme.header_row)
}

/// `value` in its column, aligned as the column is, and the gap after it.
fn push_cell(text: &mut String, value: &str, spec: &Spec, cut: &str) {
    if spec.right {
        push_right(text, value, spec.width, cut);
    } else {
        push_left(text, value, spec.width, cut);
    }
    text.push(' ');
}

/// The tree glyphs before a command: a line down past each ancestor
/// with siblings still to come, then this branch.
fn branch(ctx: &Ctx, last: &[bool]) -> String {
    let [mid, end, pipe, gap] = ctx.sym.tree;
    let Some((&own, above)) = last.split_last() else { return String::new() };
    let mut text: String = above.iter().map(|&l| if l { gap } else { pipe }).collect();
    text.push_str(if own { end } else { mid });
    text
}

/// A parent on no GPU over its GPU children: its PID and name only.
fn parent_line<'a>(ctx: &Ctx, pid: u32, name: Option<&str>, specs: &[Spec], command_w: usize) -> Line<'a> {
    let mut text = " ".repeat(MARKER);
    for spec in specs {
        let value = if spec.column == Column::Pid { pid.to_string() } else { String::new() };
        push_cell(&mut text, &value, spec, "");
    }
    let name = ctx.clean(name.unwrap_or("n/a"));
    push_left(&mut text, &name, command_w, ctx.sym.cut);
    Line::styled(text, ctx.theme.dim)
}

fn line<'a>(
    ctx: &Ctx,
    snap: &Snapshot,
    row: &Row,
    (specs, command_w): (&[Spec], usize),
    branch: &str,
    selected: bool,
) -> Line<'a> {
    let alarmed = snap.alerts.iter().any(|a| a.pid == Some(row.key.pid) && a.gpu.is_none_or(|g| g == row.key.gpu));
    let mut spans = Vec::with_capacity(3);
    spans.push(Span::styled(if selected { ">" } else { " " }, ctx.theme.title));
    spans.push(Span::styled(if alarmed { "!" } else { " " }, ctx.theme.crit));
    let (ascii, cut) = (ctx.state.ascii, ctx.sym.cut);
    let mut text = String::with_capacity(specs.iter().map(|s| s.width + 1).sum::<usize>() + command_w);
    // Each cell's value, one after another in the same buffer.
    let mut value = String::with_capacity(32);
    for spec in specs {
        value.clear();
        columns::cell_into(&mut value, row, spec.column, ctx.now_ms);
        push_cell(&mut text, &clean_cow(&value, ascii), spec, cut);
    }
    value.clear();
    columns::cell_into(&mut value, row, Column::Command, ctx.now_ms);
    let command = clean_cow(&value, ascii);
    let command = if branch.is_empty() { command } else { format!("{branch}{command}").into() };
    push_left(&mut text, &command, command_w, cut);
    spans.push(Span::raw(text));
    let line = Line::from(spans);
    if selected { line.style(ctx.theme.selected) } else { line }
}
