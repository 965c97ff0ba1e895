//! `gpuscope serve` against clients that connect and say nothing (or
//! too much): scrapes still answer, idle connections are closed after the
//! header timeout, and a flood of them never exhausts the file descriptors.
//! The same over TLS: handshakes that never start or never finish hold no
//! slot for good. Loopback only, with a bounded number of connections.

// Test code states its expectations with unwrap/expect ([lints] in Cargo.toml).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod serve_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::Sim;
use serve_common::tls::{Pki, tls_get};
use serve_common::{Server, get};

const SCENARIO: &str = "[[gpu]]\nname = \"Idle\"\n";

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// 300 silent connections against a cap of 50: every scrape still
/// answers, within a deadline, and gpuscope holds about the cap.
#[test]
fn idle_connections_cannot_starve_a_scrape() {
    let sim = Sim::new(SCENARIO);
    let args = ["--listen", "127.0.0.1:0", "--interval", "200ms", "--max-connections", "50", "--header-timeout", "30s"];
    let server = Server::start(sim.gpuscope(), &args);
    server.until("/metrics", "a first snapshot", |r| r.status == 200);
    let idle: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(server.addr).unwrap()).collect();
    for _ in 0..5 {
        let t = Instant::now();
        let r = get(server.addr, "/metrics", None);
        assert_eq!(r.status, 200);
        assert!(r.body.contains("gpuscope_build_info"));
        assert!(t.elapsed() < Duration::from_secs(5), "a scrape took {:?}", t.elapsed());
    }
    let fds = open_fds(server.child.id());
    assert!(fds < 50 + 40, "{fds} descriptors open: the cap did not hold");
    // The oldest idle connections were the ones closed.
    let closed = idle.iter().take(100).filter(|s| is_closed(s)).count();
    assert!(closed >= 90, "only {closed} of the 100 oldest were closed");
    drop(idle);
}

/// Whether the server has closed `s` (a read sees the end, or a reset).
fn is_closed(s: &TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    match (&*s).read(&mut [0u8; 1]) {
        Ok(n) => n == 0,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

/// A connection that never finishes its headers is closed after the
/// header timeout; one that sends too many is refused.
#[test]
fn slow_and_oversized_headers_are_cut_off() {
    let sim = Sim::new(SCENARIO);
    let args = ["--listen", "127.0.0.1:0", "--interval", "200ms", "--header-timeout", "500ms"];
    let server = Server::start(sim.gpuscope(), &args);
    server.until("/metrics", "a first snapshot", |r| r.status == 200);

    let mut silent = TcpStream::connect(server.addr).unwrap();
    let mut slow = TcpStream::connect(server.addr).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").unwrap();
    let t = Instant::now();
    for s in [&mut silent, &mut slow] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(!String::from_utf8_lossy(&rest).contains("200 OK"), "{}", String::from_utf8_lossy(&rest));
    }
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(5), "closed after {waited:?}");

    let mut big = TcpStream::connect(server.addr).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let header = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n", "a".repeat(64 * 1024));
    let _ = big.write_all(header.as_bytes());
    let mut answer = Vec::new();
    let _ = big.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert_eq!(get(server.addr, "/healthz", None).status, 200, "still serving");
}

/// The start of a TLS record that announces a 512-byte ClientHello and
/// never sends it.
const HALF_HELLO: [u8; 5] = [0x16, 0x03, 0x01, 0x02, 0x00];

fn tls_server(dir: &std::path::Path, sim: &Sim, limits: &[&str]) -> (Server, Pki) {
    let pki = Pki::new(dir, "idle");
    let (cert, key) = (pki.cert.to_str().unwrap(), pki.key.to_str().unwrap());
    let args = ["--listen", "127.0.0.1:0", "--interval", "200ms", "--tls-cert", cert, "--tls-key", key];
    (Server::start(sim.gpuscope(), &[&args[..], limits].concat()), pki)
}

/// 300 connections that never finish a handshake (silent, or half a
/// ClientHello) against a cap of 50: a TLS scrape still answers, and the
/// oldest handshakes were the ones closed.
#[test]
fn half_open_tls_handshakes_cannot_starve_a_scrape() {
    let (dir, sim) = (tempfile::tempdir().unwrap(), Sim::new(SCENARIO));
    let (server, pki) = tls_server(dir.path(), &sim, &["--max-connections", "50", "--header-timeout", "30s"]);
    let ok = (0..300).map(|_| tls_get(server.addr, pki.client(), "/healthz", &[]).unwrap()).find(|r| r.status == 200);
    assert!(ok.is_some(), "no snapshot: {}", server.stderr());
    let stalled: Vec<TcpStream> = (0..300)
        .map(|i| {
            let mut s = TcpStream::connect(server.addr).unwrap();
            if i % 2 == 0 {
                s.write_all(&HALF_HELLO).unwrap();
            }
            s
        })
        .collect();
    for _ in 0..5 {
        let r = tls_get(server.addr, pki.client(), "/metrics", &[]).unwrap();
        assert_eq!(r.status, 200);
        assert!(r.body.contains("gpuscope_build_info"));
    }
    let fds = open_fds(server.child.id());
    assert!(fds < 50 + 40, "{fds} descriptors open: the cap did not hold");
    let closed = stalled.iter().take(100).filter(|s| is_closed(s)).count();
    assert!(closed >= 90, "only {closed} of the 100 oldest were closed");
}

/// Below the cap, a handshake that never finishes is closed at the header
/// deadline all the same.
#[test]
fn a_stalled_tls_handshake_is_closed_at_the_header_deadline() {
    let (dir, sim) = (tempfile::tempdir().unwrap(), Sim::new(SCENARIO));
    let (server, pki) = tls_server(dir.path(), &sim, &["--header-timeout", "500ms"]);
    let mut silent = TcpStream::connect(server.addr).unwrap();
    let mut half = TcpStream::connect(server.addr).unwrap();
    half.write_all(&HALF_HELLO).unwrap();
    for s in [&mut silent, &mut half] {
        // Far beyond the deadline: a stalled handshake must end, not linger.
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut rest = Vec::new();
        let read = s.read_to_end(&mut rest);
        assert!(
            read.is_ok()
                || !matches!(read.unwrap_err().kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            "still open"
        );
    }
    let r = tls_get(server.addr, pki.client(), "/healthz", &[]).unwrap();
    assert!(r.status == 200 || r.status == 503, "still serving: {r:?}");
}
