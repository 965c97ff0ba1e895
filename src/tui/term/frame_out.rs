//! The terminal's writer: a frame's bytes held until the frame's flush.
//!
//! crossterm writes each command (a cursor move, a colour, a cell's text)
//! to its writer as a separate `write_all`, several per command. On
//! `Stdout` each one takes the stream's lock and goes through its line
//! buffer, which scans for a newline and hands the kernel a write every
//! KiB: at 8 GPUs x 64 processes that was about 1,500 pieces and two
//! system calls a frame. Here the pieces are appended to memory, and the
//! flush that ends every frame (and every `execute!`) sends them in one
//! write.
//!
//! A frame larger than `ROOM` (the first, a resize: a whole screen can be
//! a hundred KiB) goes out `ROOM` at a time, so the writer never holds
//! more than that: a frame where a few numbers change is a KiB or two.
//!
//! Held bytes are never written by a drop. A frame cut short by a panic
//! is then lost rather than written after the panic hook has restored the
//! terminal, where its escape sequences would land on the user's screen.

use std::io::{self, Write};

const ROOM: usize = 16 * 1024;

pub struct FrameOut<W: Write> {
    held: Vec<u8>,
    out: W,
}

impl<W: Write> FrameOut<W> {
    pub fn new(out: W) -> Self {
        Self { held: Vec::new(), out }
    }

    /// Writes out what is held. On an error, what reached the terminal is
    /// unknown and the held bytes are dropped all the same: the caller
    /// (`Term`) then sends every cell again, and half a frame sent twice
    /// would only add to the mess.
    fn send_held(&mut self) -> io::Result<()> {
        let sent = if self.held.is_empty() { Ok(()) } else { self.out.write_all(&self.held) };
        self.held.clear();
        sent
    }
}

impl<W: Write> Write for FrameOut<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.held.len() + buf.len() > ROOM {
            self.send_held()?;
        }
        if buf.len() > ROOM {
            return self.out.write_all(buf);
        }
        if self.held.capacity() == 0 {
            self.held.reserve_exact(ROOM);
        }
        self.held.extend_from_slice(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_held()?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each write it is handed; fails them all when told to.
    #[derive(Default)]
    struct Recorder {
        writes: Vec<Vec<u8>>,
        flushes: usize,
        broken: bool,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.broken {
                return Err(io::Error::from(io::ErrorKind::BrokenPipe));
            }
            self.writes.push(buf.to_vec());
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            self.flushes += 1;
            Ok(())
        }
    }

    #[test]
    fn a_frame_reaches_the_terminal_in_one_write_at_its_flush() {
        let mut out = FrameOut::new(Recorder::default());
        for piece in [&b"\x1b[1;1H"[..], b"a", b"\x1b[38;5;9m", b"b"] {
            out.write_all(piece).unwrap();
        }
        write!(out, "\x1b[{};{}H", 3, 4).unwrap();
        assert!(out.out.writes.is_empty(), "nothing before the flush");
        out.flush().unwrap();
        assert_eq!(out.out.writes, vec![b"\x1b[1;1Ha\x1b[38;5;9mb\x1b[3;4H".to_vec()]);
        assert_eq!(out.out.flushes, 1);
        // An empty flush writes nothing, and still flushes the terminal.
        out.flush().unwrap();
        assert_eq!((out.out.writes.len(), out.out.flushes), (1, 2));
    }

    #[test]
    fn a_frame_never_flushed_is_never_written() {
        let mut recorder = Recorder::default();
        {
            let mut out = FrameOut::new(&mut recorder);
            out.write_all(b"half a frame").unwrap();
        }
        assert!(recorder.writes.is_empty());
        assert_eq!(recorder.flushes, 0);
    }

    #[test]
    fn a_failed_flush_says_so_and_holds_nothing_more() {
        let mut out = FrameOut::new(Recorder { broken: true, ..Recorder::default() });
        out.write_all(b"lost").unwrap();
        assert_eq!(out.flush().unwrap_err().kind(), io::ErrorKind::BrokenPipe);
        out.out.broken = false;
        out.write_all(b"next").unwrap();
        out.flush().unwrap();
        assert_eq!(out.out.writes, vec![b"next".to_vec()]);
    }

    #[test]
    fn a_whole_screen_goes_out_a_room_at_a_time_in_order() {
        let mut out = FrameOut::new(Recorder::default());
        let pieces: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("\x1b[{i};1Hx").into_bytes()).collect();
        for piece in &pieces {
            out.write_all(piece).unwrap();
            assert!(out.held.len() <= ROOM && out.held.capacity() <= ROOM);
        }
        out.write_all(&vec![b'y'; 3 * ROOM]).unwrap();
        out.write_all(b"end").unwrap();
        out.flush().unwrap();
        let mut whole = pieces.concat();
        whole.extend(vec![b'y'; 3 * ROOM]);
        whole.extend(b"end");
        assert_eq!(out.out.writes.concat(), whole);
        assert!(out.out.writes.len() < 10, "{} writes", out.out.writes.len());
        assert_eq!(out.out.flushes, 1);
    }
}
