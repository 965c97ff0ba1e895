//! Whose CPU time and resident memory the poller reads for the dashboard.
//! A process's `statm` and CPU-time clock are the largest part of a tick
//! over hundreds of processes (at 8 x 512, 42 % of the dashboard's CPU
//! time by `perf`, most of it the kernel summing each process's resident
//! pages over every CPU: `task_statm` on Linux 6.18), and the table shows
//! a few dozen rows. So the poller reads
//! those of the rows on screen and a page either side, where a key that
//! scrolls lands; every process's where the order is by CPU or host
//! memory. A row further away shows `n/a` in those two columns until the
//! tick after it comes near, and a paused view keeps what its snapshot
//! read. JSON, the exporter and recordings read every process, as before.
//!
//! Likewise which of the clocks and PCIe rates the driver is asked for
//! (`sources::OnScreen`): those a GPU line has room for, or the detail
//! view's board line shows, from the tick after the frame that first
//! shows them; none on an 80-column terminal, where they were four clock
//! calls and two field-value calls (0.3 ms of the driver's CPU each) a
//! GPU a tick that nothing drew. Nothing else in the dashboard's process reads
//! them: the history keeps no clocks or PCIe rates, the dashboard records
//! nothing, and the health verdict's reasons for held-down clocks are
//! asked with the rest of the health readings. A view that hides the GPU
//! lines (the alert list, the environment, the segment map) stops the
//! asking until it closes; a paused view asks what it has room for, so
//! that the figures are there when it resumes.

use std::sync::Arc;

use crate::poller::PollerControl;
use crate::sources::{Figures, OnScreen};
use crate::tui::rows::Column;
use crate::tui::state::State;

/// What the poller was last told, so that it is told only of changes.
#[derive(Debug, Default)]
pub struct Steer {
    sent: Option<Figures>,
    on_screen: Option<OnScreen>,
}

impl Steer {
    /// After each frame.
    pub fn after_frame(&mut self, state: &State, control: &PollerControl) {
        if self.on_screen != Some(state.hits.on_screen) {
            control.set_on_screen(state.hits.on_screen);
            self.on_screen = Some(state.hits.on_screen);
        }
        let unchanged = match (&self.sent, state.hits.near.as_deref()) {
            // The same PIDs as last frame, the usual case: nothing made.
            (Some(Figures::Of(sent)), Some(near)) => **sent == *near && !needs_all(state),
            _ => false,
        };
        if unchanged {
            return;
        }
        let Some(wanted) = wanted(state) else { return };
        if self.sent.as_ref() != Some(&wanted) {
            control.set_figures(wanted.clone());
            self.sent = Some(wanted);
        }
    }
}

/// `None`: as before. Before the first snapshot nothing is known to be on
/// screen, and every process is read; a view drawn over the table (a
/// process's details, the alert list) keeps the table's last set, which
/// holds the process a detail view was opened on.
pub fn wanted(state: &State) -> Option<Figures> {
    state.shown()?;
    if needs_all(state) {
        return Some(Figures::All);
    }
    state.hits.near.as_deref().map(|pids| Figures::Of(Arc::from(pids)))
}

/// An order by CPU or host memory needs every process's figure.
fn needs_all(state: &State) -> bool {
    matches!(state.sort.column, Column::Cpu | Column::HostMem)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Gpu, GpuState, Snapshot};
    use crate::tui::TuiOptions;

    fn state() -> State {
        let mut s = State::new(&TuiOptions::offscreen(crate::tui::Clock::manual(0)));
        let snap: Snapshot = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "time": "x", "time_unix_ms": 0, "interval_ms": 1000, "collection_ms": 0.0,
            "simulated": false, "host": {}, "driver": {}, "gpus": [Gpu::blank(0, GpuState::Ok)], "processes": [],
            "alerts": [],
            "sources": { "nvml": { "ok": true, "error": null }, "host": { "ok": true, "error": null },
                         "probes": { "ok": true, "error": null, "directory": null, "files": 0, "skipped": 0, "last_skipped": null } }
        }))
        .expect("a snapshot");
        s.on_snapshot(Arc::new(snap));
        s
    }

    #[test]
    fn the_rows_near_the_screen_unless_the_order_needs_every_process() {
        let mut s = State::new(&TuiOptions::offscreen(crate::tui::Clock::manual(0)));
        s.hits.near = Some(vec![3, 7]);
        assert_eq!(wanted(&s), None, "no snapshot yet: every process, as the poller starts");
        let mut s = state();
        assert_eq!(wanted(&s), None, "no table drawn yet");
        s.hits.near = Some(vec![3, 7]);
        assert_eq!(wanted(&s), Some(Figures::Of(Arc::from([3, 7]))));
        for column in [Column::Cpu, Column::HostMem] {
            s.sort.column = column;
            assert_eq!(wanted(&s), Some(Figures::All), "{column:?}");
        }
        s.sort.column = Column::GpuMem;
        s.hits.near = None;
        assert_eq!(wanted(&s), None, "a view over the table keeps the table's set");
    }
}
