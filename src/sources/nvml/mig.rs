//! MIG devices of a GPU in MIG mode, enumerated every tick: NVML hands out
//! a handle per occupied slot (NOT_FOUND for an empty one). What does not
//! change while an instance exists (name, instance ids) is read once per
//! MIG UUID; memory every tick.

use std::collections::HashMap;
use std::ffi::c_uint;

use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper::{Device, Nvml};

use super::calls::Calls;
use crate::model::{MigDevice, MigMemory};

/// A MIG device's handle, for reading its processes, with its entry.
pub struct MigHandle<'nvml> {
    pub device: Device<'nvml>,
    pub entry: MigDevice,
}

/// Statics per MIG UUID; entries for instances gone are dropped.
#[derive(Debug, Default)]
pub struct MigStatics {
    by_uuid: HashMap<String, MigDevice>,
}

impl MigStatics {
    /// The MIG devices under `parent` (GPU `gpu`), by MIG device index.
    pub fn enumerate<'nvml>(
        &mut self,
        nvml: &'nvml Nvml,
        parent: &Device<'nvml>,
        gpu: u32,
        calls: &Calls,
    ) -> Vec<MigHandle<'nvml>> {
        let at = Some(gpu);
        let max = calls.track("nvmlDeviceGetMaxMigDeviceCount", at, || parent.mig_device_count()).unwrap_or(0);
        let mut found = Vec::new();
        for i in 0..max {
            let device = match calls.track("nvmlDeviceGetMigDeviceHandleByIndex", at, || parent.mig_device_by_index(i))
            {
                Ok(d) => d,
                // An empty slot: the GPU is not split all the way.
                Err(_) => continue,
            };
            let uuid = calls.track("nvmlDeviceGetUUID", at, || device.uuid()).ok();
            let mut entry = match uuid.as_ref().and_then(|u| self.by_uuid.get(u)) {
                Some(known) => MigDevice { index: i, ..known.clone() },
                None => read_static(nvml, &device, i, uuid, gpu, calls),
            };
            entry.memory = read_memory(&device, gpu, calls);
            found.push(MigHandle { device, entry });
        }
        self.by_uuid.retain(|u, _| found.iter().any(|h| h.entry.uuid.as_deref() == Some(u)));
        for h in &found {
            if let Some(u) = &h.entry.uuid {
                self.by_uuid.entry(u.clone()).or_insert_with(|| h.entry.clone());
            }
        }
        found
    }
}

fn read_static(
    nvml: &Nvml,
    device: &Device<'_>,
    index: u32,
    uuid: Option<String>,
    gpu: u32,
    calls: &Calls,
) -> MigDevice {
    let at = Some(gpu);
    let name = calls.track("nvmlDeviceGetName", at, || device.name()).ok();
    let lib = nvml.lib();
    MigDevice {
        index,
        uuid,
        profile: name.as_deref().and_then(MigDevice::profile_from_name),
        name,
        gpu_instance_id: calls
            .track("nvmlDeviceGetGpuInstanceId", at, || instance_id(device, lib.nvmlDeviceGetGpuInstanceId.as_ref()))
            .ok(),
        compute_instance_id: calls
            .track("nvmlDeviceGetComputeInstanceId", at, || {
                instance_id(device, lib.nvmlDeviceGetComputeInstanceId.as_ref())
            })
            .ok(),
        memory: MigMemory::default(),
        activity: None,
        activity_unavailable: None,
    }
}

type IdFn = unsafe extern "C" fn(
    nvml_wrapper_sys::bindings::nvmlDevice_t,
    *mut c_uint,
) -> nvml_wrapper_sys::bindings::nvmlReturn_t;

/// nvml-wrapper has no call for the instance ids, so the library's own
/// symbol is used; a driver without it leaves the id unknown.
fn instance_id<E>(device: &Device<'_>, sym: Result<&IdFn, E>) -> Result<u32, NvmlError> {
    let Ok(f) = sym else { return Err(NvmlError::FunctionNotFound) };
    let mut id: c_uint = 0;
    // SAFETY: the handle is NVML's own, and `id` is a live local NVML
    // writes one unsigned int to.
    nvml_try(unsafe { f(device.handle(), &mut id) })?;
    Ok(id)
}

fn read_memory(device: &Device<'_>, gpu: u32, calls: &Calls) -> MigMemory {
    match calls.track("nvmlDeviceGetMemoryInfo", Some(gpu), || device.memory_info()) {
        Ok(m) => MigMemory { total: Some(m.total), used: Some(m.used), free: Some(m.free) },
        Err(_) => MigMemory::default(),
    }
}

/// The UUID of every MIG device on the GPUs listed, with its parent's
/// index: what `--gpus MIG-…` is resolved against at start.
pub fn all_uuids(nvml: &Nvml, indices: &[u32], calls: &Calls) -> Vec<(u32, Option<String>)> {
    let mut out = Vec::new();
    for &gpu in indices {
        let Ok(dev) = calls.track("nvmlDeviceGetHandleByIndex", Some(gpu), || nvml.device_by_index(gpu)) else {
            continue;
        };
        let on = calls.track("nvmlDeviceGetMigMode", Some(gpu), || dev.mig_mode()).is_ok_and(|m| m.current == 1);
        if !on {
            continue;
        }
        let max = calls.track("nvmlDeviceGetMaxMigDeviceCount", Some(gpu), || dev.mig_device_count()).unwrap_or(0);
        for i in 0..max {
            if let Ok(m) = calls.track("nvmlDeviceGetMigDeviceHandleByIndex", Some(gpu), || dev.mig_device_by_index(i))
            {
                out.push((gpu, calls.track("nvmlDeviceGetUUID", Some(gpu), || m.uuid()).ok()));
            }
        }
    }
    out
}
