//! Mouse events to actions, pure like `keys::map`: what a click means
//! depends on where the last frame drew what (`Hits`) and on what has the
//! keyboard. The mouse is never needed: every action has its key.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};

use crate::sources::OnScreen;
use crate::tui::keys::{Action, InputMode};
use crate::tui::rows::RowKey;

/// What was drawn where in the last frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hits {
    pub targets: Vec<(Rect, Target)>,
    /// The processes on screen and a page either side, sorted; `None`
    /// where the frame drew no process table (`tui::steer`).
    pub near: Option<Vec<u32>>,
    /// The readings asked only while shown that the frame has room for
    /// (`tui::steer`).
    pub on_screen: OnScreen,
    /// Where the frame drew a process's details: how they scroll.
    pub detail: Option<Scroll>,
}

/// A scrolled text's room: the lines one screen shows (a page), and the
/// first line shown when its end is at the bottom (the furthest it
/// scrolls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scroll {
    pub page: usize,
    pub last: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A process table row.
    Row(RowKey),
    /// A GPU's lines in the GPU list, by index.
    Gpu(u32),
}

impl Hits {
    fn at(&self, column: u16, row: u16) -> Option<Target> {
        let p = Position { x: column, y: row };
        self.targets.iter().find(|(r, _)| r.contains(p)).map(|(_, t)| *t)
    }
}

/// The wheel scrolls the table or the open list; a left click selects a
/// process row or focuses a GPU (the focused one again: all GPUs). The
/// help and the kill confirmation take no mouse at all, so a stray click
/// never answers a question.
pub fn map(event: MouseEvent, hits: &Hits, mode: InputMode) -> Option<Action> {
    if matches!(mode, InputMode::Help | InputMode::Confirm) {
        return None;
    }
    match event.kind {
        MouseEventKind::ScrollDown => Some(Action::Move(1)),
        MouseEventKind::ScrollUp => Some(Action::Move(-1)),
        MouseEventKind::Down(MouseButton::Left) if clickable(mode) => match hits.at(event.column, event.row)? {
            Target::Row(key) => Some(Action::Select(key)),
            Target::Gpu(index) => Some(Action::Focus(index)),
        },
        _ => None,
    }
}

/// Where the table and the GPU list are what the user sees and clicks.
fn clickable(mode: InputMode) -> bool {
    matches!(mode, InputMode::Dashboard | InputMode::Replay | InputMode::Filter | InputMode::Search)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    fn event(kind: MouseEventKind, column: u16, row: u16) -> MouseEvent {
        MouseEvent { kind, column, row, modifiers: KeyModifiers::NONE }
    }

    fn hits() -> Hits {
        Hits {
            targets: vec![
                (Rect::new(0, 3, 80, 2), Target::Gpu(0)),
                (Rect::new(0, 5, 80, 2), Target::Gpu(3)),
                (Rect::new(0, 12, 80, 1), Target::Row(RowKey { pid: 42, gpu: 3 })),
            ],
            near: None,
            on_screen: OnScreen::NONE,
            detail: None,
        }
    }

    #[test]
    fn a_click_selects_the_row_or_focuses_the_gpu_under_it() {
        let click = |x, y| map(event(MouseEventKind::Down(MouseButton::Left), x, y), &hits(), InputMode::Dashboard);
        assert_eq!(click(10, 12), Some(Action::Select(RowKey { pid: 42, gpu: 3 })));
        assert_eq!(click(79, 4), Some(Action::Focus(0)), "either line of a GPU");
        assert_eq!(click(0, 6), Some(Action::Focus(3)), "by the index shown, not the position");
        assert_eq!(click(10, 13), None, "nothing drawn there");
        assert_eq!(click(80, 12), None, "past the row's right end");
        let right = event(MouseEventKind::Down(MouseButton::Right), 10, 12);
        assert_eq!(map(right, &hits(), InputMode::Dashboard), None);
        let release = event(MouseEventKind::Up(MouseButton::Left), 10, 12);
        assert_eq!(map(release, &hits(), InputMode::Dashboard), None);
    }

    #[test]
    fn the_wheel_scrolls_and_dialogs_take_no_mouse() {
        let wheel = |kind, mode| map(event(kind, 0, 0), &hits(), mode);
        assert_eq!(wheel(MouseEventKind::ScrollDown, InputMode::Dashboard), Some(Action::Move(1)));
        assert_eq!(wheel(MouseEventKind::ScrollUp, InputMode::Alerts), Some(Action::Move(-1)), "the open list");
        assert_eq!(wheel(MouseEventKind::ScrollDown, InputMode::SortMenu), Some(Action::Move(1)));
        assert_eq!(wheel(MouseEventKind::ScrollDown, InputMode::Confirm), None);
        let click = event(MouseEventKind::Down(MouseButton::Left), 10, 12);
        assert_eq!(map(click, &hits(), InputMode::Confirm), None, "a click never answers the kill question");
        assert_eq!(map(click, &hits(), InputMode::Help), None);
        assert_eq!(map(click, &hits(), InputMode::Alerts), None, "the table is not on screen");
    }
}
