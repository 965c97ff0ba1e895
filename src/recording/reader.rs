//! Opens a recording for replay. Only an index stays in memory (time,
//! offset and length per snapshot line), so a day at 1 Hz costs a couple of
//! megabytes; snapshots are parsed when they are shown. A `.zst` file is
//! decompressed once into an anonymous temporary file, which makes seeking
//! backwards as cheap as forwards.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{FORMAT, Header, is_zstd};
use crate::model::Snapshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub time_ms: u64,
    offset: u64,
    len: u32,
}

pub struct Recording {
    pub path: PathBuf,
    /// `None` for a bare `--json --watch` stream, which replays too.
    pub header: Option<Header>,
    pub entries: Vec<Entry>,
    /// Lines that were not snapshots: garbage, a torn last line.
    pub skipped: u64,
    data: File,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read the recording {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a gpuscope recording: {why}")]
    Foreign { path: PathBuf, why: String },
}

/// The two fields the index needs; serde skips the rest of the line.
#[derive(Deserialize)]
struct Stamp {
    #[allow(dead_code)]
    schema_version: u32,
    time_unix_ms: u64,
}

/// A line longer than this is not a snapshot gpuscope wrote.
const MAX_LINE: usize = 64 << 20;

impl Recording {
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let io_err = |source| OpenError::Io { path: path.to_path_buf(), source };
        let file = File::open(path).map_err(io_err)?;
        let data = if is_zstd(path) {
            let mut tmp = tempfile::tempfile().map_err(io_err)?;
            let decoded = zstd::Decoder::new(file).and_then(|mut d| io::copy(&mut d, &mut tmp));
            // A recording whose writer was killed ends in an unfinished
            // frame: everything decoded before that point is good.
            if let Err(e) = decoded
                && tmp.stream_position().map_err(io_err)? == 0
            {
                return Err(OpenError::Foreign { path: path.to_path_buf(), why: format!("not zstd data ({e})") });
            }
            tmp.seek(SeekFrom::Start(0)).map_err(io_err)?;
            tmp
        } else {
            file
        };
        let mut rec = Self { path: path.to_path_buf(), header: None, entries: Vec::new(), skipped: 0, data };
        rec.index().map_err(io_err)?;
        if rec.entries.is_empty() && rec.header.is_none() {
            return Err(OpenError::Foreign { path: path.to_path_buf(), why: "no gpuscope snapshot in it".into() });
        }
        Ok(rec)
    }

    fn index(&mut self) -> io::Result<()> {
        let mut reader = BufReader::new(&self.data);
        let mut line = Vec::new();
        let mut offset = 0u64;
        let mut first = true;
        loop {
            line.clear();
            let n = reader.by_ref().take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            let start = offset;
            offset += n as u64;
            let complete = line.last() == Some(&b'\n');
            let body = trim(&line);
            if body.is_empty() {
                continue;
            }
            if first {
                first = false;
                if let Ok(h) = serde_json::from_slice::<Header>(body)
                    && h.format == FORMAT
                {
                    self.header = Some(h);
                    continue;
                }
            }
            match serde_json::from_slice::<Stamp>(body) {
                Ok(s) if complete => self.entries.push(Entry {
                    time_ms: s.time_unix_ms,
                    offset: start,
                    len: u32::try_from(body.len()).unwrap_or(u32::MAX),
                }),
                _ => self.skipped += 1,
            }
            if !complete && n > MAX_LINE {
                // An endless line: skip to its end rather than hold it.
                let mut rest = Vec::new();
                offset += reader.read_until(b'\n', &mut rest)? as u64;
            }
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The snapshot at position `i`; `Err` when that line, although it has
    /// a time stamp, is not a snapshot this gpuscope can read.
    pub fn get(&self, i: usize) -> io::Result<Snapshot> {
        let e = self.entries.get(i).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "past the end"))?;
        let mut buf = vec![0; e.len as usize];
        let mut file = &self.data;
        file.seek(SeekFrom::Start(e.offset))?;
        file.read_exact(&mut buf)?;
        serde_json::from_slice(&buf).map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
    }

    /// The position of the last snapshot at or before `time_ms` (the first
    /// one when `time_ms` is earlier than all).
    pub fn position_at(&self, time_ms: u64) -> usize {
        self.entries.partition_point(|e| e.time_ms <= time_ms).saturating_sub(1)
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let end = line.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |p| p + 1);
    &line[..end]
}
