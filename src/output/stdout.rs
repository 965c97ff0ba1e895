//! Every byte the headless modes write to stdout goes through here, so an
//! output error means the same everywhere: the reader going away (a closed
//! pipe, `| head -n 1`) is a normal end, any other error (a full disk,
//! `/dev/full`) a failure that the caller reports in one line. `print!`
//! would panic on both.

use std::io::{self, Write};

/// How a write to stdout ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    All,
    /// The reader closed its end: stop writing, and exit 0.
    ReaderGone,
}

/// Runs `write` on the locked stdout and flushes it.
pub fn write_with(write: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) -> io::Result<Delivered> {
    let mut out = io::stdout().lock();
    classify(write(&mut out).and_then(|()| out.flush()))
}

pub fn print(text: &str) -> io::Result<Delivered> {
    write_with(|out| out.write_all(text.as_bytes()))
}

/// A closed pipe is an answer, not an error.
pub fn classify(result: io::Result<()>) -> io::Result<Delivered> {
    match result {
        Ok(()) => Ok(Delivered::All),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Delivered::ReaderGone),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_closed_pipe_is_a_normal_end() {
        assert_eq!(classify(Ok(())).unwrap(), Delivered::All);
        assert_eq!(classify(Err(io::ErrorKind::BrokenPipe.into())).unwrap(), Delivered::ReaderGone);
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(classify(Err(full)).unwrap_err().raw_os_error(), Some(libc::ENOSPC));
    }
}
