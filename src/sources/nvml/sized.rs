//! NVML's lists that fill a caller's buffer: asked once with room to
//! spare, where nvml-wrapper asks for the count first, a second call
//! that costs as much as the first. A buffer too small gets
//! INSUFFICIENT_SIZE and, in the count, what NVML needs (nvml.h).

use std::ffi::c_uint;

use nvml_wrapper::error::{NvmlError, nvml_try};
use nvml_wrapper_sys::bindings::{nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE as INSUFFICIENT_SIZE, nvmlReturn_t};

/// Fills `entries` with what `call` writes into a buffer of `room`
/// zeroed entries (its length in, how many were written out), asked at
/// most `tries` times; after INSUFFICIENT_SIZE the room is
/// `grow(needed, room)`. The caller keeps `entries` from tick to tick:
/// a list of 64 processes is a 1.5 KiB buffer, and before glibc hands out
/// a block that large it merges every small free block of the thread's
/// arena (`malloc_consolidate`: 4.5 % of the dashboard's CPU samples at
/// 8 x 64 in `perf`, while each list and sample buffer was new each tick).
///
/// # Safety
/// `T` must be plain old data for which all-zero bytes are a valid value.
pub unsafe fn fill<T: Clone>(
    entries: &mut Vec<T>,
    mut room: usize,
    tries: usize,
    grow: impl Fn(usize, usize) -> usize,
    mut call: impl FnMut(*mut T, &mut c_uint) -> nvmlReturn_t,
) -> Result<(), NvmlError> {
    let filled = (|| {
        for _ in 0..tries {
            entries.clear();
            // SAFETY: the caller vouches that all-zero is a valid `T`.
            entries.resize(room, unsafe { std::mem::zeroed() });
            let mut count = c_uint::try_from(room).map_err(|_| NvmlError::InvalidArg)?;
            match call(entries.as_mut_ptr(), &mut count) {
                INSUFFICIENT_SIZE => room = grow(usize::try_from(count).unwrap_or(usize::MAX), room),
                code => {
                    nvml_try(code)?;
                    entries.truncate(usize::try_from(count).unwrap_or(usize::MAX));
                    return Ok(());
                }
            }
        }
        Err(NvmlError::InsufficientSize(Some(room)))
    })();
    // Nothing of a failed call is left to be read as its entries.
    if filled.is_err() {
        entries.clear();
    }
    filled
}

#[cfg(test)]
mod tests {
    use nvml_wrapper_sys::bindings::{
        nvmlReturn_enum_NVML_ERROR_UNKNOWN as UNKNOWN, nvmlReturn_enum_NVML_SUCCESS as SUCCESS,
    };

    use super::*;

    /// A driver list of `n` entries (1, 2, ...), as NVML fills one.
    fn list(n: usize) -> impl FnMut(*mut u64, &mut c_uint) -> nvmlReturn_t {
        move |buf, count| {
            let room = *count as usize;
            *count = c_uint::try_from(n).unwrap();
            if room < n {
                return INSUFFICIENT_SIZE;
            }
            for i in 0..n {
                // SAFETY: `fill` hands a buffer of `room` entries, and i < n <= room.
                unsafe { buf.add(i).write(i as u64 + 1) };
            }
            SUCCESS
        }
    }

    #[test]
    fn the_buffer_is_kept_and_holds_only_this_call_s_entries() {
        let mut entries = Vec::new();
        // SAFETY: u64 is plain old data.
        unsafe { fill(&mut entries, 4, 3, |needed, _| needed + 1, list(3)) }.unwrap();
        assert_eq!(entries, [1, 2, 3]);
        let at = entries.as_ptr();
        // SAFETY: as above.
        unsafe { fill(&mut entries, 4, 3, |needed, _| needed + 1, list(2)) }.unwrap();
        assert_eq!(entries, [1, 2]);
        assert_eq!(entries.as_ptr(), at, "the same buffer, not a new one");
        // Outgrown: asked again with room for what the driver said it needs.
        // SAFETY: as above.
        unsafe { fill(&mut entries, 4, 3, |needed, _| needed + 1, list(6)) }.unwrap();
        assert_eq!(entries, [1, 2, 3, 4, 5, 6]);
        // SAFETY: as above.
        let failed = unsafe { fill(&mut entries, 4, 3, |needed, _| needed, |_: *mut u64, _: &mut c_uint| UNKNOWN) };
        assert!(failed.is_err() && entries.is_empty(), "nothing of an earlier call is left to be taken as this one's");
        // SAFETY: as above.
        let short = unsafe { fill(&mut entries, 1, 2, |_, room| room, list(3)) };
        assert!(matches!(short, Err(NvmlError::InsufficientSize(Some(1)))) && entries.is_empty(), "{short:?}");
    }
}
