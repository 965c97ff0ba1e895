//! The fleet view's frames at 80x24 and 200x50, pinned as text snapshots,
//! from fixed snapshots and a fixed clock: hosts (one stale, one down),
//! the jobs across hosts, an expanded host in the local dashboard's
//! widgets; and sizes too small to draw anything.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_fixtures;

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use gpuscope::fleet::jobs;
use gpuscope::fleet::model::{Answer, FLEET_SCHEMA_VERSION, Fleet, HostState, Source};
use gpuscope::fleet::view::{Flow, Screen, ViewState, draw};
use gpuscope::model::{Activity, ActivityUnavailable, Snapshot};
use gpuscope::tui::Clock;
use gpuscope::tui::term::Term;
use ratatui::backend::TestBackend;
use tui_fixtures::{Spec, T0, options, snapshot, text};

const JOB: &str = "10.1.2.3:29500";

/// Every probed process becomes a rank of JOB (world size 4), from `first`.
fn ranks(mut snap: Snapshot, first: u32) -> Snapshot {
    for (i, p) in snap.processes.iter_mut().enumerate() {
        if let Some(a) = p.allocator.as_mut() {
            a.job = Some(JOB.into());
            a.rank = Some(first + i as u32);
            a.world_size = Some(4);
        }
    }
    snap
}

/// SM activity `sm[i]` on GPU `i`; `None`: a GPU without the counters.
fn active(mut snap: Snapshot, sm: &[Option<f64>]) -> Snapshot {
    for (g, sm) in snap.gpus.iter_mut().zip(sm) {
        match sm {
            Some(sm) => g.activity = Some(Activity { period_ms: 1000, sm_active: Some(*sm), ..Activity::default() }),
            None => g.activity_unavailable = Some(ActivityUnavailable::NotSupported),
        }
    }
    snap
}

fn fleet() -> Arc<Fleet> {
    let mut a = HostState::new("node-a:10983".into());
    a.answered(Answer::of(active(ranks(snapshot(Spec::gpus(2).probed()), 0), &[Some(62.5), Some(30.0)])), T0);
    let mut b = HostState::new("node-b:10983".into());
    let b_snap = active(ranks(snapshot(Spec { alerts: true, ..Spec::gpus(1).probed() }), 2), &[Some(12.0)]);
    b.answered(Answer::of(b_snap), T0 - 12_000);
    b.failed("no answer within 2s".into(), T0 - 6000);
    let mut c = HostState::new("node-c.example.org:10983".into());
    c.failed("cannot connect: Connection refused (os error 111)".into(), T0 - 30_000);
    let mut d = HostState::new("node-d:10983".into());
    d.answered(Answer::of(active(snapshot(Spec::gpus(4)), &[None; 4])), T0);
    let mut hosts = vec![a, b, c, d];
    for h in &mut hosts {
        h.refresh(T0, 3000);
    }
    let jobs = jobs::group(&hosts);
    Arc::new(Fleet {
        fleet_schema_version: FLEET_SCHEMA_VERSION,
        source: Source::Direct,
        time_unix_ms: T0,
        hosts,
        jobs,
        capped: None,
    })
}

fn view() -> ViewState {
    ViewState::new(fleet(), options())
}

fn frame(view: &ViewState, w: u16, h: u16) -> String {
    let mut terminal = Term::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| draw(f, view, &Clock::manual(T0 + 400))).unwrap();
    text(&terminal)
}

fn press(view: &mut ViewState, code: KeyCode) -> Flow {
    view.key(KeyEvent::new(code, KeyModifiers::NONE), T0 + 400)
}

#[test]
fn hosts_with_a_stale_and_a_down_one() {
    let v = view();
    let small = frame(&v, 80, 24);
    assert!(small.contains("stale 12s") && small.contains("down 30s"), "{small}");
    assert!(small.contains("4 hosts, 2 answering"), "{small}");
    // At 80 columns the reasons are there: the down host's in the room of
    // figures it has not, the stale host's in place of its old memory.
    assert!(small.contains("down 30s     cannot connect: Connection refused"), "{small}");
    assert!(small.contains("stale 12s    1/1       no answer within 2s"), "{small}");
    insta::assert_snapshot!("fleet_hosts_80x24", small);
    insta::assert_snapshot!("fleet_hosts_200x50", frame(&v, 200, 50));
}

/// Issue 57: where the screen has room, each host's mean SM activity,
/// `n/a` on a host whose GPUs have no activity counters.
#[test]
fn wide_enough_the_hosts_show_their_sm_activity() {
    let v = view();
    let line = |frame: &str, host: &str| frame.lines().find(|l| l.contains(host)).unwrap().to_string();
    let wide = frame(&v, 120, 10);
    assert!(line(&wide, "HOST").contains("GPUS BUSY SM ACTIVE MEMORY"), "{wide}");
    assert!(line(&wide, "node-a").contains(" 2/2       46%       122.0G"), "the mean of 62.5 and 30: {wide}");
    // A stale host's reason takes the place of its old figures until
    // there is room for both.
    assert!(line(&wide, "node-b").contains(" 1/1       no answer within 2s"), "{wide}");
    let wider = frame(&v, 200, 10);
    assert!(line(&wider, "node-b").contains(" 1/1       12%       "), "{wider}");
    assert!(line(&wider, "node-b").ends_with("no answer within 2s"), "{wider}");
    assert!(line(&wide, "node-d").contains(" 4/4       n/a       "), "{wide}");
    let narrow = frame(&v, 99, 10);
    assert!(!narrow.contains("SM ACTIVE") && !narrow.contains("46%"), "{narrow}");
}

#[test]
fn the_job_view_spans_hosts() {
    let mut v = view();
    press(&mut v, KeyCode::Char('J'));
    let small = frame(&v, 80, 24);
    assert!(small.contains(&format!("job {JOB}")) && small.contains("rank 3 of 4 not seen"), "{small}");
    assert!(small.contains("node-a:10983") && small.contains("node-b:10983"), "{small}");
    insta::assert_snapshot!("fleet_jobs_80x24", small);
    let big = frame(&v, 200, 50);
    assert!(big.contains("slowest") && big.contains("stale"), "rank 2's host is stale:\n{big}");
    insta::assert_snapshot!("fleet_jobs_200x50", big);
}

/// Issue 58: where a rank's probe reports its data wait, the job gets a
/// DATA column (`n/a` for the ranks without it); the other jobs, as above,
/// none.
#[test]
fn the_job_view_shows_the_data_wait_where_a_rank_reports_it() {
    use gpuscope::model::{DataLoaderStats, InputPipeline};
    let mut snap = ranks(snapshot(Spec::gpus(2).probed()), 0);
    let loader = DataLoaderStats { id: 1, wait_share: Some(0.413), ..DataLoaderStats::default() };
    snap.processes[0].input =
        Some(Arc::new(InputPipeline { hooked: true, loaders: vec![loader], ..Default::default() }));
    let mut a = HostState::new("node-a:10983".into());
    a.answered(Answer::of(snap), T0);
    a.refresh(T0, 3000);
    let hosts = vec![a];
    let fleet = Fleet {
        fleet_schema_version: FLEET_SCHEMA_VERSION,
        source: Source::Direct,
        time_unix_ms: T0,
        jobs: jobs::group(&hosts),
        hosts,
        capped: None,
    };
    let mut v = ViewState::new(Arc::new(fleet), options());
    press(&mut v, KeyCode::Char('J'));
    let shown = frame(&v, 100, 12);
    let line = |what: &str| shown.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("{what}: {shown}"));
    assert!(line("RANK HOST").contains("UTIL  DATA  MARK"), "{shown}");
    assert!(line("4123401").contains("80%   41%   "), "{shown}");
    assert!(line("4123402").contains("88%   n/a   "), "{shown}");
}

#[test]
fn enter_shows_the_host_in_the_dashboards_widgets_and_esc_comes_back() {
    let mut v = view();
    press(&mut v, KeyCode::Down);
    assert_eq!(press(&mut v, KeyCode::Enter), Flow::Redraw);
    assert!(matches!(&v.screen, Screen::Host { host, .. } if host == "node-b:10983"));
    let shown = frame(&v, 120, 40);
    assert!(shown.contains("node01") && shown.contains("Processes"), "{shown}");
    assert!(shown.contains("fleet: node-b:10983 (stale 12s: no answer within 2s)"), "{shown}");
    // Keys that would act on this machine are refused there.
    press(&mut v, KeyCode::Char('K'));
    assert!(!frame(&v, 120, 40).contains("Send signal"), "no kill on a remote host");
    press(&mut v, KeyCode::Esc);
    assert!(matches!(v.screen, Screen::Hosts));
    // A host that never answered has nothing to expand.
    press(&mut v, KeyCode::Down);
    press(&mut v, KeyCode::Enter);
    assert!(matches!(v.screen, Screen::Hosts));
    let said = frame(&v, 100, 20);
    assert!(
        said.contains("node-c.example.org:10983: nothing to show (it has never answered: cannot connect"),
        "{said}"
    );
}

#[test]
fn sort_filter_alerts_and_quit() {
    let mut v = view();
    for _ in 0..2 {
        press(&mut v, KeyCode::Char('s'));
    }
    let order: Vec<&str> = v.hosts().iter().map(|h| h.host.as_str()).collect();
    assert_eq!(order, ["node-c.example.org:10983", "node-b:10983", "node-a:10983", "node-d:10983"], "by status");
    press(&mut v, KeyCode::Char('/'));
    for c in "ORG".chars() {
        press(&mut v, KeyCode::Char(c));
    }
    press(&mut v, KeyCode::Enter);
    assert_eq!(v.hosts().len(), 1);
    press(&mut v, KeyCode::Esc);
    assert_eq!(v.hosts().len(), 4, "Esc clears the filter");
    press(&mut v, KeyCode::Char('a'));
    let alerts = frame(&v, 100, 20);
    assert!(alerts.contains("node-b:10983"), "{alerts}");
    assert_eq!(press(&mut v, KeyCode::Char('q')), Flow::Quit);
}

#[test]
fn tiny_terminals_do_not_panic() {
    let mut v = view();
    for screen in [None, Some('J'), Some('a')] {
        if let Some(c) = screen {
            press(&mut v, KeyCode::Char(c));
        }
        for (w, h) in [(0, 0), (1, 1), (20, 5)] {
            let shown = frame(&v, w, h);
            assert_eq!(shown.lines().count(), h as usize);
        }
    }
    press(&mut v, KeyCode::Esc);
    press(&mut v, KeyCode::Enter);
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        assert_eq!(frame(&v, w, h).lines().count(), h as usize);
    }
}
