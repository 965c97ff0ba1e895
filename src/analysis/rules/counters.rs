//! Rises of the allocator's counters: allocation retries (cudaMalloc failed,
//! the cache was flushed and the allocation retried: the best early sign of
//! an OOM) and OOMs. A rise raises at once; the alert stays up for the
//! configured hold after the last rise. A counter that goes down was reset
//! (`torch.cuda.reset_accumulated_memory_stats`): a new baseline, no alert.

use std::collections::{HashMap, HashSet};

use super::{Inputs, ProcKey, Verdicts, key, process_gpus};
use crate::analysis::config::EventConfig;
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, Severity};

#[derive(Debug, Clone, Default)]
pub struct CounterState {
    retries: Option<u64>,
    ooms: Option<u64>,
    last_retry_rise_ms: Option<u64>,
    last_oom_rise_ms: Option<u64>,
}

pub fn judge(i: &Inputs<'_>, states: &mut HashMap<ProcKey, CounterState>, v: &mut Verdicts) {
    let mut seen = HashSet::new();
    for (pk, p, gpu) in process_gpus(i.snap) {
        let Some(d) = p.allocator.as_ref().and_then(|a| a.devices.iter().find(|d| d.gpu == Some(gpu))) else {
            continue;
        };
        seen.insert(pk);
        let s = states.entry(pk).or_default();
        let retry_rose = rose(&mut s.retries, d.alloc_retries);
        let oom_rose = rose(&mut s.ooms, d.ooms);
        let c = i.config;
        if c.alloc_retry.enabled {
            let verdict = event(&mut s.last_retry_rise_ms, retry_rose, i.now_ms, &c.alloc_retry, || Raise {
                severity: Severity::Critical,
                value: d.alloc_retries.map(|n| n as f64),
                threshold: None,
                message: format!(
                    "PID {} on GPU {gpu}: cudaMalloc failed and PyTorch flushed its cache to retry ({} retries \
                     so far); the next failure is an out-of-memory error",
                    p.pid,
                    d.alloc_retries.unwrap_or(0)
                ),
                hint: "Free headroom now: smaller batch or sequence length, gradient checkpointing, mixed \
                       precision; if fragmentation is high, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."
                    .into(),
            });
            v.insert(key(AlertKind::AllocRetry, gpu, Some(p.pid)), verdict);
        }
        if c.oom.enabled {
            let verdict = event(&mut s.last_oom_rise_ms, oom_rose, i.now_ms, &c.oom, || Raise {
                severity: Severity::Critical,
                value: d.ooms.map(|n| n as f64),
                threshold: None,
                message: format!("PID {} on GPU {gpu}: CUDA out of memory ({} so far)", p.pid, d.ooms.unwrap_or(0)),
                hint: "Reduce the batch size, use gradient checkpointing or mixed precision; to see what held \
                       the memory, record torch.cuda.memory._record_memory_history() before the failing step."
                    .into(),
            });
            v.insert(key(AlertKind::Oom, gpu, Some(p.pid)), verdict);
        }
    }
    states.retain(|k, _| seen.contains(k));
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
