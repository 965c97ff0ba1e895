//! Each line is written whole and flushed before the next: with zstd that
//! ends a compressed block, so a reader can decode every complete line even
//! if the frame is never finished.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::{Header, is_zstd};
use crate::model::Snapshot;

enum Sink {
    Plain(BufWriter<File>),
    Zstd(zstd::Encoder<'static, BufWriter<File>>),
}

pub struct Recorder {
    sink: Sink,
    lines: u64,
}

/// A fast level: recording runs beside training, and JSON snapshots
/// compress well even so.
const ZSTD_LEVEL: i32 = 3;

impl Recorder {
    pub fn create(path: &Path, header: &Header) -> io::Result<Self> {
        let file = BufWriter::new(File::create(path)?);
        let sink = if is_zstd(path) { Sink::Zstd(zstd::Encoder::new(file, ZSTD_LEVEL)?) } else { Sink::Plain(file) };
        let mut r = Self { sink, lines: 0 };
        r.line(&serde_json::to_vec(header)?)?;
        Ok(r)
    }

    pub fn write(&mut self, snap: &Snapshot) -> io::Result<()> {
        self.line(&serde_json::to_vec(snap)?)?;
        self.lines += 1;
        Ok(())
    }

    pub fn snapshots(&self) -> u64 {
        self.lines
    }

    fn line(&mut self, json: &[u8]) -> io::Result<()> {
        let out: &mut dyn Write = match &mut self.sink {
            Sink::Plain(w) => w,
            Sink::Zstd(w) => w,
        };
        out.write_all(json)?;
        out.write_all(b"\n")?;
        out.flush()
    }

    /// Closes the zstd frame; without it the file still reads back.
    pub fn finish(self) -> io::Result<()> {
        match self.sink {
            Sink::Plain(mut w) => w.flush(),
            Sink::Zstd(w) => w.finish()?.flush(),
        }
    }
}
