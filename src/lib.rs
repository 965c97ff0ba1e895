//! gpuscope: a terminal dashboard for NVIDIA GPUs that tells the truth
//! about GPU memory. See ARCHITECTURE.md for how the parts fit.

// A closed stderr must not panic: `output::stderr::say!` instead.
#![deny(clippy::print_stderr)]

pub mod analysis;
pub mod app;
pub mod check;
pub mod cli;
pub mod collect;
pub mod config;
pub mod docs;
pub mod doctor;
pub mod exit;
pub mod fleet;
pub mod hashing;
pub mod history;
pub mod model;
pub mod output;
pub mod pick;
pub mod poller;
pub mod probe;
pub mod query;
pub mod recording;
pub mod run_report;
pub mod serve;
pub mod settings;
pub mod sources;
pub mod tui;
pub mod util;
