//! `--token-file`: every request but `/healthz` (unless `--token-healthz`)
//! must carry `Authorization: Bearer <token>`, as Prometheus's
//! `authorization: { credentials_file: ... }` sends it.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::files::{self, FileError, Kind};
use super::web;

pub const HEALTHZ: &str = "/healthz";

/// The token: the file's content with surrounding white space trimmed,
/// as Prometheus trims its `credentials_file`.
pub struct Token(Box<[u8]>);

impl Token {
    pub fn load(path: &Path) -> Result<Self, FileError> {
        let bytes = files::read("--token-file", path, Kind::Secret)?;
        let token = bytes.trim_ascii();
        if token.is_empty() {
            return Err(FileError::new("--token-file", path, "empty: the token is the file's content, trimmed"));
        }
        // It travels in a header: anything but visible ASCII would not
        // arrive as written.
        if !token.iter().all(u8::is_ascii_graphic) {
            return Err(FileError::new("--token-file", path, "the token must be visible ASCII, without spaces"));
        }
        Ok(Self(token.into()))
    }

    /// Whether `headers` carry this token, and if not, what was wrong. The
    /// scheme is case-insensitive (RFC 9110); the token is compared in
    /// constant time.
    fn admits(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let value = headers.get(AUTHORIZATION).ok_or(Refusal::NoHeader)?.as_bytes();
        let (scheme, given) = value.split_first_chunk::<7>().ok_or(Refusal::NotBearer)?;
        let given = given.trim_ascii();
        if !scheme.eq_ignore_ascii_case(b"Bearer ") || given.is_empty() {
            return Err(Refusal::NotBearer);
        }
        if same(given, &self.0) { Ok(()) } else { Err(Refusal::WrongToken) }
    }
}

/// Why a request was refused: each says so in its own 401, so that a
/// client sending the wrong token does not think it sent none. None says
/// anything about the token itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    NoHeader,
    /// Another scheme (Basic) or `Bearer` without a token.
    NotBearer,
    WrongToken,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (challenge, body) = match self {
            Self::NoHeader => (CHALLENGE, "401: no Authorization header: send Authorization: Bearer <token>\n"),
            Self::NotBearer => (CHALLENGE, "401: the Authorization header is not Bearer <token>\n"),
            // RFC 6750 3.1: credentials were sent and are not good.
            Self::WrongToken => {
                ("Bearer realm=\"gpuscope\", error=\"invalid_token\"", "401: the bearer token was not accepted\n")
            }
        };
        let headers = [(WWW_AUTHENTICATE, challenge), (CONTENT_TYPE, "text/plain; charset=utf-8")];
        (StatusCode::UNAUTHORIZED, headers, body).into_response()
    }
}

/// RFC 6750 3.1: a request without Bearer credentials gets the challenge
/// without an error code.
const CHALLENGE: &str = "Bearer realm=\"gpuscope\"";

/// Equal bytes, in a time that depends on the lengths only: a wrong
/// guess must not tell how much of it was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Who may ask what.
#[derive(Clone)]
pub struct Access {
    pub token: Option<Arc<Token>>,
    /// `/healthz` asks for the token too (by default it does not, so that
    /// load balancers and orchestrators can probe without a secret).
    pub healthz_too: bool,
    /// `serve --web`: the page's files are open (they hold no data; the
    /// page sends the token for `/snapshot` like any client).
    pub web: bool,
}

impl Access {
    fn admits(&self, request: &Request) -> Result<(), Refusal> {
        let Some(token) = &self.token else { return Ok(()) };
        let path = request.uri().path();
        if (path == HEALTHZ && !self.healthz_too) || (self.web && web::PATHS.contains(&path)) {
            return Ok(());
        }
        token.admits(request.headers())
    }
}

/// The middleware in front of every route.
pub async fn check(State(access): State<Access>, request: Request, next: Next) -> Response {
    match access.admits(&request) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use axum::http::HeaderValue;

    use super::*;

    fn token_file(content: &str, mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, content).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    fn with(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn the_token_is_the_trimmed_content_and_only_it_admits() {
        let (_dir, path) = token_file("  s3cret-token\n", 0o600);
        let token = Token::load(&path).unwrap();
        assert_eq!(token.admits(&with("Bearer s3cret-token")), Ok(()));
        assert_eq!(token.admits(&with("bearer s3cret-token")), Ok(()), "the scheme is case-insensitive");
        assert_eq!(token.admits(&with("Bearer s3cret-toke")), Err(Refusal::WrongToken));
        assert_eq!(token.admits(&with("Bearer s3cret-tokeN")), Err(Refusal::WrongToken));
        assert_eq!(token.admits(&with("Basic s3cret-token")), Err(Refusal::NotBearer));
        assert_eq!(token.admits(&with("Bearer")), Err(Refusal::NotBearer));
        assert_eq!(token.admits(&with("Bearer   ")), Err(Refusal::NotBearer));
        assert_eq!(token.admits(&HeaderMap::new()), Err(Refusal::NoHeader));
    }

    async fn answer(refusal: Refusal) -> (StatusCode, String, String) {
        let response = refusal.into_response();
        let challenge = response.headers()[WWW_AUTHENTICATE].to_str().unwrap().to_string();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
        (status, challenge, String::from_utf8(body.to_vec()).unwrap())
    }

    /// A wrong token is told apart from none (RFC 6750's invalid_token),
    /// and no answer says anything of the token itself.
    #[tokio::test]
    async fn each_refusal_says_what_was_wrong() {
        let (status, challenge, body) = answer(Refusal::NoHeader).await;
        assert_eq!((status, challenge.as_str()), (StatusCode::UNAUTHORIZED, "Bearer realm=\"gpuscope\""));
        assert_eq!(body, "401: no Authorization header: send Authorization: Bearer <token>\n");
        let (status, challenge, body) = answer(Refusal::NotBearer).await;
        assert_eq!((status, challenge.as_str()), (StatusCode::UNAUTHORIZED, "Bearer realm=\"gpuscope\""));
        assert_eq!(body, "401: the Authorization header is not Bearer <token>\n");
        let (status, challenge, body) = answer(Refusal::WrongToken).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(challenge, "Bearer realm=\"gpuscope\", error=\"invalid_token\"");
        assert_eq!(body, "401: the bearer token was not accepted\n");
    }

    #[test]
    fn empty_spaced_and_shared_tokens_are_refused() {
        let (_d, empty) = token_file(" \n", 0o600);
        assert!(Token::load(&empty).err().unwrap().to_string().contains("empty"));
        let (_d, spaced) = token_file("two words", 0o600);
        assert!(Token::load(&spaced).err().unwrap().to_string().contains("without spaces"));
        let (_d, shared) = token_file("t", 0o640);
        assert!(Token::load(&shared).err().unwrap().to_string().contains("mode 0640"));
    }

    #[test]
    fn same_compares_every_byte() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd") && !same(b"abc", b"ab") && !same(b"", b"a"));
    }
}
