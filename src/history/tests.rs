use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::model::{Activity, Gpu, GpuState, ProcessGpu, ProcessType};

const ONE: [Tier; 3] =
    [Tier { width_ms: 0, len: 4 }, Tier { width_ms: 1_000, len: 5 }, Tier { width_ms: 10_000, len: 3 }];

fn series(points: &[(u64, Option<f64>)]) -> Series<1> {
    let mut s = Series::new(&ONE);
    for (t, v) in points {
        s.push(*t, &[*v]);
    }
    s
}

fn snap(t_ms: u64, gpus: &[(u32, &str, u64)], pids: &[u32]) -> Snapshot {
    let gpus: Vec<Gpu> = gpus
        .iter()
        .map(|&(i, uuid, used)| {
            let mut g = Gpu::blank(i, GpuState::Ok);
            g.uuid = Some(uuid.into());
            g.memory.used = Some(used);
            g.memory.total = Some(100);
            g.utilization.gpu = Some(i * 10);
            g
        })
        .collect();
    let processes: Vec<serde_json::Value> = pids
        .iter()
        .map(|&pid| {
            let gpu = ProcessGpu {
                index: 0,
                kind: ProcessType::Compute,
                used_memory: Some(u64::from(pid)),
                mig_device: None,
                mig_uuid: None,
            };
            serde_json::json!({
                "pid": pid, "gpus": [gpu], "gpu_memory_total": pid, "name": null, "user": null, "command": null,
                "start_time": null, "start_time_unix_ms": null, "parent_pid": null, "cpu_percent": null,
                "host_memory": null, "allocator": null
            })
        })
        .collect();
    let json = serde_json::json!({
        "schema_version": 1, "time": "x", "time_unix_ms": t_ms, "interval_ms": 1000,
        "collection_ms": 0.0, "simulated": true, "host": {}, "driver": {},
        "gpus": gpus, "processes": processes, "alerts": [],
        "sources": { "nvml": { "ok": true, "error": null }, "host": { "ok": true, "error": null },
                     "probes": { "ok": true, "error": null, "directory": null, "files": 0, "skipped": 0, "last_skipped": null } }
    });
    serde_json::from_value(json).unwrap()
}

#[test]
fn raw_points_then_coarser_tiers_as_the_span_grows() {
    let s = series(&(0..30).map(|i| (i * 500, Some(i as f64))).collect::<Vec<_>>());
    // The last 2 s: the raw ring, one bucket per sample.
    let raw: Vec<u64> = s.recent(1_500).map(|b| b.t_ms).collect();
    assert_eq!(raw, [13_000, 13_500, 14_000, 14_500]);
    // The last 4 s: seconds, each the newest sample's time, two samples each.
    let secs: Vec<(u64, Option<f64>, Option<f64>, u32)> =
        s.recent(4_000).map(|b| (b.t_ms, b.get(0).min(), b.get(0).max(), b.get(0).count())).collect();
    assert_eq!(secs[0], (10_500, Some(20.0), Some(21.0), 2));
    assert_eq!(secs.len(), 5);
    // Further back than the seconds reach: the ten-second buckets.
    let tens: Vec<(Option<f64>, Option<f64>, Option<f64>)> =
        s.recent(60_000).map(|b| (b.get(0).min(), b.get(0).mean(), b.get(0).max())).collect();
    assert_eq!(tens, [(Some(0.0), Some(9.5), Some(19.0)), (Some(20.0), Some(24.5), Some(29.0))]);
}

#[test]
fn five_minutes_of_a_gpu_are_read_from_the_coarsest_tier() {
    // The seconds keep two minutes; a rule's five-minute window reads the
    // buckets across the longest window, which reach back that far.
    let mut store = Store::new(Duration::from_secs(300));
    for i in 0..420u32 {
        let mut s = snap(u64::from(i) * 1_000, &[(0, "GPU-a", 1)], &[]);
        s.gpus[0].activity = Some(Activity { sm_active: Some(f64::from(i)), ..Activity::default() });
        store.record(&s);
    }
    let series = store.gpu(Some(0)).unwrap();
    assert_eq!(series.width_since(419_000 - 300_000), 1_250, "300 s over 240 buckets");
    let aggs: Vec<Agg> = series.recent_field(300_000, gpu::SM_ACTIVE).collect();
    let n: u32 = aggs.iter().map(Agg::count).sum();
    assert_eq!(n, 301, "every sample from 119 s to 419 s");
    let mean = aggs.iter().map(|a| a.mean().unwrap() * f64::from(a.count())).sum::<f64>() / f64::from(n);
    assert!((mean - 269.0).abs() < 0.01, "the mean of 119..=419: {mean}");
}

#[test]
fn a_peak_survives_aggregation() {
    let mut pts: Vec<(u64, Option<f64>)> = (0..100).map(|i| (i * 100, Some(1.0))).collect();
    pts[37].1 = Some(50.0);
    let s = series(&pts);
    let peak = s.recent(u64::MAX).filter_map(|b| b.get(0).max()).fold(0.0, f64::max);
    assert_eq!(peak, 50.0);
    let floor = s.recent(u64::MAX).filter_map(|b| b.get(0).min()).fold(f64::MAX, f64::min);
    assert_eq!(floor, 1.0);
}

#[test]
fn a_bucket_of_unavailable_points_is_unavailable() {
    let s = series(&[(0, None), (100, None), (1_000, Some(0.0)), (1_100, None)]);
    let (_, secs) = s.tiers().nth(1).unwrap();
    let secs: Vec<(Option<f64>, Option<f64>, u32)> =
        secs.iter().map(|b| (b.get(0).max(), b.get(0).mean(), b.get(0).count())).collect();
    assert_eq!(secs, [(None, None, 0), (Some(0.0), Some(0.0), 1)], "0 is a value, None is not");
}

#[test]
fn a_clock_step_starts_afresh() {
    let mut s = series(&[(5_000, Some(1.0)), (6_000, Some(2.0))]);
    s.push(1_000, &[Some(3.0)]);
    assert_eq!(s.len(), 2, "one bucket in each tier kept (seconds apart: no raw ring)");
    assert_eq!(s.span_ms(), 0);
    assert_eq!(s.recent(u64::MAX).filter_map(|b| b.get(0).max()).collect::<Vec<_>>(), [3.0]);
}

#[test]
fn memory_is_bounded_whatever_the_interval_and_run_length() {
    let mut s: Series<1> = Series::new(&ONE);
    for t in 0..200_000u64 {
        s.push(t * 7, &[Some(t as f64)]);
    }
    assert_eq!(s.len(), 4 + 5 + 3);
    assert!(s.capacity() <= 4 + 5 + 3, "{}", s.capacity());
    let store = {
        let mut st = Store::new(Duration::from_secs(600));
        for t in 0..5_000u64 {
            st.record(&snap(t * 10, &[(0, "GPU-a", t)], &[1, 2]));
        }
        st
    };
    let per_gpu = GPU_RAW + GPU_SECONDS + GPU_SPAN_BUCKETS + 1;
    let per_process = PROCESS_RAW + PROCESS_SECONDS + PROCESS_SPAN_BUCKETS + 1;
    assert!(store.total_points() <= per_gpu + 2 * per_process, "{}", store.total_points());
    assert_eq!(MAX_POINTS, per_gpu);
}

#[test]
fn departed_processes_go_after_the_window_and_beyond_the_cap_live_ones_stay() {
    let mut st = Store::new(Duration::from_secs(600));
    st.record(&snap(0, &[(0, "GPU-a", 1)], &[1]));
    st.record(&snap(1_000, &[(0, "GPU-a", 1)], &[2]));
    assert_eq!(st.process_series(), 2, "a process that left keeps its chart for a while");
    st.record(&snap(700_000, &[(0, "GPU-a", 1)], &[2]));
    assert!(st.process_row(1, 0).is_none());
    let many: Vec<u32> = (100..100 + MAX_PROCESS_SERIES as u32 + 10).collect();
    st.record(&snap(701_000, &[(0, "GPU-a", 1)], &many));
    assert_eq!(st.process_series(), MAX_PROCESS_SERIES + 10, "processes on a GPU now keep theirs");
    st.record(&snap(702_000, &[(0, "GPU-a", 1)], &[5]));
    assert_eq!(st.process_series(), MAX_PROCESS_SERIES, "the longest quiet went first");
    assert!(st.process_row(5, 0).is_some());
}

#[test]
fn another_gpu_at_an_index_and_a_vanished_gpu_drop_their_series() {
    let mut st = Store::new(Duration::from_secs(600));
    st.record(&snap(0, &[(0, "GPU-a", 10), (1, "GPU-b", 20)], &[7]));
    let moved = st.record(&snap(1_000, &[(0, "GPU-c", 30)], &[]));
    assert_eq!(moved, crate::hashing::IntSet::from_iter([0]));
    let used: Vec<Option<f64>> =
        st.gpu(Some(0)).map(|s| s.recent(u64::MAX).map(|b| b.get(gpu::USED).max()).collect()).unwrap_or_default();
    assert_eq!(used, [Some(30.0)]);
    assert!(st.gpu(Some(1)).is_none());
    assert!(st.process_row(7, 0).is_none(), "the process's GPU is another now");
    let all = st.gpu(None).and_then(|s| s.recent(0).next().map(|b| b.get(gpu::USED).max()));
    assert_eq!(all, Some(Some(30.0)));
}

/// A series with the store's process tiers, fed a sample a second for ten
/// minutes with `fields` available (the rest unavailable).
fn process_series(fields: &[usize]) -> ProcessSeries {
    let probed = fields.iter().any(|&f| f != process::NVML);
    let mut s = new_process_series(&Store::new(Duration::from_secs(600)).process_tiers, probed);
    for t in 0..600u64 {
        let v = std::array::from_fn(|f| fields.contains(&f).then_some(t as f64));
        s.push(t * 1_000, &v);
    }
    s
}

#[test]
fn an_unprobed_process_costs_about_a_quarter_of_a_probed_one() {
    let unprobed = process_series(&[process::NVML]).heap_bytes();
    let probed = process_series(&[0, 1, 2, 3]).heap_bytes();
    assert!(unprobed * 10 <= probed * 3, "unprobed {unprobed} B, probed {probed} B");
    // And the whole store: the columns are most of it, and bounded.
    let mut st = Store::new(Duration::from_secs(600));
    for t in 0..700u64 {
        st.record(&snap(t * 1_000, &[(0, "GPU-a", t)], &(1..=64).collect::<Vec<_>>()));
    }
    // Their figure (the PID) never changes: a value and a count per bucket
    // where a moving one takes whole aggregates.
    let per_process = st.processes.values().next().map_or(0, Series::heap_bytes);
    let ring = unprobed - 61 * (4 + 14);
    assert_eq!(per_process, ring + 61 * (4 + 6), "moving {unprobed} B, steady {per_process} B");
    let gpu = st.gpu(Some(0)).map_or(0, Series::heap_bytes);
    assert!(st.heap_bytes() >= 64 * per_process + 2 * gpu, "{}", st.heap_bytes());
    assert!(st.heap_bytes() <= 64 * (per_process + 256) + 2 * gpu + 1024, "{}", st.heap_bytes());
    eprintln!(
        "series heap bytes: unprobed process {unprobed}, probed process {probed}, unprobed GPU {gpu}, probed GPU {}; \
         store of 1 GPU and 64 unprobed processes {}",
        {
            let mut s = GpuSeries::new(&st.gpu_tiers);
            (0..2_000u64).for_each(|t| s.push(t * 1_000, &[Some(1.0); gpu::FIELDS]));
            s.heap_bytes()
        },
        st.heap_bytes()
    );
}

#[test]
fn a_field_available_late_reads_unavailable_before() {
    let mut s: Series<2> = Series::new(&ONE);
    // The raw ring comes with the second sample, 400 ms after the first.
    let empty = s.heap_bytes() + Series::<2>::ring_bytes();
    for t in 0..6u64 {
        s.push(t * 400, &[Some(t as f64), None]);
    }
    let one_field = s.heap_bytes();
    // Slots: the raw tier's 4, full; three one-second buckets in the first
    // 4 slots of 5; one ten-second bucket in all 3 (its length is less
    // than the first 4 slots).
    assert_eq!(s.slots().map(|(_, len, slots)| (len, slots)).collect::<Vec<_>>(), [(4, 4), (3, 4), (1, 3)]);
    // Times 4 bytes a slot; the raw column an f32 a slot, the coarser
    // ones (several samples a bucket) 14 bytes.
    let column = 4 * 4 + (4 + 3) * 14;
    assert_eq!(one_field, empty + (4 + 4 + 3) * 4 + column, "no column for a field never available");
    assert!(s.records(0) && !s.records(1), "a chart need not read the buckets to know field 1 has none");
    // Field 1 first has a value in the middle of the second at 2 000 ms.
    s.push(2_400, &[Some(6.0), Some(60.0)]);
    assert_eq!(s.heap_bytes(), one_field + 4 * 4 + (4 + 3) * 4, "its column came with every slot, at once");
    assert!(s.records(1));
    s.push(2_800, &[Some(7.0), Some(70.0)]);
    assert_eq!(s.heap_bytes(), one_field + column, "two values in a bucket: whole aggregates");
    let (_, raw) = s.tiers().next().unwrap();
    let raw: Vec<(u64, Option<f64>, Option<f64>)> =
        raw.iter().map(|b| (b.t_ms, b.get(0).max(), b.get(1).max())).collect();
    assert_eq!(
        raw,
        [
            (1_600, Some(4.0), None),
            (2_000, Some(5.0), None),
            (2_400, Some(6.0), Some(60.0)),
            (2_800, Some(7.0), Some(70.0))
        ]
    );
    let (_, secs) = s.tiers().nth(1).unwrap();
    let secs: Vec<(u64, u32, u32, Option<f64>)> =
        secs.iter().map(|b| (b.t_ms, b.get(0).count(), b.get(1).count(), b.get(1).min())).collect();
    assert_eq!(secs, [(800, 3, 0, None), (1_600, 2, 0, None), (2_800, 3, 2, Some(60.0))]);
    // A clock step forgets the column with the rest.
    s.push(0, &[Some(1.0), None]);
    assert_eq!(s.heap_bytes(), empty + (4 + 4 + 3) * 4 + (4 + 4 + 3) * 4, "one value so far: f32s, the slots kept");
    assert_eq!(s.recent(u64::MAX).map(|b| b.get(1).count()).collect::<Vec<_>>(), [0]);
}

/// Every bucket of every tier counts exactly the available points of its
/// slot, per field, and its min and max bracket them and its mean.
fn check_brackets<const N: usize>(s: &Series<N>, pushed: &[(u64, [Option<f64>; N])]) -> Result<(), TestCaseError> {
    for (tier, buckets) in s.tiers() {
        let w = tier.width_ms;
        for b in buckets {
            for f in 0..N {
                let inside: Vec<f32> = pushed
                    .iter()
                    .filter(|(pt, _)| pt.checked_div(w).map_or(*pt == b.t_ms, |i| Some(i) == b.t_ms.checked_div(w)))
                    .filter_map(|(_, v)| v[f].map(|v| v as f32))
                    .collect();
                let a = b.get(f);
                prop_assert_eq!(a.count() as usize, inside.len());
                for v in &inside {
                    prop_assert!(
                        a.min().is_some_and(|m| m <= f64::from(*v)) && a.max().is_some_and(|m| m >= f64::from(*v))
                    );
                }
                if let (Some(lo), Some(mean), Some(hi)) = (a.min(), a.mean(), a.max()) {
                    let slack = hi.abs().max(lo.abs()) * 1e-5;
                    prop_assert!(lo - slack <= mean && mean <= hi + slack, "{} {} {}", lo, mean, hi);
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Every raw point lies within the min and max of each bucket it went
    /// into, in every tier, and each bucket's mean within those too.
    #[test]
    fn buckets_bracket_every_point(steps in prop::collection::vec((1u64..3_000, prop::option::of(-1e12f64..1e12)), 1..300)) {
        let mut s: Series<1> = Series::new(&ONE);
        let mut t = 0;
        let mut pushed = Vec::new();
        for (dt, v) in steps {
            t += dt;
            s.push(t, &[v]);
            pushed.push((t, [v]));
        }
        check_brackets(&s, &pushed)?;
    }

    /// The same with few distinct values, so buckets of one value repeated
    /// (kept as a value and a count) turn into aggregates at any point; and
    /// each bucket's min and max are exactly the points'.
    #[test]
    fn buckets_of_repeated_values_read_exactly(steps in prop::collection::vec((1u64..3_000, prop::option::of(0u8..3)), 1..300)) {
        let mut s: Series<1> = Series::new(&ONE);
        let mut t = 0;
        let mut pushed = Vec::new();
        for (dt, v) in steps {
            t += dt;
            let v = v.map(f64::from);
            s.push(t, &[v]);
            pushed.push((t, [v]));
        }
        check_brackets(&s, &pushed)?;
        for (tier, buckets) in s.tiers() {
            for b in buckets {
                let w = tier.width_ms;
                let inside = pushed
                    .iter()
                    .filter(|(pt, _)| pt.checked_div(w).map_or(*pt == b.t_ms, |i| Some(i) == b.t_ms.checked_div(w)))
                    .filter_map(|(_, v)| v[0]);
                let (lo, hi) = inside.fold((None, None), |(lo, hi): (Option<f64>, Option<f64>), v| {
                    (Some(lo.map_or(v, |l| l.min(v))), Some(hi.map_or(v, |h| h.max(v))))
                });
                prop_assert_eq!((b.get(0).min(), b.get(0).max()), (lo, hi));
            }
        }
    }

    /// One field over a window reads as that field of each bucket over the
    /// same window, in every tier and for a field out of range too.
    #[test]
    fn one_field_over_a_window_reads_as_the_buckets_do(
        steps in prop::collection::vec((1u64..3_000, prop::array::uniform2(prop::option::of(-1e6f64..1e6))), 0..200),
        span in prop_oneof![0u64..70_000, Just(u64::MAX)],
    ) {
        let mut s: Series<2> = Series::new(&ONE);
        let mut t = 0;
        for (dt, v) in steps {
            t += dt;
            s.push(t, &v);
        }
        let read = |a: Agg| (a.count(), a.min(), a.max(), a.mean());
        for field in 0..3 {
            let by_field: Vec<_> = s.recent_field(span, field).map(read).collect();
            let by_bucket: Vec<_> = s.recent(span).map(|b| read(b.get(field))).collect();
            prop_assert_eq!(by_field, by_bucket);
        }
    }

    /// The same when fields first have a value at any point (or never): a
    /// column made late lines up with the buckets already held, and only
    /// the fields that ever had a value take memory.
    #[test]
    fn buckets_bracket_every_point_of_fields_available_late(
        steps in prop::collection::vec((1u64..3_000, prop::array::uniform3(prop::option::of(-1e12f64..1e12))), 1..300),
        from in prop::array::uniform3(0usize..400),
    ) {
        let mut s: Series<3> = Series::new(&ONE);
        let empty = s.heap_bytes();
        let mut t = 0;
        let mut pushed = Vec::new();
        for (i, (dt, mut v)) in steps.into_iter().enumerate() {
            t += dt;
            v.iter_mut().zip(from).filter(|(_, from)| i < *from).for_each(|(v, _)| *v = None);
            s.push(t, &v);
            pushed.push((t, v));
        }
        check_brackets(&s, &pushed)?;
        let columns = (0..3).filter(|f| pushed.iter().any(|(_, v)| v[*f].is_some())).count();
        let slots = s.capacity();
        let raw = s.slots().next().filter(|(tier, _, _)| tier.width_ms == 0).map_or(0, |(_, _, slots)| slots);
        // A raw ring kept (two samples in a second, once) takes its own
        // few words. Each column: an f32 a slot in the raw tier, an f32 or
        // 14 bytes in the others.
        let ring = s.slots().count().saturating_sub(2) * Series::<3>::ring_bytes();
        let (least, most) = (ring + slots * (4 + 4 * columns), ring + slots * 4 + columns * (raw * 4 + (slots - raw) * 14));
        prop_assert!((least..=most).contains(&(s.heap_bytes() - empty)), "{} not in {least}..={most}", s.heap_bytes() - empty);
        check_slots(&s)?;
    }

    /// Slots come as buckets do: a tier never has more than twice the
    /// buckets it has held at once (and at least the first few), nor more
    /// than its length, whatever the interval.
    #[test]
    fn slots_grow_with_the_buckets_and_stop_at_the_length(steps in prop::collection::vec(1u64..30_000, 1..400)) {
        let tiers = Store::new(Duration::from_secs(600)).process_tiers;
        let mut s: Series<1> = Series::new(&tiers);
        let mut t = 0;
        for dt in steps {
            t += dt;
            s.push(t, &[Some(1.0)]);
            check_slots(&s)?;
        }
    }
}

/// The growth bound of `slots_grow_with_the_buckets_and_stop_at_the_length`,
/// against the buckets the tier holds now: a ring only grows when every
/// slot is taken, and drops buckets only once it has all its slots (or
/// after a gap of 49 days, which does not happen here).
fn check_slots<const N: usize>(s: &Series<N>) -> Result<(), TestCaseError> {
    for (tier, len, slots) in s.slots() {
        prop_assert!(slots <= tier.len, "{tier:?}: {slots} slots");
        prop_assert!(slots <= (2 * len).max(series::FIRST_SLOTS), "{tier:?}: {slots} slots for {len} buckets");
        prop_assert!(len <= slots);
    }
    Ok(())
}

#[test]
fn one_value_a_bucket_keeps_an_f32_and_a_second_makes_aggregates_of_the_same() {
    // Samples a second apart: one per one-second bucket, so that column
    // keeps a single f32 each, and no raw ring, which would copy it.
    let mut s: Series<1> = Series::new(&ONE);
    for t in 0..8u64 {
        s.push(t * 1_000, &[(t != 3).then_some(t as f64 + 0.5)]);
    }
    let empty = Series::<1>::new(&ONE).heap_bytes();
    assert_eq!(s.heap_bytes() - empty, (5 + 3) * 4 + 5 * 4 + 3 * 14);
    let before: Vec<(Tier, Vec<Bucket<1>>)> = s.tiers().collect();
    assert_eq!(before.len(), 2);
    // A second value in the newest second: that tier's column takes whole
    // aggregates, and what it held reads as before; the raw ring starts
    // with the samples it would have held.
    s.push(7_500, &[Some(100.0)]);
    let raw = Series::<1>::ring_bytes();
    assert_eq!(s.heap_bytes() - empty, raw + (4 + 5 + 3) * 4 + 4 * 4 + (5 + 3) * 14);
    let after: Vec<(Tier, Vec<Bucket<1>>)> = s.tiers().collect();
    let raw_points: Vec<(u64, Option<f64>)> = after[0].1.iter().map(|b| (b.t_ms, b.get(0).max())).collect();
    assert_eq!(raw_points, [(5_000, Some(5.5)), (6_000, Some(6.5)), (7_000, Some(7.5)), (7_500, Some(100.0))]);
    let (secs_before, secs_after) = (&before[0].1, &after[1].1);
    assert_eq!(secs_before[..4], secs_after[..4]);
    let newest = secs_after[4].get(0);
    assert_eq!((newest.min(), newest.max(), newest.count()), (Some(7.5), Some(100.0), 2));
    assert_eq!(secs_before[3].get(0).count(), 1);
    assert_eq!(secs_after.iter().find(|b| b.t_ms == 3_000).map(|b| b.get(0).count()), Some(0), "still unavailable");
}

#[test]
fn times_beyond_49_days_of_milliseconds_apart_stay_exact() {
    // Times are kept as 32-bit offsets from a base, which moves up.
    let mut s: Series<1> = Series::new(&ONE);
    let far = u64::from(u32::MAX) + 1_500;
    for t in [0, 1_000, far, far + 1, far + 2 * u64::from(u32::MAX)] {
        s.push(t, &[Some(1.0)]);
    }
    let raw: Vec<u64> = s.tiers().next().map(|(_, b)| b.iter().map(|b| b.t_ms).collect()).unwrap_or_default();
    assert_eq!(raw, [far + 2 * u64::from(u32::MAX)], "what no longer fits goes, as from a full ring");
    let mut s: Series<1> = Series::new(&ONE);
    let start = 1_700_000_000_000;
    for i in 0..4u64 {
        s.push(start + i * (u64::from(u32::MAX) / 2), &[Some(i as f64)]);
    }
    let raw: Vec<(u64, Option<f64>)> =
        s.tiers().next().map(|(_, b)| b.iter().map(|b| (b.t_ms, b.get(0).max())).collect()).unwrap_or_default();
    let half = u64::from(u32::MAX) / 2;
    assert_eq!(
        raw,
        [(start + half, Some(1.0)), (start + 2 * half, Some(2.0)), (start + 3 * half, Some(3.0))],
        "the base moved up past the first, which no longer fits"
    );
    assert_eq!(s.since(start + 2 * half).count(), 2);
    assert_eq!(s.since(start + 3 * half).count(), 1);
}

#[test]
fn an_aggregate_takes_14_bytes_and_its_count_stops_at_the_top_of_16_bits() {
    assert_eq!(size_of::<Agg>(), 14);
    let mut a = Agg::NONE;
    for i in 0..70_000u32 {
        a.add(Some(f64::from(i % 100)));
    }
    assert_eq!(a.count(), u32::from(u16::MAX));
    assert_eq!((a.min(), a.max()), (Some(0.0), Some(99.0)));
    // Past saturation each sample weighs the same small amount: the mean
    // stays that of what came before, 49.5, give or take a little.
    let mean = a.mean().unwrap_or(f64::NAN);
    assert!((mean - 49.5).abs() < 0.5, "{mean}");
}

#[test]
fn samples_a_second_apart_read_as_raw_points_without_a_raw_ring() {
    let mut s: Series<1> = Series::new(&ONE);
    for t in 0..20u64 {
        s.push(t * 1_000 + 7, &[Some(t as f64)]);
    }
    assert_eq!(s.slots().count(), 2, "no raw ring");
    let recent: Vec<(u64, Option<f64>, u32)> =
        s.recent(2_000).map(|b| (b.t_ms, b.get(0).max(), b.get(0).count())).collect();
    assert_eq!(recent, [(17_007, Some(17.0), 1), (18_007, Some(18.0), 1), (19_007, Some(19.0), 1)]);
    assert_eq!(s.width_since(17_007), 0, "each bucket one sample, drawn as a point");
    assert_eq!(s.width_since(0), 10_000);
}

#[test]
fn an_unprobed_process_keeps_its_coarsest_tier_until_its_probe_speaks() {
    let mut st = Store::new(Duration::from_secs(600));
    let key = |pid| ProcKey { pid, start_ms: None, gpu: 0 };
    for t in 0..30u64 {
        st.record(&snap(t * 1_000, &[(0, "GPU-a", t)], &[1]));
    }
    let tiers = |st: &Store| st.process(&key(1)).map(|s| s.slots().map(|(t, ..)| t.width_ms).collect::<Vec<_>>());
    assert_eq!(tiers(&st), Some(vec![10_000]), "ten minutes in 60 buckets, and nothing finer");
    // Thirty seconds of NVML's figure, one per second, in ten-second steps.
    let s = st.process(&key(1)).unwrap();
    assert_eq!(s.width_since(0), 10_000);
    let steps: Vec<(u64, Option<f64>)> = s.recent(u64::MAX).map(|b| (b.t_ms, b.get(process::NVML).max())).collect();
    assert_eq!(steps, [(9_000, Some(1.0)), (19_000, Some(1.0)), (29_000, Some(1.0))]);
    // The probe's first figure: the finer tiers from then on, read where
    // they reach back far enough, the coarsest before.
    let mut probed = snap(30_000, &[(0, "GPU-a", 30)], &[1]);
    let alloc: crate::model::ProcessAllocator = serde_json::from_value(serde_json::json!({
        "framework": "torch", "state": "fresh", "age_ms": 0,
        "devices": [{ "gpu": 0, "reserved": 1000, "allocated": 600 }]
    }))
    .unwrap();
    probed.processes[0].allocator = Some(Box::new(alloc.clone()));
    st.record(&probed);
    for t in 31..40u64 {
        let mut next = snap(t * 1_000, &[(0, "GPU-a", t)], &[1]);
        next.processes[0].allocator = Some(Box::new(alloc.clone()));
        st.record(&next);
    }
    let s = st.process(&key(1)).unwrap();
    assert_eq!(s.slots().map(|(t, ..)| t.width_ms).collect::<Vec<_>>(), [1_000, 10_000]);
    let recent: Vec<(u64, Option<f64>)> = s.recent(5_000).map(|b| (b.t_ms, b.get(process::RESERVED).max())).collect();
    assert_eq!(recent.len(), 6, "seconds: {recent:?}");
    assert!(recent.iter().all(|(_, r)| *r == Some(1000.0)));
    let whole: Vec<Option<f64>> = s.recent(u64::MAX).map(|b| b.get(process::RESERVED).max()).collect();
    assert_eq!(whole, [None, None, None, Some(1000.0)], "the coarsest tier, before the probe and since");
}

#[test]
fn a_steady_field_keeps_a_value_and_a_count_until_it_moves() {
    // Ten-second buckets of samples a second apart: 5.0 throughout the
    // first bucket, then 5.0 and 9.0 in the second.
    let tiers = [Tier { width_ms: 10_000, len: 4 }];
    let mut s: Series<2> = Series::new(&tiers);
    for t in 0..15u64 {
        s.push(t * 1_000, &[Some(5.0), Some(if t < 13 { 5.0 } else { 9.0 })]);
    }
    type Read = (Option<f64>, Option<f64>, Option<f64>, u32);
    let read = |s: &Series<2>, f| -> Vec<Read> {
        s.recent(u64::MAX).map(|b| (b.get(f).min(), b.get(f).mean(), b.get(f).max(), b.get(f).count())).collect()
    };
    assert_eq!(read(&s, 0), [(Some(5.0), Some(5.0), Some(5.0), 10), (Some(5.0), Some(5.0), Some(5.0), 5)]);
    let second = read(&s, 1);
    assert_eq!(second[0], (Some(5.0), Some(5.0), Some(5.0), 10), "what it held reads the same as aggregates");
    assert_eq!((second[1].0, second[1].2, second[1].3), (Some(5.0), Some(9.0), 5));
    assert!((second[1].1.unwrap() - 6.6).abs() < 1e-6, "{second:?}");
    // Per slot (four: the fewest a ring takes, here its length): a time,
    // the steady field's value and count, the other field's aggregate.
    assert_eq!(s.heap_bytes() - Series::<2>::new(&tiers).heap_bytes(), 4 * (4 + 6 + 14));
}
