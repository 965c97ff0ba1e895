//! `gpuscope record FILE`: every new snapshot becomes a line, until the
//! duration is up, Ctrl-C or SIGTERM. The header is written with the first
//! snapshot, which names the host.

use std::io;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};

use super::{Header, Recorder, Target};
use crate::poller::SnapshotRx;

pub async fn record(mut rx: SnapshotRx, target: Target, duration: Option<Duration>) -> io::Result<u64> {
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let deadline = tokio::time::sleep(duration.unwrap_or(Duration::MAX));
    tokio::pin!(deadline);
    let mut target = Some(target);
    let mut recorder: Option<Recorder> = None;
    loop {
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    break;
                }
                let Some(snap) = rx.borrow_and_update().clone() else { continue };
                if let Some(target) = target.take() {
                    let header = Header::new(snap.host.hostname.clone(), snap.interval_ms);
                    recorder = Some(Recorder::start(target, &header)?);
                }
                // A write error (a full disk) ends the recording; what was
                // written before it stays readable.
                recorder.as_mut().map_or(Ok(()), |r| r.write(&snap))?;
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = hup.recv() => break,
            () = &mut deadline, if duration.is_some() => break,
        }
    }
    if let Some(unused) = target {
        unused.discard_if_unused();
    }
    let written = recorder.as_ref().map_or(0, Recorder::snapshots);
    if let Some(r) = recorder {
        r.finish()?;
    }
    Ok(written)
}
