//! `gpuscope serve` made safe to expose: TLS with a CA made in the test, a
//! bearer token, `--no-processes`, and the files it refuses (each one
//! message naming the file and the problem, exit 2).

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::path::Path;

use common::{Sim, Sleeper, assert_valid};
use serve_common::tls::{Pki, tls_get, write_private};
use serve_common::{Server, get, get_with, promtool_check};

const TOKEN: &str = "gpu-scrape-7f3a9c";

fn scenario(pid: u32) -> String {
    format!("[[gpu]]\nuuid = \"GPU-5ea1\"\n[[gpu.process]]\npid = {pid}\nused_mib = 6000\n")
}

fn token_file(dir: &Path) -> String {
    let path = dir.join("token");
    write_private(&path, &format!("{TOKEN}\n"));
    path.to_str().unwrap().to_string()
}

fn bearer(token: &str) -> [(&'static str, String); 1] {
    [("Authorization", format!("Bearer {token}"))]
}

#[test]
fn over_tls_with_a_token_only_the_right_ca_and_token_get_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, other) = (Pki::new(dir.path(), "right"), Pki::new(dir.path(), "other"));
    let sleeper = Sleeper::spawn(&["120"]);
    let sim = Sim::new(&scenario(sleeper.pid()));
    let (cert, key, token) = (pki.cert.to_str().unwrap(), pki.key.to_str().unwrap(), token_file(dir.path()));
    let args = ["--listen", "127.0.0.1:0", "--interval", "100ms", "--tls-cert", cert, "--tls-key", key];
    let server = Server::start(sim.gpuscope(), &[&args[..], &["--token-file", &token]].concat());
    assert!(server.stderr().contains("serving https://"), "{}", server.stderr());
    let scrape = |headers: &[(&str, &str)]| tls_get(server.addr, pki.client(), "/metrics", headers).unwrap();

    let right = bearer(TOKEN);
    let right: Vec<(&str, &str)> = right.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let pid = format!("pid=\"{}\"", sleeper.pid());
    let ok = (0..300)
        .map(|_| scrape(&right))
        .find(|r| r.status == 200 && r.body.contains(&pid))
        .unwrap_or_else(|| panic!("no scrape with the process: {}", server.stderr()));
    promtool_check(&ok.body);
    assert!(ok.body.contains("command=\"sleep 120\""), "{}", ok.body);

    let missing = scrape(&[]);
    assert_eq!((missing.status, missing.header("www-authenticate")), (401, Some("Bearer realm=\"gpuscope\"")));
    let wrong = bearer("gpu-scrape-7f3a9d");
    assert_eq!(scrape(&[(wrong[0].0, &wrong[0].1)]).status, 401);
    assert_eq!(tls_get(server.addr, pki.client(), "/snapshot", &[]).unwrap().status, 401);
    let health = tls_get(server.addr, pki.client(), "/healthz", &[]).unwrap();
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"), "/healthz is open by default");

    let refused = tls_get(server.addr, other.client(), "/metrics", &right).unwrap_err().to_string();
    assert!(refused.contains("invalid peer certificate") && refused.contains("UnknownIssuer"), "{refused}");
    let mut plain = std::net::TcpStream::connect(server.addr).unwrap();
    plain.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    std::io::Write::write_all(&mut plain, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut plain, &mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("HTTP/1.1 200"), "plain HTTP on the TLS port");
    assert_eq!(scrape(&right).status, 200, "still serving");
}

#[test]
fn no_processes_with_a_protected_healthz_shows_pids_but_no_names() {
    let dir = tempfile::tempdir().unwrap();
    let sleeper = Sleeper::spawn(&["120"]);
    let sim = Sim::new(&scenario(sleeper.pid()));
    let token = token_file(dir.path());
    let args = ["--listen", "127.0.0.1:0", "--interval", "100ms", "--token-file", &token];
    let server = Server::start(sim.gpuscope(), &[&args[..], &["--token-healthz", "--no-processes"]].concat());
    let auth = bearer(TOKEN);
    let auth = [(auth[0].0, auth[0].1.as_str())];
    assert_eq!(get(server.addr, "/healthz", None).status, 401, "--token-healthz");
    let pid = format!("pid=\"{}\"", sleeper.pid());
    let metrics = (0..300)
        .map(|_| get_with(server.addr, "/metrics", &auth))
        .find(|r| r.status == 200 && r.body.contains(&pid))
        .unwrap_or_else(|| panic!("no scrape with the process: {}", server.stderr()));
    promtool_check(&metrics.body);
    for hidden in ["command=", "user=", "sleep"] {
        assert!(!metrics.body.contains(hidden), "{hidden} in:\n{}", metrics.body);
    }
    assert!(metrics.body.contains("gpuscope_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-5ea1\"}"));

    let snapshot = get_with(server.addr, "/snapshot", &auth);
    let v: serde_json::Value = serde_json::from_str(&snapshot.body).unwrap();
    assert_valid(&v);
    let process = v["processes"].as_array().unwrap().iter().find(|p| p["pid"] == sleeper.pid()).unwrap();
    for field in ["name", "user", "command", "parent_name", "workload"] {
        assert!(process[field].is_null(), "{field}: {process}");
    }
    assert_eq!(get_with(server.addr, "/healthz", &auth).status, 200);
}

/// Runs `serve ARGS` expecting it to refuse: exit 2 and one line that
/// names the flag, the file and says `problem`.
fn refused(args: &[&str], file: &Path, problem: &str) {
    let sim = Sim::new("[[gpu]]\n");
    let out = sim.gpuscope().arg("serve").args(["--listen", "127.0.0.1:0"]).args(args).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&file.display().to_string()) && stderr.contains(problem), "{args:?}: {stderr}");
}

#[test]
fn bad_certificate_key_and_token_files_are_named_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, other) = (Pki::new(dir.path(), "a"), Pki::new(dir.path(), "b"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let missing = dir.path().join("missing.pem");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let key_garbage = dir.path().join("garbage-key.pem");
    write_private(&key_garbage, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    let (cert, key) = (s(&pki.cert), s(&pki.key));

    refused(&["--tls-cert", &s(&missing), "--tls-key", &key], &missing, "--tls-cert");
    refused(&["--tls-cert", &s(&garbage), "--tls-key", &key], &garbage, "holds no PEM certificate");
    refused(&["--tls-cert", &cert, "--tls-key", &s(&missing)], &missing, "cannot open it");
    refused(&["--tls-cert", &cert, "--tls-key", &s(&key_garbage)], &key_garbage, "--tls-key");
    refused(&["--tls-cert", &cert, "--tls-key", &s(&other.key)], &other.key, "does not match the certificate");
    std::fs::set_permissions(&pki.key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    refused(&["--tls-cert", &cert, "--tls-key", &key], &pki.key, "mode 0644");

    let token = dir.path().join("token");
    refused(&["--token-file", &s(&token)], &token, "cannot open it");
    write_private(&token, " \n");
    refused(&["--token-file", &s(&token)], &token, "empty");
    std::fs::write(&token, "t0ken\n").unwrap();
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    refused(&["--token-file", &s(&token)], &token, "group or others may access it (mode 0640)");
    refused(&["--token-file", &s(dir.path())], dir.path(), "not a regular file");

    let sim = Sim::new("[[gpu]]\n");
    let half = sim.gpuscope().args(["serve", "--tls-cert", &cert]).output().unwrap();
    assert_eq!(half.status.code(), Some(2), "--tls-cert alone");
    assert!(String::from_utf8_lossy(&half.stderr).contains("--tls-key"));
}
