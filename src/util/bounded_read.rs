//! A file read whole, within a bound, in as few reads as can tell its end:
//! the probe files, `/proc`'s small files, a recording's first bytes.

use std::io::{self, Read};

/// Where a file's size is unknown (procfs says 0), the first read's room:
/// enough for any `/proc/PID` text file gpuscope reads on first sight
/// (`status` is about 1.5 KiB, `environ` a few KiB).
const FIRST_READ: usize = 8 * 1024;

/// Reads `file` into `buf` (cleared first) to its end, or to `limit`
/// bytes. Where `size` is the file's own (a regular file's metadata), the
/// buffer starts with room for one byte more, and a read that leaves room
/// once `size` bytes are in proves the end: a regular file's read returns
/// less than asked only there, so the one read is all. Otherwise (procfs,
/// a pipe) reads go on until one returns nothing. Either way the buffer
/// doubles while it fills, up to `limit`; reads that stop short go on.
pub fn read_into(mut file: impl Read, buf: &mut Vec<u8>, limit: usize, size: Option<u64>) -> io::Result<()> {
    let first = size.map_or(FIRST_READ, |s| usize::try_from(s).unwrap_or(usize::MAX).saturating_add(1));
    buf.clear();
    buf.resize(first.min(limit), 0);
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            if filled >= limit {
                break;
            }
            buf.resize(filled.saturating_mul(2).min(limit), 0);
        }
        match file.read(buf.get_mut(filled..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if size.is_some_and(|s| filled as u64 >= s) && filled < buf.len() {
            break;
        }
    }
    buf.truncate(filled);
    Ok(())
}
