//! A GPU that reads busy while few of its SMs work. NVML's utilisation is
//! the share of time some kernel ran, so a stream of small kernels reads
//! 100 %; SM activity (GPM) is the share of SMs with work. Inference at a
//! small batch and eager PyTorch with many tiny ops look like this: the
//! time goes to launching kernels, not to running them.

use super::{Inputs, Verdicts, human_duration, key, window_means, window_ms};
use crate::analysis::engine::{Raise, Verdict};
use crate::history::gpu::{SM_ACTIVE, UTIL};
use crate::model::{AlertKind, Severity};

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.sm_idle;
    let window_ms = window_ms(c.window);
    for gpu in &i.snap.gpus {
        let k = key(AlertKind::SmIdle, gpu.index, None);
        // Only where some process runs: a display or a stuck context is
        // not a workload to advise on.
        let used = i.snap.processes.iter().any(|p| p.gpus.iter().any(|g| g.index == gpu.index));
        let Some(series) = i.store.gpu(Some(gpu.index)).filter(|_| used) else {
            v.insert(k, Verdict::Clear);
            continue;
        };
        let verdict = match window_means(series, window_ms, [UTIL, SM_ACTIVE], i.snap.interval_ms) {
            Ok([util, sm]) if util >= c.min_utilization && sm < c.max_sm_active => Verdict::Raise(Raise {
                severity: Severity::Warning,
                value: Some(sm),
                threshold: Some(c.max_sm_active),
                message: format!(
                    "GPU {}: utilisation {util:.0}% but SM activity {sm:.0}% over {}: kernels keep the GPU \
                     busy while few SMs work",
                    gpu.index,
                    human_duration(window_ms)
                ),
                hint: "Each kernel is too small to fill the GPU, and the time goes to launching them: run \
                       larger batches, capture the step in CUDA graphs (torch.compile(mode=\"reduce-overhead\") \
                       does), and fuse small kernels (torch.compile)."
                    .into(),
            }),
            Ok([util, sm]) if util < c.clear_utilization || sm >= c.clear_sm_active => Verdict::Clear,
            Ok(_) => Verdict::Hold,
            Err(verdict) => verdict,
        };
        v.insert(k, verdict);
    }
}
