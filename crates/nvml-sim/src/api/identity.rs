//! What a device is: name, UUID and PCI location.

use std::ffi::{c_char, c_uint};

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlPciInfo_t};

use super::out;
use crate::call;
use crate::code::nvmlReturn_t;

/// The scenario format has no PCI IDs, so every GPU claims to be an H100
/// SXM5 (device 0x2330, vendor 0x10DE) with NVIDIA's own subsystem.
const PCI_DEVICE_ID: c_uint = 0x2330_10DE;
const PCI_SUBSYSTEM_ID: c_uint = 0x16C1_10DE;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(device: nvmlDevice_t, name: *mut c_char, length: c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetName", device, None, |dev| {
        let text = dev.mig.map_or(&dev.gpu.spec.name, |m| &m.name);
        // SAFETY: NVML's contract: `name` is null or valid for writing `length` bytes.
        unsafe { out::put_str(name, length, text) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(device: nvmlDevice_t, uuid: *mut c_char, length: c_uint) -> nvmlReturn_t {
    call::device("nvmlDeviceGetUUID", device, None, |dev| {
        let text = dev.mig.map_or(&dev.gpu.uuid, |m| &m.uuid);
        // SAFETY: NVML's contract: `uuid` is null or valid for writing `length` bytes.
        unsafe { out::put_str(uuid, length, text) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    call::device("nvmlDeviceGetPciInfo_v3", device, None, |dev| {
        let address = dev.gpu.pci;
        let mut info = nvmlPciInfo_t {
            busIdLegacy: [0; 16],
            domain: address.domain,
            bus: address.bus,
            device: address.device,
            pciDeviceId: PCI_DEVICE_ID,
            pciSubSystemId: PCI_SUBSYSTEM_ID,
            busId: [0; 32],
        };
        out::fill_array(&mut info.busIdLegacy, &address.bus_id_legacy());
        out::fill_array(&mut info.busId, &address.bus_id());
        // SAFETY: NVML's contract: `pci` is null or valid for writing one value.
        unsafe { out::put(pci, info) }
    })
}
