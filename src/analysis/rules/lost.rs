use super::{Inputs, Verdicts, key};
use crate::analysis::engine::{Raise, Verdict};
use crate::model::{AlertKind, GpuState, Severity};

pub fn judge(i: &Inputs<'_>, v: &mut Verdicts) {
    for gpu in &i.snap.gpus {
        let verdict = if gpu.state == GpuState::Lost {
            Verdict::Raise(Raise {
                severity: Severity::Critical,
                value: None,
                threshold: None,
                message: match gpu.name.as_deref().or(gpu.pci_bus_id.as_deref()) {
                    Some(what) => format!("GPU {} ({what}) fell off the bus: NVML reports it lost", gpu.index),
                    None => format!("GPU {} fell off the bus: NVML reports it lost", gpu.index),
                },
                hint: "Look for Xid errors in `dmesg`; the GPU needs a reset (`nvidia-smi -r -i N`) or a \
                       reboot, and the jobs that used it have failed and must be restarted."
                    .into(),
            })
        } else {
            Verdict::Clear
        };
        v.insert(key(AlertKind::GpuLost, gpu.index, None), verdict);
    }
}
