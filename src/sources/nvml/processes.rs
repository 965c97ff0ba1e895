//! NVML lists compute and graphics processes separately, per device; one
//! process can appear in both lists and on several GPUs. This folds them
//! into one entry per PID.

use std::collections::HashMap;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};

use super::calls::Calls;
use super::mig::MigHandle;
use super::sized;
use crate::hashing::IntMap;
use crate::model::{MigDevice, ProcessGpu, ProcessType};
use crate::sources::GpuProcess;

/// Long enough for any executable path NVML returns.
const NAME_LEN: usize = 256;

/// Which of a device's two process lists.
#[derive(Clone, Copy)]
enum List {
    Compute,
    Graphics,
}

/// Entries asked for at first: more processes than one GPU holds in
/// practice, in a 1.5 KiB buffer.
const FIRST_ROOM: usize = 64;
/// Added to the count NVML says it needs, for processes that start
/// between two calls (nvml-wrapper adds 5).
const HEADROOM: usize = 16;

/// The device's compute or graphics processes in one driver call where
/// they fit in `FIRST_ROOM` (`sized::fill`; nvml-wrapper's
/// `running_compute_processes` makes two calls per list, per GPU, per
/// tick). A list that keeps outgrowing its room (processes starting by the
/// hundred) is asked for at most three times.
fn running(dev: &Device<'_>, list: List) -> Result<Vec<ProcessInfo>, NvmlError> {
    let lib = dev.nvml().lib();
    let f = match list {
        List::Compute => lib.nvmlDeviceGetComputeRunningProcesses_v3.as_ref(),
        List::Graphics => lib.nvmlDeviceGetGraphicsRunningProcesses_v3.as_ref(),
    };
    let Ok(f) = f else { return Err(NvmlError::FunctionNotFound) };
    let grow = |needed: usize, _| needed.saturating_add(HEADROOM);
    // SAFETY: nvmlProcessInfo_t is plain old data (all-zero is valid); the
    // handle is NVML's own, and NVML writes at most `count` entries.
    let entries = unsafe { sized::fill(FIRST_ROOM, 3, grow, |buf, count| f(dev.handle(), count, buf))? };
    Ok(entries.into_iter().map(ProcessInfo::from).collect())
}

#[derive(Default)]
pub struct ProcessMerger {
    /// Hashed, and ordered once at the end: a tree ordered as it went
    /// allocated a node per dozen processes, every tick.
    by_pid: IntMap<u32, Vec<ProcessGpu>>,
}

impl ProcessMerger {
    /// The GPU's processes; with MIG on, `migs` are its MIG devices, whose
    /// own lists are read too: the parent's aggregate list needs privileges
    /// (NVML), the per-instance ones do not. An entry of the parent's list
    /// is placed on the MIG device its instance ids name; unless `whole`
    /// (only some MIG devices are watched), entries on none are left out.
    /// Adds the device's processes; how many it listed.
    pub fn add_device(
        &mut self,
        index: u32,
        dev: &Device<'_>,
        migs: &[MigHandle<'_>],
        whole: bool,
        calls: &Calls,
    ) -> usize {
        // A failing list (unsupported in some containers, say) leaves the
        // device's processes out rather than failing the device.
        let at = Some(index);
        let mut listed = 0;
        for m in migs {
            let compute = calls
                .track("nvmlDeviceGetComputeRunningProcesses", at, || running(&m.device, List::Compute))
                .unwrap_or_default();
            listed += compute.len();
            self.add(index, &compute, ProcessType::Compute, |_| Some(&m.entry));
        }
        let on_mig = |p: &ProcessInfo| {
            let ids = (p.gpu_instance_id, p.compute_instance_id);
            migs.iter().map(|m| &m.entry).find(|e| (e.gpu_instance_id, e.compute_instance_id) == ids)
        };
        let mut compute =
            calls.track("nvmlDeviceGetComputeRunningProcesses", at, || running(dev, List::Compute)).unwrap_or_default();
        let mut graphics = calls
            .track("nvmlDeviceGetGraphicsRunningProcesses", at, || running(dev, List::Graphics))
            .unwrap_or_default();
        if !whole {
            compute.retain(|p| on_mig(p).is_some());
            graphics.retain(|p| on_mig(p).is_some());
        }
        self.add(index, &compute, ProcessType::Compute, on_mig);
        self.add(index, &graphics, ProcessType::Graphics, on_mig);
        listed + compute.len() + graphics.len()
    }

    fn add<'m>(
        &mut self,
        index: u32,
        list: &[ProcessInfo],
        kind: ProcessType,
        mig_of: impl Fn(&ProcessInfo) -> Option<&'m MigDevice>,
    ) {
        for p in list {
            let used = match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => Some(b),
                UsedGpuMemory::Unavailable => None,
            };
            let mig = mig_of(p);
            let mig_device = mig.map(|m| m.index);
            let gpus = self.by_pid.entry(p.pid).or_default();
            match gpus.iter_mut().find(|g| g.index == index && g.mig_device == mig_device) {
                Some(g) => {
                    g.kind = g.kind.merge(kind);
                    // The same allocation is listed twice, not two
                    // allocations: keep one figure.
                    g.used_memory = g.used_memory.max(used);
                }
                None => {
                    // Most processes run on one GPU: room for one, not the
                    // four a first push makes (168 bytes a process, kept in
                    // the snapshot).
                    if gpus.capacity() == 0 {
                        gpus.reserve_exact(1);
                    }
                    gpus.push(ProcessGpu {
                        index,
                        kind,
                        used_memory: used,
                        mig_device,
                        mig_uuid: mig.and_then(|m| m.uuid.clone()),
                    });
                }
            }
        }
    }

    /// The merged list, ordered by PID, with NVML's process names where
    /// they have been asked (`NvmlSource::process_names`); entries for
    /// PIDs no longer on any GPU are dropped from `names`.
    pub fn finish(self, names: &mut HashMap<u32, Option<String>>) -> Vec<GpuProcess> {
        names.retain(|pid, _| self.by_pid.contains_key(pid));
        let mut merged: Vec<GpuProcess> = self
            .by_pid
            .into_iter()
            .map(|(pid, gpus)| GpuProcess { pid, gpus, driver_name: names.get(&pid).cloned().flatten() })
            .collect();
        // One entry per PID: unstable orders the same.
        merged.sort_unstable_by_key(|p| p.pid);
        merged
    }
}

/// NVML's name for `pid`, sanitised; `None` where it has none.
pub fn driver_name(nvml: &Nvml, pid: u32, calls: &Calls) -> Option<String> {
    calls
        .track("nvmlSystemGetProcessName", None, || nvml.sys_process_name(pid, NAME_LEN))
        .ok()
        .map(|n| crate::sources::sanitize_command(&n))
        .filter(|n| !n.is_empty())
}
