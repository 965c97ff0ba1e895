//! The terminal's events, read on a thread of their own that blocks in
//! crossterm's `read` and hands each event to the UI task over a channel.
//!
//! crossterm's own `EventStream` polls the shared event reader without
//! waiting each time the UI task wakes, and while its helper thread holds
//! that reader (blocked in `poll`), the attempt spins: seven
//! `sched_yield` calls per wake-up, twice a second on an idle dashboard
//! (seen with strace and perf). A reader that only ever blocks costs
//! nothing between keys.

use std::io;

use crossterm::event::Event;
use futures_util::Stream;
use tokio::sync::mpsc;

/// Enough for a burst of mouse moves; past it the reader waits for the
/// UI task to catch up.
const QUEUE: usize = 256;

/// Events as a stream; it ends if the reader fails (after that error).
pub fn events() -> io::Result<impl Stream<Item = io::Result<Event>> + Unpin> {
    let (tx, mut rx) = mpsc::channel(QUEUE);
    std::thread::Builder::new().name("gpuscope-input".into()).spawn(move || read_all(&tx))?;
    Ok(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

/// Until the terminal fails or the dashboard has gone (the receiver is
/// dropped: the next event finds no one and the thread ends).
fn read_all(tx: &mpsc::Sender<io::Result<Event>>) {
    loop {
        let event = crossterm::event::read();
        let failed = event.is_err();
        if tx.blocking_send(event).is_err() || failed {
            return;
        }
    }
}
