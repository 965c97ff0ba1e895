//! `--json` (one pretty snapshot) and `--json --watch` (NDJSON). Strings
//! stay what they were (a command line is data), but invisible formatting
//! characters (bidirectional overrides, zero-width spaces, see
//! `sources::is_invisible`) are written as `\uXXXX` escapes: the JSON
//! means the same, and `cat` of it cannot be made to show something else.

use std::io::{self, BufWriter, Write};

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

use crate::model::Snapshot;
use crate::sources::is_invisible;

pub fn write_pretty(snap: &Snapshot, out: &mut impl Write) -> io::Result<()> {
    gathered(out, |w| {
        write_with(snap, &mut *w, Escaping(PrettyFormatter::new()))?;
        w.write_all(b"\n")
    })
}

/// One compact line, flushed so a reader at the other end of a pipe gets it
/// now and not when a buffer fills.
pub fn write_line(snap: &Snapshot, out: &mut impl Write) -> io::Result<()> {
    gathered(out, |w| {
        write_with(snap, &mut *w, Escaping(CompactFormatter))?;
        w.write_all(b"\n")
    })
}

/// serde_json writes a value a key, a bracket, a number at a time, and a
/// locked stdout passes each line on as it ends: a pretty snapshot of 8
/// GPUs x 64 processes took 2,738 `write(2)` calls (strace). Gathered here,
/// it goes out in a few large writes, and whole by the time this returns.
fn gathered<W: Write>(out: &mut W, write: impl FnOnce(&mut BufWriter<&mut W>) -> io::Result<()>) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(GATHER, &mut *out);
    write(&mut w)?;
    w.flush()?;
    drop(w);
    out.flush()
}

/// About a pretty snapshot of 8 GPUs x 64 processes.
const GATHER: usize = 64 * 1024;

/// Any value as compact JSON, escaped the same way (recordings, the alert hook).
pub fn to_vec(value: &impl Serialize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_with(value, &mut out, Escaping(CompactFormatter))?;
    Ok(out)
}

/// Any value as pretty JSON, escaped the same way (`fleet --json`).
pub fn to_vec_pretty(value: &impl Serialize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_with(value, &mut out, Escaping(PrettyFormatter::new()))?;
    Ok(out)
}

fn write_with(value: &impl Serialize, out: impl Write, formatter: impl Formatter) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(out, formatter);
    value.serialize(&mut ser).map_err(io::Error::from)
}

/// serde_json escapes only what JSON requires (quotes, backslashes,
/// control characters); this escapes invisible characters too, and
/// otherwise formats as the formatter it wraps.
struct Escaping<F>(F);

impl<F: Formatter> Formatter for Escaping<F> {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| is_invisible(c)) {
            w.write_all(&rest.as_bytes()[..at])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(w, "\\u{unit:04x}")?;
            }
            rest = &rest[at + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }

    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }

    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the writes that reach it, as `write(2)` calls would be.
    #[derive(Default)]
    struct Counting {
        bytes: Vec<u8>,
        writes: usize,
        flushes: usize,
    }

    impl Write for Counting {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.writes += 1;
            self.bytes.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            self.flushes += 1;
            Ok(())
        }
    }

    #[test]
    fn a_snapshot_goes_out_in_one_write_and_flushed() {
        let snap = crate::serve::metrics::tests::snapshot();
        for pretty in [true, false] {
            let mut out = Counting::default();
            match pretty {
                true => write_pretty(&snap, &mut out).unwrap(),
                false => write_line(&snap, &mut out).unwrap(),
            }
            assert!(out.bytes.len() > 2_000 && out.bytes.len() < GATHER, "{} bytes", out.bytes.len());
            assert_eq!(out.writes, 1, "pretty: {pretty}");
            assert!(out.flushes >= 1, "flushed, so a reader gets it now");
            assert_eq!(out.bytes.last(), Some(&b'\n'));
            let back: serde_json::Value = serde_json::from_slice(&out.bytes).unwrap();
            assert_eq!(back, serde_json::to_value(&snap).unwrap(), "the same value as unbuffered");
        }
    }

    #[test]
    fn invisible_characters_are_escaped_and_read_back_the_same() {
        let value = serde_json::json!({"command": "evil\u{202E}txt.exe \u{200B}x \u{E0001} é 日 😀 \"q\"\n"});
        for pretty in [false, true] {
            let mut out = Vec::new();
            match pretty {
                true => write_with(&value, &mut out, Escaping(PrettyFormatter::new())).unwrap(),
                false => write_with(&value, &mut out, Escaping(CompactFormatter)).unwrap(),
            }
            let text = String::from_utf8(out).unwrap();
            assert!(text.contains("evil\\u202etxt.exe \\u200bx \\udb40\\udc01 é 日 😀 \\\"q\\\"\\n"), "{text}");
            assert!(!text.chars().any(is_invisible), "{text}");
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value, "faithful");
            assert_eq!(pretty, text.contains('\n'), "the wrapped formatter still decides the layout");
        }
    }
}
