//! The HTTP endpoints. Each answers from the newest snapshot the poller
//! has published; none calls the driver or waits for a collection.

use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::auth::{self, Access};
use super::metrics;
use super::negotiate::format_for;
use super::state::Latest;
use super::web;

/// A snapshot older than this many intervals means the poller is stuck.
const STALE_AFTER_INTERVALS: u32 = 3;

#[derive(Clone)]
struct Shared {
    latest: Latest,
    interval: Duration,
}

/// Every route, and the 404 for any other path, behind `access`. `/` is
/// the web page with `web` (`serve --web`), else the list of endpoints.
pub fn router(latest: Latest, interval: Duration, access: Access, web: bool) -> Router {
    let router = match web {
        true => web::routes(Router::new()),
        false => Router::new().route("/", get(index)),
    };
    router
        .route("/metrics", get(scrape))
        .route("/snapshot", get(snapshot))
        .route(auth::HEALTHZ, get(healthz))
        .with_state(Shared { latest, interval })
        .layer(axum::middleware::from_fn_with_state(access, auth::check))
}

const TEXT: &str = "text/plain; charset=utf-8";

async fn index() -> Response {
    let body = "gpuscope\n/metrics   Prometheus metrics (OpenMetrics on request)\n/snapshot  the JSON snapshot, as gpuscope --json prints it\n/healthz   ok while snapshots keep coming\n";
    ([(CONTENT_TYPE, TEXT)], body).into_response()
}

fn not_yet() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, [(CONTENT_TYPE, TEXT)], "no snapshot yet: the first collection is under way\n")
        .into_response()
}

async fn scrape(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let Some(entry) = s.latest.borrow().clone() else { return not_yet() };
    let accept: Vec<&str> = headers.get_all(ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect();
    let format = format_for(&accept.join(","));
    let cached = entry.metrics(format);
    let tail = metrics::per_scrape(format, entry.age(SystemTime::now()).as_secs_f64());
    let mut body = Vec::with_capacity(cached.len() + tail.len());
    body.extend_from_slice(cached);
    body.extend_from_slice(tail.as_bytes());
    ([(CONTENT_TYPE, format.content_type())], body).into_response()
}

/// The age of the snapshot `/snapshot` answers with, in seconds, as
/// `gpuscope_snapshot_age_seconds` says it: a reader (`fleet`) tells a
/// node whose collection has stopped (a hung driver) from one that is
/// current, whatever the two machines' clocks say.
pub const SNAPSHOT_AGE_HEADER: &str = "gpuscope-snapshot-age";

async fn snapshot(State(s): State<Shared>) -> Response {
    let Some(entry) = s.latest.borrow().clone() else { return not_yet() };
    let age = format!("{:.3}", entry.age(SystemTime::now()).as_secs_f64());
    (
        [(CONTENT_TYPE, "application/json"), (HeaderName::from_static(SNAPSHOT_AGE_HEADER), age.as_str())],
        entry.json().clone(),
    )
        .into_response()
}

async fn healthz(State(s): State<Shared>) -> Response {
    let Some(entry) = s.latest.borrow().clone() else { return not_yet() };
    let (age, limit) = (entry.age(SystemTime::now()), s.interval.saturating_mul(STALE_AFTER_INTERVALS));
    if age <= limit {
        return ([(CONTENT_TYPE, TEXT)], "ok\n").into_response();
    }
    let reason = format!(
        "stale: the newest snapshot is {:.1} s old, more than {STALE_AFTER_INTERVALS} intervals ({:.1} s)\n",
        age.as_secs_f64(),
        limit.as_secs_f64()
    );
    (StatusCode::SERVICE_UNAVAILABLE, [(CONTENT_TYPE, TEXT)], reason).into_response()
}
