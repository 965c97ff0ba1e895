//! One distributed job across hosts: the probe's job key (torchrun's run id
//! or the rendezvous address), each rank with its host and GPU, the ranks
//! the world size promises but no host shows, and the two ranks worth a
//! look: the slowest and the fullest.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::HostState;
use crate::hashing::{IntMap, IntSet};
use crate::model::{Gpu, Process, Snapshot};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    pub job: String,
    /// The largest world size any rank reports; `null` when none does.
    pub world_size: Option<u32>,
    /// By rank, then host.
    pub ranks: Vec<RankEntry>,
    /// Ranks below the world size that no host shows.
    pub missing_ranks: Vec<u32>,
    /// Ranks two processes claim (two jobs sharing a key, or a restart),
    /// ascending.
    pub duplicate_ranks: Vec<u32>,
    /// The rank with the lowest GPU utilisation: the process's own sample
    /// where NVML samples processes, else its GPU's utilisation. In DDP the
    /// others wait for it at every all-reduce... or it waits for them; a
    /// rank far below the rest is the one to look at.
    pub slowest_rank: Option<u32>,
    /// The rank whose GPU has the least memory free (used / total of the
    /// GPU): the first to run out.
    pub fullest_rank: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankEntry {
    pub rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    /// NVML's index of the GPU the rank's allocator reports on (else the
    /// first GPU NVML lists for the process).
    pub gpu: Option<u32>,
    pub allocated: Option<u64>,
    pub reserved: Option<u64>,
    pub fragmentation: Option<f64>,
    /// Percent, as `slowest_rank` reads it.
    pub utilization: Option<u32>,
    /// The rank's GPU: used over total, 0 to 1.
    pub gpu_memory_ratio: Option<f64>,
    /// Share of its time the rank waits for its data, 0 to 1: the largest
    /// of its DataLoaders' (`null` without a probe that reports them).
    pub data_wait: Option<f64>,
    /// From a stale host: figures as of its last answer.
    pub stale: bool,
}

/// A job key naming a loopback rendezvous cannot span hosts: it is this
/// host's job alone, and two hosts' "127.0.0.1:29500" are different jobs.
fn scoped_key(key: &str, host: &str) -> String {
    let loopback = ["127.", "localhost", "[::1]", "::1"].iter().any(|p| key.starts_with(p));
    if loopback { format!("{key}@{host}") } else { key.to_string() }
}

pub fn group(hosts: &[HostState]) -> Vec<Job> {
    let mut by_key: BTreeMap<String, Vec<(RankEntry, Option<u32>)>> = BTreeMap::new();
    for h in hosts {
        let Some(snap) = &h.snapshot else { continue };
        let stale = h.status != super::model::HostStatus::Ok;
        let mut gpus = None;
        for p in &snap.processes {
            let Some(alloc) = &p.allocator else { continue };
            let Some(key) = &alloc.job else { continue };
            // Indexed once a snapshot, and only one with a rank: a rank's
            // GPU is then found in one step, however many a node lists.
            let gpus = gpus.get_or_insert_with(|| Gpus::of(snap));
            let entry = entry(gpus, p, &h.host, stale);
            by_key.entry(scoped_key(key, &h.host)).or_default().push((entry, alloc.world_size));
        }
    }
    by_key.into_iter().map(|(job, ranks)| finish(job, ranks)).collect()
}

/// A snapshot's GPUs by index, and each process's utilisation sample (the
/// share of time its kernels ran) by (GPU, PID).
struct Gpus<'a> {
    by_index: IntMap<u32, &'a Gpu>,
    sm: IntMap<(u32, u32), u32>,
}

impl<'a> Gpus<'a> {
    fn of(snap: &'a Snapshot) -> Self {
        let mut by_index = IntMap::default();
        let mut sm = IntMap::default();
        for g in &snap.gpus {
            // The first of a repeated index, as a search from the front found it.
            by_index.entry(g.index).or_insert(g);
            for u in g.process_utilization.iter().flatten() {
                sm.entry((g.index, u.pid)).or_insert(u.sm);
            }
        }
        Self { by_index, sm }
    }
}

fn entry(gpus: &Gpus, p: &Process, host: &str, stale: bool) -> RankEntry {
    let alloc = p.allocator.as_ref();
    let device = alloc.and_then(|a| a.devices.iter().find(|d| d.gpu.is_some()));
    let gpu = device.and_then(|d| d.gpu).or_else(|| p.gpus.first().map(|g| g.index));
    let on = gpu.and_then(|i| gpus.by_index.get(&i).copied());
    let own = gpu.and_then(|i| gpus.sm.get(&(i, p.pid)).copied());
    let ratio = on.and_then(|g| {
        let (used, total) = g.memory.used.zip(g.memory.total)?;
        (total > 0).then(|| used as f64 / total as f64)
    });
    RankEntry {
        rank: alloc.and_then(|a| a.rank),
        host: host.to_string(),
        pid: p.pid,
        gpu,
        allocated: device.and_then(|d| d.allocated),
        reserved: device.and_then(|d| d.reserved),
        fragmentation: device.and_then(|d| d.fragmentation),
        utilization: own.or_else(|| on.and_then(|g| g.utilization.gpu)),
        gpu_memory_ratio: ratio,
        data_wait: p.input.as_ref().and_then(|i| i.wait_share()),
        stale,
    }
}

fn finish(job: String, mut ranks: Vec<(RankEntry, Option<u32>)>) -> Job {
    let world_size = ranks.iter().filter_map(|(_, w)| *w).max();
    ranks.sort_by(|(a, _), (b, _)| a.rank.cmp(&b.rank).then_with(|| a.host.cmp(&b.host)));
    let ranks: Vec<RankEntry> = ranks.into_iter().map(|(r, _)| r).collect();
    // In rank order (sorted above): a repeated rank is one beside itself.
    let seen: Vec<u32> = ranks.iter().filter_map(|r| r.rank).collect();
    let mut duplicate_ranks: Vec<u32> = seen.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    duplicate_ranks.dedup();
    let seen: IntSet<u32> = seen.into_iter().collect();
    let missing_ranks =
        world_size.map_or_else(Vec::new, |w| (0..w.min(1 << 16)).filter(|r| !seen.contains(r)).collect());
    // Marks only mean something with at least two ranks to compare.
    let pick = |key: fn(&RankEntry) -> Option<f64>, lowest: bool| -> Option<u32> {
        let known: Vec<(&RankEntry, f64)> = ranks.iter().filter_map(|r| Some((r, key(r)?))).collect();
        if known.len() < 2 {
            return None;
        }
        let best = known.iter().copied().reduce(|a, b| if (b.1 < a.1) == lowest && b.1 != a.1 { b } else { a });
        best.and_then(|(r, _)| r.rank)
    };
    Job {
        slowest_rank: pick(|r| r.utilization.map(f64::from), true),
        fullest_rank: pick(|r| r.gpu_memory_ratio, false),
        job,
        world_size,
        ranks,
        missing_ranks,
        duplicate_ranks,
    }
}

/// "ranks 3, 7 of 8 not seen", or `None` when all are.
pub fn missing_text(job: &Job) -> Option<String> {
    let w = job.world_size?;
    if job.missing_ranks.is_empty() {
        return None;
    }
    let shown: Vec<String> = job.missing_ranks.iter().take(12).map(u32::to_string).collect();
    let more = if job.missing_ranks.len() > 12 {
        format!(" and {} more", job.missing_ranks.len() - 12)
    } else {
        String::new()
    };
    let word = if job.missing_ranks.len() == 1 { "rank" } else { "ranks" };
    Some(format!("{word} {}{more} of {w} not seen", shown.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(r: u32, util: Option<u32>, mem: Option<f64>) -> (RankEntry, Option<u32>) {
        let e = RankEntry {
            rank: Some(r),
            host: format!("h{}", r % 2),
            pid: 100 + r,
            gpu: Some(0),
            allocated: None,
            reserved: None,
            fragmentation: None,
            utilization: util,
            gpu_memory_ratio: mem,
            data_wait: None,
            stale: false,
        };
        (e, Some(8))
    }

    #[test]
    fn missing_slowest_and_fullest() {
        let job = finish(
            "j".into(),
            vec![
                rank(4, Some(90), Some(0.5)),
                rank(0, Some(20), Some(0.9)),
                rank(1, None, None),
                rank(2, Some(95), Some(0.2)),
                rank(5, Some(91), None),
                rank(6, Some(92), None),
            ],
        );
        assert_eq!(job.ranks.iter().map(|r| r.rank.unwrap()).collect::<Vec<_>>(), [0, 1, 2, 4, 5, 6]);
        assert_eq!(job.missing_ranks, [3, 7]);
        assert_eq!(missing_text(&job).unwrap(), "ranks 3, 7 of 8 not seen");
        assert_eq!((job.slowest_rank, job.fullest_rank), (Some(0), Some(0)));
    }

    #[test]
    fn one_known_figure_marks_nothing() {
        let job = finish("j".into(), vec![rank(0, Some(20), None), rank(1, None, None)]);
        assert_eq!((job.slowest_rank, job.fullest_rank), (None, None));
    }

    /// A node that claims 50,000 ranks (12,500 of them twice) of a world of
    /// 65,536: comparing every rank with every other is 10^9 steps and
    /// more, minutes in a debug build; sorted, a blink.
    #[test]
    fn a_job_of_many_ranks_is_grouped_in_one_pass() {
        let ranks = (0..50_000u32).map(|i| {
            let (mut e, _) = rank(i % 37_500, None, None);
            e.host = "h".into();
            (e, Some(65_536))
        });
        let job = finish("j".into(), ranks.collect());
        assert_eq!(job.ranks.len(), 50_000);
        assert_eq!(job.missing_ranks.len(), 65_536 - 37_500);
        assert_eq!(job.duplicate_ranks.len(), 12_500);
        assert!(job.duplicate_ranks.windows(2).all(|w| w[0] < w[1]), "sorted, for the marks' binary search");
    }

    #[test]
    fn loopback_rendezvous_is_per_host() {
        assert_eq!(scoped_key("127.0.0.1:29500", "n1"), "127.0.0.1:29500@n1");
        assert_eq!(scoped_key("10.0.0.1:29500", "n1"), "10.0.0.1:29500");
    }
}
