//! Small helpers every part may use, and which use nothing of gpuscope's
//! but each other: file reads within a bound (`bounded_read.rs`), the
//! bounds of user-given durations (`bounds.rs`), file operations relative
//! to a verified directory (`dirfd.rs`), gpuscope's own directory and the files it keeps there
//! (`own_files.rs`), a small sorted map
//! (`sorted_map.rs`), work spread over the CPUs (`spread.rs`), and how
//! sizes and figures are written (`units.rs`).

pub mod bounded_read;
pub mod bounds;
pub mod dirfd;
pub mod own_files;
pub mod sorted_map;
pub mod spread;
pub mod units;

/// The real user ID: whose files gpuscope trusts and writes.
pub fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}
