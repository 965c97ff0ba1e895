//! What the headless modes print, shared by every mode that prints it: the
//! JSON snapshot (one document or one line), the plain-text table of `-1`,
//! `stdout`, the one way to standard output, and `stderr`, the one way
//! to standard error. The modes themselves
//! (`check`, `serve`, `recording`, `query`, `tui`) are siblings that borrow
//! these; nothing here calls NVML or reads `/proc`.

pub mod json;
pub mod stderr;
pub mod stdout;
pub mod table;
