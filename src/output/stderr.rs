//! Every line gpuscope writes to standard error goes through here. A
//! stderr that is closed or full (`2>&-`, `2>&1 | head -1`, `/dev/full`)
//! must neither end gpuscope nor change its exit status: `eprintln!` would
//! panic there (exit 101), so the crate denies it (`lib.rs`).

use std::fmt;
use std::io::{self, Write};

/// Writes `args` to stderr as one write of the locked handle; a failure
/// is dropped, as there is nowhere left to say it.
pub fn write(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// `eprintln!` that cannot panic.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::stderr::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use say;
