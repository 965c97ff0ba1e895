//! Lines of text drawn one to a row, cut at the area's edge: what
//! `Paragraph` does without wrapping, at a fraction of the cost.
//!
//! Profiling a 200x50 frame put about 40% of its time in grapheme
//! segmentation and width lookups (`Paragraph`'s truncator and
//! `Buffer::set_stringn` both segment every string). Nearly everything the
//! dashboard draws is printable ASCII or box-drawing and block characters,
//! each one cell wide, so those go straight into packed cells
//! (`Canvas::put`); anything else (a CJK process name, an emoji) takes
//! ratatui's full path.

use ratatui::layout::Rect;
use ratatui::text::Line;

use super::Canvas;

/// Renders like `Paragraph::new(lines)`: line `i` on row `i`, left-aligned,
/// each span styled as the line's style patched by the span's.
pub struct Lines<'a>(pub Vec<Line<'a>>);

impl Lines<'_> {
    pub fn draw(self, area: Rect, canvas: &mut Canvas) {
        let area = area.intersection(canvas.area());
        for (line, y) in self.0.iter().zip(area.top()..area.bottom()) {
            let mut x = area.left();
            for span in line {
                if x >= area.right() {
                    break;
                }
                x = canvas.put(x, y, &span.content, area.right(), line.style.patch(span.style));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::buffer::Buffer;
    use ratatui::style::{Color, Modifier, Style};
    use ratatui::text::Span;
    use ratatui::widgets::Paragraph;
    use ratatui::widgets::Widget;

    fn both(lines: Vec<Line<'static>>, area: Rect) -> (Buffer, Buffer) {
        let whole = Rect::new(0, 0, 14, 4);
        let mut canvas = Canvas::default();
        canvas.resize(whole);
        let mut theirs = Buffer::empty(whole);
        Lines(lines.clone()).draw(area, &mut canvas);
        Paragraph::new(lines).render(area, &mut theirs);
        (canvas.buffer(whole), theirs)
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
