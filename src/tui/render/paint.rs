//! Lines of text drawn one to a row, cut at the area's edge: what
//! `Paragraph` does without wrapping, at a fraction of the cost.
//!
//! Profiling a 200x50 frame put about 40% of its time in grapheme
//! segmentation and width lookups (`Paragraph`'s truncator and
//! `Buffer::set_stringn` both segment every string). Nearly everything the
//! dashboard draws is printable ASCII or box-drawing and block characters,
//! each one cell wide, so those go straight into cells; anything else
//! (a CJK process name, an emoji) takes ratatui's full path.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::Widget;

/// Renders like `Paragraph::new(lines)`: line `i` on row `i`, left-aligned,
/// each span styled as the line's style patched by the span's.
pub struct Lines<'a>(pub Vec<Line<'a>>);

impl Widget for Lines<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        for (line, y) in self.0.iter().zip(area.top()..area.bottom()) {
            let mut x = area.left();
            for span in line {
                if x >= area.right() {
                    break;
                }
                x = put(buf, x, y, &span.content, area.right(), line.style.patch(span.style));
            }
        }
    }
}

/// One cell wide, never combining, never a control: what may skip
/// segmentation. Box drawing, block elements and Braille are all narrow
/// in Unicode's width tables.
fn simple(c: char) -> bool {
    matches!(c, ' '..='~' | '\u{2500}'..='\u{259F}' | '\u{2800}'..='\u{28FF}' | '·' | '…')
}

/// Writes `s` from `x` up to (not including) column `end`; returns where it
/// stopped.
fn put(buf: &mut Buffer, x: u16, y: u16, s: &str, end: u16, style: Style) -> u16 {
    if !s.chars().all(simple) {
        return buf.set_stringn(x, y, s, usize::from(end - x), style).0;
    }
    // The row's cells as one slice: no position check per cell. `end` is
    // within the area, which is within the buffer.
    let start = buf.index_of(x, y);
    let Some(cells) = buf.content.get_mut(start..start + usize::from(end - x)) else { return x };
    let mut written = 0;
    for (cell, c) in cells.iter_mut().zip(s.chars()) {
        // A blank cell already holds the space: setting it again costs a
        // stalled load (the symbol's bytes are built on the stack one by
        // one, then read back whole), and spaces are half of a frame.
        if c != ' ' || cell.symbol() != " " {
            cell.set_char(c);
        }
        cell.set_style(style);
        written += 1;
    }
    x + written
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Modifier};
    use ratatui::text::Span;
    use ratatui::widgets::Paragraph;

    fn both(lines: Vec<Line<'static>>, area: Rect) -> (Buffer, Buffer) {
        let whole = Rect::new(0, 0, 14, 4);
        let mut ours = Buffer::empty(whole);
        let mut theirs = Buffer::empty(whole);
        Lines(lines.clone()).render(area, &mut ours);
        Paragraph::new(lines).render(area, &mut theirs);
        (ours, theirs)
    }

    #[test]
    fn draws_what_paragraph_draws() {
        let lines = vec![
            Line::from(vec![
                Span::styled("ab", Style::new().fg(Color::Red)),
                Span::raw("─█▇ ·…"),
                Span::styled("cut here", Style::new().add_modifier(Modifier::BOLD)),
            ])
            .style(Style::new().bg(Color::Blue)),
            Line::raw("naïve é"),
            Line::raw("third"),
            Line::raw("fourth, below the area"),
        ];
        for area in [Rect::new(0, 0, 14, 4), Rect::new(2, 1, 9, 2), Rect::new(5, 3, 20, 9), Rect::new(0, 0, 0, 0)] {
            let (ours, theirs) = both(lines.clone(), area);
            assert_eq!(ours, theirs, "area {area:?}");
        }
    }

    #[test]
    fn wide_characters_take_the_slow_path() {
        let (ours, theirs) = both(vec![Line::raw("名前 x")], Rect::new(0, 0, 14, 1));
        assert_eq!(ours.content()[0].symbol(), "名");
        assert_eq!(ours.content()[5].symbol(), "x");
        assert_eq!(theirs.content()[5].symbol(), "x");
    }
}
