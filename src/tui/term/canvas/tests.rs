use super::*;
use proptest::prelude::*;
use ratatui::style::Stylize;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

/// Every kind of colour, from pools small enough that two cells often
/// share one. The named ones come from the decoding table, and the round
/// trip checks it against `color_code`'s own match.
fn any_color() -> impl Strategy<Value = Color> {
    prop_oneof![
        Just(Color::Reset),
        (0..NAMED.len()).prop_map(|i| NAMED[i]),
        prop_oneof![Just(0u8), Just(1), Just(16), Just(255)].prop_map(Color::Indexed),
        (0u8..2, 0u8..2, prop_oneof![Just(0u8), Just(1), Just(255)]).prop_map(|(r, g, b)| Color::Rgb(r, g, b)),
    ]
}

fn any_cell() -> impl Strategy<Value = Cell> {
    let symbol = prop_oneof![Just(" "), Just("a"), Just("─"), Just("名"), Just("e\u{301}"), Just("")];
    let modifier = prop_oneof![Just(0u16), Just(1), Just(0x40), Just(0x1FF), Just(0xF000), any::<u16>()];
    (symbol, any_color(), any_color(), any_color(), modifier).prop_map(|(symbol, fg, bg, underline, modifier)| {
        let mut cell = Cell::new(symbol);
        (cell.fg, cell.bg, cell.underline_color) = (fg, bg, underline);
        cell.modifier = Modifier::from_bits_retain(modifier);
        cell
    })
}

proptest! {
    /// The packed record is exact: equal where every field is, and it
    /// gives back the width and what shows on a blank cell.
    #[test]
    fn the_packed_record_tells_apart_what_differs(a in any_cell(), b in any_cell()) {
        let mut looks = Looks::default();
        let (pa, pb) = (looks.pack(&a), looks.pack(&b));
        let same = symbol_code(a.symbol()) == symbol_code(b.symbol())
            && (a.fg, a.bg, a.underline_color, a.modifier) == (b.fg, b.bg, b.underline_color, b.modifier);
        prop_assert_eq!(pa == pb, same);
        prop_assert_eq!(looks.styled(pa), a.bg != Color::Reset || a.modifier.intersects(VISIBLE_ON_BLANK));
        let width = if narrow(symbol_code(a.symbol())) { 1 } else { a.cell_width() };
        prop_assert_eq!(u16::from(pa.width()), width);
        prop_assert_eq!(pa == Packed::BLANK, looks.pack(&Cell::EMPTY) == pa);
    }
}

fn any_style() -> impl Strategy<Value = Style> {
    let color = || prop::option::of(any_color());
    let modifier = || prop_oneof![Just(0u16), Just(1), Just(0x41), Just(0x1FF), any::<u16>()];
    (color(), color(), color(), modifier(), modifier()).prop_map(|(fg, bg, ul, add, sub)| {
        let mut style = Style::new();
        (style.fg, style.bg, style.underline_color) = (fg, bg, ul);
        style.add_modifier = Modifier::from_bits_retain(add);
        style.sub_modifier = Modifier::from_bits_retain(sub);
        style
    })
}

/// Text of every kind the views draw: ASCII, box drawing, wide and long
/// graphemes, a control character, nothing.
fn any_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("ab"),
        Just(" "),
        Just("─█⣿"),
        Just("·…"),
        Just("名前"),
        Just("\u{2764}\u{FE0F}"),
        Just("e\u{301}"),
        Just("\t"),
        Just("é"),
        Just("°•▲▼→—"),
        Just("Müller ½\u{A0}"),
    ];
    prop::collection::vec(piece, 0..5).prop_map(|p| p.concat())
}

/// A canvas and a ratatui buffer holding the same: rows of text.
fn seeded(rows: &[(u16, String, Style)]) -> (Canvas, Buffer) {
    let area = Rect::new(0, 0, 12, 4);
    let mut buf = Buffer::empty(area);
    for (y, (x, text, style)) in (0..area.height).zip(rows) {
        buf.set_stringn(*x % area.width, y, text, usize::from(area.width), *style);
    }
    let mut canvas = Canvas::default();
    canvas.resize(area);
    canvas.copy_back(&buf);
    (canvas, buf)
}

fn any_rows() -> impl Strategy<Value = Vec<(u16, String, Style)>> {
    prop::collection::vec((0u16..12, any_text(), any_style()), 0..5)
}

proptest! {
    /// A packed cell gives back the cell it packs: every colour, every
    /// modifier bit, the symbol (a long one from the canvas's text). An
    /// empty symbol, which draws nothing where a cell must, comes back as
    /// the blank the diff always took it for.
    #[test]
    fn a_packed_cell_unpacks_to_the_same_cell(cell in any_cell()) {
        let mut looks = Looks::default();
        let packed = looks.pack(&cell);
        let long = (packed.symbol() == LONG).then(|| cell.symbol());
        let mut expected = cell.clone();
        if cell.symbol().is_empty() {
            expected.set_symbol(" ");
        }
        prop_assert_eq!(looks.cell(packed, long), expected);
    }

    /// A style laid on a packed cell is what `Cell::set_style` makes.
    #[test]
    fn paint_lays_a_style_as_set_style_does(cell in any_cell(), style in any_style()) {
        let mut styled = cell.clone();
        styled.set_style(style);
        let mut looks = Looks::default();
        let packed = looks.pack(&cell);
        let painted = looks.painted(packed.look, &Paint::of(style));
        prop_assert_eq!(Packed { look: painted, ..packed }, looks.pack(&styled));
    }

    /// Text put on the canvas, by the fast path or ratatui's, leaves what
    /// `Buffer::set_stringn` leaves on a buffer holding the same.
    #[test]
    fn put_writes_what_set_stringn_writes(
        rows in any_rows(), text in any_text(), style in any_style(), x in 0u16..12, y in 0u16..4, len in 0u16..12,
    ) {
        let (mut canvas, mut buf) = seeded(&rows);
        let end = x.saturating_add(len).min(12);
        let ours = canvas.put(x, y, &text, end, style);
        let theirs = buf.set_stringn(x, y, &text, usize::from(end - x), style).0;
        prop_assert_eq!(ours, theirs);
        prop_assert_eq!(canvas.buffer(buf.area), buf);
    }

    /// A widget drawn over part of the canvas draws as it does over the
    /// same part of a whole buffer, what lies around it untouched.
    #[test]
    fn a_widget_draws_as_on_a_whole_buffer(
        rows in any_rows(), text in any_text(), x in 0u16..14, y in 0u16..5, w in 0u16..14, h in 0u16..5,
    ) {
        let (mut canvas, mut buf) = seeded(&rows);
        let area = Rect::new(x, y, w, h);
        let popup = || Paragraph::new(Line::from(text.clone()).red()).wrap(Wrap { trim: false }).block(Block::new().borders(Borders::ALL));
        canvas.render_widget(Clear, area);
        canvas.render_widget(popup(), area);
        let inside = area.intersection(buf.area);
        Clear.render(inside, &mut buf);
        popup().render(inside, &mut buf);
        prop_assert_eq!(canvas.buffer(buf.area), buf);
    }

    /// ASCII mode leaves what replacing every symbol outside ASCII with `?`
    /// leaves on a buffer.
    #[test]
    fn force_ascii_leaves_only_ascii(rows in any_rows()) {
        let (mut canvas, mut buf) = seeded(&rows);
        canvas.force_ascii();
        for cell in &mut buf.content {
            if !cell.symbol().is_ascii() {
                cell.set_symbol("?");
            }
        }
        prop_assert_eq!(canvas.buffer(buf.area), buf);
    }
}

#[test]
fn a_long_grapheme_drawn_over_reads_its_newest_text() {
    let mut canvas = Canvas::default();
    canvas.resize(Rect::new(0, 0, 4, 1));
    canvas.put(0, 0, "e\u{301}", 4, Style::new());
    canvas.put(0, 0, "a\u{301}", 4, Style::new());
    assert_eq!(canvas.cell(0).symbol(), "a\u{301}");
    canvas.put(0, 0, "x", 4, Style::new());
    assert_eq!(canvas.cell(0).symbol(), "x");
}

/// Every character `put` writes without ratatui's path lands where
/// `Buffer::set_stringn` puts it: one column, a grapheme of its own, both
/// beside ASCII and beside a wide character.
#[test]
fn every_simple_character_is_written_as_ratatui_writes_it() {
    let simples: Vec<char> = (0..=u32::from(char::MAX)).filter_map(char::from_u32).filter(|&c| simple(c)).collect();
    assert!(simples.len() > 600, "{} characters", simples.len());
    for c in simples {
        for text in [format!("a{c}b"), format!("名{c}{c}")] {
            let (mut canvas, mut buf) = seeded(&[]);
            let ours = canvas.put(1, 0, &text, 12, Style::new());
            let theirs = buf.set_stringn(1, 0, &text, 11, Style::new()).0;
            assert_eq!((ours, canvas.buffer(buf.area)), (theirs, buf), "U+{:04X}", u32::from(c));
        }
    }
}

proptest! {
    #[test]
    fn printable_ascii_is_space_to_tilde(s in any::<String>(), bytes in proptest::collection::vec(0x1Fu8..=0x7F, 0..80)) {
        let ascii = String::from_utf8(bytes).unwrap();
        for s in [s, ascii] {
            prop_assert_eq!(printable_ascii(&s), s.bytes().all(|b| (b' '..=b'~').contains(&b)));
        }
    }
}
