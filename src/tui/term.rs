//! The screen as the views draw it and as the terminal shows it, in place
//! of ratatui's `Terminal`.
//!
//! `Terminal` keeps two full buffers, the frame being drawn and the one
//! before it, to send the terminal only the cells that changed. A cell is
//! 48 bytes (a string, three colours, modifiers, diff options), so a
//! 200x60 pane held two 564 KiB buffers: more than a tenth of the
//! dashboard's resident memory, and more than the whole of what nvtop
//! keeps for its screen. Here both the frame being drawn (`Canvas`) and
//! the record of what the terminal shows are 6 bytes a cell (`Packed`),
//! exactly what decides whether a cell is sent again: its character, its
//! width, and the number of its colours and modifiers in a table of the
//! looks the frames use. Only the cells sent are made
//! ratatui cells again, a batch at a time.
//!
//! The size is asked of the terminal when it may have changed (at the
//! start, after a resize event, after a stop), not at every frame as
//! `Terminal::draw` does: on a real terminal each ask opens `/dev/tty`.

mod canvas;
mod frame_out;
mod lines;

use std::io;

use ratatui::backend::{Backend, ClearType, CrosstermBackend};
use ratatui::buffer::Cell;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

pub use canvas::{Canvas, printable_ascii};
use canvas::{LONG, Packed};
pub use frame_out::FrameOut;
pub use lines::Lines;

/// The real terminal's backend: crossterm's, through `FrameOut`.
pub fn stdout_backend() -> CrosstermBackend<FrameOut<io::Stdout>> {
    CrosstermBackend::new(FrameOut::new(io::stdout()))
}

/// What the views draw on: the frame's canvas and its area. Offers the
/// part of ratatui's `Frame` the views use.
pub struct Frame<'a> {
    canvas: &'a mut Canvas,
}

impl<'a> Frame<'a> {
    pub fn new(canvas: &'a mut Canvas) -> Self {
        Self { canvas }
    }

    pub fn area(&self) -> Rect {
        self.canvas.area()
    }

    /// A ratatui widget (a popup's `Paragraph`, `Clear`): drawn as on a
    /// buffer of the whole frame.
    pub fn render_widget<W: Widget>(&mut self, widget: W, area: Rect) {
        self.canvas.render_widget(widget, area);
    }

    /// Lines of text, straight into the frame's cells.
    pub fn render_lines(&mut self, lines: Lines, area: Rect) {
        lines.draw(area, self.canvas);
    }

    /// Whatever was drawn, only ASCII reaches the terminal.
    pub fn force_ascii(&mut self) {
        self.canvas.force_ascii();
    }
}

/// Cells made ratatui cells for the backend at once: a first frame sends
/// most of the screen, and a whole frame of them would take 48 bytes a
/// cell again.
const BATCH: usize = 256;

/// The backend, the frame being drawn and what the terminal shows.
pub struct Term<B: Backend> {
    backend: B,
    canvas: Canvas,
    shown: Vec<Packed>,
    /// Cells to send, by index into the canvas: kept between frames so a
    /// frame allocates nothing. `u32` is enough for the largest canvas
    /// (u16::MAX x u16::MAX cells), and half the bytes: a whole frame's
    /// worth of indices is held from the first frame on.
    changed: Vec<u32>,
    /// The batch of cells being sent, kept between frames.
    batch: Vec<(u16, u16, Cell)>,
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
            canvas: Canvas::default(),
            shown: Vec::new(),
            changed: Vec::new(),
            batch: Vec::new(),
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
        self.shown.fill(Packed::BLANK);
        self.size_stale = true;
        self.cursor_hidden = false;
        Ok(())
    }

    /// Draws one frame with `view`, then sends the terminal what changed.
    pub fn draw<R>(&mut self, view: impl FnOnce(&mut Frame) -> R) -> io::Result<R> {
        if self.size_stale {
            self.fit()?;
        }
        if self.canvas.looks().crowded() {
            // The canvas is blank between frames; what the terminal shows
            // is then known only by numbers of the old table.
            self.canvas.restart_looks();
            self.shown.fill(Packed::UNKNOWN);
        }
        let result = view(&mut Frame::new(&mut self.canvas));
        // `send` leaves the canvas blank for the next frame.
        self.send()?;
        Ok(result)
    }

    /// Asks the size; on a change, clears the terminal and starts from
    /// blank, as `Terminal` does.
    fn fit(&mut self) -> io::Result<()> {
        let size = self.backend.size().map_err(io::Error::other)?;
        let area = Rect::new(0, 0, size.width, size.height);
        if area != self.canvas.area() {
            self.canvas.resize(area);
            // At the start the screen is the fresh alternate screen.
            if !std::mem::take(&mut self.fresh) {
                self.backend.clear_region(ClearType::All).map_err(io::Error::other)?;
            }
            self.shown = vec![Packed::BLANK; self.canvas.cells().len()];
        }
        self.size_stale = false;
        Ok(())
    }

    /// Sends what changed and blanks the canvas: each cell the diff passes
    /// over unsent is blanked there and then, the cells sent once sent.
    fn send(&mut self) -> io::Result<()> {
        let mut changed = std::mem::take(&mut self.changed);
        changed.clear();
        diff(&mut self.shown, &mut self.canvas, &mut changed);
        let drawn = self.send_cells(&changed);
        for &i in &changed {
            self.canvas.blank(i as usize);
        }
        self.canvas.forget_long();
        // A whole screen's worth of cells (the first frame, a resize) is
        // not kept for frames where a few numbers change: 47 KiB at 200x60.
        // Twice this frame's is: frames like it then never grow the list.
        let room = 2 * changed.len().max(MIN_CHANGED);
        if changed.capacity() > 2 * room {
            changed.shrink_to(room);
        }
        self.changed = changed;
        if drawn.is_err() {
            // What reached the terminal is unknown: all of it goes again.
            self.shown.fill(Packed::UNKNOWN);
        }
        drawn?;
        if !self.cursor_hidden {
            self.backend.hide_cursor().map_err(io::Error::other)?;
            self.cursor_hidden = true;
        }
        Backend::flush(&mut self.backend).map_err(io::Error::other)
    }

    /// The cells at `changed`, in order, a batch at a time.
    fn send_cells(&mut self, changed: &[u32]) -> io::Result<()> {
        let width = usize::from(self.canvas.area().width.max(1));
        for chunk in changed.chunks(BATCH) {
            self.batch.clear();
            self.batch.extend(chunk.iter().map(|&i| {
                let i = i as usize;
                // Within a canvas of at most u16::MAX x u16::MAX cells.
                let (x, y) =
                    (u16::try_from(i % width).unwrap_or(u16::MAX), u16::try_from(i / width).unwrap_or(u16::MAX));
                (x, y, self.canvas.cell(i))
            }));
            self.backend.draw(self.batch.iter().map(|(x, y, cell)| (*x, *y, cell))).map_err(io::Error::other)?;
        }
        Ok(())
    }
}

/// Changed cells a frame has room for whatever the frame before: about
/// five lines of a wide terminal.
const MIN_CHANGED: usize = 1024;

/// A cell's index as `changed` keeps it.
fn index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// The indices of the cells of `next` the terminal must be sent, given
/// that it shows `shown`, which becomes `next`: ratatui's `BufferDiff`
/// rules (wide characters, the trailing columns of a VS16 emoji, a wide
/// character's styled remains) over packed cells, with one difference: a
/// long grapheme is always sent. The canvas has no diff options: nothing
/// the views draw sets one. As in ratatui, the record is the whole frame
/// before, cells not sent included (the column a wide character covers).
/// Every cell of `next` not in `out` is left blank.
fn diff(shown: &mut [Packed], next: &mut Canvas, out: &mut Vec<u32>) {
    let len = shown.len().min(next.cells().len());
    let mut i = 0;
    while i < len {
        i = skip_shown(shown, next, i, len);
        if i >= len {
            break;
        }
        let now = next.cells()[i];
        let before = std::mem::replace(&mut shown[i], now);
        let here = i;
        i += 1;
        let width = usize::from(now.width());
        if before.shows(&now) {
            if width > 1 {
                i = covered(shown, next, i, width - 1);
            }
            next.blank(here);
            continue;
        }
        out.push(index(here));
        if width > 1 && now.symbol() == LONG && next.long(here).is_some_and(|s| s.contains('\u{FE0F}')) {
            // The emoji's trailing columns, where their symbol changed.
            i = trailing(shown, next, here + 1, here + width, false, out);
        } else if width > 1 {
            i = covered(shown, next, i, width - 1);
        } else if usize::from(before.width()) > width && next.looks().styled(before) {
            // A styled wide character's remains: every trailing column.
            i = trailing(shown, next, here + 1, here + usize::from(before.width()), true, out);
        }
    }
}

/// From `from`, the run of cells the terminal shows already, each one
/// column wide and not a long grapheme: all the diff does with those is
/// blank them, which here takes one pass, not a cell's full rules. Most of
/// a frame where only numbers change is such runs. Returns the first cell
/// after the run.
fn skip_shown(shown: &[Packed], next: &mut Canvas, from: usize, len: usize) -> usize {
    let (Some(shown), Some(cells)) = (shown.get(from..len), next.cells_mut().get_mut(from..len)) else { return len };
    let mut run = 0;
    for (before, now) in shown.iter().zip(cells.iter_mut()) {
        if before != now || now.width() > 1 || now.symbol() == LONG {
            break;
        }
        *now = Packed::BLANK;
        run += 1;
    }
    from + run
}

/// The `n` cells from `from` that a wide cell covers: not compared, only
/// recorded (and blanked); returns the index after them.
fn covered(shown: &mut [Packed], next: &mut Canvas, from: usize, n: usize) -> usize {
    let end = from.saturating_add(n).min(shown.len()).min(next.cells().len()).max(from);
    for (j, record) in shown.iter_mut().enumerate().take(end).skip(from) {
        *record = next.cells()[j];
        next.blank(j);
    }
    from + n
}

/// The trailing cells from `from` up to `end` (which a wide cell among them
/// extends); returns where the main scan goes on.
fn trailing(
    shown: &mut [Packed],
    next: &mut Canvas,
    from: usize,
    end: usize,
    force: bool,
    out: &mut Vec<u32>,
) -> usize {
    let len = shown.len().min(next.cells().len());
    let mut end = end.min(len);
    let mut j = from;
    while j < end {
        let now = next.cells()[j];
        let before = std::mem::replace(&mut shown[j], now);
        if force || now.symbol() == LONG || before.symbol() != now.symbol() {
            out.push(index(j));
        } else {
            next.blank(j);
        }
        j = covered(shown, next, j + 1, usize::from(now.width().max(1)) - 1);
        end = end.max(j).min(len);
    }
    end.max(from)
}

#[cfg(test)]
mod tests;
