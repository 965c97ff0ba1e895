//! `--json` (one pretty snapshot) and `--json --watch` (NDJSON).

use std::io::{self, Write};

use crate::model::Snapshot;

pub fn write_pretty(snap: &Snapshot, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, snap)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// One compact line, flushed so a reader at the other end of a pipe gets it
/// now and not when a buffer fills.
pub fn write_line(snap: &Snapshot, out: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, snap)?;
    out.write_all(b"\n")?;
    out.flush()
}
