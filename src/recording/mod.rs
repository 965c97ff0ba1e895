//! Recordings: the NDJSON stream of `--json --watch` after one header line,
//! zstd-compressed when the file name ends in `.zst`. Written so that every
//! complete line reads back whatever stops the writer (Ctrl-C, SIGTERM, a
//! full disk), and read tolerantly (a torn last line, garbage lines and
//! fields from a newer gpuscope are skipped or ignored, and counted).

mod header;
mod lines;
pub mod player;
mod reader;
mod record;
mod replay_json;
#[cfg(test)]
pub(crate) mod tests;
mod writer;

pub use header::{FORMAT, Header};
pub use lines::Skipped;
pub use reader::{OpenError, Recording, StreamError, Summary, warn_if_newer};
pub use record::record;
pub use replay_json::print as print_json;
pub use writer::{Existing, Recorder, Target};

/// Whether to write zstd: the reader goes by the file's first bytes instead.
fn is_zstd(path: &std::path::Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}
