//! NVML's lists that fill a caller's buffer: asked once with room to
//! spare, where nvml-wrapper asks for the count first, a second call
//! that costs as much as the first. A buffer too small gets
//! INSUFFICIENT_SIZE and, in the count, what NVML needs (nvml.h).

use std::ffi::c_uint;

use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper_sys::bindings::{nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as INSUFFICIENT_SIZE, nvmlReturn_t};

/// The entries `call` writes into a buffer of `room` zeroed entries (its
/// length in, how many were written out), asked at most `tries` times;
/// after INSUFFICIENT_SIZE the room is `grow(needed, room)`.
///
/// # Safety
/// `T` must be plain old data for which all-zero bytes are a valid value.
pub unsafe fn fill<T: Clone>(
    mut room: usize,
    tries: usize,
    grow: impl Fn(usize, usize) -> usize,
    mut call: impl FnMut(*mut T, &mut c_uint) -> nvmlReturn_t,
) -> Result<Vec<T>, NvmlError> {
    for _ in 0..tries {
        // SAFETY: the caller vouches that all-zero is a valid `T`.
        let mut entries: Vec<T> = vec![unsafe { std::mem::zeroed() }; room];
        let mut count = c_uint::try_from(room).map_err(|_| NvmlError::InvalidArg)?;
        match call(entries.as_mut_ptr(), &mut count) {
            INSUFFICIENT_SIZE => room = grow(usize::try_from(count).unwrap_or(usize::MAX), room),
            code => {
                nvml_try(code)?;
                entries.truncate(usize::try_from(count).unwrap_or(usize::MAX));
                return Ok(entries);
            }
        }
    }
    Err(NvmlError::InsufficientSize(Some(room)))
}
