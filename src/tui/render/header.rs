//! Two lines on top: who and when (host, clock, how old the data is, the
//! interval, pause, alert count), then the host's load and the driver.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::model::{Severity, Snapshot};
use crate::recording::player::Status;
use crate::tui::render::Ctx;
use crate::tui::render::bar::{Segment, bar};
use crate::tui::render::format::{duration_short, or_na};
use crate::tui::render::text::{spans_width, spread};
use crate::tui::term::Lines;
use crate::util::units::{bytes, bytes_pair};

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx) {
    let w = area.width as usize;
    let lines = match ctx.snap {
        None => vec![first_line(ctx, w, None)],
        Some(snap) => vec![first_line(ctx, w, Some(snap)), second_line(ctx, w, snap)],
    };
    frame.render_lines(Lines(lines), area);
}

fn first_line<'a>(ctx: &Ctx, w: usize, snap: Option<&Snapshot>) -> Line<'a> {
    let t = &ctx.theme;
    let state = ctx.state;
    let mut left = vec![Span::styled("gpuscope", t.title)];
    let mut push = |s: Span<'a>| {
        left.push(Span::raw("  "));
        left.push(s);
    };
    let Some(snap) = snap else {
        push(Span::raw(ctx.clock.wall(ctx.now_ms)));
        let waited = duration_short(ctx.now_ms.saturating_sub(state.started_ms));
        push(Span::styled(format!("waiting for the first snapshot{} ({waited})", ctx.sym.ellipsis), t.warn));
        return Line::from(left);
    };
    // Said first, where the narrowest terminal still shows it; why (the
    // driver `--demo=auto` could not use) comes last, as room allows.
    if snap.simulated {
        push(Span::styled("SIMULATED GPUs", t.warn));
    }
    let host = snap.host.hostname.as_deref().map_or_else(|| "n/a".into(), |h| ctx.clean(h));
    push(Span::styled(host, t.label));
    if state.paused() {
        push(Span::styled(format!("PAUSED at {}", ctx.clock.wall(snap.time.time_unix_ms)), t.warn));
    } else {
        push(Span::raw(ctx.clock.wall(ctx.now_ms)));
    }
    let age = state.data_age_ms(ctx.now_ms).unwrap_or(0);
    if state.stale(ctx.now_ms) {
        push(Span::styled(format!("! data {} old", duration_short(age)), t.crit));
    } else if state.replay.is_none() {
        // A replay's data is as old as the recording; its status says where
        // it is instead.
        push(Span::styled(format!("data {}", duration_short(age)), t.dim));
    }
    if state.collection_stopped {
        push(Span::styled("! collection stopped", t.crit));
    }
    match &state.replay {
        Some(replay) => push(replay_status(ctx, &replay.status.borrow())),
        None => push(Span::styled(format!("every {}", super::format::interval(state.interval)), t.dim)),
    }
    if let Some(why) = &state.notice {
        push(Span::styled(format!("({})", ctx.clean(why)), t.warn));
    }
    let right = alert_count(ctx, snap);
    spread(left, right, w, " ", t.dim)
}

/// "REPLAY paused x4 120/3600 run.ndjson.zst": how it plays, then where in
/// the recording, the file name last because it is what a narrow terminal
/// can best do without. The clock before it is the recording's own (UTC).
fn replay_status<'a>(ctx: &Ctx, s: &Status) -> Span<'a> {
    let state = match () {
        _ if s.paused => " paused",
        _ if s.at_end => " end",
        _ => "",
    };
    let mut text = format!("REPLAY{state} x{} {}/{} {}", s.speed, s.position + 1, s.len, ctx.clean(&s.file));
    if let Some(note) = &s.note {
        text.push_str(" - ");
        text.push_str(note);
    }
    Span::styled(text, ctx.theme.warn)
}

fn alert_count<'a>(ctx: &Ctx, snap: &Snapshot) -> Vec<Span<'a>> {
    let t = &ctx.theme;
    let n = snap.alerts.len();
    let worst = snap.alerts.iter().map(|a| a.severity).max();
    match worst {
        None => vec![Span::styled("no alerts", t.dim)],
        Some(sev) => {
            let style = if sev == Severity::Critical { t.crit } else { t.warn };
            vec![Span::styled(format!("! {n} alert{}", if n == 1 { "" } else { "s" }), style)]
        }
    }
}

fn second_line<'a>(ctx: &Ctx, w: usize, snap: &Snapshot) -> Line<'a> {
    let t = &ctx.theme;
    let h = &snap.host;
    if let Some(err) = &snap.sources.host.error {
        return Line::from(Span::styled(format!("! host: {}", ctx.clean(err)), t.crit));
    }
    let cpu = vec![Span::styled("CPU ", t.label), Span::raw(or_na(h.cpu_percent, |p| format!("{p:>3.0}%")))];
    let ram_text = format!(" {}", bytes_pair(h.memory_used, h.memory_total));
    let avail = format!("  avail {}", or_na(h.memory_available, bytes));
    let swap = vec![Span::styled("  swap ", t.label), Span::raw(bytes_pair(h.swap_used, h.swap_total))];
    let d = &snap.driver;
    let driver = vec![Span::styled(
        format!(
            "driver {}  CUDA {}",
            d.driver_version.as_deref().unwrap_or("n/a"),
            d.cuda_driver_version.as_deref().unwrap_or("n/a")
        ),
        t.dim,
    )];
    // The bar takes what the words leave, between 4 and 24 cells; the
    // driver versions and the available figure give way first.
    let fixed = spans_width(&cpu) + 8 + ram_text.len() + spans_width(&swap);
    let with_driver = fixed + spans_width(&driver) + 2;
    let (show_driver, show_avail) = match w {
        w if w >= with_driver + avail.len() + 10 => (true, true),
        w if w >= with_driver + 6 => (true, false),
        _ => (false, false),
    };
    let used =
        fixed + if show_driver { spans_width(&driver) + 2 } else { 0 } + if show_avail { avail.len() } else { 0 };
    let bar_w = w.saturating_sub(used).clamp(4, 24);
    let mut left = cpu;
    left.push(Span::styled("  RAM ", t.label));
    left.push(Span::raw("["));
    let used_bytes = h.memory_used.unwrap_or(0);
    let segs = [Segment { value: used_bytes, symbol: ctx.sym.used, style: t.used }];
    left.extend(bar(&segs, h.memory_total.unwrap_or(0), bar_w));
    left.push(Span::raw("]"));
    left.push(Span::raw(ram_text));
    if show_avail {
        left.push(Span::styled(avail, t.dim));
    }
    left.extend(swap);
    spread(left, if show_driver { driver } else { Vec::new() }, w, " ", t.dim)
}
