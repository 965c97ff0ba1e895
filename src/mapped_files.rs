//! The shared libraries' pages (the C library, the maths library, NVML's
//! own) mapped one at a time once start-up is over, as `startup_code` does
//! for gpuscope's own start-up code.
//!
//! A page of a file mapping is mapped on first use, and with it the kernel
//! maps up to 64 KiB around it that happen to be in the page cache
//! ("fault-around"). All of them count in resident memory for the life of
//! the process. At 8 x 512 the C library alone held 1.2 MiB of its code
//! resident, of which a tick runs a small part. Once the dashboard runs,
//! every read-only private file mapping that holds nothing but the file's
//! own pages is told it is read at random (`MADV_RANDOM`: no fault-around)
//! and its pages are unmapped (`MADV_DONTNEED`); the pages the ticks use
//! come back one by one, on their first use.
//!
//! Losing nothing is what limits it to those mappings: their pages are the
//! file's, which the kernel maps again from the file, as it does whenever
//! it reclaims clean file pages under memory pressure. A mapping that was
//! ever written (a library's relocated data made read-only, a debugger's
//! breakpoint) holds anonymous pages, and is left alone, as is every
//! writable one.

use std::ops::Range;

/// The mappings of `smaps` (proc(5)'s `/proc/PID/smaps`) whose pages can
/// be dropped without loss: a file's, private, not writable, and without
/// a single anonymous page.
pub fn droppable(smaps: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut current: Option<Range<usize>> = None;
    for line in smaps.lines() {
        if let Some(range) = header(line) {
            current = range;
            continue;
        }
        let Some(kb) = line.strip_prefix("Anonymous:") else { continue };
        let clean = kb.trim().strip_suffix("kB").is_some_and(|n| n.trim() == "0");
        if let Some(range) = current.take().filter(|_| clean) {
            found.push(range);
        }
    }
    found
}

/// A mapping's first line: `Some(None)` for one not to drop, `Some(range)`
/// for a candidate, `None` for any other line.
fn header(line: &str) -> Option<Option<Range<usize>>> {
    let mut fields = line.split_ascii_whitespace();
    let (span, perms) = (fields.next()?, fields.next()?);
    let (start, end) = span.split_once('-')?;
    let (start, end) = (usize::from_str_radix(start, 16).ok()?, usize::from_str_radix(end, 16).ok()?);
    let perms = perms.as_bytes();
    if perms.len() != 4 || start >= end {
        return None;
    }
    let (_offset, _device, _inode) = (fields.next()?, fields.next()?, fields.next()?);
    // A path; a mapping of a file since deleted still has its pages, but
    // nothing to map them again from.
    let path = fields.next().unwrap_or("");
    let file = path.starts_with('/') && fields.next().is_none();
    let candidate = file && perms[1] == b'-' && perms[3] == b'p';
    Some(candidate.then_some(start..end))
}

/// Drops what `droppable` finds in this process's own mappings; how many
/// bytes of mappings were advised, or `None` where `/proc/self/smaps`
/// could not be read.
pub fn release() -> Option<usize> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut advised = 0;
    for range in droppable(&smaps) {
        let (at, len) = (range.start as *mut libc::c_void, range.end - range.start);
        // SAFETY: the range is one whole mapping of this process, private,
        // read-only and holding none but its file's own pages (`droppable`):
        // neither advice changes what a read of it returns, the second only
        // unmaps pages that the kernel maps again from the file on use.
        let ok = unsafe {
            libc::madvise(at, len, libc::MADV_RANDOM) == 0 && libc::madvise(at, len, libc::MADV_DONTNEED) == 0
        };
        if ok {
            advised += len;
        }
    }
    Some(advised)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0000000-55d0c0100000 r-xp 00000000 08:01 123 /usr/bin/gpuscope
Size:               1024 kB
Rss:                 900 kB
Anonymous:             0 kB
7f0000000000-7f0000010000 r--p 00000000 08:01 124 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0000010000-7f0000020000 r--p 00010000 08:01 124 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:            16 kB
7f0000020000-7f0000030000 rw-p 00020000 08:01 124 /usr/lib/x86_64-linux-gnu/libc.so.6
Anonymous:             0 kB
7f0000030000-7f0000040000 r-xs 00000000 00:05 9 /dev/shm/shared
Anonymous:             0 kB
7f0000040000-7f0000050000 rw-p 00000000 00:00 0 
Anonymous:            64 kB
7f0000050000-7f0000060000 r-xp 00000000 08:01 125 /tmp/gone.so (deleted)
Anonymous:             0 kB
7f0000060000-7f0000070000 r-xp 00000000 00:00 0 [vdso]
Anonymous:             0 kB
7f0000070000-7f0000080000 r-xp 00000000 08:01 126 /opt/lib with space/libnvidia-ml.so.1
Anonymous:             0 kB
7f0000080000-7f0000090000 r-xp 00000000 08:01 127 /usr/lib/libm.so.6
VmFlags: rd ex mr mw me
";

    /// Code and constants of files, never written, are taken; relocated
    /// data, writable, shared and anonymous mappings, a deleted file's, a
    /// path that does not read back whole and one whose `Anonymous` line
    /// was never seen are not.
    #[test]
    fn only_clean_read_only_private_file_mappings_are_dropped() {
        assert_eq!(droppable(SMAPS), [0x55d0_c000_0000..0x55d0_c010_0000, 0x7f00_0000_0000..0x7f00_0001_0000]);
        assert!(droppable("").is_empty());
        assert!(droppable("garbage\nAnonymous: 0 kB\nffff-0000 r-xp 0 0 0 /x\nAnonymous: 0 kB\n").is_empty());
    }

    /// On this very process: the libraries' pages go and come back as used,
    /// and what they hold reads the same.
    #[test]
    fn this_process_runs_on_after_its_libraries_pages_are_dropped() {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        assert!(!droppable(&smaps).is_empty(), "the C library's code at least");
        let before = format!("{:?}", (1..50).map(|n| f64::from(n).sqrt()).sum::<f64>());
        assert!(release().is_some_and(|bytes| bytes > 0));
        let after = format!("{:?}", (1..50).map(|n| f64::from(n).sqrt()).sum::<f64>());
        assert_eq!(before, after);
        assert!(std::fs::read_to_string("/proc/self/status").unwrap().contains("VmRSS"));
    }

    proptest::proptest! {
        /// Whatever the text, no panic, and only non-empty ranges.
        #[test]
        fn any_text_parses_without_panic(text in "(([0-9a-f]{1,12}-[0-9a-f]{1,12} [r-][w-][x-][ps] 0 0 0 ?/?[a-z ]{0,8}|Anonymous: {0,3}[0-9]{1,3} kB|[ -~]{0,30})\n){0,12}") {
            for range in droppable(&text) {
                proptest::prop_assert!(range.start < range.end);
            }
        }
    }
}
