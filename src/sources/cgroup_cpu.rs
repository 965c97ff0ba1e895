//! A process's CPU bandwidth limit (the CFS quota a container runtime, the
//! kubelet or Slurm sets) and how often it throttled the job: a quota of
//! 4 CPUs under 8 DataLoader workers holds the workers back for most of
//! every period, and the GPU waits.
//!
//! cgroup v2 (Documentation/admin-guide/cgroup-v2.rst, "CPU Interface
//! Files"): `cpu.max` is "$MAX $PERIOD", "max" for no limit; `cpu.stat`
//! holds `nr_periods`, `nr_throttled` and `throttled_usec` "when the
//! controller is enabled". cgroup v1 (Documentation/scheduler/
//! sched-bwc.rst): `cpu.cfs_quota_us` (-1 for none) and
//! `cpu.cfs_period_us`, and `cpu.stat`'s `nr_periods`, `nr_throttled` and
//! `throttled_time` in nanoseconds. A quota binds the cgroup it is set on
//! and everything below, and each cgroup counts only its own throttling,
//! so the cgroup read is the one of the process's own and its ancestors
//! with the smallest quota.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::procstat;
use crate::model::CgroupCpu;

/// Where a process's limit is read: found at first sight and again every
/// scan (`input.rs`), read every tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// As `/proc/PID/cgroup` names it.
    path: Arc<str>,
    /// The directory of its files.
    dir: PathBuf,
    version: u8,
    quota_cpus: Option<f64>,
}

/// More levels than any runtime nests (a Kubernetes container is 4 deep).
const MAX_DEPTH: usize = 32;

/// `/proc/PID/cgroup`; `None` once the process is gone.
pub fn cgroup_of(proc_root: &Path, pid: u32) -> Option<String> {
    procstat::read_small_text(&procstat::pid_file(proc_root, pid, "cgroup"))
}

/// Finds the cgroup whose quota binds the process whose
/// `/proc/PID/cgroup` says `cgroup`, under `sys_root`'s cgroup mounts;
/// `None` where that cannot be read.
pub fn find(cgroup: &str, sys_root: &Path) -> Option<Limit> {
    let (version, mount, path) = cpu_cgroup(cgroup)?;
    let root = sys_root.join("fs/cgroup").join(mount);
    let own = root.join(path.trim_start_matches('/'));
    let mut best: Option<Limit> = None;
    let mut at = (own.clone(), path.to_owned());
    for _ in 0..MAX_DEPTH {
        let quota = quota_of(&at.0, version);
        if let Some(cpus) = quota
            && best.as_ref().and_then(|b| b.quota_cpus).is_none_or(|q| cpus < q)
        {
            best = Some(Limit { path: at.1.as_str().into(), dir: at.0.clone(), version, quota_cpus: Some(cpus) });
        }
        if at.1 == "/" || at.0 == root {
            break;
        }
        let parent_path = match at.1.rsplit_once('/') {
            Some(("", _)) | None => "/".to_owned(),
            Some((p, _)) => p.to_owned(),
        };
        let Some(parent_dir) = at.0.parent().map(Path::to_path_buf) else { break };
        at = (parent_dir, parent_path);
    }
    // The own cgroup's counters where none has a quota: they say it was
    // never throttled, which is the truth.
    Some(best.unwrap_or(Limit { path: path.into(), dir: own, version, quota_cpus: None }))
}

/// The cgroup that holds the CPU controller, from `/proc/PID/cgroup`:
/// v1's line whose controllers include `cpu` ("4:cpu,cpuacct:/path",
/// mounted at `/sys/fs/cgroup/cpu,cpuacct`), else v2's one line
/// ("0::/path", at `/sys/fs/cgroup`). A path that climbs out of this
/// cgroup namespace ("/../..") is not readable from here.
fn cpu_cgroup(text: &str) -> Option<(u8, &str, &str)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
            continue;
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some((2, "", path));
        } else if controllers.split(',').any(|c| c == "cpu") {
            return Some((1, controllers, path));
        }
    }
    v2
}

/// The quota set on this cgroup itself, in CPUs; `None` for none (or the
/// root, which has no such file).
fn quota_of(dir: &Path, version: u8) -> Option<f64> {
    let read = |name: &str| procstat::read_small_text(&dir.join(name));
    if version == 2 {
        return parse_max(&read("cpu.max")?);
    }
    let quota: i64 = read("cpu.cfs_quota_us")?.trim().parse().ok()?;
    let period: i64 = read("cpu.cfs_period_us")?.trim().parse().ok()?;
    ratio(quota, period)
}

/// v2's `cpu.max`: "$MAX $PERIOD", `max` for no quota.
fn parse_max(text: &str) -> Option<f64> {
    let mut f = text.split_whitespace();
    let (max, period) = (f.next()?, f.next()?);
    ratio(max.parse().ok()?, period.parse().ok()?)
}

/// A quota (negative: none) over a period, in CPUs.
fn ratio(quota: i64, period: i64) -> Option<f64> {
    (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
}

/// The throttling counters of `cpu.stat`, throttled time in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counters {
    periods: Option<u64>,
    throttled: Option<u64>,
    throttled_usec: Option<u64>,
}

fn parse_stat(text: &str, version: u8) -> Counters {
    let mut c = Counters::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(' ') else { continue };
        let Ok(value) = value.trim().parse::<u64>() else { continue };
        match (key, version) {
            ("nr_periods", _) => c.periods = Some(value),
            ("nr_throttled", _) => c.throttled = Some(value),
            ("throttled_usec", 2) => c.throttled_usec = Some(value),
            ("throttled_time", 1) => c.throttled_usec = Some(value / 1000),
            _ => {}
        }
    }
    c
}

/// Each cgroup's last reading, for rates: shared by every process in it.
#[derive(Debug, Default)]
pub struct Throttling {
    last: HashMap<PathBuf, (Instant, Counters)>,
    /// This tick's readings, so that the ranks of one job read their
    /// cgroup once.
    read: HashMap<PathBuf, CgroupCpu>,
}

impl Throttling {
    /// The limit's figures now: its counters read once a tick however many
    /// processes share it.
    pub fn read(&mut self, limit: &Limit, now: Instant) -> Option<CgroupCpu> {
        if let Some(done) = self.read.get(&limit.dir) {
            return Some(done.clone());
        }
        let text = procstat::read_small_text(&limit.dir.join("cpu.stat"))?;
        let now_counters = parse_stat(&text, limit.version);
        let before = self.last.insert(limit.dir.clone(), (now, now_counters));
        let delta = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
        let (mut share, mut per_s) = (None, None);
        if let Some((at, was)) = before {
            let seconds = now.saturating_duration_since(at).as_secs_f64();
            let periods = delta(was.periods, now_counters.periods).filter(|&p| p > 0);
            if let (Some(p), Some(t)) = (periods, delta(was.throttled, now_counters.throttled)) {
                share = Some((t as f64 / p as f64 * 100.0).min(100.0));
            }
            if seconds > 0.0 {
                per_s = delta(was.throttled_usec, now_counters.throttled_usec).map(|us| us as f64 / 1e6 / seconds);
            }
        }
        let cpu = CgroupCpu {
            path: limit.path.to_string(),
            version: limit.version,
            quota_cpus: limit.quota_cpus,
            periods: now_counters.periods,
            throttled_periods: now_counters.throttled,
            throttled_usec: now_counters.throttled_usec,
            throttled_periods_percent: share,
            throttled_seconds_per_s: per_s,
        };
        self.read.insert(limit.dir.clone(), cpu.clone());
        Some(cpu)
    }

    /// Ends a tick: cgroups not read in it are forgotten.
    pub fn end_tick(&mut self) {
        let read = std::mem::take(&mut self.read);
        self.last.retain(|dir, _| read.contains_key(dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    /// A scripted tree: `/proc/7/cgroup` and the cgroup file system.
    struct Tree(tempfile::TempDir);

    impl Tree {
        fn new(cgroup: &str) -> Self {
            let t = Self(tempfile::tempdir().unwrap());
            t.write("proc/7/cgroup", cgroup);
            t
        }

        fn write(&self, path: &str, text: &str) {
            let path = self.0.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }

        fn find(&self) -> Option<Limit> {
            find(&cgroup_of(&self.0.path().join("proc"), 7)?, &self.0.path().join("sys"))
        }
    }

    const POD: &str = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice";

    #[test]
    fn v2_takes_the_smallest_quota_of_the_cgroup_and_its_ancestors() {
        let t = Tree::new(&format!("0::/{POD}/cri-containerd-a.scope\n"));
        let pod = format!("sys/fs/cgroup/{POD}");
        t.write(&format!("{pod}/cpu.max"), "400000 100000\n");
        t.write(&format!("{pod}/cri-containerd-a.scope/cpu.max"), "800000 100000\n");
        t.write("sys/fs/cgroup/kubepods.slice/cpu.max", "max 100000\n");
        t.write(&format!("{pod}/cpu.stat"), "usage_usec 10\nnr_periods 100\nnr_throttled 20\nthrottled_usec 5000000\n");
        let limit = t.find().unwrap();
        assert_eq!((limit.path.as_ref(), limit.version, limit.quota_cpus), (&*format!("/{POD}"), 2, Some(4.0)));

        let mut th = Throttling::default();
        let t0 = Instant::now();
        let first = th.read(&limit, t0).unwrap();
        assert_eq!(
            (first.periods, first.throttled_periods, first.throttled_usec),
            (Some(100), Some(20), Some(5_000_000))
        );
        assert_eq!((first.throttled_periods_percent, first.throttled_seconds_per_s), (None, None), "no rate yet");
        assert_eq!(th.read(&limit, t0 + Duration::from_secs(1)), Some(first), "read once a tick");
        th.end_tick();
        t.write(&format!("{pod}/cpu.stat"), "nr_periods 110\nnr_throttled 25\nthrottled_usec 6500000\n");
        let second = th.read(&limit, t0 + Duration::from_secs(2)).unwrap();
        assert_eq!(second.throttled_periods_percent, Some(50.0), "5 of 10 periods");
        assert_eq!(second.throttled_seconds_per_s, Some(0.75), "1.5 s held back over 2 s");
        th.end_tick();
        // A counter that went back (the cgroup made anew): no rate.
        t.write(&format!("{pod}/cpu.stat"), "nr_periods 3\nnr_throttled 1\nthrottled_usec 100\n");
        let reset = th.read(&limit, t0 + Duration::from_secs(3)).unwrap();
        assert_eq!((reset.throttled_periods_percent, reset.throttled_seconds_per_s), (None, None));
    }

    #[test]
    fn without_a_quota_the_own_cgroup_says_it_was_never_throttled() {
        let t = Tree::new("0::/user.slice/session-3.scope\n");
        t.write("sys/fs/cgroup/user.slice/session-3.scope/cpu.max", "max 100000\n");
        t.write("sys/fs/cgroup/user.slice/session-3.scope/cpu.stat", "usage_usec 10\n");
        let limit = t.find().unwrap();
        assert_eq!((limit.path.as_ref(), limit.quota_cpus), ("/user.slice/session-3.scope", None));
        let cpu = Throttling::default().read(&limit, Instant::now()).unwrap();
        assert_eq!((cpu.quota_cpus, cpu.periods, cpu.throttled_usec), (None, None, None), "no bandwidth counters");
        // The root cgroup in a container's own namespace.
        let root = Tree::new("0::/\n");
        root.write("sys/fs/cgroup/cpu.stat", "usage_usec 10\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
        let limit = root.find().unwrap();
        assert_eq!((limit.path.as_ref(), limit.quota_cpus), ("/", None));
        assert_eq!(Throttling::default().read(&limit, Instant::now()).unwrap().throttled_usec, Some(0));
    }

    #[test]
    fn v1_reads_the_cpu_controller_s_hierarchy_in_nanoseconds() {
        let t = Tree::new("12:memory:/slurm/uid_1/job_4\n4:cpu,cpuacct:/slurm/uid_1/job_4/step_0\n0::/\n");
        let job = "sys/fs/cgroup/cpu,cpuacct/slurm/uid_1/job_4";
        t.write(&format!("{job}/cpu.cfs_quota_us"), "200000\n");
        t.write(&format!("{job}/cpu.cfs_period_us"), "100000\n");
        t.write(&format!("{job}/step_0/cpu.cfs_quota_us"), "-1\n");
        t.write(&format!("{job}/step_0/cpu.cfs_period_us"), "100000\n");
        t.write(&format!("{job}/cpu.stat"), "nr_periods 50\nnr_throttled 50\nthrottled_time 2000000000\n");
        let limit = t.find().unwrap();
        assert_eq!((limit.path.as_ref(), limit.version, limit.quota_cpus), ("/slurm/uid_1/job_4", 1, Some(2.0)));
        let cpu = Throttling::default().read(&limit, Instant::now()).unwrap();
        assert_eq!(cpu.throttled_usec, Some(2_000_000));
    }

    #[test]
    fn unreadable_or_foreign_cgroups_are_none() {
        assert_eq!(Tree::new("0::/../../other.scope\n").find(), None, "outside this cgroup namespace");
        assert_eq!(Tree::new("garbage").find(), None);
        let t = Tree::new("0::/a\n");
        let gone = t.find().unwrap();
        assert_eq!(Throttling::default().read(&gone, Instant::now()), None, "no cpu.stat there");
        assert_eq!(cgroup_of(Path::new("/proc"), u32::MAX - 9), None);
    }

    #[test]
    fn this_process_s_cgroup_reads_without_failing() {
        let own = cgroup_of(Path::new("/proc"), std::process::id()).unwrap();
        if let Some(limit) = find(&own, Path::new("/sys")) {
            assert!(limit.path.starts_with('/'));
            assert!(limit.quota_cpus.is_none_or(|q| q > 0.0));
        }
    }

    proptest! {
        #[test]
        fn any_text_parses_or_not_without_panicking(text in any::<String>()) {
            let _ = cpu_cgroup(&text);
            if let Some(q) = parse_max(&text) {
                prop_assert!(q > 0.0);
            }
            for version in [1, 2] {
                let _ = parse_stat(&text, version);
            }
        }

        #[test]
        fn written_counters_parse_back(p in any::<u64>(), t in any::<u64>(), us in any::<u64>()) {
            let c = parse_stat(&format!("usage_usec 1\nnr_periods {p}\nnr_throttled {t}\nthrottled_usec {us}\n"), 2);
            prop_assert_eq!(c, Counters { periods: Some(p), throttled: Some(t), throttled_usec: Some(us) });
        }
    }
}
