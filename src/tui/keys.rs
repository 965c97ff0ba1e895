//! Key presses to actions. Pure: what a key means depends only on the key
//! and on what has the keyboard (the dashboard, the filter prompt, the
//! help, a confirmation).
//!
//! `j`/`k` move, as in vim and less; killing is `K` (shift) or Delete, so
//! that a stray `k` can never open the kill dialog.

use crate::recording::player::Command;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    /// Ctrl-Z: in raw mode it is a key, not SIGTSTP.
    Suspend,
    /// A playback command for the replayed recording.
    Replay(Command),
    ToggleHelp,
    /// Esc: close the view on top, else clear the filter.
    Back,
    Move(isize),
    Page(isize),
    First,
    Last,
    FocusNext,
    FocusPrev,
    /// The GPU with this index (again: all GPUs).
    Focus(u32),
    /// A click on a process row: select it.
    Select(crate::tui::rows::RowKey),
    SortNext,
    SortReverse,
    /// F6: the sort columns in a menu.
    SortMenu,
    /// Enter in the menu: sort by the column under the cursor.
    SortPick,
    /// `w`: group the process table by container, pod or Slurm job.
    GroupByWorkload,
    /// `J`: group the process table by distributed job (ranks together).
    GroupByJob,
    /// `t` / F5: the processes as a tree of parents and children.
    Tree,
    FilterStart,
    FilterInput(char),
    FilterBackspace,
    FilterAccept,
    FilterClear,
    /// F3: the search prompt; rows stay, the selection jumps to a match.
    SearchStart,
    SearchInput(char),
    SearchBackspace,
    /// F3 in the prompt, `n` on the dashboard: the next match, wrapping.
    SearchNext,
    /// Enter: keep the selection (and the text, for `n`), close the prompt.
    SearchAccept,
    /// Esc: close the prompt and forget the text.
    SearchClose,
    OpenDetail,
    TogglePause,
    Kill,
    Confirm,
    /// `+`: the next longer interval on `update::KEY_LADDER`.
    Slower,
    /// `-`: the next shorter.
    Faster,
    /// `m`: the selected process's live segment map.
    SegmentMap,
    /// In the map: double / halve the allocation asked about.
    MapBigger,
    MapSmaller,
    /// `M`: PyTorch's memory-viewer snapshot of the selected process.
    Memviz,
    /// `A`: start the probe in the selected process (Python 3.14+).
    Attach,
    /// `a`: every active alert in full.
    AlertList,
    /// `e`: the selected process's GPU-related environment.
    Environ,
}

/// What has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputMode {
    Dashboard,
    /// The dashboard over a recording: playback keys first.
    Replay,
    Filter,
    /// The F3 search prompt.
    Search,
    Help,
    Confirm,
    /// The segment map: +/- change the allocation asked about.
    Segments,
    /// The alert list: scrolling only.
    Alerts,
    /// A process's details: the moving keys scroll them; the rest act as
    /// on the dashboard, on that process.
    Detail,
    /// The details over a recording: playback keys first.
    ReplayDetail,
    /// F6's menu: a column to sort by.
    SortMenu,
}

pub fn map(key: KeyEvent, mode: InputMode) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c' | 'C')) {
        return Some(Action::Quit);
    }
    if ctrl && matches!(key.code, KeyCode::Char('z' | 'Z')) {
        return Some(Action::Suspend);
    }
    if ctrl || key.modifiers.contains(KeyModifiers::ALT) {
        return None;
    }
    match mode {
        InputMode::Dashboard => dashboard(key.code),
        InputMode::Replay => replay(key.code).or_else(|| dashboard(key.code)),
        InputMode::Detail => detail(key.code).or_else(|| dashboard(key.code)),
        InputMode::ReplayDetail => replay(key.code).or_else(|| detail(key.code)).or_else(|| dashboard(key.code)),
        InputMode::Filter => filter(key.code),
        InputMode::Search => search(key.code),
        InputMode::Help => match key.code {
            KeyCode::Esc | KeyCode::Char('?' | 'h') | KeyCode::F(1) => Some(Action::Back),
            KeyCode::Char('q') | KeyCode::F(10) => Some(Action::Quit),
            _ => None,
        },
        InputMode::Segments => segments(key.code),
        InputMode::SortMenu => sort_menu(key.code),
        InputMode::Alerts => match key.code {
            KeyCode::Esc | KeyCode::Char('a' | 'e') => Some(Action::Back),
            KeyCode::Char('q') | KeyCode::F(10) => Some(Action::Quit),
            KeyCode::Up | KeyCode::Char('k') => Some(Action::Move(-1)),
            KeyCode::Down | KeyCode::Char('j') => Some(Action::Move(1)),
            KeyCode::PageUp => Some(Action::Page(-1)),
            KeyCode::PageDown => Some(Action::Page(1)),
            _ => None,
        },
        InputMode::Confirm => match key.code {
            KeyCode::Char('y' | 'Y') => Some(Action::Confirm),
            KeyCode::Char('n' | 'N') | KeyCode::Esc => Some(Action::Back),
            KeyCode::Char('q') => Some(Action::Quit),
            _ => None,
        },
    }
}

fn segments(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::Char('m') => Action::Back,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('+' | '=') => Action::MapBigger,
        KeyCode::Char('-' | '_') => Action::MapSmaller,
        KeyCode::Up | KeyCode::Char('k') => Action::Move(-1),
        KeyCode::Down | KeyCode::Char('j') => Action::Move(1),
        KeyCode::PageUp => Action::Page(-1),
        KeyCode::PageDown => Action::Page(1),
        KeyCode::Home => Action::First,
        _ => return None,
    })
}

/// Scrolling the details, as in less and htop: the dashboard's keys move
/// a line, a page and to either end; Space pages too, and vim's `g` and
/// `G` go to the top and the end.
fn detail(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Char(' ') => Action::Page(1),
        KeyCode::Char('g') => Action::First,
        KeyCode::Char('G') => Action::Last,
        _ => return None,
    })
}

/// Playback: Space pauses the recording (not just the view), +/- change
/// the speed (not the interval), arrows and brackets seek.
fn replay(code: KeyCode) -> Option<Action> {
    Some(Action::Replay(match code {
        KeyCode::Char(' ' | 'p') => Command::TogglePause,
        KeyCode::Char('+' | '=') => Command::Faster,
        KeyCode::Char('-' | '_') => Command::Slower,
        KeyCode::Right => Command::Seek(10_000),
        KeyCode::Left => Command::Seek(-10_000),
        KeyCode::Char(']') => Command::Seek(60_000),
        KeyCode::Char('[') => Command::Seek(-60_000),
        KeyCode::Char('n') => Command::NextAlert,
        KeyCode::Char('N') => Command::PrevAlert,
        _ => return None,
    }))
}

fn dashboard(code: KeyCode) -> Option<Action> {
    Some(match code {
        // htop's and nvitop's keys too: F10 quits, h and F1 help, F9 kills.
        KeyCode::Char('q') | KeyCode::F(10) => Action::Quit,
        KeyCode::Char('?' | 'h') | KeyCode::F(1) => Action::ToggleHelp,
        KeyCode::Esc => Action::Back,
        KeyCode::Up | KeyCode::Char('k') => Action::Move(-1),
        KeyCode::Down | KeyCode::Char('j') => Action::Move(1),
        KeyCode::PageUp => Action::Page(-1),
        KeyCode::PageDown => Action::Page(1),
        KeyCode::Home => Action::First,
        KeyCode::End => Action::Last,
        KeyCode::Tab => Action::FocusNext,
        KeyCode::BackTab => Action::FocusPrev,
        KeyCode::Char(c @ '0'..='9') => Action::Focus(u32::from(c) - u32::from('0')),
        KeyCode::Char('s') => Action::SortNext,
        KeyCode::Char('S') => Action::SortReverse,
        KeyCode::F(6) => Action::SortMenu,
        KeyCode::Char('w') => Action::GroupByWorkload,
        KeyCode::Char('J') => Action::GroupByJob,
        KeyCode::Char('t') | KeyCode::F(5) => Action::Tree,
        // htop's F3 search and F4 filter.
        KeyCode::Char('/') | KeyCode::F(4) => Action::FilterStart,
        KeyCode::F(3) => Action::SearchStart,
        KeyCode::Char('n') => Action::SearchNext,
        KeyCode::Enter => Action::OpenDetail,
        KeyCode::Char('p' | ' ') => Action::TogglePause,
        KeyCode::Char('K') | KeyCode::Delete | KeyCode::F(9) => Action::Kill,
        KeyCode::Char('+' | '=') => Action::Slower,
        KeyCode::Char('-' | '_') => Action::Faster,
        KeyCode::Char('m') => Action::SegmentMap,
        KeyCode::Char('M') => Action::Memviz,
        KeyCode::Char('A') => Action::Attach,
        KeyCode::Char('a') => Action::AlertList,
        KeyCode::Char('e') => Action::Environ,
        _ => return None,
    })
}

fn filter(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Char(c) => Action::FilterInput(c),
        KeyCode::Backspace => Action::FilterBackspace,
        KeyCode::Enter => Action::FilterAccept,
        KeyCode::Esc => Action::FilterClear,
        KeyCode::Up => Action::Move(-1),
        KeyCode::Down => Action::Move(1),
        _ => return None,
    })
}

fn sort_menu(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Esc | KeyCode::F(6) => Action::Back,
        KeyCode::Char('q') | KeyCode::F(10) => Action::Quit,
        KeyCode::Up | KeyCode::Char('k') => Action::Move(-1),
        KeyCode::Down | KeyCode::Char('j') => Action::Move(1),
        KeyCode::Home => Action::First,
        KeyCode::End => Action::Last,
        KeyCode::Enter => Action::SortPick,
        KeyCode::Char('S') => Action::SortReverse,
        _ => return None,
    })
}

/// Letters are the text searched for: the next match is F3, as in htop.
fn search(code: KeyCode) -> Option<Action> {
    Some(match code {
        KeyCode::Char(c) => Action::SearchInput(c),
        KeyCode::Backspace => Action::SearchBackspace,
        KeyCode::F(3) => Action::SearchNext,
        KeyCode::Enter => Action::SearchAccept,
        KeyCode::Esc => Action::SearchClose,
        KeyCode::Up => Action::Move(-1),
        KeyCode::Down => Action::Move(1),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn dash(code: KeyCode) -> Option<Action> {
        map(key(code), InputMode::Dashboard)
    }

    #[test]
    fn vim_keys_move_and_shift_k_kills() {
        assert_eq!(dash(KeyCode::Char('j')), Some(Action::Move(1)));
        assert_eq!(dash(KeyCode::Char('k')), Some(Action::Move(-1)));
        assert_eq!(dash(KeyCode::Down), Some(Action::Move(1)));
        assert_eq!(
            map(KeyEvent::new(KeyCode::Char('K'), KeyModifiers::SHIFT), InputMode::Dashboard),
            Some(Action::Kill)
        );
        assert_eq!(dash(KeyCode::Delete), Some(Action::Kill));
        for mode in [InputMode::Dashboard, InputMode::Replay, InputMode::Filter, InputMode::Help, InputMode::Confirm] {
            let ctrl_z = KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL);
            assert_eq!(map(ctrl_z, mode), Some(Action::Suspend), "{mode:?}");
        }
    }

    #[test]
    fn replay_keys_come_first_and_the_rest_still_work() {
        let replay = |code| map(key(code), InputMode::Replay);
        assert_eq!(replay(KeyCode::Char(' ')), Some(Action::Replay(Command::TogglePause)));
        assert_eq!(replay(KeyCode::Char('+')), Some(Action::Replay(Command::Faster)));
        assert_eq!(replay(KeyCode::Right), Some(Action::Replay(Command::Seek(10_000))));
        assert_eq!(replay(KeyCode::Char('[')), Some(Action::Replay(Command::Seek(-60_000))));
        assert_eq!(replay(KeyCode::Char('N')), Some(Action::Replay(Command::PrevAlert)));
        assert_eq!(replay(KeyCode::Char('j')), Some(Action::Move(1)));
        assert_eq!(replay(KeyCode::Char('q')), Some(Action::Quit));
        // Outside a replay, the same keys keep their dashboard meaning.
        assert_eq!(dash(KeyCode::Char(' ')), Some(Action::TogglePause));
    }

    #[test]
    fn dashboard_keys() {
        assert_eq!(dash(KeyCode::Char('q')), Some(Action::Quit));
        assert_eq!(dash(KeyCode::Char('?')), Some(Action::ToggleHelp));
        assert_eq!(dash(KeyCode::Tab), Some(Action::FocusNext));
        assert_eq!(dash(KeyCode::BackTab), Some(Action::FocusPrev));
        assert_eq!(dash(KeyCode::Char('0')), Some(Action::Focus(0)));
        assert_eq!(dash(KeyCode::Char('7')), Some(Action::Focus(7)));
        assert_eq!(dash(KeyCode::Char('s')), Some(Action::SortNext));
        assert_eq!(dash(KeyCode::Char('S')), Some(Action::SortReverse));
        assert_eq!(dash(KeyCode::Char('w')), Some(Action::GroupByWorkload));
        assert_eq!(dash(KeyCode::Char('J')), Some(Action::GroupByJob));
        assert_eq!(dash(KeyCode::Char('t')), Some(Action::Tree));
        assert_eq!(dash(KeyCode::F(5)), Some(Action::Tree));
        assert_eq!(dash(KeyCode::Char(' ')), Some(Action::TogglePause));
        assert_eq!(dash(KeyCode::Char('p')), Some(Action::TogglePause));
        assert_eq!(dash(KeyCode::Char('+')), Some(Action::Slower));
        assert_eq!(dash(KeyCode::Char('-')), Some(Action::Faster));
        assert_eq!(dash(KeyCode::PageDown), Some(Action::Page(1)));
        assert_eq!(dash(KeyCode::End), Some(Action::Last));
        assert_eq!(dash(KeyCode::Enter), Some(Action::OpenDetail));
        assert_eq!(dash(KeyCode::Char('x')), None);
        // htop's and nvitop's keys.
        assert_eq!(dash(KeyCode::F(10)), Some(Action::Quit));
        assert_eq!(dash(KeyCode::F(1)), Some(Action::ToggleHelp));
        assert_eq!(dash(KeyCode::Char('h')), Some(Action::ToggleHelp));
        assert_eq!(dash(KeyCode::F(9)), Some(Action::Kill));
        assert_eq!(map(key(KeyCode::F(1)), InputMode::Help), Some(Action::Back));
        assert_eq!(map(key(KeyCode::F(10)), InputMode::Help), Some(Action::Quit));
    }

    #[test]
    fn ctrl_c_quits_everywhere_and_other_chords_do_nothing() {
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        for mode in [InputMode::Dashboard, InputMode::Filter, InputMode::Help, InputMode::Confirm] {
            assert_eq!(map(ctrl('c'), mode), Some(Action::Quit), "{mode:?}");
            assert_eq!(map(ctrl('k'), mode), None, "{mode:?}");
        }
        let release = KeyEvent { kind: KeyEventKind::Release, ..key(KeyCode::Char('q')) };
        assert_eq!(map(release, InputMode::Dashboard), None);
    }

    #[test]
    fn the_filter_prompt_takes_letters_that_are_keys_elsewhere() {
        let f = |code| map(key(code), InputMode::Filter);
        assert_eq!(f(KeyCode::Char('q')), Some(Action::FilterInput('q')));
        assert_eq!(f(KeyCode::Char('K')), Some(Action::FilterInput('K')));
        assert_eq!(f(KeyCode::Backspace), Some(Action::FilterBackspace));
        assert_eq!(f(KeyCode::Enter), Some(Action::FilterAccept));
        assert_eq!(f(KeyCode::Esc), Some(Action::FilterClear));
    }

    #[test]
    fn f3_searches_f4_filters_as_in_htop() {
        assert_eq!(dash(KeyCode::F(4)), Some(Action::FilterStart));
        assert_eq!(dash(KeyCode::F(3)), Some(Action::SearchStart));
        assert_eq!(dash(KeyCode::Char('n')), Some(Action::SearchNext));
        let s = |code| map(key(code), InputMode::Search);
        assert_eq!(s(KeyCode::Char('n')), Some(Action::SearchInput('n')), "a letter of the text");
        assert_eq!(s(KeyCode::F(3)), Some(Action::SearchNext));
        assert_eq!(s(KeyCode::Backspace), Some(Action::SearchBackspace));
        assert_eq!(s(KeyCode::Enter), Some(Action::SearchAccept));
        assert_eq!(s(KeyCode::Esc), Some(Action::SearchClose));
        // In a replay, n stays the next alert.
        assert_eq!(map(key(KeyCode::Char('n')), InputMode::Replay), Some(Action::Replay(Command::NextAlert)));
        assert_eq!(map(key(KeyCode::F(3)), InputMode::Replay), Some(Action::SearchStart));
    }

    #[test]
    fn f6_opens_the_sort_menu_which_takes_its_own_keys() {
        assert_eq!(dash(KeyCode::F(6)), Some(Action::SortMenu));
        let m = |code| map(key(code), InputMode::SortMenu);
        assert_eq!(m(KeyCode::Char('j')), Some(Action::Move(1)));
        assert_eq!(m(KeyCode::Up), Some(Action::Move(-1)));
        assert_eq!(m(KeyCode::Enter), Some(Action::SortPick));
        assert_eq!(m(KeyCode::Esc), Some(Action::Back));
        assert_eq!(m(KeyCode::Char('S')), Some(Action::SortReverse));
        assert_eq!(m(KeyCode::Char('K')), None, "no kill from the menu");
    }

    #[test]
    fn the_details_scroll_as_in_less_and_keep_the_dashboard_s_other_keys() {
        let d = |code| map(key(code), InputMode::Detail);
        assert_eq!(d(KeyCode::Char('j')), Some(Action::Move(1)));
        assert_eq!(d(KeyCode::Up), Some(Action::Move(-1)));
        assert_eq!(d(KeyCode::PageDown), Some(Action::Page(1)));
        assert_eq!(d(KeyCode::Char(' ')), Some(Action::Page(1)), "Space pages, as in less");
        assert_eq!(d(KeyCode::PageUp), Some(Action::Page(-1)));
        assert_eq!(d(KeyCode::Char('g')), Some(Action::First));
        assert_eq!(d(KeyCode::End), Some(Action::Last));
        assert_eq!(d(KeyCode::Char('G')), Some(Action::Last));
        assert_eq!(d(KeyCode::Esc), Some(Action::Back));
        assert_eq!(d(KeyCode::Char('K')), Some(Action::Kill));
        assert_eq!(d(KeyCode::Char('p')), Some(Action::TogglePause));
        let r = |code| map(key(code), InputMode::ReplayDetail);
        assert_eq!(r(KeyCode::Char(' ')), Some(Action::Replay(Command::TogglePause)), "playback first");
        assert_eq!(r(KeyCode::Char('j')), Some(Action::Move(1)));
        assert_eq!(r(KeyCode::Char('G')), Some(Action::Last));
    }

    #[test]
    fn dialogs_take_only_their_own_keys() {
        let c = |code| map(key(code), InputMode::Confirm);
        assert_eq!(c(KeyCode::Char('y')), Some(Action::Confirm));
        assert_eq!(c(KeyCode::Char('n')), Some(Action::Back));
        assert_eq!(c(KeyCode::Esc), Some(Action::Back));
        assert_eq!(c(KeyCode::Char('K')), None, "a second K does not confirm");
        let h = |code| map(key(code), InputMode::Help);
        assert_eq!(h(KeyCode::Esc), Some(Action::Back));
        assert_eq!(h(KeyCode::Char('?')), Some(Action::Back));
        assert_eq!(h(KeyCode::Char('j')), None);
    }
}
