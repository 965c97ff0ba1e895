//! The screen as the views draw it and as the terminal shows it, in place
//! of ratatui's `Terminal`.
//!
//! `Terminal` keeps two full buffers, the frame being drawn and the one
//! before it, to send the terminal only the cells that changed. A cell is
//! 48 bytes (a string, three colours, modifiers, diff options), so a
//! 200x60 pane held two 564 KiB buffers: more than a tenth of the
//! dashboard's resident memory, and more than the whole of what nvtop
//! keeps for its screen. Here the frame before is kept as 16 bytes a cell,
//! exactly what decides whether a cell is sent again: its character, its
//! colours, its modifiers and its width. The one full buffer is drawn into
//! and cleared again for the next frame.
//!
//! The size is asked of the terminal when it may have changed (at the
//! start, after a resize event, after a stop), not at every frame as
//! `Terminal::draw` does: on a real terminal each ask opens `/dev/tty`.

use std::io;

use ratatui::backend::{Backend, ClearType};
use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::widgets::Widget;

/// What the views draw on: the frame's buffer and its area. Offers the
/// part of ratatui's `Frame` the views use.
pub struct Frame<'a> {
    buffer: &'a mut Buffer,
}

impl<'a> Frame<'a> {
    pub fn new(buffer: &'a mut Buffer) -> Self {
        Self { buffer }
    }

    pub fn area(&self) -> Rect {
        self.buffer.area
    }

    pub fn render_widget<W: Widget>(&mut self, widget: W, area: Rect) {
        widget.render(area, self.buffer);
    }

    pub fn buffer_mut(&mut self) -> &mut Buffer {
        self.buffer
    }
}

/// A cell as the terminal was last sent it, packed into 16 bytes (the
/// record is kept for the whole pane: 192 KB at 200x60, where the fields
/// side by side took 20 bytes a cell). The packing is exact: two cells are
/// equal here exactly when their character, width, colours and modifiers
/// are, and comparing is four integer compares.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Shown {
    /// The character (or `LONG`) in the low 24 bits, the width in the top 8.
    glyph: u32,
    /// Each colour as `color_code` gives it (26 bits), with six bits of the
    /// modifiers above it: bits 0-5 with `fg`, 6-11 with `bg`, 12-15 with
    /// `underline`.
    fg: u32,
    bg: u32,
    underline: u32,
}

/// A grapheme of several characters (an emoji sequence, a letter with a
/// combining mark) is not kept: it never compares equal, so it is sent
/// again each frame. Such cells are rare (process names, host names).
/// Above every `char` (at most 0x10FFFF).
const LONG: u32 = 0xFF_FFFF;
const COLOR_BITS: u32 = 26;
const COLOR: u32 = (1 << COLOR_BITS) - 1;

impl Shown {
    /// A blank cell: what a cleared terminal shows.
    const BLANK: Self = Self { glyph: ' ' as u32 | 1 << 24, fg: 0, bg: 0, underline: 0 };

    fn of(cell: &Cell) -> Self {
        let symbol = symbol_code(cell.symbol());
        let width = if narrow(symbol) { 1 } else { u32::from(u8::try_from(cell.cell_width()).unwrap_or(u8::MAX)) };
        let modifier = u32::from(cell.modifier.bits());
        Self {
            glyph: symbol | width << 24,
            fg: color_code(cell.fg) | (modifier & 0x3F) << COLOR_BITS,
            bg: color_code(cell.bg) | (modifier >> 6 & 0x3F) << COLOR_BITS,
            underline: color_code(cell.underline_color) | (modifier >> 12) << COLOR_BITS,
        }
    }

    /// Whether the terminal shows `cell` here already; a long grapheme
    /// is never known to be shown.
    fn shows(&self, cell: &Self) -> bool {
        self.symbol() != LONG && self == cell
    }

    fn symbol(&self) -> u32 {
        self.glyph & LONG
    }

    fn width(&self) -> u8 {
        u8::try_from(self.glyph >> 24).unwrap_or(u8::MAX)
    }

    /// Whether it shows on a blank cell, as ratatui's diff counts it: a
    /// background colour, or a modifier that draws on a space.
    fn styled(&self) -> bool {
        let modifier = self.fg >> COLOR_BITS | (self.bg >> COLOR_BITS) << 6 | (self.underline >> COLOR_BITS) << 12;
        let modifier = Modifier::from_bits_retain(u16::try_from(modifier).unwrap_or(u16::MAX));
        self.bg & COLOR != 0 || modifier.intersects(VISIBLE_ON_BLANK)
    }
}

/// A colour in 26 bits, `Reset` as 0: the named ones by their place, the
/// indexed and RGB ones tagged above their 8 and 24 bits.
fn color_code(color: Color) -> u32 {
    match color {
        Color::Reset => 0,
        Color::Black => 1,
        Color::Red => 2,
        Color::Green => 3,
        Color::Yellow => 4,
        Color::Blue => 5,
        Color::Magenta => 6,
        Color::Cyan => 7,
        Color::Gray => 8,
        Color::DarkGray => 9,
        Color::LightRed => 10,
        Color::LightGreen => 11,
        Color::LightYellow => 12,
        Color::LightBlue => 13,
        Color::LightMagenta => 14,
        Color::LightCyan => 15,
        Color::White => 16,
        Color::Indexed(i) => 1 << 24 | u32::from(i),
        Color::Rgb(r, g, b) => 2 << 24 | u32::from(r) << 16 | u32::from(g) << 8 | u32::from(b),
    }
}

/// One column wide for certain, without a width table: printable ASCII,
/// box drawing, blocks and Braille, most of what the views draw (a
/// lookup per cell was a fifth of the diff's time).
fn narrow(code: u32) -> bool {
    matches!(code, 0x20..=0x7E | 0x2500..=0x259F | 0x2800..=0x28FF)
}

fn symbol_code(symbol: &str) -> u32 {
    // One byte, ASCII: most of a frame, without decoding.
    if let [byte] = symbol.as_bytes() {
        return u32::from(*byte);
    }
    let mut chars = symbol.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => u32::from(c),
        (None, _) => u32::from(' '),
        _ => LONG,
    }
}

/// Modifiers that show on a blank cell, as ratatui's diff counts them.
const VISIBLE_ON_BLANK: Modifier = Modifier::REVERSED
    .union(Modifier::UNDERLINED)
    .union(Modifier::SLOW_BLINK)
    .union(Modifier::RAPID_BLINK)
    .union(Modifier::CROSSED_OUT);

/// The backend, the frame being drawn and what the terminal shows.
pub struct Term<B: Backend> {
    backend: B,
    buffer: Buffer,
    shown: Vec<Shown>,
    /// Cells to send, by index into the buffer: kept between frames so a
    /// frame allocates nothing. `u32` is enough for the largest buffer
    /// (u16::MAX x u16::MAX cells), and half the bytes: a whole frame's
    /// worth of indices is held from the first frame on.
    changed: Vec<u32>,
    /// The size must be asked again before the next frame.
    size_stale: bool,
    cursor_hidden: bool,
    /// Nothing drawn yet.
    fresh: bool,
}

impl<B> Term<B>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    pub fn new(backend: B) -> io::Result<Self> {
        let mut term = Self {
            backend,
            buffer: Buffer::empty(Rect::ZERO),
            shown: Vec::new(),
            changed: Vec::new(),
            size_stale: true,
            cursor_hidden: false,
            fresh: true,
        };
        term.fit()?;
        Ok(term)
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The terminal may have a new size (a resize event): it is asked
    /// before the next frame.
    pub fn resized(&mut self) {
        self.size_stale = true;
    }

    /// The screen holds something else (after a stop): it is cleared, and
    /// the next frame is drawn whole at a size asked again.
    pub fn redraw_all(&mut self) -> io::Result<()> {
        self.backend.clear_region(ClearType::All).map_err(io::Error::other)?;
        self.shown.fill(Shown::BLANK);
        self.size_stale = true;
        self.cursor_hidden = false;
        Ok(())
    }

    /// Draws one frame with `view`, then sends the terminal what changed.
    pub fn draw<R>(&mut self, view: impl FnOnce(&mut Frame) -> R) -> io::Result<R> {
        if self.size_stale {
            self.fit()?;
        }
        let result = view(&mut Frame::new(&mut self.buffer));
        // `send` leaves the buffer blank for the next frame.
        self.send()?;
        Ok(result)
    }

    /// Asks the size; on a change, clears the terminal and starts from
    /// blank, as `Terminal` does.
    fn fit(&mut self) -> io::Result<()> {
        let size = self.backend.size().map_err(io::Error::other)?;
        let area = Rect::new(0, 0, size.width, size.height);
        if area != self.buffer.area {
            self.buffer.resize(area);
            self.buffer.reset();
            // At the start the screen is the fresh alternate screen.
            if !std::mem::take(&mut self.fresh) {
                self.backend.clear_region(ClearType::All).map_err(io::Error::other)?;
            }
            self.shown = vec![Shown::BLANK; self.buffer.content.len()];
        }
        self.size_stale = false;
        Ok(())
    }

    /// Sends what changed and blanks the buffer: each cell the diff passes
    /// over is cleared there and then, while it is in the cache, rather
    /// than in a second pass over the whole buffer (48 bytes a cell, 564
    /// KiB at 200x60, read cold after a second's sleep); the cells sent are
    /// cleared once sent.
    fn send(&mut self) -> io::Result<()> {
        let mut changed = std::mem::take(&mut self.changed);
        changed.clear();
        diff(&mut self.shown, &mut self.buffer.content, &mut changed);
        let width = usize::from(self.buffer.area.width.max(1));
        let content = &self.buffer.content;
        let cells = changed.iter().map(|&i| {
            let i = i as usize;
            // Within a buffer of at most u16::MAX x u16::MAX cells.
            let (x, y) = (u16::try_from(i % width).unwrap_or(u16::MAX), u16::try_from(i / width).unwrap_or(u16::MAX));
            (x, y, &content[i])
        });
        let drawn = self.backend.draw(cells).map_err(io::Error::other);
        for &i in &changed {
            if let Some(cell) = self.buffer.content.get_mut(i as usize) {
                cell.reset();
            }
        }
        self.changed = changed;
        if drawn.is_err() {
            // What reached the terminal is unknown: all of it goes again.
            self.shown.fill(Shown { glyph: LONG | 1 << 24, ..Shown::BLANK });
        }
        drawn?;
        if !self.cursor_hidden {
            self.backend.hide_cursor().map_err(io::Error::other)?;
            self.cursor_hidden = true;
        }
        Backend::flush(&mut self.backend).map_err(io::Error::other)
    }
}

/// A cell's index as `changed` keeps it.
fn index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

#[allow(deprecated)]
fn skipped(cell: &Cell) -> bool {
    matches!(cell.diff_option, CellDiffOption::Skip) || (cell.skip && matches!(cell.diff_option, CellDiffOption::None))
}

/// Makes `cell`, shown as `now`, blank for the next frame; a cell blank
/// already (most of a frame's empty space) is not written again.
#[allow(deprecated)]
fn clear(cell: &mut Cell, now: &Shown) {
    if *now != Shown::BLANK || !matches!(cell.diff_option, CellDiffOption::None) || cell.skip {
        cell.reset();
    }
}

/// The indices of the cells of `next` the terminal must be sent, given
/// that it shows `shown`, which becomes `next`: ratatui's `BufferDiff`
/// rules (wide characters, the trailing columns of a VS16 emoji, a wide
/// character's styled remains, diff options) over the compact record,
/// with one difference: a long grapheme is always sent. As in ratatui,
/// the record is the whole frame before, cells not sent included (the
/// column a wide character covers). Every cell of `next` not in `out` is
/// left blank (`clear`).
fn diff(shown: &mut [Shown], next: &mut [Cell], out: &mut Vec<u32>) {
    let len = shown.len().min(next.len());
    let mut i = 0;
    while i < len {
        let current = &next[i];
        let now = Shown::of(current);
        let before = std::mem::replace(&mut shown[i], now);
        let here = i;
        i += 1;
        let sent = match current.diff_option {
            CellDiffOption::Skip => false,
            _ if skipped(current) => false,
            CellDiffOption::ForcedWidth(width) => {
                i = covered(shown, next, i, usize::from(width.get().saturating_sub(1)));
                let sent = !before.shows(&now);
                if sent {
                    out.push(index(here));
                }
                sent
            }
            CellDiffOption::None | CellDiffOption::AlwaysUpdate => {
                let width = usize::from(now.width());
                if matches!(current.diff_option, CellDiffOption::None) && before.shows(&now) {
                    if width > 1 {
                        i = covered(shown, next, i, width - 1);
                    }
                    false
                } else {
                    out.push(index(here));
                    if width > 1 && current.symbol().contains('\u{FE0F}') {
                        // The emoji's trailing columns, where their symbol changed.
                        i = trailing(shown, next, here + 1, here + width, false, out);
                    } else if width > 1 {
                        i = covered(shown, next, i, width - 1);
                    } else if usize::from(before.width()) > width && before.styled() {
                        // A styled wide character's remains: every trailing column.
                        i = trailing(shown, next, here + 1, here + usize::from(before.width()), true, out);
                    }
                    true
                }
            }
        };
        if !sent {
            clear(&mut next[here], &now);
        }
    }
}

/// The `n` cells from `from` that a wide cell covers: not compared, only
/// recorded (and cleared); returns the index after them.
fn covered(shown: &mut [Shown], next: &mut [Cell], from: usize, n: usize) -> usize {
    let end = from.saturating_add(n).min(shown.len()).min(next.len()).max(from);
    for j in from..end {
        let now = Shown::of(&next[j]);
        shown[j] = now;
        clear(&mut next[j], &now);
    }
    from + n
}

/// The trailing cells from `from` up to `end` (which a wide cell among them
/// extends); returns where the main scan goes on.
fn trailing(shown: &mut [Shown], next: &mut [Cell], from: usize, end: usize, force: bool, out: &mut Vec<u32>) -> usize {
    let len = shown.len().min(next.len());
    let mut end = end.min(len);
    let mut j = from;
    while j < end {
        let cell = &next[j];
        let now = Shown::of(cell);
        let before = std::mem::replace(&mut shown[j], now);
        let here = j;
        let sent = !skipped(cell) && (force || now.symbol() == LONG || before.symbol() != now.symbol());
        if sent {
            out.push(index(here));
        } else {
            clear(&mut next[here], &now);
        }
        j = covered(shown, next, j + 1, usize::from(now.width().max(1)) - 1);
        end = end.max(j).min(len);
    }
    end.max(from)
}

#[cfg(test)]
mod tests;
