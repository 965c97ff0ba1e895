//! Everything that turns snapshots into output. Sinks read snapshots only.

pub mod json;
pub mod stdout;
pub mod table;
