//! Actions applied to the state. What reaches outside the dashboard (the
//! poller's interval, a signal, quitting) comes back as an effect for the
//! run loop to carry out.

use crate::recording::player::Command;
use std::time::Duration;

use crate::tui::keys::Action;
use crate::tui::kill::{self, Signal, Target};
use crate::tui::probe_tools;
use crate::tui::rows::RowKey;
use crate::tui::rows::{SORTABLE, Sort};
use crate::tui::state::{Confirm, DetailView, State, View};

/// The intervals `+` and `-` step through, so that every step can be taken
/// back and each reads as a round value. Narrower than `--interval`'s
/// bounds (`bounds::INTERVAL`), because a key pressed a few times too often
/// should not make the dashboard itself the machine's busiest process.
pub const KEY_LADDER: [Duration; 10] = [
    Duration::from_millis(100),
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(5),
    Duration::from_secs(10),
    Duration::from_secs(15),
    Duration::from_secs(30),
    Duration::from_secs(60),
];
pub const KEY_FASTEST: Duration = KEY_LADDER[0];
pub const KEY_SLOWEST: Duration = KEY_LADDER[KEY_LADDER.len() - 1];

/// The next rung of `KEY_LADDER` above (`slower`) or below `from`; an
/// interval off the ladder (`--interval 1.5s`) goes to the nearest rung that
/// way. Past either end, `from` itself: a key never moves the interval the
/// other way from what was asked.
pub fn interval_step(from: Duration, slower: bool) -> Duration {
    let next = match slower {
        true => KEY_LADDER.iter().find(|&&d| d > from),
        false => KEY_LADDER.iter().rev().find(|&&d| d < from),
    };
    next.copied().unwrap_or(from)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Quit,
    /// Ctrl-Z: hand the terminal back to the shell until `fg`.
    Suspend,
    Replay(Command),
    SetInterval(Duration),
    Signal(Target, Signal),
    /// Start (or switch) asking this process's probe for its segment map.
    SegmentsOpen {
        pid: u32,
        ordinal: u32,
    },
    /// Nobody looks at the map any more: stop asking.
    SegmentsClose,
    /// Ask this process's probe for PyTorch's memory-viewer snapshot.
    Memviz(u32),
    /// Start the probe in this process.
    Attach(u32),
    /// Read this process's environment.
    Environ(u32),
}

pub fn apply(state: &mut State, action: Action, now_ms: u64) -> Option<Effect> {
    state.status = None;
    match action {
        Action::Quit => return Some(Effect::Quit),
        Action::Suspend => return Some(Effect::Suspend),
        Action::Replay(cmd) => return Some(Effect::Replay(cmd)),
        Action::ToggleHelp => state.views.push(View::Help),
        Action::Back => return back(state),
        Action::Move(by) => move_by(state, by),
        Action::Page(pages) => move_by(state, pages.saturating_mul(page(state) as isize)),
        Action::First => move_by(state, isize::MIN / 2),
        Action::SegmentMap => return probe_tools::open_map(state),
        Action::MapBigger => probe_tools::resize_request(state, true),
        Action::MapSmaller => probe_tools::resize_request(state, false),
        Action::Memviz => return probe_tools::memviz(state),
        Action::Attach => return probe_tools::attach(state),
        Action::Environ => return probe_tools::environ(state),
        Action::AlertList => {
            state.views.retain(|v| !matches!(v, View::Alerts { .. }));
            state.views.push(View::Alerts { scroll: 0 });
        }
        Action::Last => move_by(state, isize::MAX / 2),
        Action::FocusNext => focus_step(state, true),
        Action::FocusPrev => focus_step(state, false),
        Action::Focus(n) => focus_index(state, n),
        Action::Select(key) => select(state, key),
        Action::SortNext => state.sort = state.sort.next(),
        Action::SortReverse => state.sort.descending = !state.sort.descending,
        Action::SortMenu => {
            let cursor = SORTABLE.iter().position(|c| *c == state.sort.column).unwrap_or(0);
            state.views.retain(|v| !matches!(v, View::SortMenu { .. }));
            state.views.push(View::SortMenu { cursor });
        }
        Action::SortPick => {
            if let Some(View::SortMenu { cursor }) = state.top() {
                let column = SORTABLE[(*cursor).min(SORTABLE.len() - 1)];
                state.sort = Sort { column, descending: column.descending_by_default(), ..state.sort };
                state.views.pop();
            }
        }
        // The tree and the groupings each decide the order: one at a time.
        Action::GroupByWorkload => {
            state.sort.by_workload = !state.sort.by_workload;
            state.sort.tree &= !state.sort.by_workload;
        }
        Action::GroupByJob => {
            state.sort.by_job = !state.sort.by_job;
            state.sort.tree &= !state.sort.by_job;
        }
        Action::Tree => {
            state.sort.tree = !state.sort.tree;
            state.sort.by_workload &= !state.sort.tree;
            state.sort.by_job &= !state.sort.tree;
        }
        Action::FilterStart => state.editing_filter = true,
        Action::FilterInput(c) => state.filter.push(c),
        Action::FilterBackspace => drop(state.filter.pop()),
        Action::FilterAccept => state.editing_filter = false,
        Action::FilterClear => {
            state.filter.clear();
            state.editing_filter = false;
        }
        Action::SearchStart => {
            state.searching = true;
            state.search.clear();
        }
        Action::SearchInput(c) => {
            state.search.push(c);
            search_from(state, 0);
        }
        Action::SearchBackspace => {
            state.search.pop();
            search_from(state, 0);
        }
        Action::SearchNext => search_next(state),
        Action::SearchAccept => state.searching = false,
        Action::SearchClose => {
            state.searching = false;
            state.search.clear();
        }
        // Inside a view Enter has nothing more to open.
        Action::OpenDetail if !state.views.is_empty() => {}
        Action::OpenDetail => {
            if let Some(key) = selected_key(state) {
                state.views.push(View::Detail(DetailView::new(key)));
            }
        }
        Action::TogglePause => toggle_pause(state),
        Action::Kill => ask_to_kill(state, now_ms),
        Action::Confirm => {
            if let Some(View::Confirm(c)) = state.top()
                && state.replay.is_none()
            {
                return Some(Effect::Signal(c.target, c.signal));
            }
        }
        Action::Slower => return change_interval(state, interval_step(state.interval, true)),
        Action::Faster => return change_interval(state, interval_step(state.interval, false)),
    }
    None
}

/// The outcome of a signal the user confirmed: after SIGTERM, offer
/// SIGKILL for a process that does not go.
pub fn signal_sent(state: &mut State, signal: Signal, result: Result<(), String>) {
    let Some(View::Confirm(confirm)) = state.views.pop() else { return };
    let pid = confirm.target.pid;
    match result {
        Ok(()) if signal == Signal::Term => {
            state.status = Some(format!("SIGTERM sent to PID {pid}"));
            state.views.push(View::Confirm(Confirm { signal: Signal::Kill, after_term: true, ..confirm }));
        }
        Ok(()) => state.status = Some(format!("{} sent to PID {pid}", signal.name())),
        Err(e) => state.status = Some(e),
    }
}

fn back(state: &mut State) -> Option<Effect> {
    match state.views.pop() {
        None => state.filter.clear(),
        Some(View::Segments(_)) => {
            state.segmap = None;
            return Some(Effect::SegmentsClose);
        }
        Some(_) => {}
    }
    None
}

pub(crate) fn selected_key(state: &State) -> Option<RowKey> {
    let rows = state.rows();
    state.selected_index(&rows).map(|i| rows[i].key)
}

/// Selects the first row from `from` on that matches the search; the
/// selection stays put when none does (the prompt says "no match").
fn search_from(state: &mut State, from: usize) -> bool {
    let rows = state.rows();
    let Some(at) = crate::tui::rows::find(&rows, &state.search, from) else { return false };
    state.selected = Some(rows[at].key);
    state.selected_pos = at;
    true
}

/// F3 in the prompt, `n` after it: the match after the selected row.
fn search_next(state: &mut State) {
    if state.search.trim().is_empty() {
        if !state.searching {
            state.status = Some("nothing to search for: F3 starts a search".into());
        }
        return;
    }
    let from = state.selected_index(&state.rows()).map_or(0, |i| i + 1);
    if !search_from(state, from) && !state.searching {
        state.status = Some(format!("no match for \"{}\"", state.search));
    }
}

/// A page: of the details where they are open, else of the table.
fn page(state: &State) -> usize {
    match (state.top(), state.hits.detail) {
        (Some(View::Detail(_)), Some(room)) => room.page.max(1),
        _ => state.page.max(1),
    }
}

/// How far the details scroll before a frame has measured them: far
/// enough for any; the frame shows no more than their end.
const DETAIL_SCROLL: usize = 10_000;

fn move_by(state: &mut State, by: isize) {
    let last = state.hits.detail.map_or(DETAIL_SCROLL, |room| room.last);
    if let Some(View::Detail(view)) = state.views.last_mut() {
        view.scroll = view.scroll.saturating_add_signed(by).min(last);
        return;
    }
    if let Some(View::Segments(view)) = state.views.last_mut() {
        view.scroll = view.scroll.saturating_add_signed(by).min(probe_tools::MAX_SCROLL);
        return;
    }
    if let Some(View::SortMenu { cursor }) = state.views.last_mut() {
        *cursor = cursor.saturating_add_signed(by).min(SORTABLE.len() - 1);
        return;
    }
    if let Some(View::Alerts { scroll }) = state.views.last_mut() {
        // Far enough for any list; the view stops at its last line.
        *scroll = scroll.saturating_add_signed(by).min(10_000);
        return;
    }
    let rows = state.rows();
    let Some(at) = state.selected_index(&rows) else { return };
    let to = at.saturating_add_signed(by).min(rows.len() - 1);
    state.selected = Some(rows[to].key);
    state.selected_pos = to;
}

fn gpu_indices(state: &State) -> Vec<u32> {
    state.shown().map_or_else(Vec::new, |s| s.gpus.iter().map(|g| g.index).collect())
}

/// Every focus Tab can take after "all": each GPU, then its MIG devices.
fn focus_targets(state: &State) -> Vec<(u32, Option<u32>)> {
    let Some(snap) = state.shown() else { return Vec::new() };
    let each = |g: &crate::model::Gpu| {
        std::iter::once((g.index, None))
            .chain(g.mig_devices.iter().map(|m| (g.index, Some(m.index))))
            .collect::<Vec<_>>()
    };
    snap.gpus.iter().flat_map(each).collect()
}

/// Tab walks all → first GPU → its MIG devices → … → last GPU → all.
fn focus_step(state: &mut State, forward: bool) {
    let targets = focus_targets(state);
    let now = state.focus.map(|g| (g, state.focus_mig));
    let at = now.and_then(|n| targets.iter().position(|t| *t == n));
    let next = match (at, forward) {
        (None, true) => targets.first().copied(),
        (None, false) => targets.last().copied(),
        (Some(i), true) => targets.get(i + 1).copied(),
        (Some(i), false) => i.checked_sub(1).map(|i| targets[i]),
    };
    (state.focus, state.focus_mig) = (next.map(|t| t.0), next.and_then(|t| t.1));
}

/// A digit is the GPU index shown on screen (as nvidia-smi and nvitop
/// number them); the focused GPU's own digit goes back to all GPUs.
fn focus_index(state: &mut State, index: u32) {
    if !gpu_indices(state).contains(&index) {
        state.status = Some(format!("there is no GPU {index} here"));
        return;
    }
    let again = state.focus == Some(index) && state.focus_mig.is_none();
    state.focus = if again { None } else { Some(index) };
    state.focus_mig = None;
}

/// A clicked row, if it is still listed.
fn select(state: &mut State, key: RowKey) {
    let rows = state.rows();
    if let Some(at) = rows.iter().position(|r| r.key == key) {
        state.selected = Some(key);
        state.selected_pos = at;
    }
}

fn toggle_pause(state: &mut State) {
    state.frozen = match state.frozen.take() {
        Some(_) => None,
        None => state.latest.clone(),
    };
}

fn change_interval(state: &mut State, to: Duration) -> Option<Effect> {
    state.status = Some(format!("interval {}", crate::tui::render::interval_text(to)));
    if to == state.interval {
        return None;
    }
    state.interval = to;
    Some(Effect::SetInterval(to))
}

fn ask_to_kill(state: &mut State, now_ms: u64) {
    // A recorded PID may belong to any process today.
    if state.replay.is_some() {
        state.status = Some("replay: gpuscope sends no signals (a recorded PID is not today's process)".into());
        return;
    }
    if state.read_only {
        state.status = Some("read-only (--read-only): gpuscope sends no signals".into());
        return;
    }
    let key = match state.top() {
        Some(View::Detail(view)) => Some(view.key),
        _ => selected_key(state),
    };
    let Some(key) = key else { return };
    let Some(process) = state.shown().and_then(|s| s.processes.iter().find(|p| p.pid == key.pid)).cloned() else {
        state.status = Some(format!("PID {} is gone", key.pid));
        return;
    };
    if probe_tools::simulated(state) {
        state.status = Some(format!("PID {} is a simulated process (--demo): no signal sent", key.pid));
        return;
    }
    if process.other_namespace {
        // The same number here may be some unrelated local process.
        state.status = Some(format!("PID {} is the host's, not this PID namespace's: nothing to signal", key.pid));
        return;
    }
    match kill::target(key.pid) {
        Err(e) => state.status = Some(e),
        Ok(target) => state.views.push(View::Confirm(Confirm {
            target,
            signal: Signal::Term,
            user: process.user.as_deref().unwrap_or("n/a").to_owned(),
            command: process.command.as_deref().or(process.name.as_deref()).unwrap_or("n/a").to_owned(),
            age: process.start_time.map(|t| Duration::from_millis(now_ms.saturating_sub(t.time_unix_ms))),
            after_term: false,
        })),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{Gpu, GpuState, Snapshot};
    use crate::tui::{Clock, TuiOptions};

    fn options(interval: Duration) -> TuiOptions {
        TuiOptions { color: false, interval, ..TuiOptions::offscreen(Clock::manual(0)) }
    }

    fn state(interval: Duration) -> State {
        let mut state = State::new(&options(interval));
        let gpus = vec![Gpu::blank(0, GpuState::Ok), Gpu::blank(3, GpuState::Ok)];
        let snap: Snapshot = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "time": "x", "time_unix_ms": 0, "interval_ms": 1000, "collection_ms": 0.0,
            "simulated": false, "host": {}, "driver": {}, "gpus": gpus, "processes": [], "alerts": [],
            "sources": { "nvml": { "ok": true, "error": null }, "host": { "ok": true, "error": null },
                         "probes": { "ok": true, "error": null, "directory": null, "files": 0, "skipped": 0, "last_skipped": null } }
        }))
        .unwrap();
        state.on_snapshot(Arc::new(snap));
        state
    }

    #[test]
    fn the_clock_wakes_the_loop_only_when_the_header_would_change() {
        let s = state(Duration::from_secs(1));
        let ms = Duration::from_millis;
        assert_eq!(s.clock_wait(0), ms(2001), "fresh data: asleep until it turns stale");
        assert_eq!(s.clock_wait(1500), ms(501));
        assert!(!s.ticking(2000) && s.ticking(2001));
        assert_eq!(s.clock_wait(2001), ms(1000), "stale: the age counts in seconds");
        let none = State::new(&options(Duration::from_secs(1)));
        assert_eq!(none.clock_wait(5), ms(1000), "no data yet: the header says how long it has waited");
    }

    #[test]
    fn the_interval_steps_along_the_ladder_within_bounds() {
        let mut s = state(Duration::from_secs(1));
        assert_eq!(apply(&mut s, Action::Slower, 0), Some(Effect::SetInterval(Duration::from_secs(2))));
        for _ in 0..20 {
            apply(&mut s, Action::Slower, 0);
        }
        assert_eq!(s.interval, KEY_SLOWEST);
        assert_eq!(apply(&mut s, Action::Slower, 0), None, "nothing to change at the maximum");
        let mut s = state(Duration::from_secs(1));
        for _ in 0..20 {
            apply(&mut s, Action::Faster, 0);
        }
        assert_eq!(s.interval, KEY_FASTEST);
        // Below the ladder (`--interval 10ms`), `-` never lengthens it and
        // `+` goes to its first rung.
        let mut s = state(Duration::from_millis(10));
        assert_eq!(apply(&mut s, Action::Faster, 0), None);
        assert_eq!(apply(&mut s, Action::Slower, 0), Some(Effect::SetInterval(KEY_FASTEST)));
        // Above it (`--interval 5m`), `+` never shortens it.
        let mut s = state(Duration::from_secs(300));
        assert_eq!(apply(&mut s, Action::Slower, 0), None);
        assert_eq!(apply(&mut s, Action::Faster, 0), Some(Effect::SetInterval(KEY_SLOWEST)));
    }

    #[test]
    fn every_step_of_the_interval_can_be_taken_back() {
        // At either end the first key has nothing to do.
        for &rung in &KEY_LADDER[..KEY_LADDER.len() - 1] {
            let mut s = state(rung);
            apply(&mut s, Action::Slower, 0);
            apply(&mut s, Action::Faster, 0);
            assert_eq!(s.interval, rung, "+ then - from {rung:?}");
        }
        for &rung in &KEY_LADDER[1..] {
            let mut s = state(rung);
            apply(&mut s, Action::Faster, 0);
            apply(&mut s, Action::Slower, 0);
            assert_eq!(s.interval, rung, "- then + from {rung:?}");
        }
        // From 1s to the cap and back down, the way QA walked it.
        let mut s = state(Duration::from_secs(1));
        let mut up = vec![];
        while apply(&mut s, Action::Slower, 0).is_some() {
            up.push(s.status.clone().unwrap());
        }
        assert_eq!(up.last().map(String::as_str), Some("interval 1m"));
        let mut down = vec![];
        while s.interval > Duration::from_secs(1) {
            apply(&mut s, Action::Faster, 0);
            down.push(s.status.clone().unwrap());
        }
        assert_eq!(s.interval, Duration::from_secs(1));
        assert_eq!(down, ["interval 30s", "interval 15s", "interval 10s", "interval 5s", "interval 2s", "interval 1s"]);
        // Off the ladder (`--interval 1.5s`): the next rung each way.
        assert_eq!(interval_step(Duration::from_millis(1500), true), Duration::from_secs(2));
        assert_eq!(interval_step(Duration::from_millis(1500), false), Duration::from_secs(1));
    }

    /// GPUs at indices 0 and 3 with UUIDs, as `state` has them, placed by
    /// `layout` (index, uuid) and each with its own used memory.
    fn gpus_at(layout: &[(u32, &str, u64)]) -> Arc<Snapshot> {
        let mut snap = (*state(Duration::from_secs(1)).latest.unwrap()).clone();
        snap.time.time_unix_ms += 1000;
        snap.gpus = layout
            .iter()
            .map(|&(i, uuid, used)| {
                let mut g = Gpu::blank(i, GpuState::Ok);
                g.uuid = Some(uuid.into());
                g.memory.used = Some(used);
                g
            })
            .collect();
        Arc::new(snap)
    }

    #[test]
    fn focus_and_history_follow_a_gpu_to_its_new_index() {
        let mut s = state(Duration::from_secs(1));
        s.on_snapshot(gpus_at(&[(0, "GPU-a", 10), (1, "GPU-b", 20)]));
        apply(&mut s, Action::Focus(1), 0);
        assert_eq!(s.focus, Some(1));
        // GPU a leaves: b is now index 0, and a new GPU c takes index 1.
        s.on_snapshot(gpus_at(&[(0, "GPU-b", 21), (1, "GPU-c", 30)]));
        assert_eq!(s.focus, Some(0), "the focus stays on GPU b");
        let store = crate::history::lock(&s.history);
        let used: Vec<Option<f64>> = store
            .gpu(Some(1))
            .map(|g| g.recent(u64::MAX).map(|b| b.get(crate::history::gpu::USED).max()).collect())
            .unwrap_or_default();
        drop(store);
        assert_eq!(used, [Some(30.0)], "index 1's chart starts afresh with GPU c");
        s.on_snapshot(gpus_at(&[(0, "GPU-c", 31)]));
        assert_eq!(s.focus, None, "GPU b left: back to all GPUs");
    }

    #[test]
    fn tab_walks_the_gpus_and_back_to_all() {
        let mut s = state(Duration::from_secs(1));
        let mut seen = Vec::new();
        for _ in 0..3 {
            apply(&mut s, Action::FocusNext, 0);
            seen.push(s.focus);
        }
        assert_eq!(seen, [Some(0), Some(3), None]);
        apply(&mut s, Action::FocusPrev, 0);
        assert_eq!(s.focus, Some(3));
        apply(&mut s, Action::Focus(0), 0);
        assert_eq!(s.focus, Some(0), "a digit is the index shown");
        apply(&mut s, Action::Focus(5), 0);
        assert_eq!(s.focus, Some(0));
        assert!(s.status.as_deref().is_some_and(|m| m.contains("no GPU 5")));
        apply(&mut s, Action::Focus(3), 0);
        assert_eq!(s.focus, Some(3));
        apply(&mut s, Action::Focus(3), 0);
        assert_eq!(s.focus, None, "the focused GPU's digit again: all GPUs");
    }

    #[test]
    fn the_tree_and_the_groupings_exclude_each_other() {
        let mut s = state(Duration::from_secs(1));
        apply(&mut s, Action::GroupByWorkload, 0);
        apply(&mut s, Action::GroupByJob, 0);
        apply(&mut s, Action::Tree, 0);
        assert!(s.sort.tree && !s.sort.by_workload && !s.sort.by_job);
        apply(&mut s, Action::GroupByJob, 0);
        assert!(!s.sort.tree && s.sort.by_job);
        apply(&mut s, Action::Tree, 0);
        apply(&mut s, Action::GroupByWorkload, 0);
        assert!(!s.sort.tree && s.sort.by_workload && !s.sort.by_job);
        apply(&mut s, Action::GroupByWorkload, 0);
        apply(&mut s, Action::Tree, 0);
        apply(&mut s, Action::Tree, 0);
        assert_eq!(s.sort, crate::tui::rows::Sort::default(), "t twice: as before");
    }

    #[test]
    fn the_sort_menu_starts_at_the_column_in_force_and_picks_another() {
        let mut s = state(Duration::from_secs(1));
        apply(&mut s, Action::SortNext, 0);
        apply(&mut s, Action::SortMenu, 0);
        assert_eq!(s.views, [View::SortMenu { cursor: 1 }], "ALLOC is second");
        apply(&mut s, Action::Last, 0);
        apply(&mut s, Action::Move(-1), 0);
        assert_eq!(s.views, [View::SortMenu { cursor: SORTABLE.len() - 2 }]);
        apply(&mut s, Action::Move(isize::MAX / 2), 0);
        assert_eq!(s.views, [View::SortMenu { cursor: SORTABLE.len() - 1 }], "stops at the last");
        apply(&mut s, Action::SortPick, 0);
        assert!(s.views.is_empty());
        assert_eq!(s.sort.column, crate::tui::rows::Column::Command);
        assert!(!s.sort.descending, "names read best in order");
        apply(&mut s, Action::SortPick, 0);
        assert_eq!(s.sort.column, crate::tui::rows::Column::Command, "Enter outside the menu picks nothing");
    }

    #[test]
    fn esc_closes_the_top_view_then_clears_the_filter() {
        let mut s = state(Duration::from_secs(1));
        s.filter = "py".into();
        apply(&mut s, Action::ToggleHelp, 0);
        apply(&mut s, Action::Back, 0);
        assert!(s.views.is_empty());
        assert_eq!(s.filter, "py");
        apply(&mut s, Action::Back, 0);
        assert!(s.filter.is_empty());
    }

    #[test]
    fn after_sigterm_comes_the_offer_of_sigkill_and_errors_end_it() {
        let mut s = state(Duration::from_secs(1));
        let confirm = Confirm {
            target: Target { pid: 42, start_ticks: 7 },
            signal: Signal::Term,
            user: "alice".into(),
            command: "python3".into(),
            age: None,
            after_term: false,
        };
        s.views.push(View::Confirm(confirm));
        assert_eq!(
            apply(&mut s, Action::Confirm, 0),
            Some(Effect::Signal(Target { pid: 42, start_ticks: 7 }, Signal::Term))
        );
        signal_sent(&mut s, Signal::Term, Ok(()));
        assert!(matches!(s.top(), Some(View::Confirm(c)) if c.signal == Signal::Kill && c.after_term));
        signal_sent(&mut s, Signal::Kill, Err("PID 42 has already exited; nothing sent".into()));
        assert!(s.views.is_empty());
        assert_eq!(s.status.as_deref(), Some("PID 42 has already exited; nothing sent"));
    }

    #[test]
    fn the_interval_reads_as_people_say_it() {
        let mut s = state(Duration::from_millis(1875));
        apply(&mut s, Action::Faster, 0);
        assert_eq!(s.status.as_deref(), Some("interval 1s"), "the rung below, not 937ms 500us");
        for rung in KEY_LADDER {
            let text = crate::tui::render::interval_text(rung);
            assert!(
                ["100ms", "250ms", "500ms", "1s", "2s", "5s", "10s", "15s", "30s", "1m"].contains(&text.as_str()),
                "{text}"
            );
        }
        let text = crate::tui::render::interval_text;
        assert_eq!(text(Duration::from_millis(10)), "10ms");
        assert_eq!(text(Duration::from_millis(937)), "937ms");
        assert_eq!(text(Duration::from_millis(3750)), "3.75s", "exact, not rounded to 3.8s");
        assert_eq!(text(Duration::from_millis(1875)), "1.875s");
        assert_eq!(text(Duration::from_secs(60)), "1m");
    }

    #[test]
    fn enter_inside_a_view_opens_nothing_more() {
        let mut s = state(Duration::from_secs(1));
        s.views.push(View::Detail(DetailView::new(RowKey { pid: 1, gpu: 0 })));
        apply(&mut s, Action::OpenDetail, 0);
        assert_eq!(s.views.len(), 1);
        s.views = vec![View::Help];
        apply(&mut s, Action::OpenDetail, 0);
        assert_eq!(s.views, vec![View::Help]);
    }

    #[test]
    fn no_sigkill_offer_for_a_process_that_left() {
        let mut s = state(Duration::from_secs(1));
        let target = Target { pid: 42, start_ticks: 7 };
        let confirm = Confirm {
            target,
            signal: Signal::Kill,
            user: "a".into(),
            command: "p".into(),
            age: None,
            after_term: true,
        };
        s.views.push(View::Confirm(confirm));
        let mut snap = (**s.latest.as_ref().unwrap()).clone();
        snap.time.time_unix_ms += 1000;
        s.on_snapshot(Arc::new(snap));
        assert!(s.views.is_empty(), "PID 42 is on no GPU");
        assert!(s.status.as_deref().is_some_and(|m| m.contains("left the GPU after SIGTERM")), "{:?}", s.status);
    }

    #[test]
    fn read_only_refuses_before_looking_at_the_process() {
        let mut s = state(Duration::from_secs(1));
        s.read_only = true;
        assert_eq!(apply(&mut s, Action::Kill, 0), None);
        assert!(s.views.is_empty());
        assert!(s.status.as_deref().is_some_and(|m| m.contains("read-only")));
    }

    #[test]
    fn a_host_pid_seen_from_a_container_is_never_offered_a_signal() {
        let mut s = state(Duration::from_secs(1));
        // This test process's own PID stands for a local process that NVML's
        // host PID happens to equal.
        let me = std::process::id();
        let mut snap = (**s.shown().unwrap()).clone();
        snap.processes = vec![
            serde_json::from_value(serde_json::json!({
                "pid": me, "gpus": [{ "index": 0, "type": "compute", "used_memory": 1 }],
                "gpu_memory_total": 1, "name": "python3", "user": null, "command": null,
                "start_time": null, "start_time_unix_ms": null, "parent_pid": null,
                "cpu_percent": null, "host_memory": null, "allocator": null, "workload": null,
                "other_namespace": true
            }))
            .unwrap(),
        ];
        s.on_snapshot(Arc::new(snap));
        assert_eq!(apply(&mut s, Action::Kill, 0), None);
        assert!(s.views.is_empty(), "no confirmation offered");
        assert!(s.status.as_deref().is_some_and(|m| m.contains("the host's")), "{:?}", s.status);
    }
}
