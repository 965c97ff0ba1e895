//! The process table's rows: one per (process, GPU), narrowed by the
//! focused GPU and the filter, in the chosen order. Rendering and the key
//! handling both read rows from here, so they always agree on what row N is.

use std::cmp::Ordering;

use crate::model::{DeviceAllocator, Process, ProcessGpu, Snapshot};

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
    Command,
}

/// The order `s` walks through.
pub const SORTABLE: [Column; 12] = [
    Column::GpuMem,
    Column::Alloc,
    Column::Reserved,
    Column::Frag,
    Column::Peak,
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
}

impl<'a> Row<'a> {
    pub fn command(&self) -> Option<&'a str> {
        self.process.command.as_deref().filter(|c| !c.is_empty()).or(self.process.name.as_deref())
    }
}

pub fn build<'a>(snap: &'a Snapshot, focus: Option<u32>, filter: &str, sort: Sort) -> Vec<Row<'a>> {
    let needle = filter.trim().to_lowercase();
    let mut rows: Vec<Row<'a>> = snap
        .processes
        .iter()
        .flat_map(|p| p.gpus.iter().map(move |g| row(p, g)))
        .filter(|r| focus.is_none_or(|f| r.key.gpu == f))
        .filter(|r| needle.is_empty() || matches(r, &needle))
        .collect();
    rows.sort_by(|a, b| group(a, b, sort).then_with(|| compare(a, b, sort)).then_with(|| a.key.cmp(&b.key)));
    if sort.tree { crate::tui::tree::order(rows) } else { rows }
}

fn row<'a>(p: &'a Process, g: &'a ProcessGpu) -> Row<'a> {
    let device = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(g.index)));
    Row { key: RowKey { pid: p.pid, gpu: g.index }, process: p, gpu: g, device }
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
        let job = |r: &Row| r.process.allocator.as_ref().and_then(|a| a.job.clone());
        let rank = |r: &Row| r.process.allocator.as_ref().and_then(|a| a.rank);
        let by_job = match (job(a), job(b)) {
            (Some(x), Some(y)) => x.cmp(&y).then_with(|| rank(a).cmp(&rank(b))),
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

enum Value<'a> {
    Num(Option<f64>),
    Text(Option<&'a str>),
}

fn value<'a>(r: &Row<'a>, column: Column) -> Value<'a> {
    let num = |v: Option<u64>| Value::Num(v.map(|v| v as f64));
    let dev = r.device;
    match column {
        Column::Gpu => Value::Num(Some(f64::from(r.key.gpu))),
        Column::Pid => Value::Num(Some(f64::from(r.key.pid))),
        Column::User => Value::Text(r.process.user.as_deref()),
        Column::Type => Value::Text(Some(r.gpu.kind.short())),
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
        Column::Command => Value::Text(r.command()),
    }
}

/// Unknown values go last in either direction: "n/a" is never the largest.
fn compare(a: &Row, b: &Row, sort: Sort) -> Ordering {
    let dir = |o: Ordering| if sort.descending { o.reverse() } else { o };
    match (value(a, sort.column), value(b, sort.column)) {
        (Value::Num(Some(x)), Value::Num(Some(y))) => dir(x.total_cmp(&y)),
        (Value::Text(Some(x)), Value::Text(Some(y))) => dir(x.to_lowercase().cmp(&y.to_lowercase())),
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
