//! Accepting connections so that idle clients cannot starve scrapers: a
//! cap on open connections (at the cap, the connection idle the longest is
//! closed to make room; with none idle, the newcomer is), a deadline for a
//! request's headers (an idle keep-alive connection counts: it is waiting
//! for headers too), and a bound on their size. Each connection is served
//! by hyper directly, because axum's `serve` sets none of these. With TLS,
//! the handshake happens inside the same slot: it counts against the cap,
//! is idle (so the first to go at the cap) and must end within the header
//! deadline, so that half-open handshakes cannot hold slots either.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio_rustls::TlsAcceptor;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    /// From the first byte a request may start with to its last header.
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_connections: DEFAULT_MAX_CONNECTIONS, header_timeout: DEFAULT_HEADER_TIMEOUT }
    }
}

pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The read buffer, and so the request line and headers: a scrape's are a
/// few hundred bytes (hyper's minimum is 8 KiB).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;
/// After an accept error (out of file descriptors, most likely), wait a
/// little rather than spin; closing idle connections frees some.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(20);

/// The open connections: whether each is serving a request, and since
/// when it has been idle.
#[derive(Default)]
struct Tracker {
    state: Mutex<TrackerState>,
}

#[derive(Default)]
struct TrackerState {
    next_id: u64,
    open: BTreeMap<u64, Conn>,
}

struct Conn {
    busy: usize,
    idle_since: Instant,
    close: Arc<Notify>,
}

impl Tracker {
    fn lock(&self) -> MutexGuard<'_, TrackerState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Room for one more: `None` when the cap is reached and every
    /// connection is busy.
    fn admit(&self, max: usize) -> Option<(u64, Arc<Notify>)> {
        let mut s = self.lock();
        if s.open.len() >= max {
            let oldest_idle = s.open.iter().filter(|(_, c)| c.busy == 0).min_by_key(|(_, c)| c.idle_since);
            let id = *oldest_idle?.0;
            if let Some(evicted) = s.open.remove(&id) {
                evicted.close.notify_one();
            }
        }
        let id = s.next_id;
        s.next_id += 1;
        let close = Arc::new(Notify::new());
        s.open.insert(id, Conn { busy: 0, idle_since: Instant::now(), close: close.clone() });
        Some((id, close))
    }

    fn request(&self, id: u64, started: bool) {
        if let Some(c) = self.lock().open.get_mut(&id) {
            match started {
                true => c.busy += 1,
                false => {
                    c.busy = c.busy.saturating_sub(1);
                    c.idle_since = Instant::now();
                }
            }
        }
    }

    fn leave(&self, id: u64) {
        self.lock().open.remove(&id);
    }

    fn count(&self) -> usize {
        self.lock().open.len()
    }
}

/// Marks a request in flight until dropped (the response is ready, or the
/// connection went away mid-request).
struct Busy {
    tracker: Arc<Tracker>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.tracker.request(self.id, false);
    }
}

/// What every connection is served with.
#[derive(Clone)]
pub struct Service {
    pub router: Router,
    pub limits: Limits,
    pub tls: Option<TlsAcceptor>,
}

/// Serves on `listener` until `stop` turns true, then lets open
/// connections finish for up to `grace`.
pub async fn serve(listener: TcpListener, service: Service, mut stop: watch::Receiver<bool>, grace: Duration) {
    let tracker = Arc::new(Tracker::default());
    let for_conns = stop.clone();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => admit(stream, &tracker, &service, for_conns.clone()),
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            },
            _ = stop.wait_for(|s| *s) => break,
        }
    }
    drop(listener);
    let deadline = tokio::time::Instant::now() + grace;
    while tracker.count() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn admit(stream: TcpStream, tracker: &Arc<Tracker>, service: &Service, stop: watch::Receiver<bool>) {
    // At the cap with every connection busy: the newcomer is the one to go
    // (dropping it closes it).
    let Some((id, close)) = tracker.admit(service.limits.max_connections) else { return };
    let _ = stream.set_nodelay(true);
    let tracker = tracker.clone();
    let Service { router, limits, tls } = service.clone();
    tokio::spawn(async move {
        match tls {
            None => connection(stream, id, &tracker, router, limits, close, stop).await,
            Some(tls) => {
                if let Some(stream) = handshake(&tls, stream, limits.header_timeout, &close).await {
                    connection(stream, id, &tracker, router, limits, close, stop).await;
                }
            }
        }
        tracker.leave(id);
    });
}

/// The TLS handshake, given up at the header deadline or when the slot is
/// wanted for another connection. A failed one is the client's problem,
/// and not logged: anyone can send garbage.
async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    tls: &TlsAcceptor,
    stream: S,
    deadline: Duration,
    close: &Notify,
) -> Option<tokio_rustls::server::TlsStream<S>> {
    tokio::select! {
        done = tokio::time::timeout(deadline, tls.accept(stream)) => done.ok()?.ok(),
        () = close.notified() => None,
    }
}

async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    id: u64,
    tracker: &Arc<Tracker>,
    router: Router,
    limits: Limits,
    close: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let inner = TowerToHyperService::new(router);
    let for_service = tracker.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        for_service.request(id, true);
        let busy = Busy { tracker: for_service.clone(), id };
        let answer = hyper::service::Service::call(&inner, req);
        async move {
            let response: Result<Response<Body>, Infallible> = answer.await;
            drop(busy);
            response
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = close.notified() => return,
        _ = stop.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_longest_idle_goes_and_busy_ones_stay() {
        let t = Tracker::default();
        let (a, close_a) = t.admit(2).unwrap();
        let (b, _) = t.admit(2).unwrap();
        t.request(b, true);
        let (c, _) = t.admit(2).unwrap();
        assert_eq!(t.count(), 2);
        assert!(!t.lock().open.contains_key(&a), "the idle one made room");
        assert!(tokio_test_notified(&close_a), "and was told to close");
        t.request(c, true);
        assert!(t.admit(2).is_none(), "all busy: the newcomer is refused");
        t.request(c, false);
        assert!(t.admit(2).is_some(), "c is idle again");
        assert!(t.lock().open.contains_key(&b), "b, busy, was never touched");
    }

    /// Whether a permit is waiting on `n`.
    fn tokio_test_notified(n: &Notify) -> bool {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(10), n.notified()).await.is_ok() })
    }
}
