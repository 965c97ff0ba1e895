//! NVML return codes under short names, and their descriptions.

use std::ffi::CStr;

pub(crate) use nvml_wrapper_sys::bindings::{
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH as ARGUMENT_VERSION_MISMATCH,
    nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED as DRIVER_NOT_LOADED,
    nvmlReturn_enum_NVML_ERROR_FUNCTION_NOT_FOUND as FUNCTION_NOT_FOUND,
    nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST as GPU_IS_LOST,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as INSUFFICIENT_SIZE,
    nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID_ARGUMENT,
    nvmlReturn_enum_NVML_ERROR_LIB_RM_VERSION_MISMATCH as LIB_RM_VERSION_MISMATCH,
    nvmlReturn_enum_NVML_ERROR_MEMORY as MEMORY, nvmlReturn_enum_NVML_ERROR_NO_PERMISSION as NO_PERMISSION,
    nvmlReturn_enum_NVML_ERROR_NOT_FOUND as NOT_FOUND, nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED as NOT_SUPPORTED,
    nvmlReturn_enum_NVML_ERROR_TIMEOUT as TIMEOUT, nvmlReturn_enum_NVML_ERROR_UNINITIALIZED as UNINITIALIZED,
    nvmlReturn_enum_NVML_ERROR_UNKNOWN as UNKNOWN, nvmlReturn_enum_NVML_SUCCESS as SUCCESS, nvmlReturn_t,
};

use crate::scenario::InitError;

/// An NVML call's result: `Err` carries any code other than success, so
/// bodies can use `?` on the early exits every NVML function has.
pub(crate) type Outcome = Result<(), nvmlReturn_t>;

pub(crate) fn to_return(outcome: Outcome) -> nvmlReturn_t {
    outcome.err().unwrap_or(SUCCESS)
}

pub(crate) fn init_error(err: InitError) -> nvmlReturn_t {
    match err {
        InitError::DriverNotLoaded => DRIVER_NOT_LOADED,
        InitError::NoPermission => NO_PERMISSION,
        InitError::Unknown => UNKNOWN,
        InitError::LibRmVersionMismatch => LIB_RM_VERSION_MISMATCH,
    }
}

/// What `nvmlErrorString` returns; static because callers keep the pointer.
pub(crate) fn describe(code: nvmlReturn_t) -> &'static CStr {
    match code {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt Request Issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires reset",
        17 => c"GPU access blocked by the operating system",
        18 => c"RM has detected an NVML/RM version mismatch",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => c"The requested vGPU operation is not available because ECC is enabled",
        23 => c"Insufficient resources",
        24 => c"Frequency not supported",
        25 => c"Argument version mismatch",
        26 => c"Deprecated",
        27 => c"Not ready",
        28 => c"GPU not found",
        29 => c"Invalid state",
        30 => c"Reset type not supported",
        _ => c"Unknown Error",
    }
}
