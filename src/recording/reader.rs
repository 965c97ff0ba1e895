//! Opens a recording for replay. Only an index stays in memory (time,
//! offset and length per snapshot line), so a day at 1 Hz costs a couple of
//! megabytes; snapshots are parsed when they are shown. A `.zst` file is
//! decompressed once into an anonymous temporary file, which makes seeking
//! backwards as cheap as forwards. The dashboard seeks, so it needs a
//! regular file; `stream` reads anything once, front to back, for
//! `replay --json`.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::lines::{self, Line, MAX_LINE, Skipped};
use super::{FORMAT, Header};
use crate::model::{SCHEMA_VERSION, Snapshot};

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
    /// Lines that were not snapshots, by why.
    pub skipped: Skipped,
    /// Compressed with zstd (told by its content, not its name).
    pub zstd: bool,
    data: File,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read the recording {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path} is not a gpuscope recording: {why}")]
    Foreign { path: PathBuf, why: String },
    #[error(
        "{path} is not a regular file (a pipe or a FIFO?): the dashboard seeks in a recording and needs a \
         file; save it to one first, or read it once with `gpuscope replay --json`"
    )]
    NotSeekable { path: PathBuf },
    #[error("{path} already exists: pass --force to replace it or --append to add to it")]
    Exists { path: PathBuf },
    #[error("cannot append to {path}: {why}")]
    Append { path: PathBuf, why: String },
    #[error("cannot replace {path}: {why}")]
    Replace { path: PathBuf, why: String },
    #[error("cannot write the recording {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// The two fields the index needs; serde skips the rest of the line.
#[derive(Deserialize)]
struct Stamp {
    #[allow(dead_code)]
    schema_version: u32,
    time_unix_ms: u64,
}

/// What a line of a recording is.
enum Kind {
    Blank,
    Header(Header),
    Stamped(u64),
    Skip(fn(&mut Skipped)),
}

fn classify(line: &Line, first: bool) -> Kind {
    if line.too_long {
        return Kind::Skip(|s| s.too_long += 1);
    }
    let body = trim(&line.bytes);
    if body.is_empty() {
        return Kind::Blank;
    }
    if first
        && let Ok(h) = serde_json::from_slice::<Header>(body)
        && h.format == FORMAT
    {
        return Kind::Header(h);
    }
    match serde_json::from_slice::<Stamp>(body) {
        Ok(_) if !line.complete => Kind::Skip(|s| s.torn += 1),
        Ok(s) => Kind::Stamped(s.time_unix_ms),
        Err(_) if !line.complete => Kind::Skip(|s| s.torn += 1),
        Err(_) => Kind::Skip(|s| s.foreign += 1),
    }
}

impl Recording {
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let file = File::open(path).map_err(|source| OpenError::Io { path: path.to_path_buf(), source })?;
        Self::from_file(path, file)
    }

    /// [`Recording::open`] for a file already open (at `path`, which only
    /// names it in messages), read from its start.
    pub fn from_file(path: &Path, file: File) -> Result<Self, OpenError> {
        let io_err = |source| OpenError::Io { path: path.to_path_buf(), source };
        if !file.metadata().map_err(io_err)?.file_type().is_file() {
            return Err(OpenError::NotSeekable { path: path.to_path_buf() });
        }
        let mut input = lines::from_file(rewound(&file).map_err(io_err)?).map_err(io_err)?;
        let (data, too_long) = match input.zstd {
            true => spool(&mut input.reader).map_err(io_err)?,
            false => (rewound(&file).map_err(io_err)?, 0),
        };
        let (zstd, skipped) = (input.zstd, Skipped::default());
        let mut rec = Self { path: path.to_path_buf(), header: None, entries: Vec::new(), skipped, zstd, data };
        rec.skipped.too_long = too_long;
        rec.index().map_err(io_err)?;
        if rec.entries.is_empty() && rec.header.is_none() {
            return Err(OpenError::Foreign { path: path.to_path_buf(), why: "no gpuscope snapshot in it".into() });
        }
        Ok(rec)
    }

    fn index(&mut self) -> io::Result<()> {
        let mut reader = BufReader::new(&self.data);
        let mut line = Line::default();
        let mut offset = 0u64;
        let mut first = true;
        while lines::next_line(&mut reader, &mut line, MAX_LINE)? {
            let start = offset;
            offset += line.consumed;
            let kind = classify(&line, first);
            if !matches!(kind, Kind::Blank) {
                first = false;
            }
            match kind {
                Kind::Blank => {}
                Kind::Header(h) => self.header = Some(h),
                Kind::Stamped(time_ms) => self.entries.push(Entry {
                    time_ms,
                    offset: start,
                    len: u32::try_from(trim(&line.bytes).len()).unwrap_or(u32::MAX),
                }),
                Kind::Skip(count) => count(&mut self.skipped),
            }
        }
        Ok(())
    }

    /// The size of what is read from (the spool, for zstd).
    #[cfg(test)]
    pub(super) fn data_bytes(&self) -> u64 {
        self.data.metadata().map_or(0, |m| m.len())
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

/// Decompresses into an anonymous temporary file, leaving out lines over
/// the cap (counted): a small `.zst` of zeros without a newline costs
/// neither memory nor the temporary directory's space.
fn spool(reader: &mut dyn std::io::BufRead) -> io::Result<(File, u64)> {
    let mut out = std::io::BufWriter::new(tempfile::tempfile()?);
    let mut line = Line::default();
    let mut too_long = 0;
    while lines::next_line(reader, &mut line, MAX_LINE)? {
        if line.too_long {
            too_long += 1;
            continue;
        }
        out.write_all(&line.bytes)?;
        if line.complete {
            out.write_all(b"\n")?;
        }
    }
    let mut file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.seek(SeekFrom::Start(0))?;
    Ok((file, too_long))
}

/// What a pass over a recording found.
#[derive(Debug, Default)]
pub struct Summary {
    pub header: Option<Header>,
    pub snapshots: u64,
    pub skipped: Skipped,
}

/// Reads `path` once, front to back, handing each snapshot to `each`: works
/// on pipes and FIFOs, plain or zstd, and holds one line at a time.
pub fn stream(path: &Path, mut each: impl FnMut(Snapshot) -> io::Result<()>) -> Result<Summary, StreamError> {
    let io_err = |source| OpenError::Io { path: path.to_path_buf(), source };
    let mut input = lines::open(path).map_err(io_err)?;
    let mut summary = Summary::default();
    let mut line = Line::default();
    let mut first = true;
    while lines::next_line(&mut input.reader, &mut line, MAX_LINE).map_err(io_err)? {
        let kind = classify(&line, first);
        if !matches!(kind, Kind::Blank) {
            first = false;
        }
        match kind {
            Kind::Blank => {}
            Kind::Header(h) => {
                warn_if_newer(path, &h);
                summary.header = Some(h);
            }
            Kind::Stamped(_) => match serde_json::from_slice::<Snapshot>(trim(&line.bytes)) {
                Ok(snap) => {
                    summary.snapshots += 1;
                    each(snap).map_err(StreamError::Output)?;
                }
                Err(_) => summary.skipped.unreadable += 1,
            },
            Kind::Skip(count) => count(&mut summary.skipped),
        }
    }
    if summary.header.is_none() && summary.snapshots == 0 && summary.skipped.unreadable == 0 {
        let why = "no gpuscope snapshot in it".into();
        return Err(StreamError::Open(OpenError::Foreign { path: path.to_path_buf(), why }));
    }
    Ok(summary)
}

#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Writing what was read failed (the caller's sink).
    #[error("{0}")]
    Output(io::Error),
}

/// A recording from a newer gpuscope still replays: fields this one does
/// not know are ignored, and snapshots it cannot read are counted.
pub fn warn_if_newer(path: &Path, header: &Header) {
    if header.schema_version > SCHEMA_VERSION {
        crate::output::stderr::say!(
            "gpuscope: warning: {} was written by gpuscope {} (schema {}); this gpuscope reads schema \
             {SCHEMA_VERSION}: fields it does not know are ignored and snapshots it cannot read are skipped",
            path.display(),
            header.gpuscope_version,
            header.schema_version
        );
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let end = line.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |p| p + 1);
    &line[..end]
}

/// Another handle on the same open file, at its start. Handles made by
/// `try_clone` share one offset, so each reader rewinds before it starts.
pub fn rewound(file: &File) -> io::Result<File> {
    use std::io::Seek;
    let mut f = file.try_clone()?;
    f.seek(io::SeekFrom::Start(0))?;
    Ok(f)
}
