//! `m`: one process's caching allocator on one GPU, as its probe read it
//! from `torch.cuda.memory_snapshot()` a moment ago. Per pool, a strip of
//! cells proportional to size over all its segments; then one row per
//! segment, its blocks drawn in address order: allocated, pending free,
//! inactive split (trapped between live blocks) and free. And the answer to
//! the question after an OOM: would an allocation of N fit in a cached
//! block, or does it need a new `cudaMalloc`?

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::probe::segmap::{MapState, Pool, RunClass, Segment, SegmentMap};
use crate::tui::render::format::duration_short;
use crate::tui::render::text::{fit, spread, wrap};
use crate::tui::render::{Ctx, theme::Theme};
use crate::tui::state::SegmentsView;
use crate::tui::term::Lines;
use crate::util::units::bytes;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, view: SegmentsView) {
    let w = area.width as usize;
    let mut lines = vec![title(ctx, view, w)];
    let update = ctx.state.segmap.as_ref().filter(|u| u.pid == view.key.pid && u.ordinal == view.ordinal);
    match update.map(|u| &u.state) {
        None | Some(MapState::Waiting) => {
            lines.push(Line::styled(
                format!("asking PID {}'s probe for its segments{}", view.key.pid, ctx.sym.ellipsis),
                ctx.theme.dim,
            ));
        }
        Some(MapState::Failed(why)) => {
            lines.push(Line::styled(fit(&ctx.clean(why), w, ctx.sym.cut), ctx.theme.warn));
        }
        Some(MapState::Ready(map)) => {
            let rows = area.height as usize;
            body(&mut lines, ctx, map, view, w, rows);
        }
    }
    frame.render_lines(Lines(lines), area);
}

fn title<'a>(ctx: &Ctx, view: SegmentsView, w: usize) -> Line<'a> {
    let (sym, t) = (ctx.sym, &ctx.theme);
    let left = vec![
        Span::styled(sym.rule, t.rule),
        Span::styled(
            format!(
                " Segments: PID {} on GPU {} (cuda:{}){} ",
                view.key.pid,
                view.key.gpu,
                view.ordinal,
                if ctx.simulated() { ", simulated" } else { "" }
            ),
            t.title,
        ),
    ];
    let right = vec![Span::styled(" +/-: size  j/k: scroll  Esc: back ", t.dim), Span::styled(sym.rule, t.rule)];
    spread(left, right, w, sym.rule, t.rule)
}

fn body<'a>(lines: &mut Vec<Line<'a>>, ctx: &Ctx, map: &SegmentMap, view: SegmentsView, w: usize, rows: usize) {
    let t = &ctx.theme;
    let age = map.taken_unix_ms.map(|ms| ctx.now_ms.saturating_sub(ms));
    let mut said = format!("{} segments", map.segments.len());
    if let Some(age) = age {
        said.push_str(&format!(", read {} ago", duration_short(age)));
    }
    if map.truncated || map.segments_left_out > 0 {
        said.push_str("; the probe's bound left some out");
    }
    lines.push(Line::styled(fit(&said, w, ctx.sym.cut), t.dim));
    lines.extend(fit_lines(ctx, map, view.request, w));
    lines.push(legend(ctx, w));
    for pool in &map.pools {
        lines.push(pool_line(ctx, pool, w));
        lines.push(strip(ctx, map.segments.iter().filter(|s| s.pool == pool.pool), w));
    }
    let room = rows.saturating_sub(lines.len() + 1);
    let start = view.scroll.min(map.segments.len().saturating_sub(room.max(1)));
    for seg in map.segments.iter().skip(start).take(room) {
        lines.push(segment_row(ctx, seg, w));
    }
    let after = map.segments.len().saturating_sub(start + room);
    if after > 0 || start > 0 {
        let msg = format!("{start} above, {after} below (j/k, PgUp/PgDn)");
        lines.push(Line::styled(fit(&msg, w, ctx.sym.cut), t.dim));
    }
}

fn fit_lines<'a>(ctx: &Ctx, map: &SegmentMap, request: u64, w: usize) -> Vec<Line<'a>> {
    let f = map.fit(request);
    let (verdict, style) = if f.fits {
        ("would fit in a cached block", ctx.theme.allocated)
    } else {
        ("would NOT fit without a new cudaMalloc", ctx.theme.crit)
    };
    let text = format!(
        "An allocation of {} ({} pool) {verdict}: the largest free block there is {}",
        bytes(request),
        f.pool,
        bytes(f.largest_free_block)
    );
    wrap(&text, w).into_iter().take(2).map(|l| Line::styled(l, style)).collect()
}

/// The cell for each class; the ASCII set where block characters would
/// come out as garbage.
fn mark(ctx: &Ctx, class: RunClass) -> (&'static str, Style) {
    let t: &Theme = &ctx.theme;
    let ascii = ctx.state.ascii;
    match class {
        RunClass::Allocated => (if ascii { "#" } else { "█" }, t.allocated),
        RunClass::PendingFree => (if ascii { "+" } else { "▓" }, t.cached),
        RunClass::InactiveSplit => (if ascii { "~" } else { "▒" }, t.warn),
        RunClass::Free => (if ascii { "." } else { "░" }, t.free),
        RunClass::Mixed => (if ascii { "%" } else { "▚" }, t.dim),
    }
}

fn legend<'a>(ctx: &Ctx, w: usize) -> Line<'a> {
    let mut spans = Vec::new();
    for (class, name) in [
        (RunClass::Allocated, "allocated"),
        (RunClass::PendingFree, "pending free"),
        (RunClass::InactiveSplit, "inactive split"),
        (RunClass::Free, "free segment"),
    ] {
        let (m, style) = mark(ctx, class);
        spans.push(Span::styled(m, style));
        spans.push(Span::raw(format!(" {name}  ")));
    }
    let mut line = Line::from(spans);
    if line.width() > w {
        line = Line::from(line.spans.into_iter().take(4).collect::<Vec<_>>());
    }
    line
}

fn pool_line<'a>(ctx: &Ctx, pool: &Pool, w: usize) -> Line<'a> {
    let text = format!(
        "{} pool: {} segments, {}; largest free block {}; allocated {}, inactive split {}, free segments {}",
        pool.pool,
        pool.segments,
        bytes(pool.total),
        bytes(pool.largest_free_block),
        bytes(pool.allocated),
        bytes(pool.inactive_split),
        bytes(pool.free)
    );
    Line::styled(fit(&text, w, ctx.sym.cut), ctx.theme.label)
}

/// All of a pool's segments end to end, each cell the same share of bytes.
fn strip<'a, 'b>(ctx: &Ctx, segments: impl Iterator<Item = &'b Segment>, w: usize) -> Line<'a> {
    let runs: Vec<(RunClass, u64)> = segments.flat_map(|s| s.runs.iter().copied()).collect();
    cells_line(ctx, &runs, w)
}

fn segment_row<'a>(ctx: &Ctx, seg: &Segment, w: usize) -> Line<'a> {
    // Rows of both pools follow each other: each says which it is.
    let pool = if seg.pool == "small" { "S" } else { "L" };
    let label = format!("{pool} {:>9} ", bytes(seg.total));
    let bar_w = w.saturating_sub(label.len());
    let mut line = cells_line(ctx, &seg.runs, bar_w);
    line.spans.insert(0, Span::styled(label, ctx.theme.label));
    line
}

fn cells_line<'a>(ctx: &Ctx, runs: &[(RunClass, u64)], w: usize) -> Line<'a> {
    let spans = cells(runs, w)
        .into_iter()
        .map(|class| {
            let (m, style) = mark(ctx, class);
            Span::styled(m, style)
        })
        .collect::<Vec<_>>();
    Line::from(spans)
}

/// `w` cells for the runs, in order, proportional to their bytes. Where
/// every run can have a cell, each gets at least one, so a small free
/// block between live ones (fragmentation, the point of the map) never
/// vanishes; otherwise each cell shows the class with most bytes in it.
pub fn cells(runs: &[(RunClass, u64)], w: usize) -> Vec<RunClass> {
    let total: u64 = runs.iter().map(|r| r.1).sum();
    if w == 0 || total == 0 {
        return Vec::new();
    }
    if runs.len() <= w {
        let mut widths: Vec<usize> =
            runs.iter().map(|r| ((u128::from(r.1) * w as u128 / u128::from(total)) as usize).max(1)).collect();
        balance(&mut widths, w);
        return runs.iter().zip(widths).flat_map(|(r, n)| std::iter::repeat_n(r.0, n)).collect();
    }
    dominant(runs, total, w)
}

/// Widths that add up to `w`: the widest give or take the difference.
fn balance(widths: &mut [usize], w: usize) {
    loop {
        let sum: usize = widths.iter().sum();
        if sum == w {
            return;
        }
        let Some(widest) = (0..widths.len()).max_by_key(|&i| widths[i]) else { return };
        if sum < w {
            widths[widest] += w - sum;
        } else if widths[widest] > 1 {
            widths[widest] -= (sum - w).min(widths[widest] - 1);
        } else {
            return;
        }
    }
}

fn dominant(runs: &[(RunClass, u64)], total: u64, w: usize) -> Vec<RunClass> {
    const CLASSES: [RunClass; 5] =
        [RunClass::Allocated, RunClass::PendingFree, RunClass::InactiveSplit, RunClass::Free, RunClass::Mixed];
    let (total, w128) = (u128::from(total), w as u128);
    let mut out = Vec::with_capacity(w);
    let (mut run, mut run_start) = (0usize, 0u128);
    for cell in 0..w128 {
        let (lo, hi) = (cell * total / w128, (cell + 1) * total / w128);
        let mut bytes_of = [0u128; 5];
        while run < runs.len() {
            let run_end = run_start + u128::from(runs[run].1);
            let slot = CLASSES.iter().position(|c| *c == runs[run].0).unwrap_or(4);
            bytes_of[slot] += run_end.min(hi).saturating_sub(lo.max(run_start));
            if run_end > hi {
                break;
            }
            run_start = run_end;
            run += 1;
        }
        let best = (0..CLASSES.len()).max_by_key(|&i| (bytes_of[i], std::cmp::Reverse(i))).unwrap_or(0);
        out.push(CLASSES[best]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use RunClass::*;

    #[test]
    fn every_run_keeps_a_cell_when_there_is_room() {
        let runs = [(Allocated, 1000), (InactiveSplit, 1), (Allocated, 1000)];
        let c = cells(&runs, 10);
        assert_eq!(c.len(), 10);
        assert_eq!(c.iter().filter(|&&x| x == InactiveSplit).count(), 1, "the tiny hole shows");
        assert_eq!(c[0], Allocated);
    }

    #[test]
    fn more_runs_than_cells_show_the_dominant_class() {
        let runs: Vec<_> = (0..100).map(|i| (if i % 10 == 0 { Free } else { Allocated }, 10)).collect();
        let c = cells(&runs, 10);
        assert_eq!(c.len(), 10);
        assert!(c.iter().all(|&x| x == Allocated));
        assert!(cells(&runs, 0).is_empty());
        assert!(cells(&[], 5).is_empty());
        assert_eq!(cells(&[(Free, 0)], 5), Vec::<RunClass>::new());
    }
}
