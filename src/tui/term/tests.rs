use super::canvas::symbol_code;
use super::*;
use proptest::prelude::*;
use ratatui::Terminal;
use ratatui::backend::{TestBackend, WindowSize};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier, Style};
use std::convert::Infallible;

/// A test backend that also keeps what each frame was sent and counts the
/// times it was asked its size and cleared.
struct Logged {
    inner: TestBackend,
    sent: Sent,
    /// `Backend::size` takes `&self`.
    sizes: std::cell::Cell<usize>,
    clears: usize,
}

impl Logged {
    fn new(w: u16, h: u16) -> Self {
        Self { inner: TestBackend::new(w, h), sent: Vec::new(), sizes: Default::default(), clears: 0 }
    }
}

impl Backend for Logged {
    type Error = Infallible;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Infallible>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let cells: Vec<_> = content.collect();
        self.sent.extend(cells.iter().map(|(x, y, c)| (*x, *y, c.symbol().to_string())));
        self.inner.draw(cells.into_iter())
    }
    fn hide_cursor(&mut self) -> Result<(), Infallible> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Infallible> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Infallible> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Infallible> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> Result<(), Infallible> {
        self.clears += 1;
        self.inner.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Infallible> {
        self.clears += 1;
        self.inner.clear_region(clear_type)
    }
    fn size(&self) -> Result<Size, Infallible> {
        self.sizes.set(self.sizes.get() + 1);
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Infallible> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Infallible> {
        self.inner.flush()
    }
}

/// One row of a frame: where it starts, its text, its style.
type Row = (u16, String, Style);

/// The cells one frame sent, in order.
type Sent = Vec<(u16, u16, String)>;

const W: u16 = 12;
const H: u16 = 4;

fn draw_rows(buf: &mut Buffer, rows: &[Row]) {
    for (y, (x, text, style)) in rows.iter().enumerate() {
        let y = u16::try_from(y).unwrap_or(0);
        if y < buf.area.height && *x < buf.area.width {
            buf.set_string(*x, y, text, *style);
        }
    }
}

/// The rows as a widget, to draw them on the canvas as on a buffer.
struct Rows<'a>(&'a [Row]);

impl Widget for Rows<'_> {
    fn render(self, _: Rect, buf: &mut Buffer) {
        draw_rows(buf, self.0);
    }
}

fn draw_on(f: &mut Frame, rows: &[Row]) {
    let area = f.area();
    f.render_widget(Rows(rows), area);
}

fn pieces() -> impl Strategy<Value = String> {
    // Narrow, wide, a VS16 emoji, a combining mark, box drawing, blanks.
    let piece = prop_oneof![
        Just("ab".to_string()),
        Just("x".to_string()),
        Just("名前".to_string()),
        Just("\u{2764}\u{FE0F}".to_string()),
        Just("e\u{301}".to_string()),
        Just("─█".to_string()),
        Just("  ".to_string()),
    ];
    prop::collection::vec(piece, 0..5).prop_map(|p| p.concat())
}

fn styles() -> impl Strategy<Value = Style> {
    let color = prop_oneof![Just(Color::Reset), Just(Color::Red), Just(Color::Indexed(33)), Just(Color::Rgb(1, 2, 3))];
    let modifier = prop_oneof![Just(Modifier::empty()), Just(Modifier::BOLD), Just(Modifier::REVERSED)];
    (color.clone(), color, modifier).prop_map(|(fg, bg, m)| Style::new().fg(fg).bg(bg).add_modifier(m))
}

fn frames() -> impl Strategy<Value = Vec<Vec<Row>>> {
    let row = (0..W, pieces(), styles());
    prop::collection::vec(prop::collection::vec(row, 0..=usize::from(H)), 1..6)
}

/// The cells ratatui's own diff would send, and what the screen is after.
fn ratatui_frames(frames: &[Vec<Row>]) -> (Vec<Sent>, Vec<Buffer>) {
    let mut terminal = Terminal::new(Logged::new(W, H)).expect("infallible");
    let mut sent = Vec::new();
    let mut screens = Vec::new();
    for rows in frames {
        terminal.draw(|f| draw_rows(f.buffer_mut(), rows)).expect("infallible");
        sent.push(std::mem::take(&mut terminal.backend_mut().sent));
        screens.push(terminal.backend().inner.buffer().clone());
    }
    (sent, screens)
}

proptest! {
    /// Frame after frame, the terminal is sent what ratatui's `Terminal`
    /// sends it, in the same order, but for the long graphemes, which are
    /// sent again; and it shows the same screen.
    #[test]
    fn sends_what_ratatui_sends(frames in frames()) {
        let (expected, screens) = ratatui_frames(&frames);
        let mut term = Term::new(Logged::new(W, H)).expect("infallible");
        for ((rows, expected), screen) in frames.iter().zip(&expected).zip(&screens) {
            term.draw(|f| draw_on(f, rows)).expect("infallible");
            let sent = std::mem::take(&mut term.backend_mut().sent);
            let short = |cells: &[(u16, u16, String)]| -> Vec<(u16, u16, String)> {
                cells.iter().filter(|(_, _, s)| symbol_code(s) != LONG).cloned().collect()
            };
            prop_assert_eq!(short(&sent), short(expected));
            prop_assert_eq!(term.backend().inner.buffer(), screen);
        }
    }
}

#[test]
fn an_unchanged_frame_sends_nothing() {
    let mut term = Term::new(Logged::new(W, H)).expect("infallible");
    let rows = vec![(0, "GPU 0 ─█".to_string(), Style::new().fg(Color::Green))];
    term.draw(|f| draw_on(f, &rows)).expect("infallible");
    assert_eq!(term.backend().sent.len(), 8);
    term.backend_mut().sent.clear();
    term.draw(|f| draw_on(f, &rows)).expect("infallible");
    assert!(term.backend().sent.is_empty(), "{:?}", term.backend().sent);
}

#[test]
fn the_size_is_asked_only_when_it_may_have_changed() {
    let mut term = Term::new(Logged::new(W, H)).expect("infallible");
    for _ in 0..3 {
        term.draw(|_| ()).expect("infallible");
    }
    assert_eq!(term.backend().sizes.get(), 1, "asked once, at the start");
    assert_eq!(term.backend().clears, 0, "the fresh screen is not cleared");

    term.backend_mut().inner.resize(20, 6);
    term.resized();
    let area = term.draw(|f| f.area()).expect("infallible");
    assert_eq!(area, Rect::new(0, 0, 20, 6));
    assert_eq!((term.backend().sizes.get(), term.backend().clears), (2, 1), "asked again; a new size clears");

    term.resized();
    term.draw(|_| ()).expect("infallible");
    assert_eq!((term.backend().sizes.get(), term.backend().clears), (3, 1), "the same size does not clear");
}

#[test]
fn after_redraw_all_every_drawn_cell_is_sent_again() {
    let mut term = Term::new(Logged::new(W, H)).expect("infallible");
    let rows = vec![(2, "abc".to_string(), Style::new()), (0, "名".to_string(), Style::new())];
    term.draw(|f| draw_on(f, &rows)).expect("infallible");
    term.backend_mut().sent.clear();
    term.redraw_all().expect("infallible");
    assert_eq!(term.backend().clears, 1);
    term.draw(|f| draw_on(f, &rows)).expect("infallible");
    let sent: Vec<_> = term.backend().sent.iter().map(|(x, y, s)| (*x, *y, s.as_str())).collect();
    assert_eq!(sent, [(2, 0, "a"), (3, 0, "b"), (4, 0, "c"), (0, 1, "名")]);
}

#[test]
fn a_table_crowded_with_looks_starts_again_and_the_screen_stays_right() {
    // Each frame gives every row looks of its own: more over the frames
    // than the table keeps. The last frame repeats the one before.
    let (w, h) = (40u16, 30u16);
    let frame = |k: u8| -> Vec<Row> {
        (0..h)
            .map(|y| {
                let text = "x".repeat(usize::from(w));
                let y = u8::try_from(y).unwrap_or(0);
                (0, text, Style::new().fg(Color::Rgb(k, y, 0)).bg(Color::Rgb(0, k, y)))
            })
            .collect()
    };
    let frames: Vec<Vec<Row>> = (0..40).map(frame).chain([frame(39)]).collect();
    let mut theirs = Terminal::new(Logged::new(w, h)).expect("infallible");
    let mut term = Term::new(Logged::new(w, h)).expect("infallible");
    let mut restarts = 0;
    let mut before = 0;
    for rows in &frames {
        theirs.draw(|f| draw_rows(f.buffer_mut(), rows)).expect("infallible");
        term.backend_mut().sent.clear();
        term.draw(|f| draw_on(f, rows)).expect("infallible");
        assert_eq!(term.backend().inner.buffer(), theirs.backend().inner.buffer());
        let now = term.canvas.looks().len();
        assert!(now <= 1024 + usize::from(h) + 1, "{now}");
        restarts += usize::from(now < before);
        before = now;
    }
    assert_eq!(restarts, 1);
    assert!(term.backend().sent.is_empty(), "an unchanged frame sends nothing once the table has started again");
}

#[test]
fn a_frame_is_compact() {
    // What the memory saving rests on: 6 bytes a cell against ratatui's 48.
    assert_eq!(std::mem::size_of::<Packed>(), 6);
}

proptest! {
    /// What `send` leaves is the blank canvas the next frame is drawn on,
    /// as ratatui's `Buffer::reset` would leave a buffer.
    #[test]
    fn each_frame_starts_blank(frames in frames()) {
        let mut term = Term::new(Logged::new(W, H)).expect("infallible");
        for rows in &frames {
            term.draw(|f| draw_on(f, rows)).expect("infallible");
            prop_assert!(term.canvas.cells().iter().all(|c| *c == Packed::BLANK), "{:?}", term.canvas);
        }
    }
}

#[test]
fn room_for_a_whole_screen_of_changes_is_not_kept_for_small_frames() {
    let (w, h) = (200, 60);
    let mut term = Term::new(Logged::new(w, h)).expect("infallible");
    let full: Vec<Row> = (0..h).map(|y| (y, "x".repeat(usize::from(w)), Style::new().fg(Color::Green))).collect();
    term.draw(|f| draw_on(f, &full)).expect("infallible");
    assert!(term.changed.capacity() >= usize::from(w) * usize::from(h), "the first frame sends every cell");
    // Blanking the screen again changes every cell; the frame after it,
    // three.
    let small = vec![(0, "12%".to_string(), Style::new())];
    term.draw(|f| draw_on(f, &small)).expect("infallible");
    term.draw(|f| draw_on(f, &[(0, "13%".to_string(), Style::new())])).expect("infallible");
    assert!(term.changed.capacity() <= 2 * MIN_CHANGED, "{}", term.changed.capacity());
    // Frames like it then never grow the list.
    for n in 0..5 {
        let rows = vec![(0, format!("{n}%"), Style::new())];
        term.draw(|f| draw_on(f, &rows)).expect("infallible");
        assert!(term.changed.capacity() <= 2 * MIN_CHANGED);
    }
}
