//! A GPU that waits for its data. Where the job's probe measures how much
//! of each step waits on its DataLoader, that share decides, and the
//! verdict names why (`input_cause`); elsewhere a GPU mostly idle while a
//! training process holds it is the sign, and the hint stays general.

use super::{Inputs, Verdicts, human_duration, key, window_means, window_ms};
use crate::analysis::engine::{Raise, Verdict};
use crate::analysis::input_cause;
use crate::history::gpu::UTIL;
use crate::model::{AlertKind, ProbeState, Severity};
use crate::model::{DataLoaderStats, Gpu, Process};
use crate::util::units::bytes;

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.starved;
    let window_ms = window_ms(c.window);
    let min_mem = c.min_process_memory_mib << 20;
    for gpu in &i.snap.gpus {
        // The biggest live probed process on this GPU: probes run only in
        // processes that initialised CUDA, i.e. training or serving code.
        let holder = i
            .snap
            .processes
            .iter()
            .filter(|p| p.allocator.as_ref().is_some_and(|a| a.state == ProbeState::Fresh))
            .filter_map(|p| {
                let nvml = p.gpus.iter().find(|g| g.index == gpu.index)?.used_memory;
                let reserved = p.allocator.as_ref()?.devices.iter().find(|d| d.gpu == Some(gpu.index))?.reserved;
                Some((p.pid, nvml.or(reserved)?))
            })
            .filter(|(_, held)| *held >= min_mem)
            .max_by_key(|(_, held)| *held);
        let k = key(AlertKind::Starved, gpu.index, None);
        let Some((pid, held)) = holder else {
            v.insert(k, Verdict::Clear);
            continue;
        };
        let holder_process = i.snap.processes.iter().find(|p| p.pid == pid);
        if let Some((share, loader)) = holder_process.and_then(input_cause::slowest_loader) {
            let p = holder_process.unwrap_or_else(|| unreachable!("found above"));
            v.insert(k, measured(i, p, gpu, share, loader));
            continue;
        }
        let Some(series) = i.store.gpu(Some(gpu.index)) else { continue };
        let avg = match window_means(series, window_ms, [UTIL], i.snap.interval_ms) {
            Ok([avg]) => avg,
            Err(verdict) => {
                v.insert(k, verdict);
                continue;
            }
        };
        let verdict = if avg < c.max_utilization {
            Verdict::Raise(Raise {
                severity: Severity::Info,
                value: Some(avg),
                threshold: Some(c.max_utilization),
                message: format!(
                    "GPU {}: utilisation averaged {avg:.0}% over {} while PID {pid} holds {}",
                    gpu.index,
                    human_duration(window_ms),
                    bytes(held)
                ),
                hint: "The GPU waits for data: raise the DataLoader's num_workers, set pin_memory=True and \
                       persistent_workers=True, prefetch, and profile the input pipeline."
                    .into(),
            })
        } else if avg >= c.clear_utilization {
            Verdict::Clear
        } else {
            Verdict::Hold
        };
        v.insert(k, verdict);
    }
}

/// The probe's own measure: the share of the training thread's time spent
/// waiting in the DataLoader's `__next__`, over its last 30 s.
fn measured(i: &Inputs<'_>, p: &Process, gpu: &Gpu, share: f64, loader: &DataLoaderStats) -> Verdict {
    let c = &i.config.starved;
    if share < c.clear_data_wait {
        return Verdict::Clear;
    }
    if share < c.min_data_wait {
        return Verdict::Hold;
    }
    let why = input_cause::explain(i.snap, p, loader, Some(gpu), i.config.shm_full.used_share);
    let rate = loader.batches_per_s.map(|r| format!(", {r:.1} batches/s")).unwrap_or_default();
    Verdict::Raise(Raise {
        severity: Severity::Warning,
        value: Some(share * 100.0),
        threshold: Some(c.min_data_wait * 100.0),
        message: format!(
            "GPU {}: PID {} waits for data {:.0}% of the time{rate}: {}",
            gpu.index,
            p.pid,
            share * 100.0,
            why.evidence
        ),
        hint: why.fix,
    })
}
