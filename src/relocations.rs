//! The relocation table of gpuscope's own executable, handed back to the
//! kernel once the dynamic loader has applied it.
//!
//! A position-independent executable carries a relocation for every
//! pointer in its read-only data (vtables, tables of strings): about 5,100
//! entries, 124 KiB, in gpuscope's release build (`readelf -r`). The
//! loader reads them all once, before `main`, and never again, yet their
//! pages stayed mapped, and counted in the dashboard's resident memory,
//! for its whole life (`/proc/PID/pagemap`: every page of `.rela.dyn`
//! present). They lie in a read-only mapping of the file that nothing
//! writes, so dropping them from the page tables loses nothing: a later
//! read would map the file's bytes again.

use std::ffi::{c_int, c_void};

/// Gives back the whole pages of the executable's relocation table;
/// returns how many bytes, or `None` where the table was not found or the
/// kernel refused.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub fn release() -> Option<usize> {
    let (start, len) = table()?;
    let page = usize::try_from(crate::sources::procstat::page_size()).ok()?;
    let first = start.checked_next_multiple_of(page)?;
    let end = (start + len) / page * page;
    if end <= first {
        return Some(0);
    }
    // SAFETY: [first, end) holds whole pages that lie within the
    // relocation table of this executable (`table` checked it sits in a
    // read-only segment), which the loader has finished with and nothing
    // else reads; MADV_DONTNEED on such a private, never-written file
    // mapping only unmaps pages the kernel can map again from the file.
    let rc = unsafe { libc::madvise(first as *mut c_void, end - first, libc::MADV_DONTNEED) };
    (rc == 0).then_some(end - first)
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
pub fn release() -> Option<usize> {
    None
}

/// Where the executable's relocation table is in memory, and its length.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn table() -> Option<(usize, usize)> {
    executable(relocations)
}

/// Where the executable is loaded: what its link-time addresses are
/// offset by (zero for one that is not position-independent).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub fn load_bias() -> Option<usize> {
    executable(|info| usize::try_from(info.dlpi_addr).ok())
}

/// What is read of a loaded object's description.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
type Reader<T> = fn(&libc::dl_phdr_info) -> Option<T>;

/// `read` of the loader's description of the executable, the first object
/// it lists.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn executable<T>(read: Reader<T>) -> Option<T> {
    unsafe extern "C" fn first<T>(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `info` is the loader's description of a loaded object,
        // valid for this call; `data` is the `(read, found)` below, which
        // outlives the iteration.
        let (info, (read, found)) = unsafe { (&*info, &mut *data.cast::<(Reader<T>, Option<T>)>()) };
        *found = read(info);
        // The first object listed is the executable itself: stop there.
        1
    }
    let mut state: (Reader<T>, Option<T>) = (read, None);
    // SAFETY: `first::<T>` matches the callback type and only reads and
    // writes through `data`, which points at `state`, of the type it casts to.
    unsafe { libc::dl_iterate_phdr(Some(first::<T>), (&raw mut state).cast()) };
    state.1
}

/// The object's `DT_RELA` table from its dynamic section, if it lies
/// wholly within one of its read-only loaded segments.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn relocations(info: &libc::dl_phdr_info) -> Option<(usize, usize)> {
    const DT_NULL: u64 = 0;
    const DT_RELA: u64 = 7;
    const DT_RELASZ: u64 = 8;
    let bias = usize::try_from(info.dlpi_addr).ok()?;
    if info.dlpi_phdr.is_null() {
        return None;
    }
    // SAFETY: the loader gives `dlpi_phnum` program headers at `dlpi_phdr`.
    let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
    let at = |vaddr: u64| usize::try_from(vaddr).ok()?.checked_add(bias);
    let dynamic = headers.iter().find(|h| h.p_type == libc::PT_DYNAMIC)?;
    let (mut rela, mut size) = (None, None);
    let mut entry = at(dynamic.p_vaddr)? as *const [u64; 2];
    let entries = usize::try_from(dynamic.p_memsz).ok()? / std::mem::size_of::<[u64; 2]>();
    for _ in 0..entries {
        // SAFETY: the dynamic segment holds `entries` (tag, value) pairs,
        // loaded and never unmapped; the walk stops at its end or DT_NULL.
        let [tag, value] = unsafe { entry.read() };
        match tag {
            DT_NULL => break,
            DT_RELA => rela = Some(value),
            DT_RELASZ => size = Some(value),
            _ => {}
        }
        // SAFETY: still within the segment (at most `entries` steps).
        entry = unsafe { entry.add(1) };
    }
    let (rela, size) = (usize::try_from(rela?).ok()?, usize::try_from(size?).ok()?);
    // glibc rewrites some of the executable's dynamic entries to run-time
    // addresses, and leaves others as linked: a link-time address lies
    // below the load bias of a position-independent executable.
    let start = if rela >= bias { rela } else { rela.checked_add(bias)? };
    let end = start.checked_add(size)?;
    let read_only = headers.iter().any(|h| {
        h.p_type == libc::PT_LOAD
            && h.p_flags & libc::PF_W == 0
            && at(h.p_vaddr).is_some_and(|s| s <= start)
            && at(h.p_vaddr).and_then(|s| s.checked_add(usize::try_from(h.p_filesz).ok()?)).is_some_and(|e| end <= e)
    });
    read_only.then_some((start, size))
}

#[cfg(all(test, target_os = "linux", target_pointer_width = "64"))]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_found_handed_back_and_not_missed() {
        let (start, len) = table().expect("a position-independent test binary has relocations");
        assert!(len >= 4096, "{len} bytes");
        let released = release().expect("the kernel takes the pages back");
        assert!(released > 0 && released <= len, "{released} of {len}");
        // What the relocations set up still works: vtables, static strings.
        let shown: Vec<Box<dyn std::fmt::Display>> = vec![Box::new(7u8), Box::new("seven")];
        assert_eq!(shown.iter().map(|d| d.to_string()).collect::<Vec<_>>(), ["7", "seven"]);
        // The table reads back as it was: the kernel maps the file again.
        // SAFETY: `start..start + len` is the table `table` found, mapped
        // for the life of the process.
        let first = unsafe { std::ptr::read_volatile(start as *const u64) };
        assert_ne!(first, 0, "a relocation's offset");
        assert_eq!(release(), Some(released), "a second call is harmless");
    }
}
