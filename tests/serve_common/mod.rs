//! `gpuscope serve` under test: the real binary on a private simulated
//! NVML, found by the address it prints, scraped with a plain TCP client.
#![allow(dead_code)]

pub mod prometheus;
pub mod tls;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `cmd serve ARGS` (`cmd` is `Sim::gpuscope()`) and waits for
    /// the line that says where it listens.
    pub fn start(mut cmd: Command, args: &[&str]) -> Self {
        let mut child = cmd.arg("serve").args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let (lines, log) = (BufReader::new(child.stderr.take().unwrap()).lines(), stderr.clone());
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                // Logged first: a test reading stderr once started must find this line.
                log.lock().unwrap().push_str(&format!("{line}\n"));
                let served = line.split_once("serving http").map(|(_, rest)| rest.trim_start_matches('s'));
                if let Some(addr) = served.and_then(|r| r.strip_prefix("://")).and_then(|a| a.split('/').next()) {
                    let _ = tx.send(addr.parse::<SocketAddr>().unwrap());
                }
            }
        });
        let Ok(mut addr) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!("gpuscope serve never said where it listens: {}", stderr.lock().unwrap());
        };
        if addr.ip().is_unspecified() {
            addr.set_ip([127, 0, 0, 1].into());
        }
        Self { child, addr, stderr }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn get(&self, path: &str) -> Response {
        get(self.addr, path, None)
    }

    /// Polls `path` until `done` holds (at most 30 s); returns that response.
    pub fn until(&self, path: &str, what: &str, done: impl Fn(&Response) -> bool) -> Response {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.get(path);
            if done(&r) {
                return r;
            }
            assert!(Instant::now() < deadline, "never saw {what}; last: {} {}", r.status, r.body);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends `sig` and waits (at most 10 s) for the exit.
    pub fn stop_with(mut self, sig: i32) -> ExitStatus {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "still running 10 s after signal {sig}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 GET over a fresh connection, read to its end.
pub fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> Response {
    let accept: Vec<(&str, &str)> = accept.map(|a| ("Accept", a)).into_iter().collect();
    get_with(addr, path, &accept)
}

/// [`get`] with any headers.
pub fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(request(addr, path, headers).as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse(&raw)
}

/// A GET that asks the server to close the connection after answering.
pub fn request(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> String {
    let headers: String = headers.iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{headers}\r\n")
}

/// A whole response, as read to the connection's end.
pub fn parse(raw: &[u8]) -> Response {
    let text = String::from_utf8(raw.to_vec()).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no header end: {text:?}"));
    let mut lines = head.lines();
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_string(), v.trim().to_string())).collect();
    let mut response = Response { status, headers, body: body.to_string() };
    if response.header("transfer-encoding") == Some("chunked") {
        response.body = dechunk(&response.body);
    } else {
        let length = response.header("content-length").map(|l| l.parse::<usize>().unwrap());
        assert_eq!(length, Some(response.body.len()), "a full body with its length: {response:?}");
    }
    response
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return body;
        }
        body.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
}

/// A tool the test needs from Debian's `prometheus` package.
pub fn require(tool: &str) -> std::path::PathBuf {
    let found =
        std::env::var_os("PATH").iter().flat_map(std::env::split_paths).map(|dir| dir.join(tool)).find(|p| p.is_file());
    found.unwrap_or_else(|| {
        panic!("{tool} is not installed: .ci/run installs it (Debian package `prometheus`): apt-get install prometheus")
    })
}

/// `promtool check metrics` on an exposition: it must pass and say nothing
/// (a lint is as bad as an error).
#[allow(dead_code)]
pub fn promtool_check(body: &str) {
    let mut check = Command::new(require("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "promtool check metrics: {said}\n{body}");
}

/// The value of the sample whose line starts with `prefix` (name and labels).
pub fn sample(metrics: &str, prefix: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(prefix)?.strip_prefix(' ')?.parse().ok())
}
