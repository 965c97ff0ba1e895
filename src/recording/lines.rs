//! Reading a recording line by line without trusting it: a line is held
//! only up to a cap (a file of zeros without a newline costs the cap, not
//! the file), zstd is recognised by its magic bytes (so `/dev/stdin` or a
//! FIFO works whatever its name), and every line that is not a snapshot is
//! counted by why.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// A line longer than this is not a snapshot gpuscope wrote (a snapshot of
/// eight GPUs and hundreds of processes is well under 1 MiB).
pub const MAX_LINE: usize = 64 << 20;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Lines that were not shown, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// The last line, cut off before its newline (the writer was stopped).
    pub torn: u64,
    /// Longer than `MAX_LINE`.
    pub too_long: u64,
    /// Not JSON, or JSON without a snapshot's time stamp.
    pub foreign: u64,
    /// A time stamp, but not a snapshot this gpuscope can read.
    pub unreadable: u64,
}

impl Skipped {
    pub fn total(&self) -> u64 {
        self.torn + self.too_long + self.foreign + self.unreadable
    }
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reasons = [
            (self.torn, "torn last line"),
            (self.too_long, "longer than 64 MiB"),
            (self.foreign, "not a snapshot"),
            (self.unreadable, "a snapshot this gpuscope cannot read"),
        ];
        let parts: Vec<String> = reasons.iter().filter(|(n, _)| *n > 0).map(|(n, why)| format!("{n} {why}")).collect();
        match parts.is_empty() {
            true => write!(f, "0 lines skipped"),
            false => write!(f, "{} lines skipped ({})", self.total(), parts.join(", ")),
        }
    }
}

/// One line as read: its bytes (without the newline, at most `MAX_LINE`),
/// how many bytes it took in the input, and how it ended.
#[derive(Debug, Default)]
pub struct Line {
    pub bytes: Vec<u8>,
    pub consumed: u64,
    pub complete: bool,
    pub too_long: bool,
}

/// Reads the next line into `line`; `false` at the end of the input. A
/// line over `cap` is consumed to its end without being stored.
pub fn next_line(reader: &mut (impl BufRead + ?Sized), line: &mut Line, cap: usize) -> io::Result<bool> {
    line.bytes.clear();
    line.consumed = 0;
    line.complete = false;
    line.too_long = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(line.consumed > 0);
        }
        let (take, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(p) => (p + 1, true),
            None => (buf.len(), false),
        };
        let body = &buf[..if found { take - 1 } else { take }];
        if !line.too_long && line.bytes.len() + body.len() <= cap {
            line.bytes.extend_from_slice(body);
        } else if !line.too_long {
            line.too_long = true;
            line.bytes = Vec::new();
        }
        reader.consume(take);
        line.consumed += take as u64;
        if found {
            line.complete = true;
            return Ok(true);
        }
    }
}

/// The input as a line reader, decompressed when it is zstd.
pub struct Input {
    pub reader: Box<dyn BufRead + Send>,
    pub zstd: bool,
}

pub fn open(path: &Path) -> io::Result<Input> {
    from_file(File::open(path)?)
}

/// [`open`] for a file already open, read from where it stands.
pub fn from_file(mut file: File) -> io::Result<Input> {
    let head = read_head(&mut file)?;
    let zstd = head == ZSTD_MAGIC;
    // The bytes looked at go back in front of the rest: a pipe cannot rewind.
    let joined = io::Cursor::new(head).chain(file);
    let reader: Box<dyn BufRead + Send> = match zstd {
        true => Box::new(BufReader::new(Tolerant(zstd::Decoder::new(joined)?))),
        false => Box::new(BufReader::with_capacity(1 << 16, joined)),
    };
    Ok(Input { reader, zstd })
}

/// Up to the magic's length of leading bytes; a pipe may hand them over a
/// few at a time.
fn read_head(file: &mut File) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    crate::util::bounded_read::read_into(file, &mut head, ZSTD_MAGIC.len(), None)?;
    Ok(head)
}

/// A recording whose writer was killed ends in an unfinished zstd frame:
/// everything decoded before the cut is good, so the cut reads as the end.
struct Tolerant<R>(R);

impl<R: Read> Read for Tolerant<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => Ok(0),
            other => other,
        }
    }
}
