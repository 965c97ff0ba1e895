//! Writing results through the caller's pointers, with NVML's rules for
//! null pointers, short buffers and count-then-fill arrays.

use std::ffi::{c_char, c_uint};
use std::ptr;

use crate::code::{INSUFFICIENT_SIZE, INVALID_ARGUMENT, Outcome};

/// # Safety
/// `dst` must be null or valid for writing one `T`.
pub(crate) unsafe fn put<T>(dst: *mut T, value: T) -> Outcome {
    if dst.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and the caller vouches for the rest.
    unsafe { dst.write(value) };
    Ok(())
}

/// Copies `text` and its NUL, refusing buffers that cannot hold both.
///
/// # Safety
/// `buf` must be null or valid for writing `length` bytes.
pub(crate) unsafe fn put_str(buf: *mut c_char, length: c_uint, text: &str) -> Outcome {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    if text.len() >= length as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: the text and its NUL fit in the caller's `length` bytes.
    unsafe { copy_with_nul(buf, text.as_bytes()) };
    Ok(())
}

/// Copies as much of `text` as fits, which is what NVML does for process
/// names; cut on a character boundary so the result stays valid UTF-8.
///
/// # Safety
/// `buf` must be null or valid for writing `length` bytes.
pub(crate) unsafe fn put_str_cropped(buf: *mut c_char, length: c_uint, text: &str) -> Outcome {
    if buf.is_null() || length == 0 {
        return Err(INVALID_ARGUMENT);
    }
    let mut end = text.len().min(length as usize - 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // SAFETY: `end` bytes and a NUL fit in the caller's `length` bytes.
    unsafe { copy_with_nul(buf, &text.as_bytes()[..end]) };
    Ok(())
}

/// For the fixed-size strings inside NVML structs; the scenario has
/// already checked that `text` fits.
pub(crate) fn fill_array(dst: &mut [c_char], text: &str) {
    for (d, s) in dst.iter_mut().zip(text.bytes().chain(std::iter::repeat(0))) {
        *d = s as c_char;
    }
}

/// NVML's count-then-fill protocol: a short (or zero) `*count` learns the
/// size needed via INSUFFICIENT_SIZE; otherwise the array is filled.
///
/// # Safety
/// `count` must be null or valid for reads and writes; `array` must be
/// null or valid for writing `*count` elements.
pub(crate) unsafe fn put_list<T: Copy>(count: *mut c_uint, array: *mut T, items: &[T]) -> Outcome {
    if count.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and the caller vouches for the rest.
    let capacity = unsafe { count.read() } as usize;
    let needed = items.len() as c_uint;
    if items.len() > capacity {
        // SAFETY: as above.
        unsafe { count.write(needed) };
        return Err(INSUFFICIENT_SIZE);
    }
    if !items.is_empty() {
        if array.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: the caller's array holds `capacity >= items.len()` elements.
        unsafe { ptr::copy_nonoverlapping(items.as_ptr(), array, items.len()) };
    }
    // SAFETY: as above.
    unsafe { count.write(needed) };
    Ok(())
}

/// # Safety
/// `buf` must be valid for writing `bytes.len() + 1` bytes.
unsafe fn copy_with_nul(buf: *mut c_char, bytes: &[u8]) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, bytes.len());
        buf.add(bytes.len()).write(0);
    }
}
