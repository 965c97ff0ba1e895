//! One collection tick on the simulated NVML with 8 GPUs and 64 processes
//! (real `sleep` processes, so the host side does real /proc work).
//!
//! - `tick/wall`: one collection tick, driver calls included.
//! - `tick/cpu_excluding_nvml`: this thread's CPU time (user + system) for
//!   the tick, minus the time the simulated library reports having spent
//!   inside its NVML functions: gpuscope's own cost per tick.
//! - `tick/cpu_after_idle_100ms`: the same CPU time (the simulated NVML's
//!   included) for a tick that follows 100 ms of idling, as a dashboard's
//!   ticks do: caches cold, the figure that matches a running dashboard.
//! - `analysis/...`: the alert analysis of one snapshot, with ten minutes of
//!   history at a 1 s interval behind it (the benchmark's own ticks come
//!   far faster than 1 s, so their history would not be representative).
//!
//! - `probes/read_64`: reading and checking 64 probe files (one per
//!   process), the dashboard's per-tick cost of 64 probed ranks; the tick
//!   benchmarks then include those files too.
//!
//! - `tick_8x512_with_128_probes/...`: the scale target, 8 GPUs with 512
//!   processes of which 128 have probe files.
//! - `host_512/floor_statm_and_cpu_clock`: the kernel's time alone for the
//!   two reads a tick makes of each of those 512 processes, the floor under
//!   `host_512/host_sample` (gpuscope's host side of a tick) and the tick.
//!
//! Run: `cargo bench --bench tick`

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, UNIX_EPOCH};

use criterion::{Criterion, criterion_group, criterion_main};
use gpuscope::analysis::Analyzer;
use gpuscope::analysis::config::{AlertsConfig, HistoryConfig};
use gpuscope::collect::Collector;
use gpuscope::model::Timestamp;
use gpuscope::probe::files::{FileProbes, ProbeSource};
use gpuscope::sources::Figures;
use gpuscope::sources::host::ProcHost;
use gpuscope::sources::nvml::{LibrarySpec, NvmlSource};
use gpuscope::sources::procstat::start_ticks;
use gpuscope::tui::term::Term;
use gpuscope::tui::{Clock, State, TuiOptions, render};
use ratatui::backend::TestBackend;

const GPUS: usize = 8;
const PROCESSES: usize = 64;

/// Real processes for the simulated GPUs to list, killed when dropped.
struct Sleepers(Vec<Child>);

impl Sleepers {
    fn spawn(n: usize) -> Self {
        Self((0..n).map(|_| Command::new("sleep").arg("600").stdin(Stdio::null()).spawn().expect("sleep")).collect())
    }

    fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for s in &mut self.0 {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

/// A private probe directory (0700, as the probe makes it) with a file for
/// each of `pids`.
fn probe_dir_for(root: &Path, pids: &[u32]) -> std::path::PathBuf {
    let probe_dir = root.join("gpuscope").join("probes");
    std::fs::create_dir_all(&probe_dir).unwrap();
    for d in [probe_dir.parent().unwrap(), probe_dir.as_path()] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    // `scenario` puts the i-th process on GPU i % GPUS.
    for (i, &pid) in pids.iter().enumerate() {
        let ticks = start_ticks(Path::new("/proc"), pid).unwrap();
        std::fs::write(probe_dir.join(format!("{pid}-{ticks}.json")), probe_file(pid, ticks, i % GPUS)).unwrap();
    }
    probe_dir
}

/// The simulator's own count of the time spent inside its NVML functions.
/// The same path gives the same loaded library, so this reads the counter
/// of the instance the collector uses.
fn busy_counter(lib: &Path) -> unsafe extern "C" fn() -> u64 {
    // SAFETY: the simulator exports this symbol with this signature, and the
    // library stays loaded (forgotten) for as long as the pointer is used.
    unsafe {
        let lib = libloading::Library::new(lib).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn() -> u64> = lib.get(b"gpuscope_sim_busy_ns").unwrap();
        let f = *f;
        std::mem::forget(lib);
        f
    }
}

fn scenario(pids: &[u32]) -> String {
    let mut s = String::new();
    for g in 0..GPUS {
        // No fan of its own, as the H100 SXM measured (benches/node.sh).
        s.push_str("[[gpu]]\nname = \"NVIDIA H100 80GB HBM3\"\nfans = 0\nutilization_gpu = 90\nthrottle_reasons = 4\nmemory_reserved_mib = 521\n");
        s.push_str(&format!("uuid = \"GPU-{}\"\n", bare_uuid(g)));
        for pid in pids.iter().skip(g).step_by(GPUS) {
            s.push_str(&format!("[[gpu.process]]\npid = {pid}\nused_mib = 8000\n"));
        }
    }
    s
}

/// GPU `g`'s UUID as PyTorch gives it, without NVML's "GPU-"; the
/// scenario gives each GPU its own.
fn bare_uuid(g: usize) -> String {
    format!("00000000-5c0b-4e5a-9d1e-{g:012x}")
}

/// What a probed rank on GPU `gpu` writes: its device named by UUID, as
/// PyTorch's device properties give it, so the figures are joined to the
/// GPU as a real probe's are.
fn probe_file(pid: u32, ticks: u64, gpu: usize) -> String {
    let g = 1u64 << 30;
    serde_json::json!({
        "format": "gpuscope-probe", "version": 1, "pid": pid, "start_ticks": ticks, "seq": 1,
        "written_unix_ms": 1_795_289_400_123u64, "interval_s": 1.0, "errors": 0, "framework": "torch",
        "framework_version": "2.5.1", "backend": "native", "alloc_conf": "expandable_segments:False",
        "alloc_conf_var": "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments": false, "rank": 0, "local_rank": 0,
        "world_size": 64, "pinned_host": {"current": g, "peak": g},
        "devices": [{"index": 0, "uuid": bare_uuid(gpu), "allocated": 20 * g, "allocated_peak": 24 * g, "reserved": 30 * g,
            "reserved_peak": 32 * g, "active": 20 * g, "active_peak": 24 * g, "inactive_split": 2 * g,
            "inactive_split_peak": 3 * g, "requested": 20 * g, "requested_peak": 24 * g, "segments": 400,
            "alloc_retries": 0, "ooms": 0, "device_allocs": 1500, "device_frees": 1100,
            "largest_free_block": null, "bytes_limit": null}]
    })
    .to_string()
}

fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn bench(c: &mut Criterion) {
    let sleepers = Sleepers::spawn(PROCESSES);
    let pids = sleepers.pids();
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libnvidia-ml.so.1");
    std::fs::copy(env!("GPUSCOPE_SIM_LIB"), &lib).unwrap();
    let scenario_path = dir.path().join("scenario.toml");
    std::fs::write(&scenario_path, scenario(&pids)).unwrap();
    // SAFETY: set before any other thread of this benchmark exists.
    unsafe { std::env::set_var("GPUSCOPE_SIM_SCENARIO", &scenario_path) };

    let source = NvmlSource::open(LibrarySpec::Path(lib.clone().into_os_string()), Vec::new()).unwrap();
    let mut collector = Collector {
        gpu: Box::new(source),
        host: Box::new(ProcHost::new()),
        probes: Box::new(FileProbes::new(dir.path().join("probes"))),
        analyzer: Analyzer::new(&HistoryConfig::default(), AlertsConfig::default()),
        interval: Duration::from_secs(1),
        simulated: true,
        fallback: None,
        reads: gpuscope::collect::Reads::ALL,
    };
    let first = collector.tick();
    assert_eq!((first.gpus.len(), first.processes.len()), (GPUS, PROCESSES));

    let busy_ns = busy_counter(&lib);

    // 64 probe files, one per live process, as 64 probed ranks would write.
    let probe_dir = probe_dir_for(dir.path(), &pids);
    let mut probes = FileProbes::new(probe_dir.clone());
    assert_eq!(probes.sample().reports.len(), PROCESSES);
    c.bench_function("probes/read_64", |b| b.iter(|| probes.sample()));

    // The issues' condition: 8 GPUs, 64 processes, no probes.
    tick_group(c, "tick", &mut collector, busy_ns);
    let template = collector.collect();
    analysis(c, &template);
    render(c, &template);
    collector.probes = Box::new(FileProbes::new(probe_dir));
    tick_group(c, "tick_with_64_probes", &mut collector, busy_ns);
    drop(sleepers);

    // The scale target: 8 GPUs x 512 processes, 128 of them probed. The
    // same library path keeps the same loaded instance, so the scenario is
    // switched by the sleepers' own file through a fresh copy.
    let many = Sleepers::spawn(512);
    let pids = many.pids();
    let lib = dir.path().join("scale").join("libnvidia-ml.so.1");
    std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
    std::fs::copy(env!("GPUSCOPE_SIM_LIB"), &lib).unwrap();
    std::fs::write(&scenario_path, scenario(&pids)).unwrap();
    let probe_dir = probe_dir_for(&dir.path().join("scale"), &pids[..128]);
    collector.gpu = Box::new(NvmlSource::open(LibrarySpec::Path(lib.clone().into_os_string()), Vec::new()).unwrap());
    let busy_ns = busy_counter(&lib);
    collector.probes = Box::new(FileProbes::new(probe_dir));
    let first = collector.tick();
    assert_eq!((first.gpus.len(), first.processes.len()), (GPUS, 512));
    tick_group(c, "tick_8x512_with_128_probes", &mut collector, busy_ns);
    host_floor(c, &pids);
}

/// What the kernel alone takes to answer, for each of `pids`, the two
/// figures a tick reads of every process (resident memory from its
/// `statm` held open, CPU time from its CPU-time clock), with nothing of
/// gpuscope's around the calls: the floor under `ProcHost::sample`, which
/// `host_sample` measures beside it. A collection at 8 x 512 cannot cost
/// less than this on the machine it runs on.
fn host_floor(c: &mut Criterion, pids: &[u32]) {
    use std::os::unix::fs::FileExt;
    let held: Vec<(std::fs::File, libc::clockid_t)> = pids
        .iter()
        .map(|&pid| {
            let statm = std::fs::File::open(format!("/proc/{pid}/statm")).unwrap();
            let mut clock: libc::clockid_t = 0;
            // SAFETY: writes the one clock id it is given.
            assert_eq!(unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) }, 0);
            (statm, clock)
        })
        .collect();
    let mut buf = [0u8; 256];
    let mut group = c.benchmark_group(format!("host_{}", pids.len()));
    group.bench_function("floor_statm_and_cpu_clock", |b| {
        b.iter(|| {
            for (statm, clock) in &held {
                let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                // SAFETY: a valid clock id and a valid out-pointer.
                unsafe { libc::clock_gettime(*clock, &mut t) };
                std::hint::black_box(statm.read_at(&mut buf, 0).unwrap());
            }
        })
    });
    let mut host = ProcHost::new();
    let sorted = {
        let mut p = pids.to_vec();
        p.sort_unstable();
        p
    };
    assert_eq!(gpuscope::sources::HostSource::sample(&mut host, &sorted, &Figures::All).processes.len(), pids.len());
    group.bench_function("host_sample", |b| {
        b.iter(|| gpuscope::sources::HostSource::sample(&mut host, &sorted, &Figures::All))
    });
    group.finish();
}

fn tick_group(c: &mut Criterion, name: &str, collector: &mut Collector, busy_ns: unsafe extern "C" fn() -> u64) {
    let mut group = c.benchmark_group(name);
    group.bench_function("wall", |b| b.iter(|| collector.collect()));
    group.bench_function("cpu_excluding_nvml", |b| {
        b.iter_custom(|iters| {
            // SAFETY: the simulator's counter takes no arguments.
            let (cpu0, lib0) = (thread_cpu(), unsafe { busy_ns() });
            for _ in 0..iters {
                std::hint::black_box(collector.collect());
            }
            // SAFETY: as above.
            let (cpu1, lib1) = (thread_cpu(), unsafe { busy_ns() });
            (cpu1 - cpu0).saturating_sub(Duration::from_nanos(lib1 - lib0))
        })
    });
    // Back to back, a tick finds its code, its data and the kernel's
    // /proc structures in the caches the last one warmed; a dashboard's
    // tick comes after a second of sleep and finds them cold, at several
    // times the cost. Each collection here follows an idle pause, and only
    // its own CPU time counts.
    group.sample_size(10).bench_function("cpu_after_idle_100ms", |b| {
        after_idle(b, || drop(std::hint::black_box(collector.collect())));
    });
    group.finish();
    // SAFETY: as above.
    let before = unsafe { busy_ns() };
    for _ in 0..100 {
        collector.collect();
    }
    // SAFETY: as above.
    let after = unsafe { busy_ns() };
    let per_tick = (after - before) / 100;
    println!("{name}: inside the simulated NVML {:.0} us per tick", per_tick as f64 / 1000.0);
}

/// The analyzer in steady state at a 1 s interval: ten minutes of history
/// for 8 GPUs and 64 processes, then one more snapshot.
fn analysis(c: &mut Criterion, template: &gpuscope::model::Snapshot) {
    let mut analyzer = Analyzer::new(&HistoryConfig::default(), AlertsConfig::default());
    let mut snap = template.clone();
    let t0 = snap.time.time_unix_ms;
    for s in 0..600 {
        snap.time = Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(t0 + s * 1000));
        analyzer.observe(&mut snap.clone());
    }
    let mut s = 600;
    c.bench_function("analysis/observe_8_gpus_64_processes", |b| {
        b.iter(|| {
            s += 1;
            let mut next = template.clone();
            next.time = Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(t0 + s * 1000));
            analyzer.observe(&mut next);
            next
        })
    });
}

/// The pause before each run of a `..._after_idle_100ms` benchmark.
const IDLE: Duration = Duration::from_millis(100);

/// The thread's CPU time for each `work`, each after `IDLE` asleep.
fn after_idle(b: &mut criterion::Bencher, mut work: impl FnMut()) {
    b.iter_custom(|iters| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            std::thread::sleep(IDLE);
            let cpu0 = thread_cpu();
            work();
            total += thread_cpu() - cpu0;
        }
        total
    });
}

/// One 200x50 frame of the dashboard: 8 GPUs, 64 processes, ten minutes
/// of history behind the charts.
fn render(c: &mut Criterion, template: &gpuscope::model::Snapshot) {
    let t0 = template.time.time_unix_ms;
    let clock = Clock::manual(t0 + 600_000);
    let options = TuiOptions::offscreen(clock.clone());
    let mut state = State::new(&options);
    for s in 0..=600 {
        let mut snap = template.clone();
        snap.time = Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(t0 + s * 1000));
        state.on_snapshot(std::sync::Arc::new(snap));
    }
    let mut terminal = Term::new(TestBackend::new(200, 50)).unwrap();
    let mut frame = || {
        terminal
            .draw(|frame| {
                render::draw(frame, &state, &clock);
            })
            .unwrap();
    };
    let mut group = c.benchmark_group("render");
    group.bench_function("frame_200x50", |b| b.iter(&mut frame));
    // As the dashboard draws: after a second or so of sleep (see
    // `cpu_after_idle_100ms` of the tick groups).
    group.sample_size(10).bench_function("frame_200x50_cpu_after_idle_100ms", |b| after_idle(b, &mut frame));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
