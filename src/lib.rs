//! gpuscope: a terminal dashboard for NVIDIA GPUs that tells the truth
//! about GPU memory. See ARCHITECTURE.md for how the parts fit.

pub mod analysis;
pub mod app;
pub mod attach;
pub mod bounded_read;
pub mod bounds;
pub mod check;
pub mod cli;
pub mod collect;
pub mod config;
pub mod dirfd;
pub mod docs;
pub mod exit;
pub mod fleet;
pub mod hashing;
pub mod history;
pub mod inject;
pub mod memviz;
pub mod model;
pub mod output;
pub mod poller;
pub mod query;
pub mod recording;
pub mod segmap;
pub mod serve;
pub mod settings;
pub mod sorted_map;
pub mod sources;
pub mod tui;
pub mod units;
