//! The reader's tolerance and the player's seek, speed and next-alert
//! logic, on synthetic recordings.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use super::player::{self, Command};
use super::{Header, Recorder, Recording};
use crate::analysis::config::{AlertsConfig, HistoryConfig};
use crate::model::*;

pub const T0: u64 = 1_795_000_000_000;

/// A one-GPU snapshot at `T0 + secs`; the GPU is lost when `lost`.
pub fn snapshot(secs: u64, lost: bool) -> Snapshot {
    let mut gpu = Gpu::blank(0, if lost { GpuState::Lost } else { GpuState::Ok });
    gpu.name = Some("NVIDIA H100 80GB HBM3".into());
    if !lost {
        gpu.memory =
            GpuMemory { total: Some(80 << 30), used: Some(secs << 20), free: Some(40 << 30), driver_reserved: None };
        gpu.utilization.gpu = Some((secs % 100) as u32);
    }
    Snapshot {
        schema_version: SCHEMA_VERSION,
        time: Timestamp::from_system(UNIX_EPOCH + Duration::from_millis(T0 + secs * 1000)),
        interval_ms: 1000,
        collection_ms: 1.0,
        simulated: true,
        host: Host { hostname: Some("node01".into()), ..Host::default() },
        driver: Driver::default(),
        gpus: vec![gpu],
        processes: Vec::new(),
        alerts: Vec::new(),
        events: Vec::new(),
        sources: Sources::default(),
    }
}

/// `n` seconds at 1 Hz; the GPU is lost during each range in `lost`.
pub fn write_recording(path: &Path, n: u64, lost: &[std::ops::Range<u64>]) {
    let mut r = Recorder::create(path, &Header::new(Some("node01".into()), 1000)).unwrap();
    for s in 0..n {
        r.write(&snapshot(s, lost.iter().any(|l| l.contains(&s)))).unwrap();
    }
    r.finish().unwrap();
}

#[test]
fn plain_and_zstd_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["run.ndjson", "run.ndjson.zst"] {
        let path = dir.path().join(name);
        write_recording(&path, 30, &[]);
        let rec = Recording::open(&path).unwrap();
        assert_eq!(rec.len(), 30, "{name}");
        assert_eq!(rec.skipped.total(), 0);
        assert_eq!(rec.header.as_ref().unwrap().host.as_deref(), Some("node01"));
        assert_eq!(rec.get(7).unwrap(), snapshot(7, false));
        assert_eq!(rec.position_at(T0 + 7_500), 7);
        assert_eq!(rec.position_at(0), 0);
    }
}

/// A snapshot whose GPU and MIG device report activity, beside a GPU that
/// has none, with odd figures as GPM gives them (ratios of counters).
fn with_activity(secs: u64) -> Snapshot {
    let mut snap = snapshot(secs, false);
    let activity = Activity {
        period_ms: 1003,
        sm_active: Some(100.0 * 2.0 / 3.0),
        sm_occupancy: Some(100.0 * 1234.0 / 98765.0),
        tensor_active: Some(0.1 + 0.2),
        tensor_hmma: Some(41.0),
        tensor_imma: None,
        tensor_dfma: Some(0.0),
        dram_active: Some(55.55),
        fp64_active: None,
        fp32_active: Some(1e-7),
        fp16_active: Some(99.99999999999999),
        pcie_tx_bytes_per_s: Some(u64::MAX),
        pcie_rx_bytes_per_s: Some(24_000_000_000),
        nvlink_tx_bytes_per_s: None,
        nvlink_rx_bytes_per_s: Some(0),
    };
    snap.gpus[0].activity = Some(activity.clone());
    snap.gpus[0].mig_devices.push(MigDevice {
        index: 1,
        uuid: Some("MIG-1".into()),
        name: None,
        profile: Some("3g.40gb".into()),
        gpu_instance_id: Some(2),
        compute_instance_id: Some(0),
        memory: MigMemory { total: Some(40 << 30), used: None, free: None },
        activity: Some(Activity { sm_active: Some(12.5), ..activity }),
        activity_unavailable: None,
    });
    let mut old = Gpu::blank(1, GpuState::Ok);
    old.activity_unavailable = Some(ActivityUnavailable::NotSupported);
    snap.gpus.push(old);
    snap
}

/// Records `make(0..3)`, plain and compressed: each snapshot reads back
/// as it was written, through the dashboard's reader and `replay --json`'s
/// stream alike.
fn assert_records_and_replays(make: fn(u64) -> Snapshot) {
    let dir = tempfile::tempdir().unwrap();
    for name in ["run.ndjson", "run.ndjson.zst"] {
        let path = dir.path().join(name);
        let mut r = Recorder::create(&path, &Header::new(None, 1000)).unwrap();
        for s in 0..3 {
            r.write(&make(s)).unwrap();
        }
        r.finish().unwrap();
        let rec = Recording::open(&path).unwrap();
        assert_eq!(rec.get(1).unwrap(), make(1), "{name}");
        let mut streamed = Vec::new();
        super::reader::stream(&path, |snap| {
            streamed.push(snap);
            Ok(())
        })
        .unwrap();
        assert_eq!(streamed, (0..3).map(make).collect::<Vec<_>>(), "{name}");
    }
}

/// Records `make(0..3)` as an older gpuscope would have: `strip` takes
/// from each line (the header's included) the keys it did not write. The
/// recording opens whole; its last snapshot is returned.
fn read_as_written_before(make: fn(u64) -> Snapshot, strip: impl Fn(&mut serde_json::Value)) -> Snapshot {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.ndjson");
    let mut r = Recorder::create(&path, &Header::new(None, 1000)).unwrap();
    for s in 0..3 {
        r.write(&make(s)).unwrap();
    }
    r.finish().unwrap();
    let old: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
            strip(&mut v);
            v.to_string()
        })
        .collect();
    std::fs::write(&path, old.join("\n") + "\n").unwrap();
    let rec = Recording::open(&path).unwrap();
    assert_eq!((rec.len(), rec.skipped.total()), (3, 0));
    rec.get(2).unwrap()
}

/// The objects of `v`'s array `key` (none on the header line).
fn each<'v>(v: &'v mut serde_json::Value, key: &str) -> impl Iterator<Item = &'v mut serde_json::Value> {
    v.get_mut(key).and_then(serde_json::Value::as_array_mut).into_iter().flatten()
}

/// Issue 57: activity is recorded and replays as it was read.
#[test]
fn activity_records_and_replays_unchanged() {
    assert_records_and_replays(with_activity);
}

/// A recording made before gpuscope read activity has none of its keys:
/// it reads, the figures n/a rather than 0.
#[test]
fn a_recording_from_before_activity_reads_without_it() {
    let snap = read_as_written_before(with_activity, |v| {
        let strip = |o: &mut serde_json::Value| {
            let o = o.as_object_mut().unwrap();
            assert!(o.remove("activity").is_some() && o.remove("activity_unavailable").is_some(), "{o:?}");
        };
        for gpu in each(v, "gpus") {
            each(gpu, "mig_devices").for_each(strip);
            strip(gpu);
        }
    });
    let mut expected = with_activity(2);
    for g in &mut expected.gpus {
        (g.activity, g.activity_unavailable) = (None, None);
        g.mig_devices.iter_mut().for_each(|m| (m.activity, m.activity_unavailable) = (None, None));
    }
    assert_eq!(snap, expected);
}

/// A probed process whose DataLoaders wait, with a failure kept and the
/// framework's environment, figures as odd as rates and shares come.
fn with_input(secs: u64) -> Snapshot {
    let mut snap = snapshot(secs, false);
    let settings = LoaderSettings {
        num_workers: Some(8),
        pin_memory: Some(false),
        prefetch_factor: Some(2),
        persistent_workers: None,
    };
    let loader = DataLoaderStats {
        id: 3,
        live: true,
        consumer_thread: Some("MainThread".into()),
        batches: 1000 + secs,
        epochs: 2,
        window_s: Some(29.97),
        batches_per_s: Some(100.0 / 3.0),
        wait_share: Some(0.1 + 0.2),
        wait_per_batch_s: Some(1e-7),
        waiting_s: Some(0.0),
        first_batch_wait_s: None,
        iterator: Some("_MultiProcessingDataLoaderIter".into()),
        dataset: Some("ImageFolder".into()),
        settings: settings.clone(),
        workers: Some(8),
        worker_pids: Some(vec![101, 102]),
        pin_memory_thread: Some(false),
        batches_ready: Some(0),
        batch_bytes: Some(u64::MAX),
        shm_need: None,
    };
    let input = InputPipeline {
        hooked: true,
        window_s: Some(30.0),
        loaders: vec![loader, DataLoaderStats { id: 4, ..DataLoaderStats::default() }],
        loaders_left_out: 1,
        shm: Some(SharedMemory {
            path: Some("/dev/shm".into()),
            total: Some(64 << 20),
            free: Some(0),
            used: Some(64 << 20),
            need: None,
            sharing_strategy: Some("file_descriptor".into()),
            open_files_limit: Some(1024),
            open_files_limit_hard: None,
        }),
        failures: vec![LoaderFailure {
            time_unix_ms: T0 + 500,
            kind: LoaderFailureKind::BusError,
            exception: Some("RuntimeError".into()),
            message: Some("DataLoader worker (pid 102) is killed by signal: Bus error.".into()),
            loader: Some(3),
            worker_pid: Some(102),
            shm_total: Some(64 << 20),
            shm_free: Some(0),
            sharing_strategy: None,
            batch_bytes: Some(4 << 20),
            settings,
        }],
    };
    let environment = FrameworkEnvironment {
        torch_version: Some("2.5.1+cu124".into()),
        cuda_version: Some("12.4".into()),
        cudnn_version: Some("90100".into()),
        arch_flags: Some("sm_80 sm_90".into()),
        matmul_tf32: Some(false),
        cudnn_benchmark: Some(true),
        devices: vec![DeviceArch { ordinal: 0, capability: Some("9.0".into()), arch_supported: Some(true) }],
        autocast: Some(Autocast {
            hooked: true,
            entries: 12_000,
            last_s_ago: Some(0.2),
            device_type: Some("cuda".into()),
            dtype: Some("torch.bfloat16".into()),
        }),
        grad_scaler: Some(GradScalerUse { count: Some(1), enabled: None }),
        ..FrameworkEnvironment::default()
    };
    let gpu = ProcessGpu {
        index: 0,
        kind: ProcessType::Compute,
        used_memory: Some(1 << 30),
        mig_device: None,
        mig_uuid: None,
    };
    snap.processes.push(Process {
        gpus: vec![gpu],
        input: Some(std::sync::Arc::new(input)),
        environment: Some(std::sync::Arc::new(environment)),
        ..Process::bare(4242)
    });
    snap
}

/// Issue 58: the input pipeline and the environment are recorded and
/// replay as they were read.
#[test]
fn the_input_pipeline_records_and_replays_unchanged() {
    assert_records_and_replays(with_input);
}

/// A recording made before gpuscope read the input pipeline has neither
/// key on its processes: it reads, both `None` (n/a, never 0).
#[test]
fn a_recording_from_before_the_input_pipeline_reads_without_it() {
    let snap = read_as_written_before(with_input, |v| {
        for p in each(v, "processes") {
            let p = p.as_object_mut().unwrap();
            assert!(p.remove("input").is_some() && p.remove("environment").is_some(), "{p:?}");
        }
    });
    let mut expected = with_input(2);
    (expected.processes[0].input, expected.processes[0].environment) = (None, None);
    assert_eq!(snap, expected);
}

#[test]
fn damage_is_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.ndjson");
    write_recording(&path, 10, &[]);
    let mut text = std::fs::read_to_string(&path).unwrap();
    // Garbage in the middle, a field from a newer gpuscope, a torn tail.
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.insert(3, "\u{1b}[2J garbage {".into());
    lines[5] = lines[5].replacen('{', "{\"from_the_future\":{\"x\":1},", 1);
    text = lines.join("\n") + "\n" + &serde_json::to_string(&snapshot(99, false)).unwrap()[..200];
    std::fs::write(&path, text).unwrap();
    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.len(), 10);
    assert_eq!((rec.skipped.foreign, rec.skipped.torn), (1, 1), "the garbage line and the torn last line");
    assert!(rec.get(4).is_ok(), "unknown fields are ignored");

    // A zstd recording cut short (the writer was killed): every complete
    // line before the cut reads back.
    let zst = dir.path().join("cut.ndjson.zst");
    let mut r = Recorder::create(&zst, &Header::new(None, 1000)).unwrap();
    for s in 0..50 {
        r.write(&snapshot(s, false)).unwrap();
    }
    drop(r);
    let bytes = std::fs::read(&zst).unwrap();
    std::fs::write(&zst, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let rec = Recording::open(&zst).unwrap();
    assert!(rec.len() > 10 && rec.len() < 50, "{}", rec.len());
    assert!((0..rec.len()).all(|i| rec.get(i).is_ok()));
}

#[test]
fn foreign_and_empty_files_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("picture.png", &b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..]),
        ("empty.ndjson", b""),
        ("fake.zst", b"not zstd at all"),
    ] {
        let path = dir.path().join(name);
        std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
        let err = Recording::open(&path).err().unwrap().to_string();
        assert!(err.contains(name) && err.contains("not a gpuscope recording"), "{err}");
    }
    let err = Recording::open(&dir.path().join("missing.ndjson")).err().unwrap().to_string();
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn a_long_line_is_consumed_to_its_end_but_held_only_to_the_cap() {
    use super::lines::{Line, next_line};
    let mut input = vec![b'x'; 1 << 20];
    input.extend_from_slice(b"\nabc\ntail");
    let mut reader = std::io::BufReader::with_capacity(4096, &input[..]);
    let mut line = Line::default();
    assert!(next_line(&mut reader, &mut line, 100).unwrap());
    assert!(line.too_long && line.complete && line.bytes.capacity() <= 100);
    assert_eq!(line.consumed, (1 << 20) + 1);
    assert!(next_line(&mut reader, &mut line, 100).unwrap());
    assert_eq!((line.bytes.as_slice(), line.complete, line.too_long), (&b"abc"[..], true, false));
    assert!(next_line(&mut reader, &mut line, 100).unwrap());
    assert_eq!((line.bytes.as_slice(), line.complete), (&b"tail"[..], false));
    assert!(!next_line(&mut reader, &mut line, 100).unwrap());
}

/// A `.zst` of an endless line in front of a recording: the line is
/// skipped while decompressing, never stored, and the rest indexes.
#[test]
fn a_zstd_bomb_line_is_left_out_of_the_spool() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("r.ndjson");
    write_recording(&plain, 5, &[]);
    let mut data = vec![b'0'; (64 << 20) + 10];
    data.push(b'\n');
    data.extend(std::fs::read(&plain).unwrap());
    let zst = dir.path().join("bomb.zst");
    std::fs::write(&zst, zstd::encode_all(&data[..], 3).unwrap()).unwrap();
    let rec = Recording::open(&zst).unwrap();
    assert_eq!((rec.len(), rec.skipped.too_long), (5, 1));
    assert!(rec.data_bytes() < 1 << 20, "the long line was spooled");
}

#[test]
fn the_dashboard_says_a_fifo_cannot_be_seeked() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates a file.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Held open for reading and writing, so that opening it does not wait
    // for a writer, and nothing is written that the refusal would leave
    // unread (a write to a FIFO nobody reads any more is SIGPIPE).
    let _held = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
    let err = Recording::open(&fifo).err().unwrap().to_string();
    assert!(err.contains("not a regular file") && err.contains("replay --json"), "{err}");
}

/// A recording with an alert in it never runs the `[alerts] exec` hook:
/// the alert is about the past, the hook acts now.
#[tokio::test]
async fn replay_never_runs_the_alert_hook() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.ndjson");
    let lost = [1..2, 2..3];
    write_recording(&path, 5, &lost);
    let ran = dir.path().join("hook-ran");
    let alerts = AlertsConfig {
        exec: vec!["sh".into(), "-c".into(), format!("touch {}", ran.display())],
        ..AlertsConfig::default()
    };
    let live = crate::analysis::Analyzer::new(&HistoryConfig::default(), alerts.clone());
    assert!(live.runs_hooks(), "the same config runs the hook live");
    let replayed = crate::analysis::Analyzer::for_replay(&HistoryConfig::default(), alerts.clone());
    assert!(!replayed.runs_hooks());
    let rec = Recording::open(&path).unwrap();
    let (mut rx, h) = player::start(rec, HistoryConfig::default(), alerts.clone(), |_| {});
    h.commands.send(Command::Faster).unwrap();
    for _ in 0..4 {
        h.commands.send(Command::Faster).unwrap();
    }
    let mut saw_alert = false;
    while rx.changed().await.is_ok() {
        let snap = rx.borrow_and_update().clone().unwrap();
        saw_alert |= !snap.alerts.is_empty();
        if snap.time.time_unix_ms >= T0 + 4_000 {
            break;
        }
    }
    assert!(saw_alert, "the recording raises an alert on the way");
    let mut out = Vec::new();
    super::print_json(&path, crate::analysis::Analyzer::for_replay(&HistoryConfig::default(), alerts), &mut out)
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!ran.exists(), "the hook ran for a recorded alert");
}

fn start(path: &Path) -> (crate::poller::SnapshotRx, player::Handle) {
    let rec = Recording::open(path).unwrap();
    player::start(rec, HistoryConfig::default(), AlertsConfig::default(), |_| {})
}

async fn shown(rx: &mut crate::poller::SnapshotRx) -> u64 {
    rx.changed().await.unwrap();
    let t = rx.borrow_and_update().as_ref().unwrap().time.time_unix_ms;
    (t - T0) / 1000
}

#[tokio::test(start_paused = true)]
async fn plays_at_the_recorded_pace_times_the_speed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.ndjson");
    write_recording(&path, 100, &[]);
    let (mut rx, h) = start(&path);
    let t = tokio::time::Instant::now();
    assert_eq!(shown(&mut rx).await, 0);
    assert_eq!(t.elapsed(), Duration::ZERO, "the first snapshot at once");
    assert_eq!(shown(&mut rx).await, 1);
    assert_eq!(t.elapsed(), Duration::from_secs(1));
    for _ in 0..2 {
        h.commands.send(Command::Faster).unwrap();
    }
    let t = tokio::time::Instant::now();
    assert_eq!(shown(&mut rx).await, 2);
    assert!(t.elapsed() <= Duration::from_millis(250), "x4: {:?}", t.elapsed());
    h.commands.send(Command::TogglePause).unwrap();
    tokio::task::yield_now().await;
    let wait = tokio::time::timeout(Duration::from_secs(30), rx.changed()).await;
    assert!(wait.is_err(), "paused: nothing new");
    assert!(h.status.borrow().paused);
}

#[tokio::test(start_paused = true)]
async fn seeks_and_jumps_between_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.ndjson");
    write_recording(&path, 600, &[200..210, 400..405]);
    let (mut rx, h) = start(&path);
    h.commands.send(Command::TogglePause).unwrap();
    h.commands.send(Command::Seek(60_000)).unwrap();
    assert_eq!(shown(&mut rx).await, 60);
    h.commands.send(Command::Seek(-10_000)).unwrap();
    assert_eq!(shown(&mut rx).await, 50);
    // The alert index is built in the background; wait for it.
    let mut status = h.status.clone();
    while status.borrow_and_update().alerts_indexed.is_none() {
        status.changed().await.unwrap();
    }
    assert_eq!(status.borrow().alerts_indexed, Some(2));
    h.commands.send(Command::NextAlert).unwrap();
    assert_eq!(shown(&mut rx).await, 200);
    let snap = rx.borrow().clone().unwrap();
    assert_eq!(snap.alerts[0].kind, AlertKind::GpuLost, "recomputed on the way");
    h.commands.send(Command::NextAlert).unwrap();
    assert_eq!(shown(&mut rx).await, 400);
    h.commands.send(Command::PrevAlert).unwrap();
    assert_eq!(shown(&mut rx).await, 200);
    h.commands.send(Command::Seek(i64::MIN / 2)).unwrap();
    assert_eq!(shown(&mut rx).await, 0, "seeking past the start stops at it");
}

mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::analysis::Analyzer;
    use crate::recording::lines::{Line, next_line};

    /// Bytes that look like a recording more often than chance would:
    /// snapshot lines, JSON fragments, long runs, newlines, NULs.
    fn recording_ish() -> impl Strategy<Value = Vec<u8>> {
        let good = serde_json::to_string(&snapshot(1, false)).unwrap();
        let header = serde_json::to_string(&Header::new(Some("h".into()), 1000)).unwrap();
        let piece = prop_oneof![
            Just(good.clone().into_bytes()),
            Just(header.into_bytes()),
            Just(b"\n".to_vec()),
            (0..good.len()).prop_map(move |n| good.as_bytes()[..n].to_vec()),
            prop::collection::vec(any::<u8>(), 0..64),
            (0usize..5000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
            Just(b"{\"schema_version\":1,\"time_unix_ms\":18446744073709551615}".to_vec()),
            Just(b"{\"schema_version\":99,\"time_unix_ms\":-1}".to_vec()),
        ];
        prop::collection::vec(piece, 0..24).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// A line is never held past the cap, and the reader accounts for
        /// every byte of the input.
        #[test]
        fn lines_are_capped_and_account_for_every_byte(
            input in prop::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..4096),
            cap in 1usize..64,
            chunk in 1usize..32,
        ) {
            let mut reader = std::io::BufReader::with_capacity(chunk, &input[..]);
            let mut line = Line::default();
            let mut total = 0u64;
            while next_line(&mut reader, &mut line, cap).unwrap() {
                prop_assert!(line.bytes.len() <= cap && line.bytes.capacity() <= cap.max(8) * 2);
                prop_assert!(line.too_long || line.bytes.len() as u64 + u64::from(line.complete) == line.consumed);
                total += line.consumed;
            }
            prop_assert_eq!(total, input.len() as u64);
        }

        /// Whatever the file holds, opening, indexing, reading every entry
        /// and streaming it never panic, and both ways agree on the count.
        #[test]
        fn any_bytes_open_or_are_refused_without_a_panic(bytes in recording_ish()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.ndjson");
            std::fs::write(&path, &bytes).unwrap();
            let indexed = Recording::open(&path);
            let mut out = Vec::new();
            let analyzer = Analyzer::for_replay(&HistoryConfig::default(), AlertsConfig::default());
            let streamed = super::super::print_json(&path, analyzer, &mut out);
            if let Ok(rec) = &indexed {
                let readable = (0..rec.len()).filter(|&i| rec.get(i).is_ok()).count() as u64;
                let summary = streamed.as_ref().unwrap();
                prop_assert_eq!(readable, summary.snapshots);
                prop_assert_eq!(rec.len() as u64, summary.snapshots + summary.skipped.unreadable);
            }
        }

        /// A zstd recording cut anywhere (or with a byte changed) opens
        /// without a panic, and what reads back is what was written.
        #[test]
        fn a_damaged_zstd_recording_reads_back_what_it_can(cut in 0usize..100_000, flip in any::<Option<(usize, u8)>>()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.ndjson.zst");
            write_recording(&path, 40, &[]);
            let mut bytes = std::fs::read(&path).unwrap();
            bytes.truncate(cut % (bytes.len() + 1));
            if let Some((at, b)) = flip && !bytes.is_empty() {
                let at = at % bytes.len();
                bytes[at] ^= b;
            }
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(rec) = Recording::open(&path) {
                prop_assert!(rec.len() <= 40);
                if flip.is_none() {
                    for i in 0..rec.len() {
                        prop_assert_eq!(rec.get(i).unwrap(), snapshot(i as u64, false));
                    }
                }
            }
        }
    }
}
