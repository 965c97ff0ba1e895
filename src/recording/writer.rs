//! Each line is written whole and flushed before the next: with zstd that
//! ends a compressed block, so a reader can decode every complete line even
//! if the frame is never finished.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::reader::rewound;
use super::{FORMAT, Header, OpenError, Recording, is_zstd};
use crate::model::{SCHEMA_VERSION, Snapshot};
use crate::util::own_files::open_ours;

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

/// What to do when the file already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// The default: a recording is never overwritten by accident.
    Refuse,
    /// `--force`.
    Replace,
    /// `--append`: only to a recording of this schema.
    Append,
}

/// Where a recording goes, opened before anything is collected so that a
/// refusal costs nothing.
pub struct Target {
    file: File,
    zstd: bool,
    append: bool,
    /// What was there before, for the user: "replacing", "appending to".
    pub note: Option<String>,
    /// Where this run created the file (it did not exist before).
    created: Option<std::path::PathBuf>,
}

impl Target {
    pub fn open(path: &Path, existing: Existing) -> Result<Self, OpenError> {
        let write_err = |source| OpenError::Write { path: path.to_path_buf(), source };
        let there = std::fs::symlink_metadata(path).is_ok();
        let new = || OpenOptions::new().write(true).create_new(true).open(path);
        let (file, zstd, append, note) = match (existing, there) {
            (Existing::Refuse, _) | (_, false) => match new() {
                Ok(f) => (f, is_zstd(path), false, None::<String>),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(OpenError::Exists { path: path.to_path_buf() });
                }
                Err(e) => return Err(write_err(e)),
            },
            (Existing::Replace, true) => {
                (replace_no_follow(path)?, is_zstd(path), false, Some(format!("replacing {}", path.display())))
            }
            (Existing::Append, true) => {
                let (file, zstd, snapshots) = open_for_append(path)?;
                let note = format!("appending to {} ({snapshots} snapshots in it)", path.display());
                (file, zstd, true, Some(note))
            }
        };
        let created = (!there || existing == Existing::Refuse).then(|| path.to_path_buf());
        Ok(Self { file, zstd, append, note, created })
    }

    /// A file this run created and never wrote to is removed: a run that
    /// collected nothing (no driver, stopped at once) leaves nothing behind
    /// that the next `record` would refuse. Only while the path is still
    /// that empty file.
    pub fn discard_if_unused(self) {
        use std::os::unix::fs::MetadataExt;
        let Some(path) = &self.created else { return };
        let (Ok(ours), Ok(there)) = (self.file.metadata(), std::fs::symlink_metadata(path)) else { return };
        if ours.len() == 0 && (ours.dev(), ours.ino()) == (there.dev(), there.ino()) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `--force`: the file at `path` itself, emptied once it proves ours.
fn replace_no_follow(path: &Path) -> Result<File, OpenError> {
    let refuse = |why: String| OpenError::Replace { path: path.to_path_buf(), why };
    let file = open_ours(path, OpenOptions::new().write(true).create(true)).map_err(refuse)?;
    file.set_len(0).map_err(|source| OpenError::Write { path: path.to_path_buf(), source })?;
    Ok(file)
}

/// The existing file must be a whole recording of this schema, in the
/// format it will be continued in. Everything is read through the one
/// handle opened here, so the file checked is the file continued.
fn open_for_append(path: &Path) -> Result<(File, bool, usize), OpenError> {
    let refuse = |why: String| OpenError::Append { path: path.to_path_buf(), why };
    let io_err = |source| OpenError::Io { path: path.to_path_buf(), source };
    let mut file = open_ours(path, OpenOptions::new().read(true).append(true)).map_err(refuse)?;
    let rec = Recording::from_file(path, rewound(&file).map_err(io_err)?)?;
    match &rec.header {
        None => return Err(refuse("it has no recording header (a bare --json --watch stream?)".into())),
        Some(h) if h.format != FORMAT || h.schema_version != SCHEMA_VERSION => {
            return Err(refuse(format!(
                "it was written with schema {} and this gpuscope writes schema {SCHEMA_VERSION}",
                h.schema_version
            )));
        }
        Some(_) => {}
    }
    let zstd = rec.zstd;
    if zstd && !zstd_is_whole(&file) {
        return Err(refuse(
            "its last zstd frame is unfinished (its writer was killed); lines appended after it could not be \
             read back"
                .into(),
        ));
    }
    if !zstd {
        end_with_newline(&mut file).map_err(|source| OpenError::Write { path: path.to_path_buf(), source })?;
    }
    Ok((file, zstd, rec.len()))
}

fn zstd_is_whole(file: &File) -> bool {
    rewound(file).and_then(zstd::Decoder::new).and_then(|mut d| io::copy(&mut d, &mut io::sink())).is_ok()
}

/// A torn last line stays a line of its own: the next one starts fresh.
/// (`file` is open for reading too; appends go to the end wherever it reads.)
fn end_with_newline(file: &mut File) -> io::Result<()> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        file.write_all(b"\n")?;
    }
    Ok(())
}

impl Recorder {
    /// A new file at `path`, replacing any (tests and tools).
    pub fn create(path: &Path, header: &Header) -> io::Result<Self> {
        let file = File::create(path)?;
        Self::start(Target { file, zstd: is_zstd(path), append: false, note: None, created: None }, header)
    }

    /// Starts writing; an appended recording keeps its own header.
    pub fn start(target: Target, header: &Header) -> io::Result<Self> {
        let file = BufWriter::new(target.file);
        let sink = if target.zstd { Sink::Zstd(zstd::Encoder::new(file, ZSTD_LEVEL)?) } else { Sink::Plain(file) };
        let mut r = Self { sink, lines: 0 };
        if !target.append {
            r.line(&crate::output::json::to_vec(header)?)?;
        }
        Ok(r)
    }

    pub fn write(&mut self, snap: &Snapshot) -> io::Result<()> {
        self.line(&crate::output::json::to_vec(snap)?)?;
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
