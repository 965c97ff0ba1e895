//! F6: the sort columns in a list, as htop's sort menu; the column in
//! force marked with its direction, the cursor with `>`.

use crate::tui::term::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use crate::tui::render::Ctx;
use crate::tui::render::layout::centered;
use crate::tui::rows::SORTABLE;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &Ctx, cursor: usize) {
    let (t, sort) = (&ctx.theme, ctx.state.sort);
    let arrow = if sort.descending { ctx.sym.descending } else { ctx.sym.ascending };
    let lines: Vec<Line> = SORTABLE
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let mark = if *column == sort.column { arrow } else { " " };
            let text = format!("{} {mark} {:<10}", if i == cursor { ">" } else { " " }, column.title());
            if i == cursor { Line::styled(text, t.selected) } else { Line::raw(text) }
        })
        .collect();
    let popup = centered(area, 20, lines.len() as u16 + 2);
    let block =
        Block::bordered().border_set(ctx.sym.border).border_style(t.rule).title(Span::styled(" sort by ", t.title));
    frame.render_widget(Clear, popup);
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}
