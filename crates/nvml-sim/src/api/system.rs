//! System-wide queries: versions and process names.

use std::ffi::{c_char, c_int, c_uint};

use super::out;
use crate::call;
use crate::code::{INVALID_ARGUMENT, NOT_FOUND, nvmlReturn_t};
use crate::procfs;
use crate::scenario::Scenario;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `version` is null or valid for writing `length` bytes.
    call::run("nvmlSystemGetDriverVersion", |ctx| unsafe {
        out::put_str(version, length, &ctx.scenario.driver_version)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `version` is null or valid for writing `length` bytes.
    call::run("nvmlSystemGetNVMLVersion", |ctx| unsafe { out::put_str(version, length, &ctx.scenario.nvml_version) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `version` is null or valid for writing one value.
    call::run("nvmlSystemGetCudaDriverVersion", |ctx| unsafe { out::put(version, ctx.scenario.cuda_driver_version) })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    // SAFETY: NVML's contract: `version` is null or valid for writing one value.
    call::run("nvmlSystemGetCudaDriverVersion_v2", |ctx| unsafe { out::put(version, ctx.scenario.cuda_driver_version) })
}

/// Real NVML crops the name to `length` instead of failing, and so does this.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(pid: c_uint, name: *mut c_char, length: c_uint) -> nvmlReturn_t {
    call::run("nvmlSystemGetProcessName", |ctx| {
        if name.is_null() || length == 0 {
            return Err(INVALID_ARGUMENT);
        }
        let found = scenario_name(ctx.scenario, pid)
            .map(str::to_owned)
            .or_else(|| procfs::process_name(pid))
            .ok_or(NOT_FOUND)?;
        // SAFETY: NVML's contract: `name` is null or valid for writing `length` bytes.
        unsafe { out::put_str_cropped(name, length, &found) }
    })
}

fn scenario_name(scenario: &Scenario, pid: u32) -> Option<&str> {
    (scenario.gpus.iter())
        .flat_map(|gpu| &gpu.spec.process)
        .filter(|p| p.pid_now() == Some(pid))
        .find_map(|p| p.name.as_deref())
}
