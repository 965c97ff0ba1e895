//! Rises of the allocator's counters: allocation retries (cudaMalloc failed,
//! the cache was flushed and the allocation retried: the best early sign of
//! an OOM) and OOMs. A rise raises at once; the alert stays up for the
//! configured hold after the last rise. A counter that goes down was reset
//! (`torch.cuda.reset_accumulated_memory_stats`): a new baseline, no alert.
//! A counter the backend does not keep (`null`) never rises. The OOM alert
//! also rises with the OutOfMemoryErrors the probe sees, and, where the
//! backend keeps no OOM count, while NVML says the GPU has no free memory.

use crate::util::sorted_map::SortedMap;

use super::{Inputs, ProcKey, Verdicts, forget_unseen, key, process_gpus};
use crate::analysis::config::EventConfig;
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, OomPostMortem, ProcessAllocator, Severity};

#[derive(Debug, Clone, Default)]
pub struct CounterState {
    retries: Option<u64>,
    ooms: Option<u64>,
    oom_events: Option<u64>,
    last_retry_rise_ms: Option<u64>,
    last_oom_rise_ms: Option<u64>,
    /// The newest post-mortem already raised, by its time.
    post_mortem_ms: Option<u64>,
}

/// NVML's free memory at or below this is "none": a device that has run
/// out never reads exactly 0 once the driver's own small allocations and
/// rounding are counted, and a working process never leaves just 1 MiB.
pub const NO_FREE_MEMORY: u64 = 1 << 20;

pub fn judge(i: &Inputs<'_>, states: &mut SortedMap<ProcKey, CounterState>, v: &mut Verdicts) {
    let mut seen = Vec::new();
    for (pk, p, gpu) in process_gpus(i.snap) {
        let Some(a) = p.allocator.as_ref() else { continue };
        // A device the probe could not place on a GPU has no counters here;
        // the process's own OOM count still applies to every GPU it uses.
        let d = a.devices.iter().find(|d| d.gpu == Some(gpu));
        seen.push(pk);
        let s = states.get_or_insert_with(pk, CounterState::default);
        let retries = d.and_then(|d| d.alloc_retries);
        let ooms = d.and_then(|d| d.ooms);
        let retry_rose = rose(&mut s.retries, retries);
        let oom_rose = rose(&mut s.ooms, ooms);
        let event_rose = rose(&mut s.oom_events, a.oom_events);
        // A backend that does not count OOMs (cudaMallocAsync; JAX) leaves
        // the device itself as the witness: no free memory at all.
        let device_full = d.is_some_and(|d| d.ooms.is_none())
            && i.snap.gpus.iter().any(|g| g.index == gpu && g.memory.free.is_some_and(|f| f <= NO_FREE_MEMORY));
        let c = i.config;
        if c.alloc_retry.enabled {
            let verdict = event(&mut s.last_retry_rise_ms, retry_rose, i.now_ms, &c.alloc_retry, || Raise {
                severity: Severity::Critical,
                value: retries.map(|n| n as f64),
                threshold: None,
                message: format!(
                    "PID {} on GPU {gpu}: cudaMalloc failed and PyTorch flushed its cache to retry ({} so far); \
                     the next failure is an out-of-memory error",
                    p.pid,
                    retries.map_or_else(|| "retries".to_string(), |n| format!("{n} retries"))
                ),
                hint: format!(
                    "Free headroom now: smaller batch or sequence length, gradient checkpointing, mixed \
                     precision; if fragmentation is high, {}=expandable_segments:True.",
                    a.conf_var()
                ),
            });
            v.insert(key(AlertKind::AllocRetry, gpu, Some(p.pid)), verdict);
        }
        if c.oom.enabled {
            let post_mortem = new_post_mortem(a, gpu, s.post_mortem_ms, i.now_ms, &c.oom);
            if let Some(r) = post_mortem {
                s.post_mortem_ms = Some(r.time_unix_ms);
            }
            let rose = oom_rose || event_rose || device_full || post_mortem.is_some();
            let verdict = event(&mut s.last_oom_rise_ms, rose, i.now_ms, &c.oom, || {
                let mut raise =
                    oom_raise(p.pid, gpu, a, ooms, (oom_rose || event_rose || post_mortem.is_some(), device_full));
                if let Some(r) = post_mortem.or_else(|| newest_post_mortem(a, gpu)) {
                    raise.message = format!("PID {} on GPU {gpu}: CUDA out of memory: {}", p.pid, r.read());
                }
                raise
            });
            v.insert(key(AlertKind::Oom, gpu, Some(p.pid)), verdict);
        }
    }
    forget_unseen(states, seen);
}

/// A post-mortem on `gpu` newer than the last one raised and younger than
/// the alert's hold: the first look after a crash (a one-shot `--json`,
/// `check`, a replay) shows the OOM that just happened.
fn new_post_mortem<'a>(
    a: &'a ProcessAllocator,
    gpu: u32,
    raised_ms: Option<u64>,
    now_ms: u64,
    c: &EventConfig,
) -> Option<&'a OomPostMortem> {
    let hold_ms = u64::try_from(c.hold.as_millis()).unwrap_or(u64::MAX);
    newest_post_mortem(a, gpu)
        .filter(|r| raised_ms.is_none_or(|t| r.time_unix_ms > t) && now_ms.saturating_sub(r.time_unix_ms) < hold_ms)
}

fn newest_post_mortem(a: &ProcessAllocator, gpu: u32) -> Option<&OomPostMortem> {
    a.last_oom.iter().rev().find(|r| r.gpu == Some(gpu) || r.gpu.is_none())
}

/// `counted`: the allocator's or the probe's own count rose; `inferred`:
/// only the device's free memory says so.
fn oom_raise(pid: u32, gpu: u32, a: &ProcessAllocator, ooms: Option<u64>, (counted, inferred): (bool, bool)) -> Raise {
    let what = "Reduce the batch size, use gradient checkpointing or mixed precision; to see what held \
                the memory, record torch.cuda.memory._record_memory_history() before the failing step.";
    let seen = match (ooms, a.oom_events) {
        (Some(n), _) => format!(" ({n} so far)"),
        (None, Some(n)) if n > 0 => format!(" ({n} seen by the probe)"),
        _ => String::new(),
    };
    if counted || !inferred {
        return Raise {
            severity: Severity::Critical,
            value: ooms.or(a.oom_events).map(|n| n as f64),
            threshold: None,
            message: format!("PID {pid} on GPU {gpu}: CUDA out of memory{seen}"),
            hint: what.into(),
        };
    }
    let backend = a.backend.as_deref().unwrap_or(&a.framework);
    Raise {
        severity: Severity::Critical,
        value: None,
        threshold: None,
        message: format!("PID {pid} on GPU {gpu}: the GPU has no free memory left; allocations are failing"),
        hint: format!(
            "{backend} does not count OOMs, so this is inferred from the device: NVML reports no free memory \
             on GPU {gpu}. {what}"
        ),
    }
}

/// Whether `now` is above the previous value; the first value and a
/// decrease (a reset) only set the baseline.
fn rose(prev: &mut Option<u64>, now: Option<u64>) -> bool {
    let Some(now) = now else { return false };
    let rose = prev.is_some_and(|p| now > p);
    *prev = Some(now);
    rose
}

fn event(last_rise: &mut Option<u64>, rose: bool, now: u64, c: &EventConfig, raise: impl FnOnce() -> Raise) -> Verdict {
    if rose {
        *last_rise = Some(now);
        return Verdict::Raise(raise());
    }
    let hold_ms = u64::try_from(c.hold.as_millis()).unwrap_or(u64::MAX);
    match *last_rise {
        Some(t) if now.saturating_sub(t) < hold_ms => Verdict::Hold,
        _ => Verdict::Clear,
    }
}
