//! The frame the views draw on, 6 bytes a cell.
//!
//! ratatui's `Buffer` takes 48 bytes a cell (a string, three colours,
//! modifiers, diff options): 564 KiB for a 200x60 pane, the largest single
//! thing the dashboard held, and a tenth of its resident memory. Every cell
//! is also written and read back whole on every frame. Here a cell is the
//! packed record that decides whether the terminal must be sent it again
//! (`Packed`): its character and width, and the number of its look (its
//! colours and modifiers) in the canvas's table of looks (`Looks`). A
//! frame uses a few dozen looks, so the table is small, and numbering them
//! halves a cell against keeping the colours in it. The frame and the
//! record of what the terminal shows are the same type, numbered by the
//! same table, so the diff compares integers with no conversion per cell.
//!
//! Text drawn by `Lines` (nearly all of a frame) goes straight into packed
//! cells. Any other ratatui widget (a popup's `Paragraph`, `Clear`) draws
//! on a ratatui `Buffer` the size of its own area, filled from the canvas
//! first and copied back after, so it draws exactly as it would on the
//! whole frame's buffer. Those are the small overlays.

use ratatui::buffer::{Buffer, Cell, CellWidth};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::Widget;

use crate::hashing::IntMap;

/// A cell packed into 6 bytes (two frames of 200x60: 141 KiB, where 8
/// bytes took 188). The packing is exact: two cells are equal here exactly
/// when their character, width, colours and modifiers are (the table gives
/// each look one number), and comparing is two integer compares. Packed to
/// 2-byte alignment, so the fields are only ever copied, never borrowed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(C, packed(2))]
pub struct Packed {
    /// The character (or `LONG`) in the low 24 bits, the width in the top 8.
    glyph: u32,
    /// The look's number in the canvas's `Looks`.
    look: u16,
}

/// A grapheme of several characters (an emoji sequence, a letter with a
/// combining mark): the canvas keeps its text apart, and the terminal's
/// record never counts it as shown, so it is sent again each frame. Such
/// cells are rare (process names, host names). Above every `char` (at
/// most 0x10FFFF).
pub const LONG: u32 = 0xFF_FFFF;
const COLOR_BITS: u32 = 26;
const COLOR: u32 = (1 << COLOR_BITS) - 1;
const WIDTH_SHIFT: u32 = 24;

impl Packed {
    /// A blank cell: what a cleared terminal shows.
    pub const BLANK: Self = Self { glyph: ' ' as u32 | 1 << WIDTH_SHIFT, look: Looks::PLAIN };
    /// Equal to no cell: what the terminal is recorded as showing where
    /// that is unknown.
    pub const UNKNOWN: Self = Self { glyph: LONG | 1 << WIDTH_SHIFT, ..Self::BLANK };

    /// Whether the terminal, showing `self`, shows `cell` already; a long
    /// grapheme is never known to be shown.
    pub fn shows(&self, cell: &Self) -> bool {
        self.symbol() != LONG && self == cell
    }

    pub fn symbol(&self) -> u32 {
        self.glyph & LONG
    }

    pub fn width(&self) -> u8 {
        u8::try_from(self.glyph >> WIDTH_SHIFT).unwrap_or(u8::MAX)
    }
}

/// A cell's colours and modifiers: each colour as `color_code` gives it
/// (26 bits), with six bits of the modifiers above it (bits 0-5 with `fg`,
/// 6-11 with `bg`, 12-15 with `underline`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
struct Look {
    fg: u32,
    bg: u32,
    underline: u32,
}

impl Look {
    fn of(cell: &Cell) -> Self {
        let colors =
            Self { fg: color_code(cell.fg), bg: color_code(cell.bg), underline: color_code(cell.underline_color) };
        colors.with_modifier(cell.modifier)
    }

    fn modifier(self) -> Modifier {
        let bits = self.fg >> COLOR_BITS | (self.bg >> COLOR_BITS) << 6 | (self.underline >> COLOR_BITS) << 12;
        Modifier::from_bits_retain(u16::try_from(bits).unwrap_or(u16::MAX))
    }

    fn with_modifier(self, modifier: Modifier) -> Self {
        let m = u32::from(modifier.bits());
        Self {
            fg: self.fg & COLOR | (m & 0x3F) << COLOR_BITS,
            bg: self.bg & COLOR | (m >> 6 & 0x3F) << COLOR_BITS,
            underline: self.underline & COLOR | (m >> 12) << COLOR_BITS,
        }
    }

    /// Whether it shows on a blank cell, as ratatui's diff counts it: a
    /// background colour, or a modifier that draws on a space.
    fn styled(self) -> bool {
        self.bg & COLOR != 0 || self.modifier().intersects(VISIBLE_ON_BLANK)
    }

    /// `paint` laid over the look, as `Cell::set_style` lays a style.
    fn painted(self, paint: &Paint) -> Self {
        let pick = |word: u32, code: Option<u32>| code.map_or(word, |c| word & !COLOR | c);
        let colored = Self {
            fg: pick(self.fg, paint.fg),
            bg: pick(self.bg, paint.bg),
            underline: pick(self.underline, paint.underline),
        };
        if paint.add.is_empty() && paint.sub.is_empty() {
            return colored;
        }
        colored.with_modifier(self.modifier().union(paint.add).difference(paint.sub))
    }
}

/// The looks a canvas's cells have been given, numbered in the order they
/// first appeared; the plain look (no colour, no modifier) is number 0.
/// Numbers are never reused while cells hold them: the table only grows
/// until `Term` starts it again between frames (`crowded`), and then the
/// whole screen is sent again.
#[derive(Debug)]
pub struct Looks {
    list: Vec<Look>,
    numbers: IntMap<Look, u16>,
}

impl Default for Looks {
    fn default() -> Self {
        let mut looks = Self { list: Vec::new(), numbers: IntMap::default() };
        looks.number(Look::default());
        looks
    }
}

impl Looks {
    pub const PLAIN: u16 = 0;
    /// More looks than any view draws (a few dozen): reached only by a
    /// pathological sequence of styles, and then the table starts again.
    const CROWDED: usize = 1024;

    fn number(&mut self, look: Look) -> u16 {
        if let Some(&n) = self.numbers.get(&look) {
            return n;
        }
        // Past 65,535 looks in one frame (the views draw a few dozen, in
        // styles of their own: no text chooses one), the last number is
        // shared and those cells may show another of those looks.
        let n = u16::try_from(self.list.len()).unwrap_or(u16::MAX);
        self.list.push(look);
        self.numbers.insert(look, n);
        n
    }

    fn look(&self, n: u16) -> Look {
        self.list.get(usize::from(n)).copied().unwrap_or_default()
    }

    /// The packed cell of a ratatui cell.
    pub fn pack(&mut self, cell: &Cell) -> Packed {
        let symbol = symbol_code(cell.symbol());
        let width = if narrow(symbol) { 1 } else { u32::from(u8::try_from(cell.cell_width()).unwrap_or(u8::MAX)) };
        Packed { glyph: symbol | width << WIDTH_SHIFT, look: self.number(Look::of(cell)) }
    }

    /// The ratatui cell a packed one packs; `long` is the text of a `LONG`
    /// symbol.
    pub fn cell(&self, packed: Packed, long: Option<&str>) -> Cell {
        let mut cell = Cell::EMPTY;
        // `LONG` is above every `char`: it reads as `None`.
        match char::from_u32(packed.symbol()) {
            Some(' ') => {}
            Some(c) => {
                cell.set_char(c);
            }
            None => {
                cell.set_symbol(long.unwrap_or(" "));
            }
        }
        let look = self.look(packed.look);
        (cell.fg, cell.bg, cell.underline_color) = (color_of(look.fg), color_of(look.bg), color_of(look.underline));
        cell.modifier = look.modifier();
        cell
    }

    /// Whether the cell shows on a blank one, as ratatui's diff counts it.
    pub fn styled(&self, packed: Packed) -> bool {
        self.look(packed.look).styled()
    }

    /// The number of look `n` with `paint` laid over it.
    fn painted(&mut self, n: u16, paint: &Paint) -> u16 {
        let look = self.look(n).painted(paint);
        self.number(look)
    }

    /// How many looks it holds.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether the table should start again before the next frame.
    pub fn crowded(&self) -> bool {
        self.list.len() > Self::CROWDED
    }
}

/// A style with its colours packed, made once per span and laid on each
/// of its cells.
#[derive(Clone, Copy, Debug)]
pub struct Paint {
    fg: Option<u32>,
    bg: Option<u32>,
    underline: Option<u32>,
    add: Modifier,
    sub: Modifier,
}

impl Paint {
    pub fn of(style: Style) -> Self {
        Self {
            fg: style.fg.map(color_code),
            bg: style.bg.map(color_code),
            underline: style.underline_color.map(color_code),
            add: style.add_modifier,
            sub: style.sub_modifier,
        }
    }
}

/// The named colours in the order of their codes (1 to 17).
const NAMED: [Color; 16] = [
    Color::Black,
    Color::Red,
    Color::Green,
    Color::Yellow,
    Color::Blue,
    Color::Magenta,
    Color::Cyan,
    Color::Gray,
    Color::DarkGray,
    Color::LightRed,
    Color::LightGreen,
    Color::LightYellow,
    Color::LightBlue,
    Color::LightMagenta,
    Color::LightCyan,
    Color::White,
];

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

/// The colour of a word's code (its low 26 bits).
fn color_of(word: u32) -> Color {
    let code = word & COLOR;
    let byte = |shift: u32| u8::try_from(code >> shift & 0xFF).unwrap_or(0);
    match code >> 24 {
        1 => Color::Indexed(byte(0)),
        2 => Color::Rgb(byte(16), byte(8), byte(0)),
        _ => usize::try_from(code)
            .ok()
            .and_then(|c| c.checked_sub(1))
            .and_then(|i| NAMED.get(i))
            .copied()
            .unwrap_or(Color::Reset),
    }
}

/// One column wide for certain, without a width table: printable ASCII,
/// box drawing, blocks and Braille, most of what the views draw (a
/// lookup per cell was a fifth of the diff's time).
fn narrow(code: u32) -> bool {
    matches!(code, 0x20..=0x7E | 0x2500..=0x259F | 0x2800..=0x28FF)
}

pub fn symbol_code(symbol: &str) -> u32 {
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

/// Every byte from space to tilde: text that is one cell a byte. Asked of
/// every span drawn, and again by the views that measure and clean text:
/// without an early exit the loop goes 32 bytes at a time (a table row is
/// some 200 bytes, nearly always all printable).
pub fn printable_ascii(s: &str) -> bool {
    s.bytes().fold(true, |all, b| all & (b.wrapping_sub(0x20) < 0x5F))
}

/// Modifiers that show on a blank cell, as ratatui's diff counts them.
const VISIBLE_ON_BLANK: Modifier = Modifier::REVERSED
    .union(Modifier::UNDERLINED)
    .union(Modifier::SLOW_BLINK)
    .union(Modifier::RAPID_BLINK)
    .union(Modifier::CROSSED_OUT);

/// One cell wide, never combining, never a control: what `put` writes
/// without segmenting. The narrow ranges, Latin-1's letters and signs (a
/// user or a command named in French or German; the temperature's `°`,
/// the separator `·`), and the marks the views draw (`…`, the legend's
/// `•`, the sort arrows, `→`, `—`): each one column in Unicode's width
/// tables and a grapheme of its own (a test checks every one). Each of
/// those marks sent its span down ratatui's path before: a dozen a frame,
/// a tenth of the dashboard's instructions at 8 GPUs x 64 processes.
fn simple(c: char) -> bool {
    narrow(u32::from(c)) || matches!(c, '\u{A0}'..='\u{AC}' | '\u{AE}'..='\u{FF}' | '…' | '•' | '—' | '→' | '▲' | '▼')
}

/// The frame being drawn: a packed cell per position of `area`, row by row.
#[derive(Debug, Default)]
pub struct Canvas {
    area: Rect,
    cells: Vec<Packed>,
    /// The text of each `LONG` cell, by index, newest last (a cell drawn
    /// over twice has two entries; the last is its own).
    long: Vec<(u32, String)>,
    looks: Looks,
}

impl Canvas {
    pub fn area(&self) -> Rect {
        self.area
    }

    /// Blank, at `area`'s size.
    pub fn resize(&mut self, area: Rect) {
        self.area = area;
        self.cells = vec![Packed::BLANK; usize::from(area.width) * usize::from(area.height)];
        self.long = Vec::new();
        self.looks = Looks::default();
    }

    /// The table the cells' looks are numbered in, and so the terminal's
    /// record of them.
    pub fn looks(&self) -> &Looks {
        &self.looks
    }

    /// Starts the table of looks again: only between frames, every cell
    /// blank, and with the terminal's record forgotten, since its numbers
    /// meant the old table's looks.
    pub fn restart_looks(&mut self) {
        self.looks = Looks::default();
    }

    pub fn cells(&self) -> &[Packed] {
        &self.cells
    }

    /// For the diff's runs of blanking (`skip_shown`), which never blank a
    /// long grapheme: its text is kept apart, in `long`.
    pub(super) fn cells_mut(&mut self) -> &mut [Packed] {
        &mut self.cells
    }

    /// Makes the cell at `i` blank for the next frame.
    pub fn blank(&mut self, i: usize) {
        if let Some(c) = self.cells.get_mut(i) {
            *c = Packed::BLANK;
        }
    }

    /// Forgets the long graphemes, once every cell is blank again.
    pub fn forget_long(&mut self) {
        self.long.clear();
    }

    /// The text of the long grapheme at `i`.
    pub fn long(&self, i: usize) -> Option<&str> {
        let i = u32::try_from(i).ok()?;
        self.long.iter().rev().find(|(at, _)| *at == i).map(|(_, s)| s.as_str())
    }

    /// The ratatui cell at `i`, as a backend is sent it.
    pub fn cell(&self, i: usize) -> Cell {
        let packed = self.cells.get(i).copied().unwrap_or(Packed::BLANK);
        let long = if packed.symbol() == LONG { self.long(i) } else { None };
        self.looks.cell(packed, long)
    }

    fn set(&mut self, i: usize, cell: &Cell) {
        let packed = self.looks.pack(cell);
        if packed.symbol() == LONG {
            self.long.push((u32::try_from(i).unwrap_or(u32::MAX), cell.symbol().to_string()));
        }
        if let Some(c) = self.cells.get_mut(i) {
            *c = packed;
        }
    }

    fn index(&self, x: u16, y: u16) -> usize {
        usize::from(y.saturating_sub(self.area.y)) * usize::from(self.area.width)
            + usize::from(x.saturating_sub(self.area.x))
    }

    /// Any ratatui widget, drawn on a buffer over its area that holds what
    /// the canvas holds there, then copied back.
    pub fn render_widget<W: Widget>(&mut self, widget: W, area: Rect) {
        let area = area.intersection(self.area);
        let mut buf = self.buffer(area);
        widget.render(area, &mut buf);
        self.copy_back(&buf);
    }

    /// What the canvas holds over `area` (within it), as a ratatui buffer.
    pub fn buffer(&self, area: Rect) -> Buffer {
        let mut buf = Buffer::empty(area);
        for y in area.top()..area.bottom() {
            for x in area.left()..area.right() {
                buf[(x, y)] = self.cell(self.index(x, y));
            }
        }
        buf
    }

    fn copy_back(&mut self, buf: &Buffer) {
        let area = buf.area;
        for y in area.top()..area.bottom() {
            for x in area.left()..area.right() {
                let i = self.index(x, y);
                self.set(i, &buf[(x, y)]);
            }
        }
    }

    /// Writes `s` from `x` on row `y` up to (not including) column `end`,
    /// both within the canvas, as `Buffer::set_stringn` would; returns
    /// where it stopped.
    pub fn put(&mut self, x: u16, y: u16, s: &str, end: u16, style: Style) -> u16 {
        // Printable ASCII, most of a frame, is told and written a byte at a
        // time, without decoding characters.
        if printable_ascii(s) {
            return self.put_simple(x, y, s.bytes().map(u32::from), end, style);
        }
        if !s.chars().all(simple) {
            // No grapheme is wider than two columns a character: the
            // buffer covers what `s` can reach, not the rest of the row.
            let reach = s.chars().count().saturating_mul(2);
            let area = Rect::new(x, y, (end - x).min(u16::try_from(reach).unwrap_or(u16::MAX)), 1);
            let mut buf = self.buffer(area);
            let stopped = buf.set_stringn(x, y, s, usize::from(area.width), style).0;
            self.copy_back(&buf);
            return stopped;
        }
        self.put_simple(x, y, s.chars().map(u32::from), end, style)
    }

    /// `put` for characters each one cell wide (`simple`), given as codes.
    fn put_simple(&mut self, x: u16, y: u16, codes: impl Iterator<Item = u32>, end: u16, style: Style) -> u16 {
        let paint = Paint::of(style);
        let start = self.index(x, y);
        let Some(cells) = self.cells.get_mut(start..start + usize::from(end - x)) else { return x };
        // The cells under a span nearly always share one look: the table
        // is asked once for each look the span lands on in a row.
        let mut last = None;
        let mut written = 0;
        for (cell, code) in cells.iter_mut().zip(codes) {
            let look = match last {
                Some((under, painted)) if under == cell.look => painted,
                _ => {
                    let painted = self.looks.painted(cell.look, &paint);
                    last = Some((cell.look, painted));
                    painted
                }
            };
            *cell = Packed { glyph: code | 1 << WIDTH_SHIFT, look };
            written += 1;
        }
        x + written
    }

    /// Every character outside ASCII made `?`: only ASCII reaches a
    /// terminal that cannot show more.
    pub fn force_ascii(&mut self) {
        for cell in &mut self.cells {
            if cell.symbol() > 0x7F {
                cell.glyph = u32::from('?') | 1 << WIDTH_SHIFT;
            }
        }
        self.long.clear();
    }
}

#[cfg(test)]
mod tests;
