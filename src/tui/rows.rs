//! The process table's rows: one per (process, GPU), narrowed by the
//! focused GPU and the filter, in the chosen order. Rendering and the key
//! handling both read rows from here, so they always agree on what row N is.

use std::borrow::Cow;
use std::cmp::Ordering;

use crate::hashing::IntMap;
use crate::model::{DeviceAllocator, Process, ProcessGpu, ProcessUtilization, Snapshot};

/// Identifies a process row: one process on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    pub pid: u32,
    pub gpu: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Column {
    Gpu,
    Pid,
    User,
    Type,
    GpuMem,
    Alloc,
    Reserved,
    Frag,
    Peak,
    Cpu,
    HostMem,
    Time,
    /// The container, pod or Slurm job: `w` groups by it rather than `s`
    /// sorting by it, so it is not in `SORTABLE`.
    Workload,
    /// rank/world of a distributed job, from the probe: `J` groups by job.
    Rank,
    /// Pinned host memory PyTorch's host allocator holds.
    Pinned,
    /// NVML's per-process utilisation sample: the share of its last
    /// sample period in which a kernel of the process ran (nvitop's
    /// `%SM`, nvidia-smi pmon's `sm`). Not SM activity: one small kernel
    /// running all the time reads 100%.
    Util,
    /// Its share of the GPU's memory bandwidth (nvitop's `%GMBW`).
    MemBw,
    /// The largest share of wall time its training thread waits in a
    /// DataLoader's `__next__`, as its probe measures it.
    DataWait,
    Command,
}

/// The order `s` walks through.
pub const SORTABLE: [Column; 15] = [
    Column::GpuMem,
    Column::Alloc,
    Column::Reserved,
    Column::Frag,
    Column::Peak,
    Column::Util,
    Column::MemBw,
    Column::DataWait,
    Column::Cpu,
    Column::HostMem,
    Column::Time,
    Column::Gpu,
    Column::Pid,
    Column::User,
    Column::Command,
];

impl Column {
    pub fn title(self) -> &'static str {
        match self {
            Self::Gpu => "GPU",
            Self::Pid => "PID",
            Self::User => "USER",
            Self::Type => "TYPE",
            Self::GpuMem => "GPU MEM",
            Self::Alloc => "ALLOC",
            Self::Reserved => "RESERVED",
            Self::Frag => "FRAG",
            Self::Peak => "PEAK",
            Self::Cpu => "CPU%",
            Self::HostMem => "HOST MEM",
            Self::Time => "TIME",
            Self::Workload => "WORKLOAD",
            Self::Rank => "RANK",
            Self::Pinned => "PINNED",
            Self::Util => "UTIL%",
            Self::MemBw => "GMBW%",
            Self::DataWait => "DATA%",
            Self::Command => "COMMAND",
        }
    }

    /// Figures read best largest first; names and numbers that identify
    /// (GPU, PID) read best in order.
    pub fn descending_by_default(self) -> bool {
        !matches!(self, Self::Gpu | Self::Pid | Self::User | Self::Type | Self::Workload | Self::Rank | Self::Command)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sort {
    pub column: Column,
    pub descending: bool,
    /// `w`: the rows of one workload together, in workload order, each
    /// group sorted by `column`; processes in none last.
    pub by_workload: bool,
    /// `J`: the ranks of one distributed job together (the probe's job
    /// key), by rank; before the workload grouping when both are on.
    pub by_job: bool,
    /// `t` / F5: parents and children (see `tree`); never with a grouping.
    pub tree: bool,
}

impl Default for Sort {
    fn default() -> Self {
        Self { column: Column::GpuMem, descending: true, by_workload: false, by_job: false, tree: false }
    }
}

impl Sort {
    pub fn next(self) -> Self {
        let at = SORTABLE.iter().position(|c| *c == self.column).map_or(0, |i| (i + 1) % SORTABLE.len());
        let column = SORTABLE[at];
        Self { column, descending: column.descending_by_default(), ..self }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    pub key: RowKey,
    pub process: &'a Process,
    pub gpu: &'a ProcessGpu,
    /// The allocator's view of this process on this GPU, with a probe.
    pub device: Option<&'a DeviceAllocator>,
    pub share: Share<'a>,
}

/// NVML's sample of a process's share of its GPU
/// (`nvmlDeviceGetProcessUtilization`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share<'a> {
    /// The GPU takes no samples of its processes (under MIG, or where the
    /// driver refuses): the columns say `n/a`.
    Unsampled,
    /// The GPU samples, and its last period has none of this process:
    /// NVML lists the processes that ran there, so this one ran nothing
    /// it saw. The columns say `-`, as `nvidia-smi pmon` does, not 0,
    /// which NVML did not say.
    NoSample,
    Sample(&'a ProcessUtilization),
}

impl Share<'_> {
    pub fn sample(self) -> Option<ProcessUtilization> {
        match self {
            Share::Sample(u) => Some(*u),
            Share::Unsampled | Share::NoSample => None,
        }
    }
}

/// Each process's sample by (GPU, PID), gathered once a frame: the rows
/// then find theirs in one step, at 512 processes on a GPU too. Empty,
/// and allocating nothing, where no GPU samples.
struct Shares<'a> {
    sampled: Vec<u32>,
    by_key: IntMap<(u32, u32), &'a ProcessUtilization>,
}

impl<'a> Shares<'a> {
    fn of(snap: &'a Snapshot) -> Self {
        let sampled = || snap.gpus.iter().filter_map(|g| Some((g.index, g.process_utilization.as_deref()?)));
        if sampled().next().is_none() {
            return Self { sampled: Vec::new(), by_key: IntMap::default() };
        }
        // Sized once: grown sample by sample, the map would be rehashed
        // on its way to 512 entries.
        let n = sampled().map(|(_, samples)| samples.len()).sum();
        let mut shares = Self { sampled: Vec::with_capacity(snap.gpus.len()), by_key: IntMap::default() };
        shares.by_key.reserve(n);
        for (index, samples) in sampled() {
            shares.sampled.push(index);
            for u in samples {
                shares.by_key.entry((index, u.pid)).or_insert(u);
            }
        }
        shares
    }

    fn get(&self, gpu: u32, pid: u32) -> Share<'a> {
        if !self.sampled.contains(&gpu) {
            return Share::Unsampled;
        }
        self.by_key.get(&(gpu, pid)).map_or(Share::NoSample, |u| Share::Sample(u))
    }
}

impl<'a> Row<'a> {
    pub fn command(&self) -> Option<&'a str> {
        self.process.command.as_deref().filter(|c| !c.is_empty()).or(self.process.name.as_deref())
    }

    /// The share (0 to 1) of time its slowest DataLoader keeps it
    /// waiting; `None` without a probe figure. The process's, on each of
    /// its GPUs: one training thread feeds them all.
    pub fn data_wait(&self) -> Option<f64> {
        self.process.input.as_deref()?.wait_share().filter(|s| s.is_finite()).map(|s| s.clamp(0.0, 1.0))
    }
}

pub fn build<'a>(snap: &'a Snapshot, focus: Option<u32>, filter: &str, sort: Sort) -> Vec<Row<'a>> {
    let needle = filter.trim().to_lowercase();
    let shares = Shares::of(snap);
    let shares = &shares;
    // Sized up front: collected through the filters, the list would grow
    // seven times on its way to 512 rows.
    let mut rows = Vec::with_capacity(snap.processes.iter().map(|p| p.gpus.len()).sum());
    rows.extend(
        snap.processes
            .iter()
            .flat_map(|p| p.gpus.iter().map(move |g| row(p, g, shares)))
            .filter(|r| focus.is_none_or(|f| r.key.gpu == f))
            .filter(|r| needle.is_empty() || matches(r, &needle)),
    );
    let rows = sorted(rows, sort);
    if sort.tree { crate::tui::tree::order(rows) } else { rows }
}

/// The rows in `sort`'s order. Each row's sort value is worked out once,
/// not in every comparison: at 512 processes a sort makes some 4,600
/// comparisons each frame, and a text column lowered its two texts (two
/// allocations) in each. The position in `rows` breaks the last ties, so
/// the faster unstable sort gives the order a stable one would.
fn sorted(rows: Vec<Row<'_>>, sort: Sort) -> Vec<Row<'_>> {
    if let Some(order) = numeric_order(&rows, sort) {
        let mut sorted = Vec::with_capacity(rows.len());
        sorted.extend(order.into_iter().filter_map(|(_, _, at)| rows.get(at as usize).copied()));
        return sorted;
    }
    let mut keyed: Vec<(Value, usize, Row)> =
        rows.into_iter().enumerate().map(|(at, r)| (value(&r, sort.column), at, r)).collect();
    keyed.sort_unstable_by(|(va, at_a, a), (vb, at_b, b)| {
        group(a, b, sort)
            .then_with(|| compare(va, vb, sort.descending))
            .then_with(|| a.key.cmp(&b.key))
            .then_with(|| at_a.cmp(at_b))
    });
    keyed.into_iter().map(|(_, _, r)| r).collect()
}

/// The order of a numeric column without a grouping, the dashboard's
/// usual one, as plain integers: each row's value as a number that
/// orders as `compare` does, its key, and its position. Sorting those
/// takes a tenth of the instructions that comparing rows does.
fn numeric_order(rows: &[Row], sort: Sort) -> Option<Vec<(u128, u64, u32)>> {
    if sort.by_job || sort.by_workload {
        return None;
    }
    let mut order = Vec::with_capacity(rows.len());
    for (at, r) in rows.iter().enumerate() {
        let Value::Num(v) = value(r, sort.column) else { return None };
        let key = (u64::from(r.key.pid) << 32) | u64::from(r.key.gpu);
        order.push((ordinal(v, sort.descending), key, u32::try_from(at).ok()?));
    }
    order.sort_unstable();
    Some(order)
}

/// A value as an integer in `compare`'s order: `total_cmp`'s order
/// mapped onto unsigned integers, reversed when descending, and an
/// unknown value past every known one either way.
fn ordinal(v: Option<f64>, descending: bool) -> u128 {
    let Some(x) = v else { return 1 << 64 };
    let bits = x.to_bits();
    let ascending = if bits >> 63 == 1 { !bits } else { bits | (1 << 63) };
    u128::from(if descending { !ascending } else { ascending })
}

fn row<'a>(p: &'a Process, g: &'a ProcessGpu, shares: &Shares<'a>) -> Row<'a> {
    let device = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(g.index)));
    Row { key: RowKey { pid: p.pid, gpu: g.index }, process: p, gpu: g, device, share: shares.get(g.index, p.pid) }
}

/// Whether the row has `needle` (lower case) in its user, name, command,
/// PID or workload: what `/` keeps and F3 jumps to.
pub fn matches(r: &Row, needle: &str) -> bool {
    let has = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(needle));
    has(r.process.user.as_deref())
        || has(r.process.name.as_deref())
        || has(r.command())
        || r.key.pid.to_string().contains(needle)
        || has(r.process.workload.as_ref().map(|w| w.search_text()).as_deref())
}

/// F3: the first row from `from` on that matches `text`, wrapping past
/// the last; `None` when no row does (or the text is blank).
pub fn find(rows: &[Row], text: &str, from: usize) -> Option<usize> {
    let needle = text.trim().to_lowercase();
    if needle.is_empty() || rows.is_empty() {
        return None;
    }
    let start = from % rows.len();
    (start..rows.len()).chain(0..start).find(|&i| matches(&rows[i], &needle))
}

/// With grouping on, by workload (pod, else container, else Slurm job),
/// the rows in none last whatever the direction.
fn group(a: &Row, b: &Row, sort: Sort) -> Ordering {
    if sort.by_job {
        fn job<'r>(r: &Row<'r>) -> Option<&'r str> {
            r.process.allocator.as_ref().and_then(|a| a.job.as_deref())
        }
        let rank = |r: &Row| r.process.allocator.as_ref().and_then(|a| a.rank);
        let by_job = match (job(a), job(b)) {
            (Some(x), Some(y)) => x.cmp(y).then_with(|| rank(a).cmp(&rank(b))),
            (x, y) => y.is_some().cmp(&x.is_some()),
        };
        if by_job != Ordering::Equal || !sort.by_workload {
            return by_job;
        }
    }
    if !sort.by_workload {
        return Ordering::Equal;
    }
    match (&a.process.workload, &b.process.workload) {
        (Some(x), Some(y)) => x.group_key().cmp(&y.group_key()),
        (x, y) => y.is_some().cmp(&x.is_some()),
    }
}

/// A row's value in the sorted column; a text already lowered, so that
/// case does not order it.
enum Value<'a> {
    Num(Option<f64>),
    Text(Option<Cow<'a, str>>),
}

fn value<'a>(r: &Row<'a>, column: Column) -> Value<'a> {
    let num = |v: Option<u64>| Value::Num(v.map(|v| v as f64));
    let text = |v: Option<&'a str>| Value::Text(v.map(lowered));
    let dev = r.device;
    match column {
        Column::Gpu => Value::Num(Some(f64::from(r.key.gpu))),
        Column::Pid => Value::Num(Some(f64::from(r.key.pid))),
        Column::User => text(r.process.user.as_deref()),
        Column::Type => text(Some(r.gpu.kind.short())),
        Column::GpuMem => num(r.gpu.used_memory),
        Column::Alloc => num(dev.and_then(|d| d.allocated)),
        Column::Reserved => num(dev.and_then(|d| d.reserved)),
        Column::Frag => Value::Num(dev.and_then(|d| d.fragmentation)),
        Column::Peak => num(dev.and_then(|d| d.allocated_peak)),
        Column::Cpu => Value::Num(r.process.cpu_percent),
        Column::HostMem => num(r.process.host_memory),
        // The earlier the start, the longer it has run.
        Column::Time => Value::Num(r.process.start_time.as_ref().map(|t| -(t.time_unix_ms as f64))),
        Column::Workload => Value::Text(None),
        Column::Rank => num(r.process.allocator.as_ref().and_then(|a| a.rank).map(u64::from)),
        Column::Pinned => num(r.process.allocator.as_ref().and_then(|a| a.pinned_host)),
        // Unsampled and no sample alike go last: neither is a figure.
        Column::Util => Value::Num(r.share.sample().map(|u| f64::from(u.sm))),
        Column::MemBw => Value::Num(r.share.sample().map(|u| f64::from(u.memory))),
        Column::DataWait => Value::Num(r.data_wait()),
        Column::Command => text(r.command()),
    }
}

/// `s` in lower case, borrowed where it already is: user names and
/// commands nearly always are.
fn lowered(s: &str) -> Cow<'_, str> {
    if s.is_ascii() && !s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.to_lowercase())
    }
}

/// Unknown values go last in either direction: "n/a" is never the largest.
fn compare(a: &Value, b: &Value, descending: bool) -> Ordering {
    let dir = |o: Ordering| if descending { o.reverse() } else { o };
    match (a, b) {
        (Value::Num(Some(x)), Value::Num(Some(y))) => dir(x.total_cmp(y)),
        (Value::Text(Some(x)), Value::Text(Some(y))) => dir(x.cmp(y)),
        (Value::Num(x), Value::Num(y)) => y.is_some().cmp(&x.is_some()),
        (Value::Text(x), Value::Text(y)) => y.is_some().cmp(&x.is_some()),
        _ => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap() -> Snapshot {
        let proc = |pid: u32, gpu: u32, mem: Option<u64>, user: &str, cmd: &str| {
            serde_json::json!({
                "pid": pid, "gpus": [{ "index": gpu, "type": "compute", "used_memory": mem }],
                "gpu_memory_total": mem, "name": "python3", "user": user, "command": cmd,
                "start_time": null, "start_time_unix_ms": null, "parent_pid": null,
                "cpu_percent": null, "host_memory": null, "allocator": null
            })
        };
        let mut two_gpus = proc(30, 0, Some(5), "carol", "torchrun train.py");
        two_gpus["gpus"] = serde_json::json!([
            { "index": 0, "type": "compute", "used_memory": 5 },
            { "index": 1, "type": "compute", "used_memory": 50 }
        ]);
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "time": "x", "time_unix_ms": 0, "interval_ms": 1000, "collection_ms": 0.0,
            "simulated": false, "host": {}, "driver": {}, "gpus": [], "alerts": [],
            "processes": [proc(10, 0, Some(100), "alice", "python serve.py"), proc(20, 1, None, "bob", "vllm"), two_gpus],
            "sources": { "nvml": { "ok": true, "error": null }, "host": { "ok": true, "error": null },
                         "probes": { "ok": true, "error": null, "directory": null, "files": 0, "skipped": 0, "last_skipped": null } }
        }))
        .unwrap()
    }

    /// GPU 0 samples its processes: PID 10 at SM 80% and 5% of the memory
    /// bandwidth, PID 30 at 20% and 60%; GPU 1 (under MIG, say) does not.
    fn with_shares() -> Snapshot {
        let mut s = snap();
        let share = |pid, sm, memory| ProcessUtilization { pid, sm, memory, encoder: 0, decoder: 0 };
        let mut sampled = crate::model::Gpu::blank(0, crate::model::GpuState::Ok);
        sampled.process_utilization = Some(vec![share(10, 80, 5), share(30, 20, 60)]);
        s.gpus = vec![sampled, crate::model::Gpu::blank(1, crate::model::GpuState::Ok)];
        s
    }

    fn by(column: Column, descending: bool) -> Sort {
        Sort { column, descending, ..Sort::default() }
    }

    #[test]
    fn each_row_has_its_gpu_s_sample_of_it_or_says_why_not() {
        let mut s = with_shares();
        let rows = build(&s, None, "", by(Column::Pid, false));
        let shares: Vec<Option<(u32, u32)>> = rows.iter().map(|r| r.share.sample().map(|u| (u.sm, u.memory))).collect();
        assert_eq!(keys(&rows), [(10, 0), (20, 1), (30, 0), (30, 1)]);
        assert_eq!(shares, [Some((80, 5)), None, Some((20, 60)), None]);
        assert_eq!(rows[1].share, Share::Unsampled, "GPU 1 takes no samples");
        // GPU 0 samples, and its last period had none of PID 30.
        s.gpus[0].process_utilization.as_mut().unwrap().truncate(1);
        let rows = build(&s, None, "", by(Column::Pid, false));
        assert_eq!((rows[2].key, rows[2].share), (RowKey { pid: 30, gpu: 0 }, Share::NoSample));
        assert_eq!(rows[3].share, Share::Unsampled);
    }

    #[test]
    fn sorting_by_sm_share_puts_the_busiest_first_and_the_unknown_last() {
        let s = with_shares();
        assert_eq!(keys(&build(&s, None, "", by(Column::Util, true))), [(10, 0), (30, 0), (20, 1), (30, 1)]);
        assert_eq!(keys(&build(&s, None, "", by(Column::Util, false))), [(30, 0), (10, 0), (20, 1), (30, 1)]);
        assert_eq!(keys(&build(&s, None, "", by(Column::MemBw, true))), [(30, 0), (10, 0), (20, 1), (30, 1)]);
        // The same order through the comparisons a grouping sorts by.
        let grouped = Sort { by_workload: true, ..by(Column::Util, true) };
        assert_eq!(keys(&build(&s, None, "", grouped)), [(10, 0), (30, 0), (20, 1), (30, 1)]);
        assert!(Column::Util.descending_by_default() && Column::MemBw.descending_by_default());
        let after_peak = Sort { column: Column::Peak, ..Sort::default() }.next();
        assert_eq!((after_peak.column, after_peak.next().column), (Column::Util, Column::MemBw), "`s` walks to them");
    }

    /// PID 10 waits for its data 5% of the time; PID 30 (on two GPUs)
    /// 60% on its slowest loader; PID 20 has no probe figure.
    fn with_data_wait() -> Snapshot {
        use crate::model::{DataLoaderStats, InputPipeline};
        let mut s = snap();
        let input = |shares: &[Option<f64>]| {
            let loaders = shares.iter().map(|w| DataLoaderStats { wait_share: *w, ..Default::default() }).collect();
            Some(std::sync::Arc::new(InputPipeline { hooked: true, loaders, ..Default::default() }))
        };
        s.processes[0].input = input(&[Some(0.05)]);
        s.processes[1].input = input(&[None]);
        s.processes[2].input = input(&[Some(0.2), Some(0.6), None]);
        s
    }

    #[test]
    fn sorting_by_data_wait_puts_the_hungriest_first_and_the_unknown_last() {
        let s = with_data_wait();
        let rows = build(&s, None, "", by(Column::Pid, false));
        let waits: Vec<Option<f64>> = rows.iter().map(Row::data_wait).collect();
        assert_eq!(waits, [Some(0.05), None, Some(0.6), Some(0.6)], "the slowest loader, on each GPU of it");
        assert_eq!(keys(&build(&s, None, "", by(Column::DataWait, true))), [(30, 0), (30, 1), (10, 0), (20, 1)]);
        assert_eq!(keys(&build(&s, None, "", by(Column::DataWait, false))), [(10, 0), (30, 0), (30, 1), (20, 1)]);
        // The same order through the comparisons a grouping sorts by.
        let grouped = Sort { by_workload: true, ..by(Column::DataWait, true) };
        assert_eq!(keys(&build(&s, None, "", grouped)), [(30, 0), (30, 1), (10, 0), (20, 1)]);
        assert!(Column::DataWait.descending_by_default());
        let after_mem_bw = Sort { column: Column::MemBw, ..Sort::default() }.next();
        assert_eq!((after_mem_bw.column, after_mem_bw.descending), (Column::DataWait, true), "`s` walks to it");
        assert!(SORTABLE.contains(&Column::DataWait), "the F6 menu lists it");
        // Without a probe's input figures every row is unknown: by key.
        let plain = snap();
        assert_eq!(keys(&build(&plain, None, "", by(Column::DataWait, true))), [(10, 0), (20, 1), (30, 0), (30, 1)]);
    }

    fn keys(rows: &[Row]) -> Vec<(u32, u32)> {
        rows.iter().map(|r| (r.key.pid, r.key.gpu)).collect()
    }

    #[test]
    fn one_row_per_process_and_gpu_largest_first_unknown_last() {
        let s = snap();
        let rows = build(&s, None, "", Sort::default());
        assert_eq!(keys(&rows), [(10, 0), (30, 1), (30, 0), (20, 1)]);
        let asc = build(
            &s,
            None,
            "",
            Sort { column: Column::GpuMem, descending: false, by_workload: false, by_job: false, tree: false },
        );
        assert_eq!(keys(&asc), [(30, 0), (30, 1), (10, 0), (20, 1)], "n/a stays last");
    }

    #[test]
    fn focus_and_filter_narrow_the_rows() {
        let s = snap();
        assert_eq!(keys(&build(&s, Some(1), "", Sort::default())), [(30, 1), (20, 1)]);
        assert_eq!(keys(&build(&s, None, "ALI", Sort::default())), [(10, 0)], "by user, any case");
        assert_eq!(keys(&build(&s, None, "vll", Sort::default())), [(20, 1)], "by command");
        assert_eq!(keys(&build(&s, None, "30", Sort::default())), [(30, 1), (30, 0)], "by PID");
        assert!(build(&s, Some(0), "bob", Sort::default()).is_empty());
    }

    #[test]
    fn sort_cycles_every_sortable_column_with_its_natural_direction() {
        let mut sort = Sort::default();
        let mut seen = Vec::new();
        for _ in 0..SORTABLE.len() {
            sort = sort.next();
            seen.push(sort.column);
            assert_eq!(sort.descending, sort.column.descending_by_default());
        }
        assert_eq!(sort, Sort::default(), "back to the start");
        assert_eq!(seen.len(), SORTABLE.len());
        let s = snap();
        let by_user = build(
            &s,
            None,
            "",
            Sort { column: Column::User, descending: false, by_workload: false, by_job: false, tree: false },
        );
        assert_eq!(keys(&by_user), [(10, 0), (20, 1), (30, 0), (30, 1)]);
    }

    #[test]
    fn text_columns_order_without_regard_to_case() {
        let mut s = snap();
        s.processes[0].user = Some("Émile".into());
        s.processes[1].user = Some("BOB".into());
        let by_user = Sort { column: Column::User, descending: false, by_workload: false, by_job: false, tree: false };
        // bob, carol (both GPUs, in key order), émile: "é" sorts after the ASCII letters.
        assert_eq!(keys(&build(&s, None, "", by_user)), [(20, 1), (30, 0), (30, 1), (10, 0)]);
        assert_eq!(lowered("carol"), Cow::Borrowed("carol"), "nothing to lower, nothing allocated");
        assert_eq!(lowered("ÉMILE"), "émile");
    }

    fn figure() -> impl proptest::strategy::Strategy<Value = Option<f64>> {
        use proptest::prelude::*;
        let special = prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::NAN),
            Just(-f64::NAN),
            Just(f64::MIN_POSITIVE),
        ];
        proptest::option::of(prop_oneof![any::<f64>(), special])
    }

    proptest::proptest! {
        /// The integers the usual sort orders by order the figures as
        /// `compare` does, unknown last, in both directions.
        #[test]
        fn ordinals_order_figures_as_compare_does(a in figure(), b in figure(), descending: bool) {
            let by_integers = ordinal(a, descending).cmp(&ordinal(b, descending));
            proptest::prop_assert_eq!(by_integers, compare(&Value::Num(a), &Value::Num(b), descending));
        }
    }

    #[test]
    fn search_finds_the_next_match_and_wraps() {
        let s = snap();
        let rows = build(&s, None, "", Sort::default());
        // (10, 0) alice, (30, 1) carol, (30, 0) carol, (20, 1) bob
        assert_eq!(find(&rows, "carol", 0), Some(1));
        assert_eq!(find(&rows, "CAROL", 2), Some(2), "any case, from where it is asked");
        assert_eq!(find(&rows, "carol", 3), Some(1), "past the last row: from the top");
        assert_eq!(find(&rows, "20", 0), Some(3), "by PID");
        assert_eq!(find(&rows, "python3", 1), Some(1), "by name");
        assert_eq!(find(&rows, "nobody", 0), None);
        assert_eq!(find(&rows, " ", 0), None, "a blank text matches nothing");
        assert_eq!(find(&[], "x", 5), None);
    }

    fn with_workloads() -> Snapshot {
        let mut s = snap();
        let docker = |id: &str| crate::model::Workload {
            kind: crate::model::WorkloadKind::Docker,
            container_id: Some(id.repeat(64)),
            pod_uid: None,
            qos: None,
            slurm_job: None,
            slurm_step: None,
            slurm_uid: None,
            pod: crate::model::PodNames::default(),
        };
        s.processes[0].workload = Some(std::sync::Arc::new(docker("b")));
        s.processes[1].workload = Some(std::sync::Arc::new(crate::model::Workload {
            kind: crate::model::WorkloadKind::Slurm,
            container_id: None,
            slurm_job: Some(4242),
            slurm_step: Some("0".into()),
            ..docker("c")
        }));
        s
    }

    #[test]
    fn the_filter_matches_a_workload_s_ids() {
        let s = with_workloads();
        assert_eq!(keys(&build(&s, None, "bbbbbbbbbbbbbbbbbbbbbbbb", Sort::default())), [(10, 0)], "a container id");
        assert_eq!(keys(&build(&s, None, "docker", Sort::default())), [(10, 0)], "the runtime");
        assert_eq!(keys(&build(&s, None, "slurm:4242", Sort::default())), [(20, 1)], "the tag");
        assert_eq!(keys(&build(&s, None, "4242", Sort::default())), [(20, 1)], "the job id");
    }

    #[test]
    fn grouping_by_job_puts_ranks_together_in_rank_order() {
        let mut s = snap();
        let job =
            |p: &mut Process, key: Option<&str>, rank: u32| {
                p.allocator = Some(serde_json::from_value(serde_json::json!({
                "framework": "torch", "framework_version": null, "backend": "native", "alloc_conf": null,
                "rank": rank, "local_rank": null, "world_size": 2, "pinned_host": null, "pinned_host_peak": null,
                "state": "fresh", "age_ms": 0, "devices": [], "job": key
            })).unwrap());
            };
        job(&mut s.processes[0], Some("10.0.0.1:29500"), 1);
        job(&mut s.processes[1], None, 0);
        job(&mut s.processes[2], Some("10.0.0.1:29500"), 0);
        let rows = build(&s, None, "", Sort { by_job: true, ..Sort::default() });
        let pids: Vec<u32> = rows.iter().map(|r| r.key.pid).collect();
        assert_eq!(&pids[..pids.len() - 1], &[30, 30, 10], "rank 0 (both its GPUs), then rank 1: {pids:?}");
        assert_eq!(pids.last(), Some(&20), "outside any job, last");
    }

    #[test]
    fn grouping_puts_each_workload_together_and_the_rest_last() {
        let s = with_workloads();
        let plain = build(&s, None, "", Sort::default());
        assert_eq!(keys(&plain), [(10, 0), (30, 1), (30, 0), (20, 1)]);
        // Containers before Slurm jobs, processes in none last, in either direction.
        let grouped = Sort { by_workload: true, ..Sort::default() };
        assert_eq!(keys(&build(&s, None, "", grouped)), [(10, 0), (20, 1), (30, 1), (30, 0)]);
        let reversed = Sort { descending: false, ..grouped };
        assert_eq!(keys(&build(&s, None, "", reversed)), [(10, 0), (20, 1), (30, 0), (30, 1)]);
        assert!(grouped.next().by_workload, "changing the sort keeps the grouping");
    }
}
