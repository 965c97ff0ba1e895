//! `gpuscope serve --web`: the page's routes and headers, the token rules
//! with the page on, and the page itself in a real headless Chromium
//! (`tests/web/test_page.py`, Selenium).

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Sim, Sleeper};
use serve_common::tls::{Pki, tls_get, write_private};
use serve_common::{Response, Server, get, get_with};

const TOKEN: &str = "web-t0ken-5b1c";
/// Would run script if the page wrote snapshot strings as markup.
const MARKUP: &str = "<img src=x onerror=\"window.pwned=1\"><b>bold</b>";
const PAGE: [(&str, &str); 5] = [
    ("/", "text/html; charset=utf-8"),
    ("/index.html", "text/html; charset=utf-8"),
    ("/web.js", "text/javascript; charset=utf-8"),
    ("/web.css", "text/css; charset=utf-8"),
    ("/favicon.svg", "image/svg+xml"),
];

fn demo(args: &[&str]) -> Server {
    Server::start(common::gpuscope(), &[&["--demo", "--listen", "127.0.0.1:0", "--interval", "100ms"], args].concat())
}

fn token_file(dir: &Path) -> String {
    let path = dir.join("token");
    write_private(&path, &format!("{TOKEN}\n"));
    path.to_str().unwrap().to_string()
}

fn assert_page_headers(r: &Response, path: &str, content_type: &str) {
    assert_eq!((r.status, r.header("content-type")), (200, Some(content_type)), "{path}");
    let csp = r.header("content-security-policy").unwrap_or_else(|| panic!("{path}: no CSP"));
    assert!(csp.starts_with("default-src 'self';") && !csp.contains("unsafe"), "{path}: {csp}");
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{path}");
    assert_eq!(r.header("referrer-policy"), Some("no-referrer"), "{path}");
}

#[test]
fn without_web_there_is_no_page() {
    let server = demo(&[]);
    for (path, _) in &PAGE[1..] {
        assert_eq!(server.get(path).status, 404, "{path}");
    }
    let index = server.get("/");
    assert_eq!((index.status, index.header("content-type")), (200, Some("text/plain; charset=utf-8")));
    assert!(index.body.contains("/snapshot") && !index.body.contains("<html"), "{}", index.body);
    assert!(!server.stderr().contains("web page"), "{}", server.stderr());
}

#[test]
fn with_web_the_page_and_its_files_carry_the_security_headers() {
    let server = demo(&["--web"]);
    let url = format!("http://{}/", server.addr);
    assert!(server.stderr().contains(&format!("the web page: {url})")), "{}", server.stderr());
    for (path, content_type) in PAGE {
        assert_page_headers(&server.get(path), path, content_type);
    }
    assert_eq!(server.get("/").body, server.get("/index.html").body);
    assert!(server.get("/").body.contains("<script src=\"web.js\" defer></script>"));
    let snapshot = server.until("/snapshot", "a snapshot", |r| r.status == 200);
    assert_eq!(snapshot.header("content-type"), Some("application/json"));
    assert_eq!(server.get("/web.js/x").status, 404);
}

/// The page holds no data: it is open; what it shows still needs the token.
#[test]
fn the_token_guards_the_data_not_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path());
    let server = demo(&["--web", "--token-file", &token]);
    for (path, content_type) in PAGE {
        assert_page_headers(&server.get(path), path, content_type);
    }
    let right = [("Authorization", format!("Bearer {TOKEN}"))];
    let right = [(right[0].0, right[0].1.as_str())];
    for path in ["/snapshot", "/metrics"] {
        // Each 401 says what was wrong; a wrong token is RFC 6750's invalid_token.
        let none = server.get(path);
        assert_eq!((none.status, none.header("www-authenticate")), (401, Some("Bearer realm=\"gpuscope\"")), "{path}");
        assert_eq!(none.body, "401: no Authorization header: send Authorization: Bearer <token>\n", "{path}");
        let basic = get_with(server.addr, path, &[("Authorization", "Basic d2ViOnQwa2Vu")]);
        assert_eq!((basic.status, basic.body.as_str()), (401, "401: the Authorization header is not Bearer <token>\n"));
        let wrong = get_with(server.addr, path, &[("Authorization", "Bearer nope")]);
        let invalid = "Bearer realm=\"gpuscope\", error=\"invalid_token\"";
        assert_eq!((wrong.status, wrong.header("www-authenticate")), (401, Some(invalid)), "{path}");
        assert_eq!(wrong.body, "401: the bearer token was not accepted\n", "{path}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while get_with(server.addr, "/snapshot", &right).status != 200 {
        assert!(Instant::now() < deadline, "no snapshot with the token: {}", server.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(server.addr, "/healthz", None).status, 200, "open, as without --web");

    // Without --web, `/` (the list of endpoints) needs the token as before.
    let plain = demo(&["--token-file", &token]);
    assert_eq!(plain.get("/").status, 401);
    assert_eq!(plain.get("/web.js").status, 401, "no page route: the token is asked first");
}

#[test]
fn over_tls_the_page_is_served_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), "localhost");
    let (cert, key) = (pki.cert.to_str().unwrap(), pki.key.to_str().unwrap());
    let server = demo(&["--web", "--tls-cert", cert, "--tls-key", key]);
    assert!(server.stderr().contains(&format!("the web page: https://{}/", server.addr)), "{}", server.stderr());
    for (path, content_type) in PAGE {
        assert_page_headers(&tls_get(server.addr, pki.client(), path, &[]).unwrap(), path, content_type);
    }
}

/// A program on PATH, or where `var` says.
fn find(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var) {
        return Some(PathBuf::from(path));
    }
    let dirs: Vec<PathBuf> = std::env::var_os("PATH").iter().flat_map(std::env::split_paths).collect();
    names.iter().flat_map(|n| dirs.iter().map(move |d| d.join(n))).find(|p| p.is_file())
}

/// The page in headless Chromium: the demo's GPUs and a process with no
/// console error, a figure updated within two intervals, a phone's width,
/// and the token asked once. Skipped, saying so, only where no Chromium is
/// installed; .ci/run installs it, its driver and Selenium.
#[test]
fn a_real_browser_shows_the_demo_live_and_asks_for_the_token() {
    let Some(chromium) = find("GPUSCOPE_TEST_CHROMIUM", &["chromium", "chromium-browser"]) else {
        eprintln!(
            "SKIPPED: no Chromium (apt-get install chromium chromium-driver; pip install selenium), \
             or set GPUSCOPE_TEST_CHROMIUM"
        );
        return;
    };
    let driver = find("GPUSCOPE_TEST_CHROMEDRIVER", &["chromedriver"])
        .expect("Chromium is here but chromedriver is not: apt-get install chromium-driver");
    // .ci/run's virtual environment, where it made one.
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/web-test-venv/bin/python");
    let python = std::env::var_os("GPUSCOPE_TEST_WEB_PYTHON")
        .map(PathBuf::from)
        .or_else(|| venv.is_file().then_some(venv))
        .unwrap_or_else(|| "python3".into());
    let has_selenium = Command::new(&python).args(["-c", "import selenium"]).output().unwrap();
    assert!(
        has_selenium.status.success(),
        "Chromium is here but {} has no Selenium: pip install selenium, or set GPUSCOPE_TEST_WEB_PYTHON",
        python.display()
    );

    // A GPU and a process that name themselves as markup.
    // The interpreter itself, not a wrapper (pyenv's) that NVML would list.
    let interpreter = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    let hostile = Sleeper(
        Command::new(String::from_utf8(interpreter.stdout).unwrap().trim())
            .args(["-c", "import time; time.sleep(120)", MARKUP])
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let name = MARKUP.replace('\\', "\\\\").replace('"', "\\\"");
    let sim = Sim::new(&format!(
        "[[gpu]]\nname = \"{name}\"\nuuid = \"GPU-3eb1\"\n[[gpu.process]]\npid = {}\nused_mib = 6000\nsm_util = 10\n",
        hostile.pid()
    ));
    let sim_command = sim.gpuscope();
    let env: serde_json::Map<String, serde_json::Value> = sim_command
        .get_envs()
        .map(|(k, v)| (k.to_str().unwrap().to_string(), serde_json::json!(v.map(|v| v.to_str().unwrap()))))
        .collect();
    let args: Vec<&str> = sim_command.get_args().map(|a| a.to_str().unwrap()).collect();
    let spec = serde_json::json!({ "args": args, "env": env, "pid": hostile.pid(), "markup": MARKUP });

    let gpuscope = common::gpuscope();
    let mut command = Command::new(&python);
    command
        .args(["-m", "unittest", "discover", "-s", "tests/web", "-t", "tests/web", "-v"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("GPUSCOPE_BIN", gpuscope.get_program())
        .env("GPUSCOPE_TEST_CHROMIUM", &chromium)
        .env("GPUSCOPE_TEST_CHROMEDRIVER", &driver)
        .env("GPUSCOPE_TEST_HOSTILE", spec.to_string())
        .stdin(Stdio::null());
    // The environment every other test gives gpuscope (no user config, no
    // real probes, no NVML library from the shell).
    for (name, value) in gpuscope.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    // Every wait in the suite is bounded (30 s), so it cannot hang.
    let out = command.output().unwrap();
    let (status, stdout, stderr) =
        (out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(status.success(), "tests/web failed ({status}):\n{stdout}\n{stderr}");
    // unittest reports on stderr: every test ran, none skipped.
    assert!(stderr.contains("Ran 5 tests") && stderr.lines().any(|l| l == "OK"), "{stderr}");
}
