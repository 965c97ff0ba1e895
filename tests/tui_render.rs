//! The dashboard's frames at 80x24 and 200x50, pinned as text snapshots
//! (`tests/snapshots/`), from fixed snapshots and a fixed clock.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tui_fixtures;

use std::sync::Arc;

use gpuscope::sources::OnScreen;
use gpuscope::sources::nvml::Wanted;
use gpuscope::tui::keys::Action;
use gpuscope::tui::state::View;
use gpuscope::tui::update::apply;
use gpuscope::tui::{Clock, State, TuiOptions};
use tui_fixtures::{
    Spec, T0, many_processes, options, render, render_text, snapshot, snapshot_at, state, state_with, uses_color,
    with_every_reading, without_nvml,
};

fn act(state: &mut State, actions: &[Action]) {
    for a in actions {
        apply(state, *a, T0 + 400);
    }
}

#[test]
fn one_gpu_with_a_probe() {
    let mut s = state(Spec::gpus(1).probed());
    insta::assert_snapshot!("one_gpu_80x24", render_text(&mut s, 80, 24));
    insta::assert_snapshot!("one_gpu_200x50", render_text(&mut s, 200, 50));
}

#[test]
fn two_gpus_with_a_probe() {
    let mut s = state(Spec::gpus(2).probed());
    insta::assert_snapshot!("two_gpus_80x24", render_text(&mut s, 80, 24));
    insta::assert_snapshot!("two_gpus_200x50", render_text(&mut s, 200, 50));
}

#[test]
fn four_gpus_without_allocator_data() {
    let mut s = state(Spec::gpus(4));
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("█ used ░ free") && !small.contains("cached"), "{small}");
    insta::assert_snapshot!("four_gpus_no_probe_80x24", small);
    insta::assert_snapshot!("four_gpus_no_probe_200x50", render_text(&mut s, 200, 50));
}

#[test]
fn eight_gpus_go_compact_on_a_small_terminal() {
    let mut s = state(Spec::gpus(8).probed());
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("NAME") && small.contains("UTIL"), "the compact form has column titles:\n{small}");
    for i in 0..8 {
        assert!(small.lines().any(|l| l.contains(&format!(" {i} H100 80GB HBM3"))), "GPU {i}:\n{small}");
    }
    insta::assert_snapshot!("eight_gpus_compact_80x24", small);
    let big = render_text(&mut s, 200, 50);
    assert_eq!(big.matches("NVIDIA H100 80GB HBM3").count(), 8, "full names at 200x50:\n{big}");
    insta::assert_snapshot!("eight_gpus_200x50", big);
}

#[test]
fn active_alerts_show_as_words_and_marks() {
    let mut s = state(Spec { alerts: true, ..Spec::gpus(2).probed() });
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("! CRIT GPU 1 PID 4123402") && text.contains("! WARN"), "{text}");
    assert!(text.contains("! 2 alerts"), "{text}");
    insta::assert_snapshot!("alerts_80x24", text);
    insta::assert_snapshot!("alerts_200x50", render_text(&mut s, 200, 50));
}

#[test]
fn a_lost_gpu_says_so() {
    let mut s = state(Spec { lost: Some(1), ..Spec::gpus(4) });
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("LOST") && text.contains("needs a GPU reset or a reboot"), "{text}");
    insta::assert_snapshot!("lost_gpu_80x24", text);
}

#[test]
fn help_lists_every_key() {
    let mut s = state(Spec::gpus(2).probed());
    act(&mut s, &[Action::ToggleHelp]);
    let text = render_text(&mut s, 80, 24);
    for (keys, _) in gpuscope::tui::render::KEYS {
        assert!(text.contains(keys), "{keys}:\n{text}");
    }
    insta::assert_snapshot!("help_80x24", text);
}

#[test]
fn detail_view_of_a_probed_process() {
    let mut s = state(Spec { alerts: true, ..Spec::gpus(2).probed() });
    // Sorted by GPU memory, GPU 1's process is first.
    act(&mut s, &[Action::OpenDetail]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("PID 4123402 on GPU 1"), "{text}");
    assert!(text.contains("expandable_segments:True"), "the hint:\n{text}");
    insta::assert_snapshot!("detail_80x24", text);
    insta::assert_snapshot!("detail_200x50", render_text(&mut s, 200, 50));
}

/// The details scroll where they do not fit: a line (j, Down), a page
/// (PgDn, Space), the end (End, G) and back (k, PgUp, Home, g); the last
/// line says how much more there is either way; scrolling past the end
/// stops at it; another process's details start at the top again.
#[test]
fn the_detail_view_scrolls() {
    let mut s = state(Spec { alerts: true, ..Spec::gpus(2).probed().input() });
    act(&mut s, &[Action::OpenDetail]);
    let top = render_text(&mut s, 80, 24);
    assert!(top.contains("PID 4123402 on GPU 1") && top.contains("more lines") && !top.contains("above"), "{top}");
    let scroll = |s: &State| match s.top() {
        Some(View::Detail(d)) => d.scroll,
        other => panic!("{other:?}"),
    };
    act(&mut s, &[Action::Move(1), Action::Move(1), Action::Page(1)]);
    let page = s.hits.detail.unwrap().page;
    assert_eq!(scroll(&s), 2 + page, "two lines and a page");
    let scrolled = render_text(&mut s, 80, 24);
    assert!(scrolled.contains(&format!("{} lines above", 2 + page)), "{scrolled}");
    insta::assert_snapshot!("detail_scrolled_80x24", scrolled);
    // Past the end: it stops at the last screenful, and one line up
    // moves at once.
    let last = s.hits.detail.unwrap().last;
    for _ in 0..3 {
        act(&mut s, &[Action::Page(1), Action::Move(1)]);
    }
    assert_eq!(scroll(&s), last);
    act(&mut s, &[Action::Last, Action::Last]);
    assert_eq!(scroll(&s), last);
    let end = render_text(&mut s, 80, 24);
    assert!(end.contains("hints     ·") && !end.contains("more line"), "the hints at the end:\n{end}");
    act(&mut s, &[Action::Move(-1)]);
    assert_eq!(scroll(&s), last - 1);
    act(&mut s, &[Action::First]);
    assert_eq!(scroll(&s), 0);
    // A tall screen holds it all: nothing to scroll.
    act(&mut s, &[Action::Last]);
    let all = render_text(&mut s, 200, 50);
    assert!(!all.contains("more line") && !all.contains("above"), "{all}");
    assert_eq!(s.hits.detail.unwrap().last, 0);
    // Scrolled, then another process: from the top.
    act(&mut s, &[Action::Back, Action::Move(1), Action::OpenDetail]);
    render_text(&mut s, 80, 24);
    act(&mut s, &[Action::Last, Action::Back, Action::Move(-1), Action::OpenDetail]);
    assert_eq!(scroll(&s), 0);
    renders_tiny(&mut s);
    act(&mut s, &[Action::Last]);
    renders_tiny(&mut s);
}

/// At 200x50 the details stand beside their chart, half the width: a job
/// with an OOM post-mortem, an alert and its input pipeline needs more
/// than the height, and scrolls.
#[test]
fn the_detail_view_scrolls_at_200x50() {
    let mut s = state(Spec { alerts: true, oom: true, ..Spec::gpus(2).probed().input() });
    act(&mut s, &[Action::OpenDetail]);
    let top = render_text(&mut s, 200, 50);
    assert!(top.contains("more line"), "{top}");
    act(&mut s, &[Action::Page(1)]);
    let scrolled = render_text(&mut s, 200, 50);
    assert!(scrolled.contains("above"), "{scrolled}");
    insta::assert_snapshot!("detail_scrolled_200x50", scrolled);
    renders_tiny(&mut s);
}

/// NVML's per-process samples (nvitop's %SM and %GMBW, here UTIL% and
/// mem, never called SM) beside the memory
/// NVML attributes to the process.
#[test]
fn detail_view_shows_the_process_share_of_the_gpu() {
    let mut s = State::new(&options());
    for step in (0..=120u64).rev() {
        let mut snap = tui_fixtures::snapshot_at(Spec::gpus(2).probed(), tui_fixtures::T0 - step * 5000, step);
        for gpu in &mut snap.gpus {
            let pids: Vec<u32> =
                snap.processes.iter().filter(|p| p.gpus.iter().any(|g| g.index == gpu.index)).map(|p| p.pid).collect();
            gpu.process_utilization = Some(
                pids.iter()
                    .map(|&pid| gpuscope::model::ProcessUtilization { pid, sm: 87, memory: 41, encoder: 0, decoder: 0 })
                    .collect(),
            );
        }
        s.on_snapshot(Arc::new(snap));
    }
    act(&mut s, &[Action::OpenDetail]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("util 87% mem 41% of the time (NVML's per-process"), "{text}");
    assert!(!text.contains("SM 87%"), "SM is the activity GPM counts:\n{text}");
    insta::assert_snapshot!("detail_process_share_80x24", text);
}

#[test]
fn detail_view_of_a_cuda_malloc_async_process() {
    let mut s = state(Spec { async_server: true, ..Spec::gpus(3) });
    // The server holds the most GPU memory: its row is first.
    act(&mut s, &[Action::OpenDetail]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("PID 4123403 on GPU 2"), "{text}");
    assert!(text.contains("PYTORCH_ALLOC_CONF=backend:cudaMallocAsync (runtime)"), "{text}");
    assert!(text.contains("segments n/a") && text.contains("OOMs n/a (probe saw 1)"), "{text}");
    assert!(text.contains("cudaMallocAsync does not count"), "{text}");
    insta::assert_snapshot!("detail_async_80x24", text);
    let wide = render_text(&mut s, 200, 50);
    assert!(wide.contains("env PYTORCH_ALLOC_CONF=(unset)  PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:512"), "{wide}");
    assert!(wide.contains("held by private pools such as CUDA graphs"), "{wide}");
    insta::assert_snapshot!("detail_async_200x50", wide);
}

#[test]
fn detail_view_of_an_unmatched_device() {
    let mut s = state(Spec { unmatched: true, ..Spec::gpus(2).probed() });
    act(&mut s, &[Action::OpenDetail]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("PID 4123402 on GPU 1"), "{text}");
    assert!(text.contains("cuda:1 gpu n/a: CUDA's fastest-first order is ambiguous"), "{text}");
    insta::assert_snapshot!("detail_unmatched_80x24", text);
    insta::assert_snapshot!("detail_unmatched_200x50", render_text(&mut s, 200, 50));
}

#[test]
fn detail_view_shows_the_last_oom_post_mortem() {
    let mut s = state(Spec { oom: true, ..Spec::gpus(2).probed() });
    act(&mut s, &[Action::OpenDetail]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("last OOM"), "{text}");
    let wide = render_text(&mut s, 200, 50);
    assert!(
        wide.contains("needed 2.0 GiB on GPU 1; 6.4 GiB free in the allocator but the largest free block"),
        "{wide}"
    );
    assert!(wide.contains("is 912 MiB (fragmentation)"), "{wide}");
    assert!(wide.contains("large pool: 96 segments"), "{wide}");
    insta::assert_snapshot!("detail_oom_80x24", text);
    insta::assert_snapshot!("detail_oom_200x50", wide);
}

#[test]
fn filter_narrows_the_table() {
    let mut s = state(Spec::gpus(4).probed());
    act(&mut s, &[Action::FilterStart]);
    for c in "vllm".chars() {
        act(&mut s, &[Action::FilterInput(c)]);
    }
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("Processes 1") && text.contains("/vllm_"), "{text}");
    insta::assert_snapshot!("filter_80x24", text);
}

#[test]
fn focus_narrows_table_and_chart() {
    let mut s = state(Spec::gpus(2).probed());
    act(&mut s, &[Action::Focus(1)]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("History GPU 1") && text.contains("GPU 1 only"), "{text}");
    insta::assert_snapshot!("focus_gpu1_80x24", text);
}

/// A focused GPU with no process says which key shows every GPU again:
/// its own digit (0 would focus GPU 0).
#[test]
fn an_idle_focused_gpu_says_how_to_see_all_gpus() {
    let mut snap = snapshot(Spec::gpus(4));
    snap.processes.retain(|p| p.gpus.iter().all(|g| g.index != 3));
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(snap));
    act(&mut s, &[Action::Focus(3)]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("no process on this GPU (3 again shows all GPUs)"), "{text}");
    insta::assert_snapshot!("focus_idle_gpu_80x24", text);
    act(&mut s, &[Action::Focus(3)]);
    assert_eq!(s.focus, None, "the digit again: all GPUs, as the table says");
}

#[test]
fn ascii_and_no_colour() {
    let plain = TuiOptions { ascii: true, color: false, ..options() };
    let mut s = state_with(Spec { alerts: true, ..Spec::gpus(4).probed() }, plain);
    let terminal = render(&mut s, 80, 24);
    let text = tui_fixtures::text(&terminal);
    assert!(text.is_ascii(), "{text}");
    assert!(!uses_color(&terminal));
    assert!(text.contains("! CRIT") && text.contains(">"), "marks, not colours:\n{text}");
    insta::assert_snapshot!("ascii_no_color_80x24", text);
    act(&mut s, &[Action::ToggleHelp]);
    let help = render_text(&mut s, 80, 24);
    assert!(help.is_ascii(), "{help}");

    let mut coloured = state(Spec::gpus(1));
    assert!(uses_color(&render(&mut coloured, 80, 24)));
}

#[test]
fn missing_nvml_is_shown_not_fatal() {
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(without_nvml()));
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("NVML: cannot load libnvidia-ml.so.1"), "{text}");
    insta::assert_snapshot!("no_nvml_80x24", text);
}

#[test]
fn before_the_first_snapshot() {
    let mut s = State::new(&options());
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("waiting for the first snapshot…"), "{text}");
    insta::assert_snapshot!("waiting_80x24", text);
}

#[test]
fn stale_data_is_dated_and_paused_data_says_so() {
    let clock = Clock::manual(T0 + 400);
    let mut s = State::new(&TuiOptions { clock: clock.clone(), ..options() });
    s.on_snapshot(Arc::new(snapshot(Spec::gpus(1))));
    let mut terminal = gpuscope::tui::term::Term::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
    clock.set(T0 + 12_000);
    terminal
        .draw(|f| {
            gpuscope::tui::render::draw(f, &s, &clock);
        })
        .unwrap();
    let stale = tui_fixtures::text(&terminal);
    assert!(stale.lines().next().unwrap().contains("! data 12s old"), "{stale}");
    act(&mut s, &[Action::TogglePause]);
    terminal
        .draw(|f| {
            gpuscope::tui::render::draw(f, &s, &clock);
        })
        .unwrap();
    let paused = tui_fixtures::text(&terminal);
    assert!(paused.lines().next().unwrap().contains("PAUSED at 19:30:00"), "{paused}");
}

#[test]
fn too_small_says_so() {
    let mut s = state(Spec::gpus(2));
    let text = render_text(&mut s, 20, 5);
    assert!(text.contains("terminal too"), "{text}");
    insta::assert_snapshot!("too_small_20x5", text);
}

/// Every view at sizes down to nothing: no panic, whatever fits.
#[test]
fn tiny_terminals_never_panic() {
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let mut views: Vec<(&str, State)> = Vec::new();
    views.push(("waiting", State::new(&options())));
    views.push(("dashboard", state(Spec { alerts: true, ..Spec::gpus(8).probed() })));
    let mut help = state(Spec::gpus(2));
    act(&mut help, &[Action::ToggleHelp]);
    views.push(("help", help));
    let mut detail = state(Spec::gpus(2).probed());
    act(&mut detail, &[Action::OpenDetail]);
    views.push(("detail", detail));
    let mut filter = state(Spec::gpus(2));
    act(&mut filter, &[Action::FilterStart, Action::FilterInput('x')]);
    views.push(("filter", filter));
    let mut confirm = State::new(&options());
    let mut snap = snapshot(Spec::gpus(1));
    snap.processes[0].pid = child.id();
    confirm.on_snapshot(Arc::new(snap));
    act(&mut confirm, &[Action::Kill]);
    assert!(matches!(confirm.top(), Some(gpuscope::tui::state::View::Confirm(_))), "{:?}", confirm.status);
    views.push(("confirm", confirm));
    let mut nvml = State::new(&TuiOptions { ascii: true, ..options() });
    nvml.on_snapshot(Arc::new(without_nvml()));
    views.push(("no nvml, ascii", nvml));
    for (name, mut s) in views {
        for (w, h) in [(0, 0), (1, 1), (20, 5), (40, 10), (39, 24), (80, 9)] {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render_text(&mut s, w, h)));
            assert!(result.is_ok(), "{name} at {w}x{h} panicked");
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Invisible formatting characters in a command, a user and a host name
/// are drawn as a visible mark, and wide characters are fitted by display
/// width: every row of the frame is exactly as wide as the terminal.
#[test]
fn spoofing_and_wide_characters_are_drawn_safely() {
    let mut snap = snapshot(Spec::gpus(1).probed());
    snap.host.hostname = Some("node\u{202E}10".into());
    for p in &mut snap.processes {
        p.command =
            Some(format!("python3 ev\u{202E}yp.niart\u{2066} 训练{} {}", "模型".repeat(30), "🔥😀".repeat(20)).into());
        p.user = Some("al\u{200B}ice".into());
    }
    let mut s = state(Spec::gpus(1).probed());
    s.on_snapshot(Arc::new(snap));
    let invisible = |c: char| matches!(c, '\u{202E}' | '\u{2066}' | '\u{200B}');
    for (w, h, actions) in [(80, 24, &[][..]), (200, 50, &[]), (80, 24, &[Action::OpenDetail])] {
        act(&mut s, actions);
        let terminal = render(&mut s, w, h);
        let buf = terminal.backend().buffer();
        let text: String = buf.content.iter().map(|c| c.symbol()).collect();
        assert!(!text.chars().any(invisible), "{w}x{h} {actions:?}");
        assert!(text.contains("ev\u{FFFD}yp.nia") && text.contains("node\u{FFFD}10"), "{w}x{h} {actions:?}:\n{text}");
        // As a terminal shows it: a wide character covers the next cell.
        for row in buf.content.chunks(w as usize) {
            let (mut columns, mut cells) = (0, row.iter());
            while let Some(cell) = cells.next() {
                let cw = unicode_width::UnicodeWidthStr::width(cell.symbol()).max(1);
                columns += cw;
                if cw > 1 {
                    cells.nth(cw - 2);
                }
            }
            assert!(columns <= w as usize, "{w}x{h}: a row of {columns} columns");
        }
    }
}

#[test]
fn workloads_get_a_column_a_filter_and_a_grouping() {
    let mut s = state(Spec::gpus(4).workloads());
    // At 80 columns every other column has a figure to show: WORKLOAD is
    // the one that gives way, and Enter shows the workload in full.
    let small = render_text(&mut s, 80, 24);
    assert!(!small.contains("WORKLOAD"), "{small}");
    insta::assert_snapshot!("workloads_80x24", small);
    let medium = render_text(&mut s, 100, 30);
    assert!(medium.contains("WORKLOAD") && medium.contains("pod:7a1b2c3d"), "{medium}");
    act(&mut s, &[Action::OpenDetail]);
    let detail = render_text(&mut s, 80, 24);
    assert!(
        detail.contains("workload  docker  container") && detail.contains(&"9f2e4d6c8b0a1e3f".repeat(4)),
        "{detail}"
    );
    insta::assert_snapshot!("workloads_detail_80x24", detail);
    act(&mut s, &[Action::Back]);
    let big = render_text(&mut s, 200, 50);
    for tag in ["pod:7a1b2c3d", "slurm:48214.0", "9f2e4d6c8b0a"] {
        assert!(big.contains(tag), "{tag}:\n{big}");
    }
    insta::assert_snapshot!("workloads_200x50", big);

    // With probes, the allocator columns keep their place over WORKLOAD.
    let mut probed = state(Spec::gpus(4).probed().workloads());
    let narrow = render_text(&mut probed, 100, 30);
    assert!(narrow.contains("ALLOC") && !narrow.contains("WORKLOAD"), "{narrow}");

    act(&mut s, &[Action::GroupByWorkload]);
    let grouped = render_text(&mut s, 200, 50);
    assert!(grouped.contains("by workload"), "{grouped}");
    let order: Vec<usize> =
        ["pod:7a1b2c3d", "9f2e4d6c8b0a", "slurm:48214.0"].iter().map(|t| grouped.find(t).unwrap()).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "pods, containers, then jobs:\n{grouped}");
    insta::assert_snapshot!("workloads_grouped_200x50", grouped);

    act(&mut s, &[Action::FilterStart]);
    for c in "slurm".chars() {
        act(&mut s, &[Action::FilterInput(c)]);
    }
    let filtered = render_text(&mut s, 120, 30);
    assert!(filtered.contains("Processes 1") && filtered.contains("slurm:48214.0"), "{filtered}");
}

#[test]
fn in_a_container_the_header_says_so_once_and_host_pids_are_marked() {
    let mut s = state(Spec { container: true, ..Spec::gpus(2) });
    let text = render_text(&mut s, 200, 50);
    assert_eq!(text.matches("in a container").count(), 1, "{text}");
    assert!(text.contains("[host] python3") && !text.contains("alice"), "{text}");
    insta::assert_snapshot!("container_200x50", text);
    insta::assert_snapshot!("container_80x24", render_text(&mut s, 80, 24));
}

#[test]
fn a_unified_memory_board_shows_the_machine_s_memory_marked_unified() {
    let mut s = State::new(&options());
    for step in (0..=120u64).rev() {
        s.on_snapshot(Arc::new(tui_fixtures::unified(snapshot_at(Spec::gpus(2).probed(), T0 - step * 5000, step))));
    }
    let small = render_text(&mut s, 80, 24);
    let gb10 = small.lines().position(|l| l.contains("GB10")).expect("the GB10's line");
    let bar = small.lines().nth(gb10 + 1).unwrap();
    assert!(bar.contains("58.0/128.0 GiB unified"), "{small}");
    assert_eq!(small.matches("unified").count(), 1, "only the GB10's memory is the machine's:\n{small}");
    insta::assert_snapshot!("unified_memory_80x24", small);
    insta::assert_snapshot!("unified_memory_200x50", render_text(&mut s, 200, 50));
}

#[test]
fn a_named_pod_shows_its_name_and_where_the_name_came_from() {
    let name = |mut snap: gpuscope::model::Snapshot| {
        for p in &mut snap.processes {
            if let Some(w) = p.workload.as_mut().filter(|w| w.pod_uid.is_some()) {
                let w = Arc::make_mut(w);
                w.pod.pod_name = Some("trainer-0".into());
                w.pod.pod_namespace = Some("ml".into());
                w.pod.container_name = Some("main".into());
                w.pod.pod_source = Some(gpuscope::model::PodSource::Kubelet);
            }
        }
        snap
    };
    let mut s = State::new(&options());
    for step in (0..=120u64).rev() {
        s.on_snapshot(Arc::new(name(snapshot_at(Spec::gpus(4).workloads(), T0 - step * 5000, step))));
    }
    let big = render_text(&mut s, 200, 50);
    assert!(big.contains("pod:trainer-0") && !big.contains("pod:7a1b2c3d"), "{big}");
    insta::assert_snapshot!("workloads_named_pod_200x50", big);
    let row = s.rows().iter().position(|r| r.key.gpu == 0).unwrap();
    for _ in 0..row {
        act(&mut s, &[Action::Move(1)]);
    }
    act(&mut s, &[Action::OpenDetail]);
    let detail = render_text(&mut s, 80, 24);
    assert!(detail.contains("ml/trainer-0 (kubelet)") && detail.contains("container main"), "{detail}");
    insta::assert_snapshot!("workloads_named_pod_detail_80x24", detail);
}

#[test]
fn a_seven_way_mig_gpu_shows_each_mig_device_under_it() {
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(tui_fixtures::mig_7way()));
    let small = render_text(&mut s, 80, 24);
    let migs: Vec<&str> = small.lines().filter(|l| l.contains("MIG ") && l.contains("1g.10gb")).collect();
    assert_eq!(migs.len(), 7, "{small}");
    assert!(migs[4].contains("2.0/9.6 GiB") && migs[4].contains("1 proc"), "{small}");
    assert!(small.lines().any(|l| l.contains(" 0:4 ")), "the process row names its MIG device:\n{small}");
    insta::assert_snapshot!("mig_7way_80x24", small);
    insta::assert_snapshot!("mig_7way_200x50", render_text(&mut s, 200, 50));

    // Tab: the GPU, then each of its MIG devices; the process table narrows.
    act(
        &mut s,
        &[
            Action::FocusNext,
            Action::FocusNext,
            Action::FocusNext,
            Action::FocusNext,
            Action::FocusNext,
            Action::FocusNext,
        ],
    );
    assert_eq!((s.focus, s.focus_mig), (Some(0), Some(4)));
    let focused = render_text(&mut s, 80, 24);
    assert!(focused.contains("focus: GPU 0 MIG 4") && focused.contains("GPU 0 MIG 4 only"), "{focused}");
    assert!(focused.lines().any(|l| l.starts_with(">") && l.contains("MIG 4")), "{focused}");
    assert_eq!(s.rows().len(), 1);
    assert_eq!(s.rows()[0].key.pid, 4_200_105);
    act(&mut s, &[Action::FocusNext, Action::FocusNext, Action::FocusNext]);
    assert_eq!((s.focus, s.focus_mig), (None, None), "past the last MIG device: all GPUs");
    act(&mut s, &[Action::FocusPrev]);
    assert_eq!((s.focus, s.focus_mig), (Some(0), Some(6)));
    act(&mut s, &[Action::Focus(0)]);
    assert_eq!((s.focus, s.focus_mig), (Some(0), None), "a digit focuses the whole GPU");
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        render(&mut s, w, h);
    }
}

/// The probe's answer for a job that fragmented its large pool: split
/// segments with holes between live blocks, a wholly free segment, a
/// pending-free block, and the small pool.
fn fragmented_map(taken_ms: u64) -> gpuscope::probe::segmap::SegmentMap {
    let mib = |n: u64| n << 20;
    let mut segments = Vec::new();
    let mut pools = serde_json::Map::new();
    let mut large = (0u64, 0u64, 0u64, 0u64, 0u64);
    for i in 0..14u64 {
        let runs = if i == 3 {
            vec![("f", mib(512))]
        } else {
            vec![("a", mib(200 + i * 10)), ("s", mib(60 + i)), ("a", mib(100)), ("p", mib(8)), ("s", mib(40))]
        };
        let total: u64 = runs.iter().map(|r| r.1).sum();
        let allocated: u64 = runs.iter().filter(|r| r.0 == "a").map(|r| r.1).sum();
        let split: u64 = runs.iter().filter(|r| r.0 == "s").map(|r| r.1).sum();
        let free: u64 = runs.iter().filter(|r| r.0 == "s" || r.0 == "f").map(|r| r.1).sum();
        let largest = runs.iter().filter(|r| r.0 == "s" || r.0 == "f").map(|r| r.1).max().unwrap_or(0);
        large = (large.0 + total, large.1 + allocated, large.2 + split, large.3 + free - split, large.4.max(largest));
        segments.push(serde_json::json!({"pool": "large", "address": 0x7f00_0000_0000u64 + i * mib(1024),
            "total": total, "allocated": allocated, "inactive_split": split, "free": free,
            "largest_free_block": largest, "runs": runs}));
    }
    for i in 0..3u64 {
        segments.push(serde_json::json!({"pool": "small", "address": 0x7e00_0000_0000u64 + i * mib(2),
            "total": mib(2), "allocated": mib(1), "inactive_split": mib(1), "free": mib(1),
            "largest_free_block": 786432, "runs": [["a", 524288], ["s", 786432], ["a", 524288], ["s", 262144]]}));
    }
    pools.insert(
        "large".into(),
        serde_json::json!({"pool": "large", "segments": 14, "total": large.0,
        "allocated": large.1, "inactive_split": large.2, "free": large.3, "largest_free_block": large.4}),
    );
    pools.insert(
        "small".into(),
        serde_json::json!({"pool": "small", "segments": 3, "total": mib(6),
        "allocated": mib(3), "inactive_split": mib(3), "free": 0, "largest_free_block": 786432}),
    );
    serde_json::from_value(serde_json::json!({"format": "gpuscope-segments", "version": 1, "id": "r", "state": "done",
        "error": null, "device": 1, "taken_unix_ms": taken_ms, "pools": [pools["large"], pools["small"]],
        "segments": segments, "truncated": false, "segments_left_out": 0}))
    .unwrap()
}

fn with_map(s: &mut State, state: gpuscope::probe::segmap::MapState) {
    let Some(gpuscope::tui::state::View::Segments(view)) = s.top().cloned() else {
        panic!("no map view: {:?}", s.status)
    };
    s.segmap = Some(gpuscope::probe::segmap::MapUpdate { pid: view.key.pid, ordinal: view.ordinal, state });
}

#[test]
fn the_segment_map_shows_where_the_free_memory_is() {
    use gpuscope::probe::segmap::MapState;
    let mut s = state(Spec { oom: true, ..Spec::gpus(2).probed() });
    act(&mut s, &[Action::Focus(1), Action::SegmentMap]);
    let waiting = render_text(&mut s, 80, 24);
    assert!(waiting.contains("asking PID"), "{waiting}");
    with_map(&mut s, MapState::Ready(Arc::new(fragmented_map(T0 - 600))));
    let small = render_text(&mut s, 80, 24);
    let big = render_text(&mut s, 200, 50);
    // The OOM's request is the first question: 2 GiB, in the large pool.
    assert!(big.contains("An allocation of 2.0 GiB (large pool) would NOT fit without a new cudaMalloc"), "{big}");
    assert!(big.contains("the largest free block there is 512 MiB"), "{big}");
    assert!(big.contains("large pool: 14 segments"), "{big}");
    assert!(small.contains("below (j/k"), "{small}");
    insta::assert_snapshot!("segments_80x24", small);
    insta::assert_snapshot!("segments_200x50", big);
    // Halving the size asked about until it fits.
    act(&mut s, &[Action::MapSmaller, Action::MapSmaller]);
    assert!(render_text(&mut s, 200, 50).contains("An allocation of 512 MiB (large pool) would fit"));
    // Scrolling shows the rest.
    act(&mut s, &[Action::Page(1)]);
    assert!(render_text(&mut s, 80, 24).contains("above"));
    with_map(&mut s, MapState::Failed("cudaMallocAsync keeps no segments of its own to show".into()));
    let failed = render_text(&mut s, 80, 24);
    assert!(failed.contains("cudaMallocAsync keeps no segments"), "{failed}");
    let mut plain = state_with(Spec { oom: true, ..Spec::gpus(2).probed() }, TuiOptions { ascii: true, ..options() });
    act(&mut plain, &[Action::Focus(1), Action::SegmentMap]);
    with_map(&mut plain, MapState::Ready(Arc::new(fragmented_map(T0 - 600))));
    let ascii = render_text(&mut plain, 80, 24);
    assert!(ascii.is_ascii() && ascii.contains("~"), "{ascii}");
    for (w, h) in [(0, 0), (1, 1), (20, 5), (40, 10), (39, 24), (80, 9)] {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render_text(&mut s, w, h)));
        assert!(result.is_ok(), "the segment map at {w}x{h} panicked");
    }
    // Esc closes it, and tells the loop to stop asking.
    assert_eq!(apply(&mut s, Action::Back, T0), Some(gpuscope::tui::update::Effect::SegmentsClose));
    assert!(s.segmap.is_none() && s.views.is_empty());
}

#[test]
fn the_map_and_the_snapshot_need_a_pytorch_probe() {
    let mut s = state(Spec::gpus(2));
    act(&mut s, &[Action::SegmentMap]);
    assert!(s.views.is_empty());
    assert!(s.status.as_deref().is_some_and(|m| m.contains("has no gpuscope probe")), "{:?}", s.status);
    act(&mut s, &[Action::Memviz]);
    assert!(s.status.as_deref().is_some_and(|m| m.contains("has no gpuscope probe")), "{:?}", s.status);
}

/// Two GPUs of `spec` with NVLink: GPU 0's 18 links up and busy, GPU 1's
/// link 17 down, before any traffic was read.
fn with_links(spec: Spec) -> State {
    use gpuscope::model::{NvLink, NvLinkState};
    let mut snap = snapshot(Spec { gpus: 2, ..spec });
    let links = |down: Option<u32>| (0..18).map(|l| NvLinkState { link: l, active: Some(l) != down }).collect();
    snap.gpus[0].nvlink =
        Some(NvLink { links: links(None), tx_bytes_per_s: Some(166 << 30), rx_bytes_per_s: Some(162 << 30) });
    snap.gpus[1].nvlink = Some(NvLink { links: links(Some(17)), tx_bytes_per_s: None, rx_bytes_per_s: None });
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(snap));
    s
}

#[test]
fn nvlink_shows_beside_each_gpu_that_has_it() {
    let mut s = with_links(Spec::gpus(2).probed());
    let big = render_text(&mut s, 200, 50);
    assert!(big.contains("NVLink 18/18 328.0G/s"), "{big}");
    assert!(big.contains("NVLink 17/18"), "{big}");
    insta::assert_snapshot!("nvlink_200x50", big);
    insta::assert_snapshot!("nvlink_80x24", render_text(&mut s, 80, 24));
}

/// `--demo=auto` without a driver says why in the header, where the
/// dashboard's user sees it (not on stderr after quitting).
#[test]
fn the_fallback_to_simulated_gpus_is_said_in_the_header() {
    let why = "no NVIDIA driver found (libnvidia-ml.so.1: cannot open shared object file: No such file or directory)";
    let mut s = state_with(Spec::gpus(2), TuiOptions { notice: Some(why.into()), ..options() });
    let mut snap = (**s.latest.as_ref().unwrap()).clone();
    snap.simulated = true;
    s.on_snapshot(Arc::new(snap));
    let big = render_text(&mut s, 200, 50);
    let first = big.lines().next().unwrap();
    assert!(first.contains("SIMULATED GPUs") && first.contains("(no NVIDIA driver found (libnvidia-ml.so.1"), "{big}");
    let small = render_text(&mut s, 80, 24);
    assert!(small.lines().next().unwrap().starts_with("gpuscope  SIMULATED GPUs"), "{small}");
    insta::assert_snapshot!("demo_auto_header_80x24", small);
    insta::assert_snapshot!("demo_auto_header_200x50", big);
}

#[test]
fn the_alert_list_shows_every_alert_in_full() {
    let mut s = state(Spec { alerts: true, ..Spec::gpus(8).probed() });
    act(&mut s, &[Action::AlertList]);
    let small = render_text(&mut s, 80, 24);
    let big = render_text(&mut s, 200, 50);
    let n = s.shown().unwrap().alerts.len();
    assert!(big.contains(&format!("Alerts {n}")), "{big}");
    for a in &s.shown().unwrap().alerts {
        assert!(big.contains(&a.hint[..a.hint.len().min(40)]), "hint of {:?} missing:\n{big}", a.kind);
    }
    insta::assert_snapshot!("alert_list_80x24", small);
    insta::assert_snapshot!("alert_list_200x50", big);
    // A short terminal shows part of the list; j scrolls it.
    let top = render_text(&mut s, 80, 10);
    act(&mut s, &[Action::Move(3)]);
    let scrolled = render_text(&mut s, 80, 10);
    assert_ne!(top, scrolled, "j scrolls the list");
    assert!(scrolled.contains("fragmentation 36%"), "{scrolled}");
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        render(&mut s, w, h);
    }
    act(&mut s, &[Action::Back]);
    assert!(s.views.is_empty());
}

/// `-u USER` and `-p PID,...`, as htop takes them: the table keeps only
/// those processes, and its title says why the others are missing.
#[test]
fn users_and_pids_from_the_command_line_narrow_the_table() {
    use gpuscope::settings::ProcessFilter;
    let only = ProcessFilter { users: vec!["alice".into()], pids: Vec::new() };
    let mut s = state_with(Spec::gpus(4).probed(), TuiOptions { only, ..options() });
    assert!(s.rows().iter().all(|r| r.process.user.as_deref() == Some("alice")));
    assert_eq!(s.rows().len(), 2);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains("-u alice") && !text.contains("svc-infer"), "{text}");
    let only = ProcessFilter { users: Vec::new(), pids: vec![4_123_402] };
    let s = state_with(Spec::gpus(4).probed(), TuiOptions { only, ..options() });
    let pids: Vec<u32> = s.rows().iter().map(|r| r.key.pid).collect();
    assert_eq!(pids, [4_123_402]);
}

#[test]
fn the_environment_view_shows_what_decides_gpu_use() {
    use gpuscope::tui::state::View;
    let mut s = state(Spec::gpus(2).probed());
    act(&mut s, &[Action::Environ]);
    let Some(View::Environ { pid, .. }) = s.top().cloned() else { panic!("{:?}", s.status) };
    let reading = render_text(&mut s, 80, 24);
    assert!(reading.contains(&format!("reading /proc/{pid}/environ")), "{reading}");
    let vars = vec![
        ("CUDA_VISIBLE_DEVICES".to_string(), "2,3".to_string()),
        ("MASTER_ADDR".to_string(), "10.0.0.1".to_string()),
        ("PYTORCH_CUDA_ALLOC_CONF".to_string(), "expandable_segments:True".to_string()),
        ("RANK".to_string(), "1".to_string()),
    ];
    s.views.pop();
    s.views.push(View::Environ { pid, vars: Some(Ok(vars)) });
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("PYTORCH_CUDA_ALLOC_CONF = expandable_segments:True"), "{small}");
    insta::assert_snapshot!("environ_80x24", small);
    insta::assert_snapshot!("environ_200x50", render_text(&mut s, 200, 50));
    s.views.pop();
    s.views.push(View::Environ { pid, vars: Some(Err("PID 1 is readable only by its owner or root".into())) });
    assert!(render_text(&mut s, 80, 24).contains("only by its owner or root"));
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        render(&mut s, w, h);
    }
}

/// F3: the selection jumps to the match, no row is hidden, and the
/// prompt says when nothing matches.
#[test]
fn f3_search_selects_without_hiding_rows() {
    let mut s = state(Spec::gpus(4).probed());
    act(&mut s, &[Action::SearchStart]);
    for c in "carol".chars() {
        act(&mut s, &[Action::SearchInput(c)]);
    }
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("Processes 4") && small.contains("search: carol_"), "{small}");
    assert!(small.lines().any(|l| l.starts_with('>') && l.contains("4123404")), "{small}");
    assert!(!small.contains("no match"), "{small}");
    insta::assert_snapshot!("search_80x24", small);
    insta::assert_snapshot!("search_200x50", render_text(&mut s, 200, 50));
    act(&mut s, &[Action::SearchInput('z')]);
    let missed = render_text(&mut s, 80, 24);
    assert!(missed.contains("no match") && missed.lines().any(|l| l.starts_with('>') && l.contains("4123404")));
    act(&mut s, &[Action::SearchBackspace, Action::SearchAccept]);
    assert!(!s.searching && s.search == "carol");
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        render(&mut s, w, h);
    }
}

/// torchrun (on no GPU) over its two ranks, an evaluation worker that
/// rank 0 started nested under it, vllm alone: `t` draws the tree.
fn tree_snapshot(ascii: bool) -> State {
    let mut snap = snapshot(Spec::gpus(4).probed());
    for p in &mut snap.processes {
        match p.pid {
            4_123_403 => (p.parent_pid, p.parent_name) = (Some(1), Some("systemd".into())),
            4_123_404 => {
                (p.parent_pid, p.parent_name) = (Some(4_123_401), Some("python3".into()));
                p.command = Some("python3 eval_worker.py --from-rank 0".into());
            }
            _ => p.parent_name = Some("torchrun".into()),
        }
    }
    let mut s = State::new(&TuiOptions { ascii, ..options() });
    s.on_snapshot(Arc::new(snap));
    s
}

#[test]
fn t_draws_the_process_tree() {
    use gpuscope::tui::state::View;
    let mut s = tree_snapshot(false);
    act(&mut s, &[Action::Tree]);
    let small = render_text(&mut s, 80, 24);
    let lines: Vec<&str> = small.lines().collect();
    let at = |text: &str| lines.iter().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{text}:\n{small}"));
    assert!(small.contains(" tree "), "the title says so:\n{small}");
    let header = lines[at("torchrun")];
    assert!(header.contains("4123300") && !header.contains("alice") && !header.starts_with('>'), "{small}");
    assert!(at("vllm serve") < at("torchrun"), "vllm holds the most memory:\n{small}");
    assert!(at("torchrun") < at("├─ python3 train") && lines[at("4123402")].contains("├─ python3 train"));
    assert!(lines[at("4123401")].contains("└─ python3 train"), "{small}");
    assert!(lines[at("4123404")].contains("   └─ python3 eval"), "nested under rank 0:\n{small}");
    let big = render_text(&mut s, 200, 50);
    for p in &s.shown().unwrap().processes {
        assert!(big.contains(&p.pid.to_string()), "the launchers' lines push no row off the table:\n{big}");
    }
    insta::assert_snapshot!("tree_80x24", small);
    insta::assert_snapshot!("tree_200x50", big);
    // The header is never selected: End then k walks rows only.
    act(&mut s, &[Action::First, Action::Move(1)]);
    assert_eq!(s.rows()[1].key.pid, 4_123_402);
    assert_eq!(s.selected.map(|k| k.pid), Some(4_123_402), "from vllm straight to rank 1, past the header");
    act(&mut s, &[Action::OpenDetail]);
    assert!(matches!(s.top(), Some(View::Detail(d)) if d.key.pid == 4_123_402));
    act(&mut s, &[Action::Back, Action::GroupByJob]);
    assert!(!render_text(&mut s, 80, 24).contains(" tree "), "J ends the tree");
    let mut plain = tree_snapshot(true);
    act(&mut plain, &[Action::Tree]);
    let ascii = render_text(&mut plain, 80, 24);
    assert!(ascii.is_ascii() && ascii.contains("`- python3 eval") && ascii.contains("|- python3"), "{ascii}");
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        render(&mut s, w, h);
    }
}

/// A tall wide terminal: the chart takes the rows a short process table
/// would leave blank; a long table keeps them.
#[test]
fn at_200x60_no_rows_stay_blank() {
    let mut few = state(Spec::gpus(4).probed());
    let text = render_text(&mut few, 200, 60);
    let blank_run = |t: &str| {
        let mut longest = 0;
        let mut run = 0;
        for l in t.lines() {
            run = if l.trim().is_empty() { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        longest
    };
    assert!(blank_run(&text) <= 2, "{text}");
    assert!(text.lines().nth(58).is_some_and(|l| l.contains("4123404")), "the table ends at the footer:\n{text}");
    insta::assert_snapshot!("four_gpus_200x60", text);
    let mut many = state(Spec { alerts: true, ..Spec::gpus(8).probed() });
    let text = render_text(&mut many, 200, 60);
    assert!(blank_run(&text) <= 2, "{text}");
    insta::assert_snapshot!("eight_gpus_200x60", text);
}

#[test]
fn f6_lists_the_sort_columns_over_the_dashboard() {
    let mut s = state(Spec::gpus(2).probed());
    act(&mut s, &[Action::SortMenu, Action::Move(2)]);
    let small = render_text(&mut s, 80, 24);
    for column in gpuscope::tui::rows::SORTABLE {
        assert!(small.contains(column.title()), "{}:\n{small}", column.title());
    }
    assert!(small.contains(" sort by ") && small.contains("  ▼ GPU MEM"), "{small}");
    assert!(small.lines().any(|l| l.contains(">   RESERVED")), "the cursor:\n{small}");
    insta::assert_snapshot!("sort_menu_80x24", small);
    insta::assert_snapshot!("sort_menu_200x50", render_text(&mut s, 200, 50));
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        render(&mut s, w, h);
    }
    act(&mut s, &[Action::SortPick]);
    assert!(render_text(&mut s, 80, 24).contains("RESERVED▼"));
}

/// The `?` box shows whole at 80x24 in every mode: its top and bottom
/// borders and every key it offers are on screen.
#[test]
fn help_fits_80x24_in_every_mode() {
    let (handle, _player) = tui_fixtures::replay_handle();
    let replay = TuiOptions { replay: Some(handle), ..options() };
    let modes =
        [("dashboard", options()), ("read-only", TuiOptions { read_only: true, ..options() }), ("replay", replay)];
    for (name, opts) in modes {
        let mut s = state_with(Spec { alerts: true, ..Spec::gpus(2).probed() }, opts);
        act(&mut s, &[Action::ToggleHelp]);
        let text = render_text(&mut s, 80, 24);
        assert!(
            text.lines().any(|l| l.starts_with("┌ keys")) && text.lines().any(|l| l.starts_with("└─")),
            "{name}:\n{text}"
        );
        for (keys, _) in gpuscope::tui::render::KEYS {
            let refused = name == "replay" && matches!(*keys, "p, Space" | "+, -" | "K, Del, F9" | "m" | "M, A");
            assert!(refused || text.contains(keys), "{name}: {keys}:\n{text}");
        }
    }
}

/// Ten minutes of snapshots, every GPU given every reading, then those of
/// the groups `wanted` does not ask taken away again.
fn state_asking(spec: Spec, wanted: Wanted) -> State {
    let mut state = State::new(&options());
    for step in (0..=120u64).rev() {
        let mut snap = with_every_reading(snapshot_at(spec, T0 - step * 5000, step));
        snap.gpus.iter_mut().for_each(|g| wanted.blank(g));
        state.on_snapshot(Arc::new(snap));
    }
    state
}

/// Eight GPUs, one lost, with alerts.
fn every_kind() -> Spec {
    Spec { alerts: true, lost: Some(5), ..Spec::gpus(8).probed() }
}

/// A snapshot with every reading, and the same as a source asking only
/// `wanted` reads it, which must differ.
fn with_and_without(wanted: Wanted) -> (gpuscope::model::Snapshot, gpuscope::model::Snapshot) {
    let full = with_every_reading(snapshot(every_kind()));
    let mut asked = full.clone();
    asked.gpus.iter_mut().for_each(|g| wanted.blank(g));
    assert_ne!(asked.gpus, full.gpus, "{wanted:?} leaves readings unasked");
    (full, asked)
}

/// What a frame of `state` at `w`x`h` has on screen of the readings the
/// dashboard asks only while shown.
fn on_screen(state: &mut State, w: u16, h: u16) -> OnScreen {
    let mut terminal = gpuscope::tui::term::Term::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    let clock = Clock::manual(T0 + 400);
    let mut shown = OnScreen::NONE;
    terminal.draw(|f| shown = gpuscope::tui::render::draw_with_hits(f, state, &clock).1.on_screen).unwrap();
    shown
}

/// Every frame is the same from a source asking only what the dashboard
/// always asks and what that frame says it has on screen (the poller is
/// told after each frame: `tui::steer`).
#[test]
fn the_dashboard_shows_no_reading_it_does_not_ask_the_driver_for() {
    with_and_without(Wanted::DASHBOARD);
    let spec = every_kind();
    let mut full = state_asking(spec, Wanted::ALL);
    let views: [&[Action]; 6] = [
        &[],
        &[Action::FocusNext],
        &[Action::Back, Action::Move(1), Action::OpenDetail],
        &[Action::Back, Action::AlertList],
        &[Action::Back, Action::Tree],
        &[Action::Tree, Action::GroupByJob],
    ];
    let mut done = Vec::new();
    for actions in views {
        act(&mut full, actions);
        done.extend_from_slice(actions);
        for (w, h) in [(80, 24), (200, 50), (300, 60)] {
            let shown = on_screen(&mut full, w, h);
            let mut asked = state_asking(spec, Wanted::DASHBOARD.showing(shown));
            act(&mut asked, &done);
            let text = render_text(&mut full, w, h);
            assert_eq!(render_text(&mut asked, w, h), text, "{actions:?} at {w}x{h}, with {shown:?} on screen");
        }
    }
}

#[test]
fn the_table_shows_no_reading_it_does_not_ask_the_driver_for() {
    let (full, asked) = with_and_without(Wanted::TABLE);
    let text = gpuscope::output::table::render(&full);
    assert!(text.contains("sw_power_cap") && text.contains("remapped rows"), "what it asks, it shows:\n{text}");
    assert_eq!(gpuscope::output::table::render(&asked), text);
}

/// After each frame the dashboard tells its poller whose CPU time and
/// host memory to read: the rows on screen and a page either side, all
/// of them where the order needs every process's, and no change while a
/// view covers the table.
#[test]
fn the_table_names_the_processes_near_the_screen() {
    let mut state = State::new(&options());
    state.on_snapshot(Arc::new(many_processes(200)));
    let draw = |state: &mut State| {
        let mut terminal = gpuscope::tui::term::Term::new(ratatui::backend::TestBackend::new(80, 24)).unwrap();
        let clock = Clock::manual(T0 + 400);
        terminal.draw(|f| (state.page, state.hits) = gpuscope::tui::render::draw_with_hits(f, state, &clock)).unwrap();
    };
    // The largest first: PIDs from 1199 down.
    let expected = |state: &State, from: usize, to: usize| {
        let mut pids: Vec<u32> = state.rows()[from..to].iter().map(|r| r.key.pid).collect();
        pids.sort_unstable();
        pids
    };
    draw(&mut state);
    let page = state.page;
    assert!(page >= 3, "room for {page} rows");
    assert_eq!(state.hits.near, Some(expected(&state, 0, 2 * page)), "the top: two pages");
    act(&mut state, &[Action::Page(1); 5]);
    draw(&mut state);
    let selected = state.selected_index(&state.rows()).unwrap();
    let offset = selected + 1 - page;
    let near = expected(&state, offset - page, offset + 2 * page);
    assert_eq!(state.hits.near.as_ref(), Some(&near));
    for (_, target) in &state.hits.targets {
        if let gpuscope::tui::mouse::Target::Row(key) = target {
            assert!(near.binary_search(&key.pid).is_ok(), "{key:?} is drawn");
        }
    }
    let figures = gpuscope::tui::steer::wanted(&state);
    assert_eq!(figures, Some(gpuscope::sources::Figures::Of(Arc::from(near.as_slice()))));
    assert!(near.len() == 3 * page && !figures.as_ref().unwrap().wants(1199), "{near:?}");
    act(&mut state, &[Action::OpenDetail]);
    draw(&mut state);
    assert_eq!((state.hits.near.as_ref(), gpuscope::tui::steer::wanted(&state)), (None, None), "the details");
    act(&mut state, &[Action::Back]);
    act(&mut state, &[Action::SortNext; 8]);
    draw(&mut state);
    assert_eq!(state.sort.column, gpuscope::tui::rows::Column::Cpu);
    assert_eq!(gpuscope::tui::steer::wanted(&state), Some(gpuscope::sources::Figures::All));
}

/// `--demo`: `m` and `e` on a demo rank show the demo's own answers, said
/// to be simulated, so every view can be seen without a GPU.
#[test]
fn the_demos_segment_map_and_environment_are_simulated() {
    use gpuscope::tui::state::View;
    let mut snap = snapshot(Spec::gpus(2).probed());
    snap.simulated = true;
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(snap));
    act(&mut s, &[Action::Focus(0), Action::SegmentMap]);
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("Segments: PID 4123401 on GPU 0 (cuda:0), simulated"), "{small}");
    assert!(small.contains("would NOT fit without a new cudaMalloc"), "{small}");
    insta::assert_snapshot!("demo_segments_80x24", small);
    insta::assert_snapshot!("demo_segments_200x50", render_text(&mut s, 200, 50));
    act(&mut s, &[Action::Back, Action::Environ]);
    assert!(matches!(s.top(), Some(View::Environ { vars: Some(Ok(_)), .. })), "{:?}", s.status);
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("Environment of PID 4123401 (simulated)") && small.contains("RANK"), "{small}");
    insta::assert_snapshot!("demo_environ_80x24", small);
    insta::assert_snapshot!("demo_environ_200x50", render_text(&mut s, 200, 50));
}

/// The sizes every new view must draw at without a panic.
fn renders_tiny(state: &mut State) {
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        render(state, w, h);
    }
}

/// The first cell of the first place `needle` is drawn, by cell.
fn cell_of(terminal: &gpuscope::tui::term::Term<ratatui::backend::TestBackend>, needle: &str) -> ratatui::buffer::Cell {
    let buf = terminal.backend().buffer();
    let want: Vec<String> = needle.chars().map(String::from).collect();
    for row in buf.content.chunks(usize::from(buf.area.width.max(1))) {
        for x in 0..row.len() {
            if row.len() - x >= want.len() && row[x..].iter().zip(&want).all(|(c, s)| c.symbol() == s) {
                return row[x].clone();
            }
        }
    }
    panic!("{needle:?} is not drawn");
}

fn gpu_line(text: &str, index: u32) -> &str {
    text.lines().find(|l| l.starts_with(&format!("  {index} NVIDIA"))).unwrap_or_else(|| panic!("GPU {index}:\n{text}"))
}

/// GPM's activity stands beside utilisation: SM activity at any width,
/// tensor and DRAM where there is room; a GPU without any (GPU 2 was
/// refused them) says n/a, never 0; GPU 0, 80% busy with 6% of its SMs
/// working, is a warning, marked `!` as well as coloured.
#[test]
fn activity_stands_beside_utilisation() {
    let mut s = state(Spec::gpus(4).activity());
    let terminal = render(&mut s, 80, 24);
    let small = tui_fixtures::text(&terminal);
    assert!(gpu_line(&small, 0).contains("util  80%  SM  6%!  mem  40%"), "{small}");
    assert!(gpu_line(&small, 1).contains("SM  62%") && !small.contains("TC "), "only SM at 80 columns:\n{small}");
    assert!(gpu_line(&small, 2).contains("SM  n/a"), "{small}");
    assert!(gpu_line(&small, 3).contains("SM   0%"), "idle is a figure too:\n{small}");
    let warned = cell_of(&terminal, "6%!");
    assert_eq!(
        (warned.fg, warned.modifier.contains(ratatui::style::Modifier::BOLD)),
        (ratatui::style::Color::Yellow, true)
    );
    assert_eq!(cell_of(&terminal, "62%").fg, ratatui::style::Color::Reset, "a healthy GPU is not a warning");
    insta::assert_snapshot!("activity_80x24", small);

    let big = render_text(&mut s, 200, 50);
    assert!(gpu_line(&big, 0).contains("util  80%  SM  6%!  TC   0%  DRAM   3%  mem  40%"), "{big}");
    assert!(gpu_line(&big, 2).contains("SM  n/a  TC  n/a  DRAM  n/a"), "{big}");
    assert!(big.contains("• util × SM + TC ∘ DRAM"), "the chart draws activity:\n{big}");
    insta::assert_snapshot!("activity_200x50", big);

    // The chart's legend names as many as fit, SM first; the memory's
    // names shorten to make room.
    let mut two = state(Spec::gpus(2).probed().activity());
    let chart = render_text(&mut two, 80, 24);
    assert!(chart.contains("▓ resv █ alloc • util × SM + TC ─") && !chart.contains("DRAM"), "{chart}");
    insta::assert_snapshot!("activity_chart_80x24", chart);

    // Eight GPUs at 80x24, a line each: SM beside UTIL.
    let mut many = state(Spec::gpus(8).activity());
    let compact = render_text(&mut many, 80, 24);
    assert!(compact.contains("UTIL   SM  MEM"), "{compact}");
    assert!(compact.lines().any(|l| l.contains(" 0 H100 80GB HBM3") && l.contains(" 80%  6%!  40%")), "{compact}");
    insta::assert_snapshot!("activity_compact_80x24", compact);
    renders_tiny(&mut s);
    renders_tiny(&mut many);
    // Healthy links give way to tensor and DRAM activity; a link down
    // goes before them.
    let big = render_text(&mut with_links(Spec::gpus(2).activity()), 200, 50);
    assert!(gpu_line(&big, 0).contains("DRAM   3%") && !gpu_line(&big, 0).contains("NVLink"), "{big}");
    assert!(gpu_line(&big, 1).contains("TC  44%") && gpu_line(&big, 1).contains("NVLink 17/18"), "{big}");
    assert!(!gpu_line(&big, 1).contains("DRAM"), "{big}");
    // Without activity on any GPU, the lines stay as they were.
    let plain = render_text(&mut state(Spec::gpus(4)), 200, 50);
    assert!(!plain.contains(" SM ") && !plain.contains("× SM"), "{plain}");
}

/// The first row's details at 80x24, which must be `whose`.
fn first_details(spec: Spec, whose: &str) -> (State, String) {
    let mut s = state(spec);
    act(&mut s, &[Action::OpenDetail]);
    let text = render_text(&mut s, 80, 24);
    assert!(text.contains(whose), "{text}");
    (s, text)
}

/// The details of a process show its GPU's activity counters, each with
/// what it counts.
#[test]
fn detail_view_shows_the_gpu_activity() {
    // GPU 1's process holds the most memory: the first row.
    let (mut s, small) = first_details(Spec::gpus(2).activity(), "PID 4123402 on GPU 1");
    assert!(small.contains("activity  GPU 1 over 1s (NVML GPM), share of the time:"), "{small}");
    assert!(small.contains("SM active 62% (time with a warp)  occupancy 31% (warps of the maximum)"), "{small}");
    assert!(
        small.contains("tensor any 44%  HMMA 44% (fp16/bf16)  IMMA n/a (int)"),
        "a metric the board lacks:\n{small}"
    );
    assert!(small.contains("NVLink tx 139.7 GiB/s"), "{small}");
    insta::assert_snapshot!("detail_activity_80x24", small);
    insta::assert_snapshot!("detail_activity_200x50", render_text(&mut s, 200, 50));

    let mut probed = state(Spec { alerts: true, ..Spec::gpus(2).probed().activity() });
    act(&mut probed, &[Action::OpenDetail]);
    let crowded = render_text(&mut probed, 80, 24);
    assert!(crowded.contains("SM active 62% (time with a warp)"), "every counter, with its meaning:\n{crowded}");
    assert!(crowded.contains("more lines"), "{crowded}");
    act(&mut probed, &[Action::Last]);
    let end = render_text(&mut probed, 80, 24);
    assert!(end.contains("hints     · fragmentation 36%"), "the hints at the end:\n{end}");
    assert!(render_text(&mut probed, 200, 50).contains("DRAM 38% (memory bandwidth)"), "room for all at 200x50");
    renders_tiny(&mut s);
    renders_tiny(&mut probed);
}

/// A GPU without activity says why, in the words of the reason.
#[test]
fn detail_view_says_why_a_gpu_has_no_activity() {
    // GPU 2's inference server holds the most memory.
    let (mut s, small) = first_details(Spec::gpus(3).activity(), "PID 4123403 on GPU 2");
    assert!(small.contains("activity  GPU 2: n/a, the driver refused (no permission); asking again"), "{small}");
    assert!(!small.contains("SM active"), "{small}");
    insta::assert_snapshot!("detail_no_activity_80x24", small);
    insta::assert_snapshot!("detail_no_activity_200x50", render_text(&mut s, 200, 50));
    renders_tiny(&mut s);
}

/// UTIL% and GMBW% (NVML's per-process samples) appear where some GPU
/// samples its processes: `n/a` on a GPU that does not, `-` for a process
/// with no sample in the period; `s` and F6 sort by them.
#[test]
fn the_process_table_shows_each_process_share_of_its_gpu() {
    let mut s = state(Spec::gpus(4).shares());
    let small = render_text(&mut s, 80, 24);
    let row = |text: &str, pid: u32| text.lines().find(|l| l.contains(&pid.to_string())).unwrap_or("").to_string();
    assert!(small.contains("GPU MEM▼  UTIL%   CPU%"), "UTIL% outlasts TYPE and GMBW% at 80 columns:\n{small}");
    assert!(row(&small, 4_123_402).contains("GiB     77  101.3"), "{small}");
    assert!(row(&small, 4_123_403).contains("GiB    n/a  101.3"), "a GPU that does not sample:\n{small}");
    assert!(row(&small, 4_123_404).contains("MiB      -  101.3"), "no sample this period:\n{small}");
    insta::assert_snapshot!("process_shares_80x24", small);
    let big = render_text(&mut s, 200, 50);
    assert!(big.contains(" UTIL%  GMBW%   CPU%") && row(&big, 4_123_401).contains("  57     20  "), "{big}");
    insta::assert_snapshot!("process_shares_200x50", big);

    act(&mut s, &[Action::SortNext; 5]);
    assert_eq!(s.sort.column, gpuscope::tui::rows::Column::Util);
    let pids: Vec<u32> = s.rows().iter().map(|r| r.key.pid).collect();
    assert_eq!(pids, [4_123_402, 4_123_401, 4_123_403, 4_123_404], "largest first, unknown last");
    assert!(render_text(&mut s, 80, 24).contains("UTIL%▼"));
    act(&mut s, &[Action::SortNext]);
    assert_eq!(s.sort.column, gpuscope::tui::rows::Column::MemBw);
    assert!(render_text(&mut s, 200, 50).contains("GMBW%▼"));
    renders_tiny(&mut s);
    assert!(!render_text(&mut state(Spec::gpus(4)), 200, 50).contains("UTIL%"), "no GPU samples: no column");
}

/// Each MIG device's line has its GPU instance's activity; one without
/// says n/a; a MIG process's details name the instance.
#[test]
fn mig_devices_show_their_own_activity() {
    let mut snap = tui_fixtures::mig_7way();
    for m in &mut snap.gpus[0].mig_devices {
        let sm = [Some(71.0), Some(12.0), Some(35.0), None, Some(0.0), None, None][m.index as usize];
        m.activity = sm.map(|sm| gpuscope::model::Activity {
            period_ms: 1000,
            sm_active: Some(sm),
            tensor_active: Some(sm * 0.7),
            dram_active: Some(sm / 2.0),
            ..Default::default()
        });
        m.activity_unavailable = sm.is_none().then_some(gpuscope::model::ActivityUnavailable::FirstSample);
    }
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(snap));
    let small = render_text(&mut s, 80, 24);
    let mig = |text: &str, i: u32| {
        text.lines().find(|l| l.contains(&format!("MIG {i} 1g.10gb"))).unwrap_or_else(|| panic!("{text}")).to_string()
    };
    assert!(mig(&small, 0).contains("SM  71%  TC  50%  DRAM  36%"), "{small}");
    assert!(mig(&small, 3).contains("SM  n/a  TC  n/a  DRAM  n/a"), "{small}");
    assert!(mig(&small, 4).contains("1 proc"), "the count stays:\n{small}");
    insta::assert_snapshot!("mig_activity_80x24", small);
    insta::assert_snapshot!("mig_activity_200x50", render_text(&mut s, 200, 50));
    act(&mut s, &[Action::OpenDetail]);
    let detail = render_text(&mut s, 200, 50);
    assert!(detail.contains("activity  GPU 0 MIG 2 (its GPU instance) over 1s"), "{detail}");
    renders_tiny(&mut s);
}

/// Two GPUs whose health is not ok: GPU 0 critical (a row remapping
/// failed, a critical Xid), GPU 1 a warning (hardware thermal slowdown)
/// after an application's Xid 13.
fn unhealthy() -> State {
    use gpuscope::model::{
        DriverEvent, DriverEventKind, Health, HealthCode, HealthReason, Severity, Timestamp, XidAction,
    };
    let mut snap = snapshot(Spec::gpus(2).probed());
    let reason = |code, severity, message: &str| HealthReason { code, severity, message: message.into() };
    let xid = |number, action, severity, meaning: &str| DriverEvent {
        time: Timestamp::from_system(std::time::UNIX_EPOCH + std::time::Duration::from_millis(T0 - 90_000)),
        kind: DriverEventKind::Xid,
        xid: Some(number),
        mnemonic: None,
        meaning: Some(meaning.into()),
        action: Some(action),
        severity,
        gpu_instance_id: None,
        compute_instance_id: None,
    };
    snap.gpus[0].health = Some(Health::from_reasons(
        vec![
            reason(HealthCode::RowRemapFailed, Severity::Critical, "a row remapping failed: replace the board"),
            reason(HealthCode::Xid, Severity::Critical, "Xid 48 at 12:00: double-bit ECC error; reset the GPU"),
        ],
        Vec::new(),
    ));
    snap.gpus[0].driver_events.push(xid(
        48,
        XidAction::ResetGpu,
        Severity::Critical,
        "double-bit (uncorrectable) ECC error in device memory",
    ));
    snap.gpus[1].health = Some(Health::from_reasons(
        vec![reason(HealthCode::HwThermalSlowdown, Severity::Warning, "the hardware slows the clocks down: too hot")],
        Vec::new(),
    ));
    snap.gpus[1].driver_events.push(xid(13, XidAction::RestartApp, Severity::Warning, "graphics engine exception"));
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(snap));
    s
}

#[test]
fn health_marks_each_gpu_and_the_detail_view_gives_the_reasons() {
    let mut s = unhealthy();
    let big = render_text(&mut s, 200, 50);
    assert!(big.contains("CRIT remap failed +1") && big.contains("WARN HW thermal"), "{big}");
    insta::assert_snapshot!("health_200x50", big);
    insta::assert_snapshot!("health_80x24", render_text(&mut s, 80, 24));
    // Sorted by GPU memory, GPU 1's process is first.
    act(&mut s, &[Action::OpenDetail]);
    let detail = render_text(&mut s, 200, 50);
    assert!(detail.contains("WARN the hardware slows the clocks down"), "{detail}");
    assert!(detail.contains("Xid 13 1m30s ago: graphics engine exception; restart the application"), "{detail}");
    insta::assert_snapshot!("health_detail_200x50", detail);
    insta::assert_snapshot!("health_detail_80x24", render_text(&mut s, 80, 24));
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render_text(&mut s, w, h)));
        assert!(drawn.is_ok(), "the detail view at {w}x{h} panicked");
    }
    let mut dashboard = unhealthy();
    for (w, h) in [(0, 0), (1, 1), (20, 5)] {
        let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render_text(&mut dashboard, w, h)));
        assert!(drawn.is_ok(), "the dashboard at {w}x{h} panicked");
    }
}

/// Every one of `parts` is drawn in `text`.
fn shows(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} is not drawn:\n{text}");
    }
}

/// A probed state whose snapshots come with `alerts`.
fn with_alerts(spec: Spec, alerts: &[serde_json::Value]) -> State {
    let mut s = State::new(&options());
    let mut snap = snapshot(spec);
    snap.alerts = alerts.iter().map(|a| serde_json::from_value(a.clone()).unwrap()).collect();
    s.on_snapshot(Arc::new(snap));
    s
}

/// Where the time goes: the share of each step that waits for data, as a
/// bar with its rate; why (here: both workers busy at a full CPU each) and
/// what to change; the loader's settings, the workers as the host sees
/// them, `/dev/shm`, and the environment, each wrapped at 80 columns.
#[test]
fn detail_view_says_where_a_starved_job_s_time_goes() {
    let mut s = state(Spec::gpus(2).probed().input());
    // GPU 0's rank is the second row (GPU 1 holds more).
    act(&mut s, &[Action::Move(1), Action::OpenDetail]);
    let small = render_text(&mut s, 80, 24);
    insta::assert_snapshot!("detail_input_starved_80x24", small);
    // All of it, on a screen tall enough.
    shows(
        &render_text(&mut s, 80, 80),
        &[
            "PID 4123401 on GPU 0",
            "data wait ████████░░░░░░░░░░░░ 41%  6.2 batches/s  66ms a batch  first batch",
            "cause     all 2 workers busy at 98% of a CPU each; about 56 of the host's CPUs",
            "fix       Add workers (num_workers) while idle CPUs remain",
            "/dev/shm  ░░░░░░░░░░░░░░░░░░░░ 1%  310 MiB of 32.0 GiB  the loaders need 144",
            "env       torch 2.6.0  CUDA 12.4  cuDNN 9.1.0  capability 9.0: in the wheel",
            "hints     ·",
        ],
    );
    let big = render_text(&mut s, 200, 50);
    shows(
        &big,
        &[
            "data wait ████████░░░░░░░░░░░░ 41%  6.2 batches/s  66ms a batch  first batch 6.4s",
            "loader    2 workers  pin_memory off  prefetch 2  persistent off  0 batches ready  batches of 24 MiB",
            "workers   2 alive  CPU 98% each (98-99%)",
            "TF32 matmul on cuDNN on  fp32 matmul precision high  cudnn.benchmark on  autocast bfloat16",
        ],
    );
    insta::assert_snapshot!("detail_input_starved_200x50", big);
    // The wait is drawn in the warning style: it is over the starved
    // rule's share.
    let terminal = render(&mut s, 80, 24);
    assert_eq!(cell_of(&terminal, "████████░").fg, ratatui::style::Color::Yellow);
    renders_tiny(&mut s);
}

/// A `/dev/shm` nearly full names itself as the cause, whatever the wait,
/// with the remedies; the workers' death by a bus error stays as the last
/// failure; a wheel without code for the GPU says so.
#[test]
fn detail_view_keeps_a_shm_failure() {
    let mut s = state(Spec::gpus(2).probed().input());
    act(&mut s, &[Action::OpenDetail]);
    let small = render_text(&mut s, 80, 24);
    shows(
        &small,
        &[
            "PID 4123402 on GPU 1",
            "cause     /dev/shm 62 MiB of 64 MiB used (2 MiB free), the loaders need about 5",
            "fix       Give the container more shared memory: docker run --shm-size=8g",
            "failure   2m ago: worker killed by a bus error (worker 4124105)",
        ],
    );
    insta::assert_snapshot!("detail_input_shm_80x24", small);
    let big = render_text(&mut s, 200, 50);
    shows(
        &big,
        &[
            "/dev/shm  ███████████████████▒ 97%  62 MiB of 64 MiB  the loaders need 54 MiB in flight",
            // The message in full.
            "is killed by signal: Bus error.",
            "capability 9.0: NOT in the wheel's arch list",
            "the wheel has code for sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86",
        ],
    );
    insta::assert_snapshot!("detail_input_shm_200x50", big);
    let terminal = render(&mut s, 200, 50);
    assert_eq!(cell_of(&terminal, "/dev/shm 62 MiB").fg, ratatui::style::Color::Red, "the cause is critical");
    renders_tiny(&mut s);

    // The shm_full warning's text is the cause and fix above: the hints
    // do not repeat it. The one saying workers died stays.
    let alert = |severity: &str, message: &str| {
        serde_json::json!({
            "kind": "shm_full", "severity": severity, "gpu": 1, "pid": 4_123_402,
            "since": "2026-11-21T19:29:00.000Z", "since_unix_ms": T0 - 60_000, "value": 97.0, "threshold": 90.0,
            "message": message, "hint": "Give the container more shared memory"
        })
    };
    let mut warned = with_alerts(Spec::gpus(2).probed().input(), &[alert("warning", "PID 4123402: /dev/shm filling")]);
    act(&mut warned, &[Action::OpenDetail]);
    let text = render_text(&mut warned, 200, 50);
    assert!(text.contains("cause     /dev/shm") && !text.contains("· PID 4123402: /dev/shm filling"), "{text}");
    let mut died = with_alerts(Spec::gpus(2).probed().input(), &[alert("critical", "PID 4123402: workers died")]);
    act(&mut died, &[Action::OpenDetail]);
    assert!(render_text(&mut died, 200, 50).contains("hints     · PID 4123402: workers died"));
}

/// A process whose probe sees no DataLoader says so in a line, and keeps
/// its environment; one whose probe reports neither (older probes, JAX)
/// has no section at all.
#[test]
fn detail_view_without_input_data() {
    let mut snap = snapshot(Spec::gpus(2).probed().input());
    let p = &mut snap.processes[1];
    assert_eq!(p.pid, 4_123_402);
    p.input = Some(Arc::new(gpuscope::model::InputPipeline { window_s: Some(30.0), ..Default::default() }));
    let mut s = State::new(&options());
    s.on_snapshot(Arc::new(snap));
    act(&mut s, &[Action::OpenDetail]);
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("data wait n/a: no DataLoader in this process (torch.utils.data not loaded)"), "{small}");
    assert!(!small.contains("cause") && !small.contains("/dev/shm"), "{small}");
    insta::assert_snapshot!("detail_input_none_80x24", small);
    let big = render_text(&mut s, 200, 50);
    assert!(big.contains("env       torch 1.13.1  CUDA 11.6  cuDNN 8.3.2"), "{big}");
    insta::assert_snapshot!("detail_input_none_200x50", big);
    renders_tiny(&mut s);

    let mut plain = state(Spec::gpus(2).probed());
    act(&mut plain, &[Action::OpenDetail]);
    let text = render_text(&mut plain, 200, 50);
    assert!(!text.contains("data wait") && !text.contains("env  "), "{text}");
}

/// DATA% appears when some process's probe measures its wait: `-` where
/// none does; `s` and F6 sort by it, largest first.
#[test]
fn the_process_table_shows_each_process_data_wait() {
    let mut s = state(Spec::gpus(4).probed().input());
    let row = |text: &str, pid: u32| text.lines().find(|l| l.contains(&pid.to_string())).unwrap_or("").to_string();
    let small = render_text(&mut s, 80, 24);
    assert!(small.contains("RESERVED  DATA% COMMAND"), "DATA% outlasts FRAG at 80 columns:\n{small}");
    assert!(row(&small, 4_123_401).contains("GiB     41 python3"), "{small}");
    assert!(row(&small, 4_123_403).contains("n/a      - vllm"), "no probe:\n{small}");
    insta::assert_snapshot!("process_data_wait_80x24", small);
    let big = render_text(&mut s, 200, 50);
    assert!(big.contains("PINNED  DATA%   CPU%"), "{big}");
    insta::assert_snapshot!("process_data_wait_200x50", big);

    // GPU MEM, then ALLOC, RESERVED, FRAG, PEAK, UTIL%, GMBW%, DATA%.
    act(&mut s, &[Action::SortNext; 7]);
    assert_eq!(s.sort.column, gpuscope::tui::rows::Column::DataWait);
    let pids: Vec<u32> = s.rows().iter().map(|r| r.key.pid).collect();
    assert_eq!(pids, [4_123_401, 4_123_402, 4_123_403, 4_123_404], "largest first, unknown last");
    assert!(render_text(&mut s, 80, 24).contains("DATA%▼"));
    renders_tiny(&mut s);
    assert!(!render_text(&mut state(Spec::gpus(4).probed()), 200, 50).contains("DATA%"), "no figure: no column");
}

#[test]
fn the_gpu_line_shows_clocks_then_pcie_rates_where_the_width_allows_and_the_detail_view_always() {
    let mut s = state(Spec::gpus(2));
    let small = render_text(&mut s, 80, 24);
    assert!(!small.contains("PCIe rx"), "no room at 80 columns:\n{small}");
    let big = render_text(&mut s, 200, 50);
    assert!(big.contains("600/700 W  P0  1980/2619 MHz"), "{big}");
    let wide = render_text(&mut s, 260, 50);
    assert!(wide.contains("1980/2619 MHz  PCIe rx 2M/s tx 1000K/s"), "{wide}");
    insta::assert_snapshot!("gpu_line_wide_260x50", wide);
}

/// The clocks and PCIe rates are asked for where a GPU line has room for
/// them, or the details show the board line. None at 80 columns. Without
/// activity counters the clocks from 81 columns and the PCIe rates from
/// 109, up to 140, where the GPU list gives half the width to the chart;
/// then from 162 and 218. With the counters (Hopper), whose SM, tensor
/// and DRAM columns come first, from 110 and 138, then 220 and 276. The
/// alert list hides the GPU lines.
#[test]
fn the_clocks_and_pcie_rates_are_on_screen_where_a_gpu_line_or_the_details_have_them() {
    const NONE: OnScreen = OnScreen::NONE;
    const CLOCKS: OnScreen = OnScreen { clocks: true, pcie: false };
    const BOTH: OnScreen = OnScreen { clocks: true, pcie: true };
    let mut plain = state(Spec::gpus(2));
    let mut counted = state(Spec::gpus(4).activity());
    for (w, h, without, with) in [
        (80, 24, NONE, NONE),
        (100, 30, CLOCKS, NONE),
        (120, 30, BOTH, CLOCKS),
        (160, 40, NONE, NONE),
        (200, 50, CLOCKS, NONE),
        (240, 50, BOTH, CLOCKS),
        (300, 50, BOTH, BOTH),
    ] {
        assert_eq!(on_screen(&mut plain, w, h), without, "without activity counters at {w}x{h}");
        assert_eq!(on_screen(&mut counted, w, h), with, "with them at {w}x{h}");
    }
    // What a line has room for is asked whether it was read or not: the
    // first tick after it is asked shows it.
    let mut unread = state_asking(Spec::gpus(2), Wanted::DASHBOARD);
    assert_eq!(on_screen(&mut unread, 300, 50), BOTH);
    assert!(!render_text(&mut unread, 300, 50).contains("MHz"), "nothing shown before it is read");
    act(&mut counted, &[Action::OpenDetail]);
    let details = render_text(&mut counted, 80, 24);
    assert!(details.contains("memory clock 2619 MHz") && details.contains("PCIe rx"), "{details}");
    assert_eq!(on_screen(&mut counted, 80, 24), BOTH, "the details' board line");
    act(&mut counted, &[Action::Back, Action::AlertList]);
    assert_eq!(on_screen(&mut counted, 300, 50), NONE, "the alert list hides the GPU lines");
}
