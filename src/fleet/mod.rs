//! `gpuscope fleet`: many nodes in one terminal. Sources (`poll.rs`: each
//! node's `gpuscope serve` over `client.rs`; `prometheus.rs`: one
//! Prometheus for all of them) feed one aggregator, which publishes the
//! whole `Fleet` (`model.rs`, with the jobs across hosts of `jobs.rs`) on
//! a `watch` channel; the consumers are the view (`view/`) and the
//! headless `--json` and `-1` (`table.rs`).

pub mod client;
pub mod hosts;
pub mod jobs;
pub mod model;
pub mod poll;
pub mod prometheus;
pub mod table;
pub mod tls;
pub mod view;

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::FleetArgs;
use crate::output::stdout::{self, Delivered};

pub use model::{Fleet, HostState, HostStatus};
pub use poll::FleetRx;

#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("{0}")]
    Usage(String),
    #[error("writing the output: {0}")]
    Output(io::Error),
}

impl FleetError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => crate::exit::USAGE,
            Self::Output(_) => crate::exit::FAILURE,
        }
    }
}

/// "3.4s", "12s", "5m12s".
pub fn short_age(ms: u64) -> String {
    crate::tui::render::duration_short(ms)
}

/// The hosts from the command line and `--hosts-file`, in that order.
pub fn host_list(args: &FleetArgs) -> Result<Vec<hosts::HostSpec>, FleetError> {
    let mut list = hosts::parse_list(&args.hosts).map_err(FleetError::Usage)?;
    if let Some(path) = &args.hosts_file {
        list.extend(hosts::read_file(path).map_err(FleetError::Usage)?);
    }
    if list.is_empty() && args.prometheus.is_none() {
        return Err(FleetError::Usage("no hosts: give HOST[:PORT],... or --hosts-file FILE".into()));
    }
    if let Some(h) = list.iter().find(|h| h.scheme == hosts::Scheme::Https).filter(|_| args.ca.is_none()) {
        return Err(FleetError::Usage(format!(
            "{h}: https:// needs --ca PATH, the CA that signed the nodes' certificates (gpuscope does not read the system's trust store)"
        )));
    }
    Ok(list)
}

pub fn client(args: &FleetArgs, timeout: Duration) -> Result<client::Client, FleetError> {
    let token = match &args.token_file {
        Some(path) => Some(read_token(path)?),
        None => None,
    };
    let tls = match &args.ca {
        Some(path) => Some(tls::connector(path).map_err(|e| FleetError::Usage(e.to_string()))?),
        None => None,
    };
    client::Client::new(timeout, token.as_deref(), tls).map_err(FleetError::Usage)
}

fn read_token(path: &std::path::Path) -> Result<String, FleetError> {
    use std::io::Read;
    let name = path.display();
    let file = std::fs::File::open(path).map_err(|e| FleetError::Usage(format!("--token-file {name}: {e}")))?;
    let mut text = String::new();
    file.take(64 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| FleetError::Usage(format!("--token-file {name}: {e}")))?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(FleetError::Usage(format!("--token-file {name}: empty")));
    }
    Ok(token)
}

/// Starts the source the flags ask for on the current runtime.
pub fn start(args: &FleetArgs, interval: Duration, timeout: Duration) -> Result<FleetRx, FleetError> {
    let client = client(args, timeout)?;
    if let Some(url) = &args.prometheus {
        let endpoint = prometheus::parse_url(url).map_err(FleetError::Usage)?;
        if endpoint.spec.scheme == hosts::Scheme::Https && args.ca.is_none() {
            return Err(FleetError::Usage(format!("--prometheus {url}: https:// needs --ca PATH")));
        }
        warn_of_clear_text_token(args, [&endpoint.spec]);
        return Ok(prometheus::spawn(endpoint, client, interval));
    }
    let list = host_list(args)?;
    warn_of_clear_text_token(args, &list);
    Ok(poll::spawn_direct(&list, &client, interval))
}

fn warn_of_clear_text_token<'a>(args: &FleetArgs, hosts: impl IntoIterator<Item = &'a hosts::HostSpec>) {
    if args.token_file.is_some() {
        for warning in hosts::clear_text_token_warnings(hosts) {
            crate::output::stderr::say!("gpuscope: warning: {warning}");
        }
    }
}

/// Until every host has had its first attempt, or for `timeout` at most:
/// each attempt is bounded by it, and so is the one-shot as a whole, work
/// after the answer included. A host still waiting then is reported as
/// not having answered in time.
pub async fn first_round(rx: &mut FleetRx, timeout: Duration) -> Arc<Fleet> {
    let all = async {
        loop {
            let fleet = rx.borrow_and_update().clone();
            if !fleet.hosts.iter().any(|h| h.status == HostStatus::Waiting) || rx.changed().await.is_err() {
                return fleet;
            }
        }
    };
    match tokio::time::timeout(timeout, all).await {
        Ok(fleet) => fleet,
        Err(_) => {
            let mut fleet = Fleet::clone(&rx.borrow());
            let now = poll::now_ms();
            let late = client::FetchError::Timeout(timeout).to_string();
            fleet
                .hosts
                .iter_mut()
                .filter(|h| h.status == HostStatus::Waiting)
                .for_each(|h| h.failed(late.clone(), now));
            Arc::new(fleet)
        }
    }
}

pub enum Headless {
    Json,
    JsonStream { count: Option<u64> },
    Table,
}

/// `--json`, `--json --watch`, `-1`. A one-shot waits for every host's
/// first attempt; a stream writes what is known at each interval, so a
/// slow host never holds back the lines.
pub async fn headless(
    mut rx: FleetRx,
    mode: Headless,
    interval: Duration,
    timeout: Duration,
) -> Result<(), FleetError> {
    match mode {
        Headless::Json => {
            let fleet = first_round(&mut rx, timeout).await;
            let mut doc = crate::output::json::to_vec_pretty(fleet.as_ref()).map_err(FleetError::Output)?;
            doc.push(b'\n');
            write(|out| out.write_all(&doc)).map(drop)
        }
        Headless::Table => {
            let fleet = first_round(&mut rx, timeout).await;
            write(|out| out.write_all(table::render(&fleet, poll::now_ms()).as_bytes())).map(drop)
        }
        Headless::JsonStream { count } => stream(rx, count, interval).await,
    }
}

async fn stream(rx: FleetRx, count: Option<u64>, interval: Duration) -> Result<(), FleetError> {
    let mut ticks = tokio::time::interval(interval);
    let mut written = 0u64;
    while count.is_none_or(|c| written < c) {
        ticks.tick().await;
        let fleet = rx.borrow().clone();
        let mut line = crate::output::json::to_vec(fleet.as_ref()).map_err(FleetError::Output)?;
        line.push(b'\n');
        if write(|out| out.write_all(&line))? == Delivered::ReaderGone {
            break;
        }
        written += 1;
    }
    Ok(())
}

fn write(f: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) -> Result<Delivered, FleetError> {
    stdout::write_with(f).map_err(FleetError::Output)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host whose answer is still being read when the timeout comes (or
    /// never comes): the one-shot ends at the timeout and says so.
    #[tokio::test(start_paused = true)]
    async fn a_one_shot_ends_at_the_timeout_whatever_a_host_does() {
        let (_outcomes, rx) = tokio::sync::mpsc::channel(1);
        let names = vec!["slow:10983".to_string()];
        let mut fleet = poll::spawn_aggregator(model::Source::Direct, names, Duration::from_secs(1), rx);
        let start = tokio::time::Instant::now();
        let got = first_round(&mut fleet, Duration::from_secs(2)).await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert_eq!(got.hosts[0].status, HostStatus::Unreachable);
        assert_eq!(got.hosts[0].error.as_deref(), Some("no answer within 2s"));
    }
}
