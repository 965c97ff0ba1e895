//! The dashboard's loop driven the way `gpuscope` drives it, with scripted
//! key events and snapshots instead of a terminal and a poller, and the
//! screen read back from a test backend after each step.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_fixtures;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use gpuscope::model::Snapshot;
use gpuscope::poller::PollerControl;
use gpuscope::tui::term::Term;
use gpuscope::tui::{TuiOptions, run_loop};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tui_fixtures::{SharedBackend, Spec, T0, many_processes, options, snapshot, snapshot_at};

struct Dashboard {
    screen: SharedBackend,
    keys: mpsc::UnboundedSender<io::Result<Event>>,
    snapshots: watch::Sender<Option<Arc<Snapshot>>>,
    done: JoinHandle<io::Result<()>>,
}

impl Dashboard {
    fn start(first: Option<Snapshot>, control: Option<PollerControl>, options: TuiOptions) -> Self {
        let screen = SharedBackend::new(80, 24);
        let (keys, mut rx) = mpsc::unbounded_channel();
        let events = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let (snapshots, snap_rx) = watch::channel(first.map(Arc::new));
        let mut terminal = Term::new(screen.clone()).unwrap();
        let done = tokio::spawn(async move { run_loop(&mut terminal, events, snap_rx, control, options).await });
        Self { screen, keys, snapshots, done }
    }

    fn press(&self, code: KeyCode) {
        self.keys.send(Ok(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))).unwrap();
    }

    fn typed(&self, text: &str) {
        text.chars().for_each(|c| self.press(KeyCode::Char(c)));
    }

    fn publish(&self, snap: Snapshot) {
        self.snapshots.send_replace(Some(Arc::new(snap)));
    }

    /// Waits until the screen satisfies `ok`; the loop may draw a frame
    /// period after the event.
    async fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        for _ in 0..500 {
            let screen = self.screen.screen();
            if ok(&screen) {
                return screen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the screen never showed {what}:\n{}", self.screen.screen());
    }

    async fn shows(&self, text: &str) -> String {
        self.wait_for(text, |s| s.contains(text)).await
    }

    async fn hides(&self, text: &str) -> String {
        self.wait_for(&format!("no {text:?}"), |s| !s.contains(text)).await
    }

    async fn quit(self) {
        self.press(KeyCode::Char('q'));
        let ended = tokio::time::timeout(Duration::from_secs(5), self.done).await;
        ended.expect("q ends the loop").unwrap().unwrap();
    }
}

fn four_gpus() -> Option<Snapshot> {
    Some(snapshot(Spec::gpus(4).probed()))
}

#[tokio::test]
async fn waits_for_the_first_snapshot_then_draws_it() {
    let d = Dashboard::start(None, None, options());
    d.shows("waiting for the first snapshot").await;
    d.publish(snapshot(Spec::gpus(2)));
    d.shows("NVIDIA H100 80GB HBM3").await;
    d.quit().await;
}

#[tokio::test]
async fn question_mark_opens_help_and_esc_closes_it() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPUs").await;
    d.press(KeyCode::Char('?'));
    d.shows("this help").await;
    d.press(KeyCode::Esc);
    d.hides("this help").await;
    d.quit().await;
}

#[tokio::test]
async fn slash_filters_as_you_type_and_esc_clears() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("Processes 4").await;
    d.press(KeyCode::Char('/'));
    d.typed("svc-");
    let screen = d.shows("Processes 1").await;
    assert!(screen.contains("vllm serve") && !screen.contains("train.py"), "{screen}");
    // While typing, q is a letter of the filter, not quit.
    d.typed("q");
    d.shows("Processes 0").await;
    d.press(KeyCode::Backspace);
    d.press(KeyCode::Enter);
    d.shows("Processes 1").await;
    d.press(KeyCode::Esc);
    d.shows("Processes 4").await;
    d.quit().await;
}

#[tokio::test]
async fn s_changes_the_sort_and_capital_s_reverses_it() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPU MEM▼").await;
    d.press(KeyCode::Char('s'));
    d.shows("ALLOC▼").await;
    d.press(KeyCode::Char('S'));
    d.shows("ALLOC▲").await;
    d.quit().await;
}

#[tokio::test]
async fn tab_and_digits_focus_a_gpu() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("focus: all GPUs").await;
    d.press(KeyCode::Tab);
    let screen = d.shows("focus: GPU 0").await;
    assert!(screen.contains("Processes 1"), "{screen}");
    d.press(KeyCode::Char('2'));
    d.shows("focus: GPU 2").await;
    d.press(KeyCode::Char('2'));
    d.shows("focus: all GPUs").await;
    d.quit().await;
}

#[tokio::test]
async fn selection_moves_with_j_k_and_enter_opens_details() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.wait_for("GPU 2's row selected", |s| s.lines().any(|l| l.starts_with(">") && l.contains("4123403"))).await;
    d.press(KeyCode::Char('j'));
    d.wait_for("the next row selected", |s| s.lines().any(|l| l.starts_with(">") && l.contains("4123402"))).await;
    d.press(KeyCode::End);
    d.wait_for("the last row selected", |s| s.lines().any(|l| l.starts_with(">") && l.contains("4123404"))).await;
    d.press(KeyCode::Char('k'));
    d.press(KeyCode::Enter);
    d.shows("PID 4123401 on GPU 0").await;
    d.press(KeyCode::Esc);
    d.hides("Esc: back").await;
    d.quit().await;
}

#[tokio::test]
async fn p_freezes_the_view_while_snapshots_keep_coming() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("62.0/79.6 GiB").await;
    d.press(KeyCode::Char('p'));
    d.shows("PAUSED at 19:30:00").await;
    // GPU 1's memory moves in the new snapshot: 62.0 becomes 66.0 GiB.
    d.publish(snapshot_at(Spec::gpus(4).probed(), T0 + 1000, 10));
    // A key round trip after the snapshot, so the loop has seen it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    d.press(KeyCode::Char('?'));
    d.shows("this help").await;
    d.press(KeyCode::Esc);
    let frozen = d.hides("this help").await;
    assert!(frozen.contains("62.0/79.6 GiB") && !frozen.contains("66.0/79.6 GiB"), "{frozen}");
    d.press(KeyCode::Char(' '));
    d.shows("66.0/79.6 GiB").await;
    d.hides("PAUSED").await;
    d.quit().await;
}

/// A poller on scripted sources, for what the dashboard tells it.
fn idle_poller() -> (gpuscope::poller::SnapshotRx, PollerControl, std::thread::JoinHandle<()>) {
    use gpuscope::analysis::Analyzer;
    use gpuscope::analysis::config::{AlertsConfig, HistoryConfig};
    use gpuscope::probe::files::fake::ScriptedProbes;
    use gpuscope::sources::fake::{ScriptedGpu, ScriptedHost};
    let collector = gpuscope::collect::Collector {
        gpu: Box::new(ScriptedGpu::new([])),
        host: Box::new(ScriptedHost::new([])),
        probes: Box::new(ScriptedProbes::new([])),
        analyzer: Analyzer::new(&HistoryConfig::default(), AlertsConfig::default()),
        interval: Duration::from_secs(1),
        simulated: false,
        fallback: None,
        reads: gpuscope::collect::Reads::ALL,
    };
    gpuscope::poller::spawn(collector).unwrap()
}

#[tokio::test]
async fn plus_and_minus_change_the_pollers_interval() {
    let (_rx, control, _poller) = idle_poller();
    let d = Dashboard::start(four_gpus(), Some(control.clone()), options());
    d.shows("every 1s").await;
    d.press(KeyCode::Char('+'));
    d.shows("every 2s").await;
    assert_eq!(control.interval(), Duration::from_secs(2));
    for _ in 0..6 {
        d.press(KeyCode::Char('-'));
    }
    d.shows("every 100ms").await;
    assert_eq!(control.interval(), Duration::from_millis(100), "the ladder stops at 100ms");
    d.quit().await;
}

/// The dashboard tells the poller whose CPU time and host memory to read:
/// the rows near the screen, and every process's once the order is by CPU.
#[tokio::test]
async fn the_poller_reads_the_figures_of_the_rows_near_the_screen() {
    use gpuscope::sources::Figures;
    let (_rx, control, _poller) = idle_poller();
    assert_eq!(control.figures(), Figures::All, "every process's until the dashboard says");
    let d = Dashboard::start(Some(many_processes(100)), Some(control.clone()), options());
    d.shows("1099").await;
    let near = loop {
        if let Figures::Of(pids) = control.figures() {
            break pids;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(near.contains(&1099) && !near.contains(&1000) && near.is_sorted(), "{near:?}");
    d.press(KeyCode::Char('s'));
    d.shows("sort ALLOC").await;
    // Past RESERVED, FRAG, PEAK, UTIL%, GMBW% and DATA% to CPU%.
    for _ in 0..7 {
        d.press(KeyCode::Char('s'));
    }
    d.shows("sort CPU").await;
    assert_eq!(control.figures(), Figures::All);
    d.quit().await;
}

/// The dashboard tells the poller which of the clocks and PCIe rates it
/// has on screen: none on an 80-column terminal with Hopper's activity
/// counters, both in a process's details, both on a wide one.
#[tokio::test]
async fn the_poller_asks_for_the_clocks_and_pcie_rates_only_while_they_are_on_screen() {
    use gpuscope::sources::OnScreen;
    let (_rx, control, _poller) = idle_poller();
    let told = |want: OnScreen| {
        let control = control.clone();
        async move {
            for _ in 0..500 {
                if control.on_screen() == Some(want) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("the poller was never told {want:?}: {:?}", control.on_screen());
        }
    };
    let both = OnScreen { clocks: true, pcie: true };
    let d = Dashboard::start(Some(snapshot(Spec::gpus(4).activity())), Some(control.clone()), options());
    d.shows("GPUs").await;
    told(OnScreen::NONE).await;
    d.press(KeyCode::Enter);
    d.shows("Esc: back").await;
    told(both).await;
    d.press(KeyCode::Esc);
    d.hides("Esc: back").await;
    told(OnScreen::NONE).await;
    d.screen.0.lock().unwrap().resize(300, 50);
    d.keys.send(Ok(Event::Resize(300, 50))).unwrap();
    told(both).await;
    d.quit().await;
}

#[tokio::test]
async fn q_ends_the_loop_and_ctrl_c_too() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPUs").await;
    d.quit().await;
    let d = Dashboard::start(four_gpus(), None, options());
    d.keys.send(Ok(Event::Key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)))).unwrap();
    tokio::time::timeout(Duration::from_secs(5), d.done).await.expect("Ctrl-C ends the loop").unwrap().unwrap();
}

#[tokio::test]
async fn a_resize_redraws_at_the_new_size() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPUs").await;
    d.screen.0.lock().unwrap().resize(200, 50);
    d.keys.send(Ok(Event::Resize(200, 50))).unwrap();
    let wide = d.shows("driver 560.35.03").await;
    assert!(wide.lines().count() == 50 && wide.contains("History"), "{wide}");
    d.screen.0.lock().unwrap().resize(20, 5);
    d.keys.send(Ok(Event::Resize(20, 5))).unwrap();
    d.shows("terminal too").await;
    d.quit().await;
}

#[tokio::test]
async fn stale_data_is_dated_by_the_clock_tick_without_any_input() {
    let opts = options();
    let clock = opts.clock.clone();
    let d = Dashboard::start(four_gpus(), None, opts);
    d.shows("data 0.4s").await;
    clock.set(T0 + 5_000);
    d.shows("! data 5.0s old").await;
    clock.set(T0 + 9_000);
    d.shows("! data 9.0s old").await;
    d.quit().await;
}

#[tokio::test]
async fn shift_k_asks_then_terminates_then_offers_sigkill() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let mut snap = snapshot(Spec::gpus(1));
    snap.processes[0].pid = child.id();
    let d = Dashboard::start(Some(snap), None, options());
    d.shows("GPUs").await;
    d.press(KeyCode::Char('K'));
    let ask = d.shows("Send SIGTERM?").await;
    assert!(
        ask.contains(&format!("PID {}", child.id())) && ask.contains("user alice") && ask.contains("running 3h12m")
    );
    assert!(ask.contains("python3 train.py"), "{ask}");
    d.press(KeyCode::Char('y'));
    d.shows("Send SIGKILL too?").await;
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    d.press(KeyCode::Char('y'));
    d.shows("has already exited; nothing sent").await;
    d.quit().await;
}

/// `--demo`'s PIDs are made up, and a live process here may hold the same
/// number: it gets no signal and no probe, and its environment is never
/// read. The demo's own ranks answer with the demo's map and environment.
#[tokio::test]
async fn the_demos_made_up_pids_are_never_acted_on() {
    let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let mut snap = snapshot(Spec::gpus(1).probed());
    snap.simulated = true;
    snap.processes[0].pid = child.id();
    let d = Dashboard::start(Some(snap.clone()), None, options());
    d.shows("GPUs").await;
    let pid = child.id();
    for (key, says) in [
        ('K', "no signal sent"),
        ('A', "nothing to attach to"),
        ('M', "M needs a real PyTorch job"),
        ('e', "no environment to read"),
        ('m', "its map needs a real job"),
    ] {
        d.press(KeyCode::Char(key));
        d.press(KeyCode::Char('y'));
        d.shows(&format!("PID {pid} is a simulated process (--demo): {says}")).await;
    }
    assert!(!d.screen.screen().contains("Send SIGTERM"));
    assert!(child.try_wait().unwrap().is_none(), "the live process got a signal");
    snap.processes[0].pid = 4_123_401;
    snap.time.time_unix_ms += 1000;
    d.publish(snap);
    d.shows("4123401").await;
    d.press(KeyCode::Char('m'));
    let map = d.shows("Segments: PID 4123401 on GPU 0 (cuda:0), simulated").await;
    assert!(map.contains("would NOT fit without a new cudaMalloc"), "{map}");
    d.press(KeyCode::Esc);
    d.press(KeyCode::Char('e'));
    let env = d.shows("Environment of PID 4123401 (simulated)").await;
    assert!(env.contains("WORLD_SIZE"), "{env}");
    d.quit().await;
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn read_only_never_asks() {
    let child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let mut snap = snapshot(Spec::gpus(1));
    snap.processes[0].pid = child.id();
    let d = Dashboard::start(Some(snap), None, TuiOptions { read_only: true, ..options() });
    d.shows("GPUs").await;
    d.press(KeyCode::Delete);
    d.shows("read-only").await;
    assert!(!d.screen.screen().contains("Send SIGTERM"));
    d.quit().await;
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Ctrl-Z does not quit: off a real terminal there is nothing to hand
/// back, and the loop still clears the screen and draws it all again, as
/// it does after `fg`.
#[tokio::test]
async fn ctrl_z_suspends_then_redraws_everything() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPUs").await;
    let (clears, frames) = (d.screen.2.load(std::sync::atomic::Ordering::SeqCst), d.screen.frames());
    d.keys.send(Ok(Event::Key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL)))).unwrap();
    for _ in 0..200 {
        if d.screen.frames() > frames {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(d.screen.2.load(std::sync::atomic::Ordering::SeqCst), clears + 1, "one full clear");
    assert!(d.screen.frames() > frames, "then a new frame");
    d.shows("GPUs").await;
    assert!(!d.done.is_finished(), "Ctrl-Z is not quit");
    d.quit().await;
}

/// A replay over a recording whose PID now belongs to a live process:
/// K, Delete and a stray `y` send nothing, and the help says so.
#[tokio::test]
async fn replay_never_signals_a_live_process() {
    let mut child = std::process::Command::new("sleep").arg("60").spawn().unwrap();
    let mut snap = snapshot(Spec::gpus(1));
    snap.processes[0].pid = child.id();
    let (handle, _player) = tui_fixtures::replay_handle();
    let replay = Some(handle);
    let d = Dashboard::start(Some(snap), None, TuiOptions { replay, ..options() });
    d.shows("GPUs").await;
    for key in [KeyCode::Char('K'), KeyCode::Delete, KeyCode::Char('y'), KeyCode::Char('y')] {
        d.press(key);
    }
    d.shows("sends no signals").await;
    d.press(KeyCode::Char('?'));
    d.shows("no signal is ever sent").await;
    let help = d.shows("exec hook never runs").await;
    assert!(!help.contains("send SIGTERM"), "{help}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(child.try_wait().unwrap().is_none(), "the live process got a signal");
    assert!(!d.screen.screen().contains("Send SIGTERM"));
    d.quit().await;
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn a_burst_of_input_costs_a_few_frames_not_one_each() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPUs").await;
    let before = d.screen.frames();
    let started = std::time::Instant::now();
    for i in 0..300 {
        d.press(KeyCode::Char(if i % 2 == 0 { 'j' } else { 'k' }));
    }
    d.press(KeyCode::Char('?'));
    d.shows("this help").await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let frames = d.screen.frames() - before;
    let budget = started.elapsed().as_millis() as usize / gpuscope::tui::FRAME.as_millis() as usize + 2;
    assert!(frames <= budget, "{frames} frames for 301 keys in {:?}", started.elapsed());
    d.quit().await;
}

/// On paused time, so what is compared is the loop's own clock: a key
/// pressed just after new data was drawn must not wait out the frame
/// period that data frame started (over a slow link it would come on top
/// of the round trip).
#[tokio::test(start_paused = true)]
async fn a_key_just_after_a_data_frame_shows_at_once() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPUs").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let frames = d.screen.frames();
    d.publish(snapshot_at(Spec::gpus(4), T0 + 1_000, 1));
    d.wait_for("the new data's frame", |_| d.screen.frames() > frames).await;
    let pressed = tokio::time::Instant::now();
    d.press(KeyCode::Char('?'));
    d.shows("this help").await;
    assert!(pressed.elapsed() < gpuscope::tui::FRAME, "drawn {:?} after the key", pressed.elapsed());
    // Keys still have a frame period: a burst right after costs one frame.
    let frames = d.screen.frames();
    for _ in 0..20 {
        d.press(KeyCode::Char('j'));
    }
    tokio::time::sleep(gpuscope::tui::FRAME / 2).await;
    assert!(d.screen.frames() <= frames + 1, "{} frames for a burst", d.screen.frames() - frames);
    d.quit().await;
}

#[tokio::test]
async fn nothing_is_redrawn_while_nothing_happens() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPUs").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = d.screen.frames();
    // Fresh data and no input: no frame, the 1 Hz tick included.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(d.screen.frames(), before);
    d.quit().await;
}

/// `m`, `M` and `A` run off the UI task and come back to the screen: the
/// map's requester thread answers (here: the fixture's PID is no live
/// process, so it says so), memviz and attach put their outcome in the
/// status line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_tools_answer_on_the_screen() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("no alerts").await;
    d.press(KeyCode::Char('m'));
    d.shows("has no gpuscope probe").await;
    d.press(KeyCode::Char('j'));
    d.press(KeyCode::Char('m'));
    d.shows("Segments: PID 4123402").await;
    d.shows("no process").await;
    d.press(KeyCode::Esc);
    d.hides("Segments: PID").await;
    d.press(KeyCode::Char('M'));
    d.shows("memviz: no process").await;
    let mut snap = snapshot(Spec::gpus(4));
    snap.processes.iter_mut().for_each(|p| p.pid = 4_194_304);
    d.publish(snap);
    d.shows("4194304").await;
    d.press(KeyCode::Char('A'));
    d.shows("attach: no process 4194304").await;
    d.quit().await;
}

/// `e` reads the environment on the blocking pool and shows it: here of
/// this very test process, standing in for a GPU process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e_shows_the_selected_process_environment() {
    let mut snap = snapshot(Spec::gpus(1));
    snap.processes[0].pid = std::process::id();
    let d = Dashboard::start(Some(snap), None, options());
    d.shows("no alerts").await;
    d.press(KeyCode::Char('e'));
    d.shows(&format!("Environment of PID {}", std::process::id())).await;
    d.hides("reading /proc").await;
    d.press(KeyCode::Esc);
    d.hides("Environment of PID").await;
    d.quit().await;
}

/// htop's F4 is `/`; F3 searches: the selection jumps, every row stays,
/// F3 again goes on to the next match, Enter keeps it and `n` goes on.
#[tokio::test]
async fn f4_filters_and_f3_searches_without_hiding() {
    let selected = |pid: &'static str| move |s: &str| s.lines().any(|l| l.starts_with('>') && l.contains(pid));
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("Processes 4").await;
    d.press(KeyCode::F(4));
    d.typed("carol");
    d.shows("Processes 1").await;
    d.press(KeyCode::Esc);
    d.shows("Processes 4").await;
    d.press(KeyCode::F(3));
    d.typed("alice");
    let screen = d.wait_for("rank 1 selected", selected("4123402")).await;
    assert!(screen.contains("search: alice_") && screen.contains("Processes 4"), "{screen}");
    d.press(KeyCode::F(3));
    d.wait_for("rank 0 selected", selected("4123401")).await;
    d.press(KeyCode::F(3));
    d.wait_for("back to rank 1", selected("4123402")).await;
    d.press(KeyCode::Enter);
    d.hides("search: alice").await;
    d.press(KeyCode::Char('n'));
    d.wait_for("n: rank 0 again", selected("4123401")).await;
    d.press(KeyCode::F(3));
    d.typed("#%");
    let missed = d.shows("no match").await;
    assert!(missed.contains("Processes 4") && selected("4123401")(&missed), "the selection stays:\n{missed}");
    d.press(KeyCode::Esc);
    d.hides("search:").await;
    d.quit().await;
}

/// `t` and F5 turn the tree on and off; `w` turns it off.
#[tokio::test]
async fn t_and_f5_toggle_the_tree() {
    let mut snap = snapshot(Spec::gpus(4));
    for p in &mut snap.processes {
        p.parent_name = Some("torchrun".into());
    }
    let d = Dashboard::start(Some(snap), None, options());
    d.shows("Processes 4").await;
    d.press(KeyCode::Char('t'));
    let tree = d.shows(" tree ").await;
    assert!(tree.lines().any(|l| l.contains("4123300") && l.contains("torchrun")), "{tree}");
    assert!(tree.contains("└─ "), "{tree}");
    d.press(KeyCode::F(5));
    d.hides(" tree ").await;
    d.press(KeyCode::F(5));
    d.shows(" tree ").await;
    d.press(KeyCode::Char('w'));
    let grouped = d.shows("by workload").await;
    assert!(!grouped.contains(" tree ") && !grouped.contains("└─ "), "{grouped}");
    d.quit().await;
}

/// F6's menu: arrows move, Enter sorts by the column, `S` still reverses.
#[tokio::test]
async fn f6_picks_a_sort_column_from_a_menu() {
    let d = Dashboard::start(four_gpus(), None, options());
    d.shows("GPU MEM▼").await;
    d.press(KeyCode::F(6));
    d.shows("sort by").await;
    d.press(KeyCode::Down);
    d.press(KeyCode::Char('j'));
    d.press(KeyCode::Char('k'));
    d.press(KeyCode::Enter);
    let screen = d.shows("ALLOC▼").await;
    assert!(!screen.contains(" sort by "), "Enter closes the menu:\n{screen}");
    d.press(KeyCode::Char('S'));
    d.shows("ALLOC▲").await;
    d.press(KeyCode::F(6));
    d.shows(" sort by ").await;
    d.press(KeyCode::Esc);
    d.hides(" sort by ").await;
    assert!(d.screen.screen().contains("ALLOC▲"), "Esc changes nothing");
    d.quit().await;
}

/// Clicks and the wheel, mapped through where the last frame drew what.
#[tokio::test]
async fn the_mouse_selects_rows_focuses_gpus_and_scrolls() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mouse = |kind, row: usize| {
        let row = u16::try_from(row).unwrap();
        Ok(Event::Mouse(MouseEvent { kind, column: 30, row, modifiers: KeyModifiers::NONE }))
    };
    let click = |row| mouse(MouseEventKind::Down(MouseButton::Left), row);
    let line_of = |screen: &str, text: &str| screen.lines().position(|l| l.contains(text)).unwrap();
    let selected = |pid: &'static str| move |s: &str| s.lines().any(|l| l.starts_with('>') && l.contains(pid));
    let d = Dashboard::start(four_gpus(), None, options());
    let screen = d.wait_for("GPU 2's row selected", selected("4123403")).await;
    d.keys.send(click(line_of(&screen, "4123404"))).unwrap();
    d.wait_for("the clicked row selected", selected("4123404")).await;
    d.keys.send(mouse(MouseEventKind::ScrollUp, 0)).unwrap();
    d.wait_for("the wheel: one row up", selected("4123401")).await;
    d.keys.send(click(line_of(&screen, "  2 NVIDIA H100") + 1)).unwrap();
    let focused = d.shows("focus: GPU 2").await;
    assert!(focused.contains("Processes 1"), "{focused}");
    d.keys.send(click(line_of(&screen, "  2 NVIDIA H100"))).unwrap();
    d.shows("focus: all GPUs").await;
    // The kill question takes no click.
    d.press(KeyCode::Char('?'));
    d.shows("this help").await;
    d.keys.send(click(line_of(&screen, "4123402"))).unwrap();
    d.press(KeyCode::Esc);
    d.hides("this help").await;
    assert!(selected("4123401")(&d.screen.screen()), "a click under the help selects nothing");
    d.quit().await;
}
