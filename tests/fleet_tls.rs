//! `gpuscope fleet` over TLS: `https://` nodes (`gpuscope serve` with a
//! certificate from a CA made in the test, and a bearer token) read with
//! `--ca` and `--token-file`, and each way it can go wrong named in the
//! host's error: another CA, a certificate for another name, a plain HTTP
//! server behind an https:// URL, a wrong token.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::path::Path;

use common::{Sim, assert_success, gpuscope};
use serde_json::Value;
use serve_common::Server;
use serve_common::tls::{Pki, write_private};

const TOKEN: &str = "fleet-tls-5b1e";
const SCENARIO: &str = "[[gpu]]\nuuid = \"GPU-5ea1c0de-0000-4000-8000-00000000000f\"\nmemory_total_mib = 81559\n";

fn serve_tls(sim: &Sim, pki: &Pki, token: &Path) -> Server {
    let (cert, key, token) = (pki.cert.to_str().unwrap(), pki.key.to_str().unwrap(), token.to_str().unwrap());
    let args = ["--listen", "127.0.0.1:0", "--interval", "200ms", "--tls-cert", cert, "--tls-key", key];
    Server::start(sim.gpuscope(), &[&args[..], &["--token-file", token]].concat())
}

/// The one-shot's document; its exit status must be `status` (0 all
/// answering, 1 some not, 3 none).
fn fleet(hosts: &str, ca: &Path, token: &Path, status: i32) -> Value {
    let (ca, token) = (ca.to_str().unwrap(), token.to_str().unwrap());
    let out = gpuscope()
        .args(["fleet", hosts, "--json", "--timeout", "10s", "--ca", ca, "--token-file", token])
        .output()
        .unwrap();
    if status == 0 {
        assert_success(&out);
    }
    assert_eq!(out.status.code(), Some(status), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn error(v: &Value, i: usize) -> &str {
    v["hosts"][i]["error"].as_str().unwrap_or_else(|| panic!("host {i} has no error: {v:#}"))
}

#[test]
fn https_nodes_with_the_right_ca_and_token_answer_and_every_failure_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, other) = (Pki::new(dir.path(), "right"), Pki::new(dir.path(), "other"));
    let elsewhere = Pki::for_names(dir.path(), "elsewhere", &["node7.example"]);
    let (token, wrong_token) = (dir.path().join("token"), dir.path().join("wrong"));
    write_private(&token, &format!("{TOKEN}\n"));
    write_private(&wrong_token, "not-the-token\n");
    let sim = Sim::new(SCENARIO);
    let server = serve_tls(&sim, &pki, &token);
    let misnamed = serve_tls(&sim, &elsewhere, &token);
    let plain = Server::start(sim.gpuscope(), &["--listen", "127.0.0.1:0", "--interval", "200ms"]);
    let url = format!("https://localhost:{}", server.addr.port());
    let list = format!("{url},https://127.0.0.1:{},https://{}", misnamed.addr.port(), plain.addr);

    let v = fleet(&list, &pki.ca, &token, 1);
    assert_eq!(v["hosts"][0]["host"], url.as_str());
    assert_eq!((&v["hosts"][0]["status"], &v["hosts"][0]["error"]), (&"ok".into(), &Value::Null), "{v:#}");
    assert!(v["hosts"][0]["snapshot"]["gpus"].as_array().unwrap().len() == 1, "{v:#}");
    // `elsewhere`'s CA is not given: its node is refused before its name is looked at.
    assert!(error(&v, 1).contains("certificate not trusted: UnknownIssuer"), "{v:#}");
    assert!(error(&v, 2).contains("does not speak TLS") || error(&v, 2).contains("plain HTTP"), "{v:#}");

    let names = dir.path().join("both.pem");
    let bundle = [std::fs::read_to_string(&pki.ca).unwrap(), std::fs::read_to_string(&elsewhere.ca).unwrap()];
    std::fs::write(&names, bundle.concat()).unwrap();
    let v = fleet(&list, &names, &token, 1);
    assert_eq!(v["hosts"][0]["status"], "ok", "a bundle of two CAs: {v:#}");
    assert!(error(&v, 1).contains("certificate name mismatch"), "{v:#}");

    let v = fleet(&url, &other.ca, &token, 3);
    let e = error(&v, 0);
    assert!(e.starts_with("TLS: certificate not trusted: UnknownIssuer"), "{e}");
    let v = fleet(&url, &pki.ca, &wrong_token, 3);
    assert_eq!(error(&v, 0), "HTTP 401: the bearer token was not accepted", "{v:#}");
    let v = fleet(&url, &pki.ca, &token, 0);
    assert_eq!(v["hosts"][0]["status"], "ok", "{v:#}");

    // Plain http:// to a TLS node: hyper's "invalid HTTP version parsed" said plainly.
    let v = fleet(&server.addr.to_string(), &pki.ca, &token, 3);
    let e = error(&v, 0);
    assert_eq!(e, format!("the node answered with TLS: use https://{} (with --ca)", server.addr), "{v:#}");
}

#[test]
fn https_without_ca_and_a_bad_ca_file_are_usage_errors() {
    let out = gpuscope().args(["fleet", "https://node1:10983", "-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("https://node1:10983: https:// needs --ca PATH"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "garbage\n").unwrap();
    let out = gpuscope().args(["fleet", "https://node1", "--ca", ca.to_str().unwrap(), "-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("--ca {}: holds no PEM certificate", ca.display())), "{err}");
}
