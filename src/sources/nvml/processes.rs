//! NVML lists compute and graphics processes separately, per device; one
//! process can appear in both lists and on several GPUs. This folds them
//! into one entry per PID.

use std::collections::HashMap;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::nvmlProcessInfo_t;

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
/// tick), written to `into`. A list that keeps outgrowing its room
/// (processes starting by the hundred) is asked for at most three times.
fn running(dev: &Device<'_>, list: List, into: &mut Vec<nvmlProcessInfo_t>) -> Result<(), NvmlError> {
    let lib = dev.nvml().lib();
    let f = match list {
        List::Compute => lib.nvmlDeviceGetComputeRunningProcesses_v3.as_ref(),
        List::Graphics => lib.nvmlDeviceGetGraphicsRunningProcesses_v3.as_ref(),
    };
    let Ok(f) = f else { return Err(NvmlError::FunctionNotFound) };
    let grow = |needed: usize, _| needed.saturating_add(HEADROOM);
    // SAFETY: nvmlProcessInfo_t is plain old data (all-zero is valid); the
    // handle is NVML's own, and NVML writes at most `count` entries.
    unsafe { sized::fill(into, FIRST_ROOM, 3, grow, |buf, count| f(dev.handle(), count, buf)) }
}

/// Kept by the source from tick to tick, so the map keeps its room and
/// the driver's buffer is not made anew per list (`sized::fill`).
#[derive(Default)]
pub struct ProcessMerger {
    /// Hashed, and ordered once at the end: a tree ordered as it went
    /// allocated a node per dozen processes, every tick.
    by_pid: IntMap<u32, Vec<ProcessGpu>>,
    /// The list the driver wrote last.
    listed: Vec<nvmlProcessInfo_t>,
}

impl ProcessMerger {
    /// Forgets what a tick that ended early had added.
    pub fn begin(&mut self) {
        self.by_pid.clear();
    }

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
        let mut listed = 0;
        for m in migs {
            self.list(&m.device, List::Compute, index, calls);
            listed += add(&mut self.by_pid, index, &self.listed, ProcessType::Compute, |_| Some(Some(&m.entry)));
        }
        let on_mig = |p: &ProcessInfo| {
            let ids = (p.gpu_instance_id, p.compute_instance_id);
            migs.iter().map(|m| &m.entry).find(|e| (e.gpu_instance_id, e.compute_instance_id) == ids)
        };
        for (list, kind) in [(List::Compute, ProcessType::Compute), (List::Graphics, ProcessType::Graphics)] {
            self.list(dev, list, index, calls);
            listed += add(&mut self.by_pid, index, &self.listed, kind, |p| {
                let mig = on_mig(p);
                if whole || mig.is_some() { Some(mig) } else { None }
            });
        }
        listed
    }

    /// Reads one list into `listed`. A failing list (unsupported in some
    /// containers, say) leaves the device's processes out rather than
    /// failing the device.
    fn list(&mut self, dev: &Device<'_>, list: List, index: u32, calls: &Calls) {
        let name = match list {
            List::Compute => "nvmlDeviceGetComputeRunningProcesses",
            List::Graphics => "nvmlDeviceGetGraphicsRunningProcesses",
        };
        if calls.track(name, Some(index), || running(dev, list, &mut self.listed)).is_err() {
            self.listed.clear();
        }
    }

    /// The merged list, ordered by PID, with NVML's process names where
    /// they have been asked (`NvmlSource::process_names`); entries for
    /// PIDs no longer on any GPU are dropped from `names`.
    pub fn finish(&mut self, names: &mut HashMap<u32, Option<String>>) -> Vec<GpuProcess> {
        names.retain(|pid, _| self.by_pid.contains_key(pid));
        let mut merged: Vec<GpuProcess> = self
            .by_pid
            .drain()
            .map(|(pid, gpus)| GpuProcess { pid, gpus, driver_name: names.get(&pid).cloned().flatten() })
            .collect();
        // One entry per PID: unstable orders the same.
        merged.sort_unstable_by_key(|p| p.pid);
        merged
    }
}

/// Adds a list's entries on GPU `index` to `by_pid`; how many it took.
/// `mig_of` says which MIG device an entry runs on (`Some(None)`: on the
/// GPU itself), or `None` to leave it out.
fn add<'m>(
    by_pid: &mut IntMap<u32, Vec<ProcessGpu>>,
    index: u32,
    list: &[nvmlProcessInfo_t],
    kind: ProcessType,
    mig_of: impl Fn(&ProcessInfo) -> Option<Option<&'m MigDevice>>,
) -> usize {
    let mut took = 0;
    for p in list.iter().copied().map(ProcessInfo::from) {
        let Some(mig) = mig_of(&p) else { continue };
        took += 1;
        let used = match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => Some(b),
            UsedGpuMemory::Unavailable => None,
        };
        let mig_device = mig.map(|m| m.index);
        let gpus = by_pid.entry(p.pid).or_default();
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
    took
}

/// NVML's name for `pid`, sanitised; `None` where it has none.
pub fn driver_name(nvml: &Nvml, pid: u32, calls: &Calls) -> Option<String> {
    calls
        .track("nvmlSystemGetProcessName", None, || nvml.sys_process_name(pid, NAME_LEN))
        .ok()
        .map(|n| crate::sources::sanitize_command(&n))
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: u32, used: u64) -> nvmlProcessInfo_t {
        nvmlProcessInfo_t { pid, usedGpuMemory: used, gpuInstanceId: u32::MAX, computeInstanceId: u32::MAX }
    }

    #[test]
    fn a_tick_s_list_holds_only_that_tick_s_processes() {
        let mut merger = ProcessMerger::default();
        let on_gpu = |_: &ProcessInfo| Some(None);
        let took = add(&mut merger.by_pid, 0, &[entry(7, 10), entry(3, 20)], ProcessType::Compute, on_gpu);
        assert_eq!(took, 2);
        // Listed as graphics too, on the same GPU: one entry, both kinds, one figure.
        add(&mut merger.by_pid, 0, &[entry(7, 10)], ProcessType::Graphics, on_gpu);
        add(&mut merger.by_pid, 1, &[entry(7, 5)], ProcessType::Compute, on_gpu);
        let mut names = HashMap::from([(7, Some("python".to_owned())), (9, Some("gone".to_owned()))]);
        let first = merger.finish(&mut names);
        let pids: Vec<u32> = first.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [3, 7]);
        let seven: Vec<(u32, ProcessType, Option<u64>)> =
            first[1].gpus.iter().map(|g| (g.index, g.kind, g.used_memory)).collect();
        assert_eq!(
            seven,
            [(0, ProcessType::Compute.merge(ProcessType::Graphics), Some(10)), (1, ProcessType::Compute, Some(5))]
        );
        assert_eq!(first[1].driver_name.as_deref(), Some("python"));
        assert!(!names.contains_key(&9), "a name is kept only while its PID is on a GPU");
        // The next tick starts from nothing, though the map keeps its room.
        add(&mut merger.by_pid, 0, &[entry(11, 1)], ProcessType::Compute, |_| None);
        assert!(merger.finish(&mut names).is_empty(), "an entry left out is not listed");
        add(&mut merger.by_pid, 0, &[entry(11, 1)], ProcessType::Compute, on_gpu);
        merger.begin();
        add(&mut merger.by_pid, 2, &[entry(12, 1)], ProcessType::Compute, on_gpu);
        let pids: Vec<u32> = merger.finish(&mut names).iter().map(|p| p.pid).collect();
        assert_eq!(pids, [12], "what a tick that ended early had added is forgotten");
    }
}
