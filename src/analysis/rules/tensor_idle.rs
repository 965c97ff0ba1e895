//! SMs busy while the tensor cores do nearly nothing: matrix maths in
//! plain FP32, which on tensor-core boards runs several times slower than
//! TF32, BF16 or FP16 would. Info, not a warning: some work (elementwise
//! kernels, FFTs, sorting) has no matrix product to give them.

use super::{Inputs, Verdicts, human_duration, key, window_means, window_ms};
use crate::analysis::engine::{Raise, Verdict};
use crate::history::gpu::{SM_ACTIVE, TENSOR_ACTIVE};
use crate::model::{AlertKind, Severity};

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    let c = &i.config.tensor_idle;
    let window_ms = window_ms(c.window);
    for gpu in &i.snap.gpus {
        let k = key(AlertKind::TensorIdle, gpu.index, None);
        let Some(series) = i.store.gpu(Some(gpu.index)) else { continue };
        // A board that does not report tensor activity leaves it absent
        // throughout, which clears: it is not a board whose cores idle.
        let verdict = match window_means(series, window_ms, [SM_ACTIVE, TENSOR_ACTIVE], i.snap.interval_ms) {
            Ok([sm, tensor]) if sm >= c.min_sm_active && tensor < c.max_tensor_active => Verdict::Raise(Raise {
                severity: Severity::Info,
                value: Some(tensor),
                threshold: Some(c.max_tensor_active),
                message: format!(
                    "GPU {}: SM activity {sm:.0}% but tensor cores {tensor:.1}% over {}: the maths runs \
                     without them",
                    gpu.index,
                    human_duration(window_ms)
                ),
                hint: "FP32 matrix products skip the tensor cores: allow TF32 \
                       (torch.backends.cuda.matmul.allow_tf32 = True, or \
                       torch.set_float32_matmul_precision(\"high\")), run the step under \
                       torch.autocast(device_type=\"cuda\", dtype=torch.bfloat16), or load the model in \
                       bf16 or fp16."
                    .into(),
            }),
            Ok([sm, tensor]) if sm < c.clear_sm_active || tensor >= c.clear_tensor_active => Verdict::Clear,
            Ok(_) => Verdict::Hold,
            Err(verdict) => verdict,
        };
        v.insert(k, verdict);
    }
}
