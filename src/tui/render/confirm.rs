//! The question before a signal: names the process by PID, user, command
//! and age, so the user knows what they are about to end.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use crate::tui::render::Ctx;
use crate::tui::render::format::duration_short;
use crate::tui::render::layout::centered;
use crate::tui::state::Confirm;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, c: &Confirm) {
    let t = &ctx.theme;
    let name = c.signal.name();
    let title = if c.after_term { format!(" SIGTERM sent. Send {name} too? ") } else { format!(" Send {name}? ") };
    let age = c.age.map_or_else(|| "n/a".into(), |a| duration_short(u64::try_from(a.as_millis()).unwrap_or(u64::MAX)));
    let mut lines = vec![
        Line::from(vec![
            Span::styled("PID ", t.label),
            Span::raw(c.target.pid.to_string()),
            Span::styled("  user ", t.label),
            Span::raw(ctx.clean(&c.user)),
            Span::styled("  running ", t.label),
            Span::raw(age),
        ]),
        Line::raw(ctx.clean(&c.command)),
        Line::raw(""),
    ];
    if c.after_term {
        lines.push(Line::styled("If it has not exited: SIGKILL cannot be caught; unsaved work is lost.", t.warn));
    }
    lines.push(Line::from(vec![
        Span::styled("y", t.key),
        Span::raw(format!(": send {name}    ")),
        Span::styled("n, Esc", t.key),
        Span::raw(if c.after_term { ": leave it" } else { ": cancel" }),
    ]));
    let popup = centered(area, 76, lines.len() as u16 + 4);
    let block = Block::bordered().border_set(ctx.sym.border).border_style(t.crit).title(Span::styled(title, t.crit));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).block(block), popup);
}
