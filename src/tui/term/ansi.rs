//! The real terminal's backend: crossterm's, except for the cells of a
//! frame, whose escape sequences are written here.
//!
//! crossterm formats every command through `core::fmt` (a cursor move, a
//! colour pair, each attribute, each cell's text), and an attribute's
//! number goes through a `String` it allocates: about 250 formatted
//! writes a frame at 8 GPUs x 64 processes. Here the same bytes are put
//! together from integers into one buffer, written once a batch: the
//! dashboard's instructions there went from 75.0 to 72.0 million over
//! 30 s (benches/tui_instructions.sh).
//!
//! The bytes are crossterm 0.29's, through ratatui-crossterm's `draw`,
//! exactly (a test compares the two on random cells): the same cursor
//! moves, the same attribute changes in the same order, colours as
//! crossterm spells them (the sixteen named colours as `5;N`), and the
//! same resets after each batch. Where `NO_COLOR` is set, crossterm writes
//! colours as nothing; the cells then go through crossterm itself.

use std::io::{self, Write};

use crossterm::style::Colored;
use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};

/// What a batch's bytes may grow to before they are handed to the writer.
const SPILL: usize = 4096;

pub struct Ansi<W: Write> {
    inner: CrosstermBackend<W>,
    /// The batch's bytes, kept between batches.
    out: Vec<u8>,
}

impl<W: Write> Ansi<W> {
    pub fn new(writer: W) -> Self {
        Self { inner: CrosstermBackend::new(writer), out: Vec::new() }
    }

    /// Hands the writer what is put together so far.
    fn spill(&mut self) -> io::Result<()> {
        let sent = self.inner.write_all(&self.out);
        self.out.clear();
        sent
    }
}

/// The state a batch starts from and carries from cell to cell, as
/// ratatui-crossterm's `draw` keeps it.
struct Pen {
    fg: Color,
    bg: Color,
    underline: Color,
    modifier: Modifier,
    last: Option<(u16, u16)>,
}

impl<W: Write> Backend for Ansi<W> {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        if Colored::ansi_color_disabled_memoized() {
            return self.inner.draw(content);
        }
        let mut pen = Pen {
            fg: Color::Reset,
            bg: Color::Reset,
            underline: Color::Reset,
            modifier: Modifier::empty(),
            last: None,
        };
        for (x, y, cell) in content {
            put_cell(&mut self.out, &mut pen, x, y, cell);
            if self.out.len() >= SPILL {
                self.spill()?;
            }
        }
        // What ratatui-crossterm ends each batch with.
        self.out.extend_from_slice(b"\x1b[39m\x1b[49m\x1b[59m\x1b[0m");
        self.spill()
    }

    fn append_lines(&mut self, n: u16) -> io::Result<()> {
        self.inner.append_lines(n)
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

/// One cell, after whatever moves the cursor and changes the pen.
fn put_cell(out: &mut Vec<u8>, pen: &mut Pen, x: u16, y: u16, cell: &Cell) {
    // A cell right after the last one needs no move.
    if !matches!(pen.last, Some((px, py)) if py == y && px.checked_add(1) == Some(x)) {
        out.extend_from_slice(b"\x1b[");
        number(out, u32::from(y) + 1);
        out.push(b';');
        number(out, u32::from(x) + 1);
        out.push(b'H');
    }
    pen.last = Some((x, y));
    if cell.modifier != pen.modifier {
        modifier_change(out, pen.modifier, cell.modifier);
        pen.modifier = cell.modifier;
    }
    if cell.fg != pen.fg || cell.bg != pen.bg {
        out.extend_from_slice(b"\x1b[");
        color(out, b"39", b"38;", cell.fg);
        out.push(b';');
        color(out, b"49", b"48;", cell.bg);
        out.push(b'm');
        (pen.fg, pen.bg) = (cell.fg, cell.bg);
    }
    if cell.underline_color != pen.underline {
        out.extend_from_slice(b"\x1b[");
        color(out, b"59", b"58;", cell.underline_color);
        out.push(b'm');
        pen.underline = cell.underline_color;
    }
    out.extend_from_slice(cell.symbol().as_bytes());
}

fn number(out: &mut Vec<u8>, n: u32) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// A colour as crossterm's `Colored` writes it: `reset`, or `lead` and
/// the colour (ratatui's sixteen named colours are crossterm's in the
/// order of their ANSI numbers, which crossterm writes as `5;N`).
fn color(out: &mut Vec<u8>, reset: &[u8], lead: &[u8], c: Color) {
    let indexed = match c {
        Color::Reset => return out.extend_from_slice(reset),
        Color::Rgb(r, g, b) => {
            out.extend_from_slice(lead);
            out.extend_from_slice(b"2;");
            for (i, part) in [r, g, b].into_iter().enumerate() {
                if i > 0 {
                    out.push(b';');
                }
                number(out, u32::from(part));
            }
            return;
        }
        Color::Indexed(i) => i,
        Color::Black => 0,
        Color::Red => 1,
        Color::Green => 2,
        Color::Yellow => 3,
        Color::Blue => 4,
        Color::Magenta => 5,
        Color::Cyan => 6,
        Color::Gray => 7,
        Color::DarkGray => 8,
        Color::LightRed => 9,
        Color::LightGreen => 10,
        Color::LightYellow => 11,
        Color::LightBlue => 12,
        Color::LightMagenta => 13,
        Color::LightCyan => 14,
        Color::White => 15,
    };
    out.extend_from_slice(lead);
    out.extend_from_slice(b"5;");
    number(out, u32::from(indexed));
}

/// One SGR attribute, `ESC [ n m`, as crossterm's `SetAttribute` writes it.
fn sgr(out: &mut Vec<u8>, n: u8) {
    out.extend_from_slice(b"\x1b[");
    number(out, u32::from(n));
    out.push(b'm');
}

/// From `from` to `to`, in ratatui-crossterm's order (`ModifierDiff`):
/// what is removed first, bold and dim both undone by normal intensity and
/// the one kept set again, then what is added.
fn modifier_change(out: &mut Vec<u8>, from: Modifier, to: Modifier) {
    let removed = from - to;
    if removed.contains(Modifier::REVERSED) {
        sgr(out, 27);
    }
    let reset_intensity = removed.intersects(Modifier::BOLD | Modifier::DIM);
    if reset_intensity {
        sgr(out, 22);
        if to.contains(Modifier::DIM) {
            sgr(out, 2);
        }
        if to.contains(Modifier::BOLD) {
            sgr(out, 1);
        }
    }
    for (m, n) in
        [(Modifier::ITALIC, 23), (Modifier::UNDERLINED, 24), (Modifier::CROSSED_OUT, 29), (Modifier::HIDDEN, 28)]
    {
        if removed.contains(m) {
            sgr(out, n);
        }
    }
    if removed.intersects(Modifier::SLOW_BLINK | Modifier::RAPID_BLINK) {
        sgr(out, 25);
    }
    let added = to - from;
    for (m, n, unless_reset) in [
        (Modifier::REVERSED, 7, false),
        (Modifier::BOLD, 1, true),
        (Modifier::ITALIC, 3, false),
        (Modifier::UNDERLINED, 4, false),
        (Modifier::DIM, 2, true),
        (Modifier::CROSSED_OUT, 9, false),
        (Modifier::HIDDEN, 8, false),
        (Modifier::SLOW_BLINK, 5, false),
        (Modifier::RAPID_BLINK, 6, false),
    ] {
        if added.contains(m) && !(unless_reset && reset_intensity) {
            sgr(out, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_color() -> impl Strategy<Value = Color> {
        prop_oneof![
            (0u8..17).prop_map(|n| match n {
                0 => Color::Reset,
                1 => Color::Black,
                2 => Color::Red,
                3 => Color::Green,
                4 => Color::Yellow,
                5 => Color::Blue,
                6 => Color::Magenta,
                7 => Color::Cyan,
                8 => Color::Gray,
                9 => Color::DarkGray,
                10 => Color::LightRed,
                11 => Color::LightGreen,
                12 => Color::LightYellow,
                13 => Color::LightBlue,
                14 => Color::LightMagenta,
                15 => Color::LightCyan,
                _ => Color::White,
            }),
            any::<u8>().prop_map(Color::Indexed),
            any::<(u8, u8, u8)>().prop_map(|(r, g, b)| Color::Rgb(r, g, b)),
        ]
    }

    fn any_cell() -> impl Strategy<Value = Cell> {
        let symbol = prop_oneof![Just("a"), Just(" "), Just("─"), Just("名"), Just("👍🏽"), Just("é"), Just("")];
        (symbol, any_color(), any_color(), any_color(), any::<u16>()).prop_map(|(s, fg, bg, ul, m)| {
            let mut cell = Cell::new(s);
            cell.fg = fg;
            cell.bg = bg;
            cell.underline_color = ul;
            cell.modifier = Modifier::from_bits_truncate(m);
            cell
        })
    }

    /// Positions that move on by one most of the time (runs of a row), and
    /// jump elsewhere now and then, edges of the u16 range included. No
    /// cell sits at x = u16::MAX: a buffer is at most that wide, so its
    /// last column is one less, and crossterm's backend would overflow
    /// working out the column after it.
    fn any_cells() -> impl Strategy<Value = Vec<(u16, u16, Cell)>> {
        proptest::collection::vec((any::<bool>(), any::<(u16, u16)>(), any_cell()), 0..60).prop_map(|steps| {
            let mut at = (0u16, 0u16);
            steps
                .into_iter()
                .map(|(jump, to, cell)| {
                    at = if jump {
                        (to.0.min(u16::MAX - 1), to.1.min(u16::MAX - 1))
                    } else {
                        (at.0.saturating_add(1).min(u16::MAX - 1), at.1)
                    };
                    (at.0, at.1, cell)
                })
                .collect()
        })
    }

    fn bytes_of<B: Backend>(backend: &mut B, cells: &[(u16, u16, Cell)]) -> Result<(), B::Error> {
        backend.draw(cells.iter().map(|(x, y, c)| (*x, *y, c)))
    }

    proptest! {
        #[test]
        fn writes_the_bytes_crossterm_writes(batches in proptest::collection::vec(any_cells(), 1..4)) {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            {
                let (mut a, mut c) = (Ansi::new(&mut ours), CrosstermBackend::new(&mut theirs));
                for batch in &batches {
                    bytes_of(&mut a, batch).unwrap();
                    bytes_of(&mut c, batch).unwrap();
                }
            }
            prop_assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        }
    }

    #[test]
    fn a_batch_larger_than_the_spill_comes_out_whole_and_in_order() {
        let cells: Vec<(u16, u16, Cell)> = (0..3000u16)
            .map(|i| {
                let mut cell = Cell::new("x");
                cell.fg = Color::Indexed(u8::try_from(i % 256).unwrap());
                (i % 200, i / 200, cell)
            })
            .collect();
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        bytes_of(&mut Ansi::new(&mut ours), &cells).unwrap();
        bytes_of(&mut CrosstermBackend::new(&mut theirs), &cells).unwrap();
        assert!(ours.len() > 3 * SPILL);
        assert_eq!(ours, theirs);
    }
}
