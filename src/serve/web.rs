//! `serve --web`: one page, built into the binary, that draws `/snapshot`
//! live in a browser (`assets/web/`: no CDN, no build step). The page, its
//! script, style and icon hold no data, so they are served without the
//! token; the script asks for the token when `/snapshot` answers 401 and
//! sends it as the bearer header, like any other client.

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const HTML: &str = include_str!("../../assets/web/index.html");
const JS: &str = include_str!("../../assets/web/web.js");
const CSS: &str = include_str!("../../assets/web/web.css");
const ICON: &str = include_str!("../../assets/web/favicon.svg");

/// The page's paths: open without the token, since none of them carries a
/// figure (`auth::Access` reads this list).
pub const PATHS: [&str; 5] = ["/", "/index.html", "/web.js", "/web.css", "/favicon.svg"];

/// Everything the page loads comes from this server, and nothing else may
/// run: script and style are files of their own, so no inline block needs
/// a hash. `base-uri`, `form-action` and `frame-ancestors` do not fall back
/// to `default-src` (CSP Level 3, section 6.1.3): without `form-action
/// 'none'` a token form submitted before the script ran would put the token
/// in a URL.
pub const CSP: &str = "default-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The page's routes, added to `router`.
pub fn routes<S: Clone + Send + Sync + 'static>(router: Router<S>) -> Router<S> {
    router
        .route("/", get(page))
        .route("/index.html", get(page))
        .route("/web.js", get(|| async { asset("text/javascript; charset=utf-8", JS) }))
        .route("/web.css", get(|| async { asset("text/css; charset=utf-8", CSS) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", ICON) }))
}

async fn page() -> Response {
    asset("text/html; charset=utf-8", HTML)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (CONTENT_TYPE, content_type),
        (CONTENT_SECURITY_POLICY, CSP),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (REFERRER_POLICY, "no-referrer"),
        // A new gpuscope behind the same address must not run an old script.
        (CACHE_CONTROL, "no-cache"),
    ];
    (headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_small_and_loads_only_its_own_files() {
        let size = HTML.len() + JS.len() + CSS.len() + ICON.len();
        assert!(size < 30 * 1024, "the page weighs {size} bytes");
        // Relative: the page works behind a reverse proxy's path prefix too.
        for asset in ["src=\"web.js\"", "href=\"web.css\"", "href=\"favicon.svg\""] {
            assert!(HTML.contains(asset), "{asset}");
        }
        for text in [HTML, JS, CSS] {
            assert!(!text.contains("http://") && !text.contains("https://") && !text.contains("//cdn"));
        }
        // Inline script or style would need a hash the policy does not carry.
        assert!(!HTML.contains("<script>") && !HTML.contains("<style") && !HTML.contains(" style="));
    }

    /// Snapshot strings are a process's own words: they must reach the page
    /// as text, never as markup.
    #[test]
    fn the_script_never_writes_markup() {
        for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
            assert!(!JS.contains(sink), "web.js uses {sink}");
        }
        assert!(!JS.contains("localStorage."), "the token stays in the tab (sessionStorage)");
        assert!(JS.contains("sessionStorage") && JS.contains("\"Bearer \""));
    }

    #[test]
    fn the_policy_allows_only_self() {
        assert!(CSP.starts_with("default-src 'self';"));
        assert!(!CSP.contains("unsafe") && !CSP.contains('*') && !CSP.contains("data:"));
    }
}
