//! The alert strip: active alerts, most severe first, each with its
//! severity as a word (not only a colour), what it is about, and the hint.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::model::{Alert, Severity, Snapshot};
use crate::tui::render::Ctx;
use crate::tui::render::format::duration_short;
use crate::tui::render::text::{fit, width};
use crate::tui::term::Lines;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, snap: &Snapshot) {
    let mut alerts: Vec<&Alert> = snap.alerts.iter().collect();
    alerts.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.since.time_unix_ms.cmp(&b.since.time_unix_ms)));
    let room = area.height as usize;
    let overflow = alerts.len() > room;
    let shown = if overflow { room.saturating_sub(1) } else { room };
    let w = area.width as usize;
    let mut lines: Vec<Line> = alerts.iter().take(shown).map(|a| line(ctx, a, w)).collect();
    if overflow {
        let more = alerts.len() - shown;
        lines.push(Line::styled(
            format!("  {} and {more} more alert{}", ctx.sym.ellipsis, if more == 1 { "" } else { "s" }),
            ctx.theme.dim,
        ));
    }
    frame.render_lines(Lines(lines), area);
}

pub fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Critical => "CRIT",
        Severity::Warning => "WARN",
        Severity::Info => "INFO",
    }
}

fn line<'a>(ctx: &Ctx, a: &Alert, w: usize) -> Line<'a> {
    let t = &ctx.theme;
    let style = match a.severity {
        Severity::Critical => t.crit,
        Severity::Warning => t.warn,
        Severity::Info => t.info,
    };
    let mark = if a.severity == Severity::Info { " " } else { "!" };
    // The rules' messages name their GPU and PID already: said once.
    let mut about = String::new();
    if let Some(g) = a.gpu.filter(|g| !names(&a.message, "GPU", *g)) {
        about.push_str(&format!(" GPU {g}"));
    }
    if let Some(p) = a.pid.filter(|p| !names(&a.message, "PID", *p)) {
        about.push_str(&format!(" PID {p}"));
    }
    let age = duration_short(ctx.now_ms.saturating_sub(a.since.time_unix_ms));
    let head = format!("{mark} {}", severity_word(a.severity));
    let about = format!("{about} ({age})");
    let room = w.saturating_sub(width(&head) + width(&about));
    let message = fit(&format!(" {}", ctx.clean(&a.message)), room, ctx.sym.cut);
    let hint =
        fit(&format!(" {} {}", ctx.sym.dot, ctx.clean(&a.hint)), room.saturating_sub(width(&message)), ctx.sym.cut);
    Line::from(vec![
        Span::styled(head, style),
        Span::styled(about, t.label),
        Span::raw(message),
        Span::styled(hint, t.dim),
    ])
}

/// Whether `message` says "GPU 1" (not "GPU 10") for `what` "GPU", `n` 1.
fn names(message: &str, what: &str, n: u32) -> bool {
    let said = format!("{what} {n}");
    message.match_indices(&said).any(|(at, _)| {
        let after = message[at + said.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn a_subject_the_message_names_is_not_said_again() {
        assert!(names("GPU 4 fell off the bus", "GPU", 4));
        assert!(names("PID 42 on GPU 1: CUDA out of memory", "GPU", 1));
        assert!(!names("PID 42 on GPU 10: CUDA out of memory", "GPU", 1));
        assert!(!names("only 2 GiB free", "GPU", 2));
    }
}
