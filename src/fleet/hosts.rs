//! Which nodes the fleet reads: `HOST[:PORT]` on the command line or one a
//! line in a hosts file. Input from people: every refusal says what and
//! where.

use std::fmt;
use std::net::IpAddr;

/// `gpuscope serve`'s default port.
pub const DEFAULT_PORT: u16 = 10983;

/// A hosts file larger than this is not a list of hosts.
const MAX_FILE: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    /// TLS, verified against `--ca` (see `tls.rs`).
    Https,
}

/// One node: what the user wrote, and where to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    pub scheme: Scheme,
    /// A name or an address, without the brackets of an IPv6 literal.
    pub host: String,
    pub port: u16,
}

impl HostSpec {
    /// `host:port` as the `Host` header and the screen show it.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl HostSpec {
    /// `localhost` or a loopback address: what is sent there stays on
    /// this machine. Any other name may resolve anywhere.
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost") || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// What `fleet` says on stderr, once a host, when `--token-file`'s token
/// would cross the network in clear text: as `serve` warns of the same
/// exposure from its side.
pub fn clear_text_token_warnings<'a>(hosts: impl IntoIterator<Item = &'a HostSpec>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    hosts
        .into_iter()
        .filter(|h| h.scheme == Scheme::Http && !h.is_loopback() && seen.insert(h.authority()))
        .map(|h| {
            format!(
                "{h} is not a loopback address and speaks plain HTTP: the token (--token-file) and the answers \
                 cross the network in clear text; use https://{} with --ca",
                h.authority()
            )
        })
        .collect()
}

impl fmt::Display for HostSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.scheme {
            Scheme::Http => f.write_str(&self.authority()),
            Scheme::Https => write!(f, "https://{}", self.authority()),
        }
    }
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT`, optionally behind `http://` or
/// `https://`.
pub fn parse(text: &str) -> Result<HostSpec, String> {
    let t = text.trim();
    let (scheme, rest) = match t.split_once("://") {
        Some(("http", rest)) => (Scheme::Http, rest),
        Some(("https", rest)) => (Scheme::Https, rest),
        Some((other, _)) => return Err(format!("{t:?}: unknown scheme {other:?} (http or https)")),
        None => (Scheme::Http, t),
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.chars().any(char::is_whitespace) {
        return Err(format!(
            "{t:?}: one host per line in a hosts file (on the command line, separate hosts with commas)"
        ));
    }
    if rest.contains('/') {
        return Err(format!("{t:?}: a path is not taken: HOST:PORT or https://HOST:PORT only"));
    }
    let (host, port) = split_port(rest).map_err(|why| format!("{t:?}: {why}"))?;
    if host.is_empty() {
        return Err(format!("{t:?}: no host name"));
    }
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    if !host.chars().all(ok) {
        return Err(format!("{t:?}: a host is a name or an address (letters, digits, '.', '-', '_')"));
    }
    Ok(HostSpec { scheme, host: host.to_string(), port })
}

fn split_port(s: &str) -> Result<(&str, u16), String> {
    let port = |p: &str| match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{p:?} is not a port (1 to 65535)")),
    };
    if let Some(v6) = s.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or("an IPv6 address needs its closing ']'")?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((addr, port(p)?)),
            None if after.is_empty() => Ok((addr, DEFAULT_PORT)),
            None => Err(format!("unexpected {after:?} after the address")),
        };
    }
    match s.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => Err("write an IPv6 address in brackets: [::1]:10983".into()),
        Some((h, p)) => Ok((h, port(p)?)),
        None => Ok((s, DEFAULT_PORT)),
    }
}

/// The list without the hosts named again (the same host and port, the
/// name's case aside, whatever the scheme), the first naming kept; and a
/// note for each one dropped. Answers are matched to hosts by name: a host
/// listed twice would wait for an answer that went to its twin.
pub fn dedup(list: Vec<HostSpec>) -> (Vec<HostSpec>, Vec<String>) {
    let (mut seen, mut noted) = (std::collections::HashSet::new(), std::collections::HashSet::new());
    let mut notes = Vec::new();
    let mut kept = Vec::with_capacity(list.len());
    for h in list {
        let key = (h.host.to_ascii_lowercase(), h.port);
        if !seen.contains(&key) {
            seen.insert(key);
            kept.push(h);
        } else if noted.insert(key) {
            notes.push(format!("{} is listed more than once: it is read once", h.authority()));
        }
    }
    (kept, notes)
}

/// A comma-separated list, as the command line takes it.
pub fn parse_list(items: &[String]) -> Result<Vec<HostSpec>, String> {
    items.iter().flat_map(|i| i.split(',')).filter(|s| !s.trim().is_empty()).map(parse).collect()
}

/// One host a line; `#` starts a comment; blank lines are skipped.
pub fn parse_file_text(name: &str, text: &str) -> Result<Vec<HostSpec>, String> {
    let mut hosts = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let entry = line.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        hosts.push(parse(entry).map_err(|why| format!("{name}, line {}: {why}", n + 1))?);
    }
    Ok(hosts)
}

pub fn read_file(path: &std::path::Path) -> Result<Vec<HostSpec>, String> {
    use std::io::Read;
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| format!("{name}: {e}"))?;
    let mut text = String::new();
    file.take(MAX_FILE + 1).read_to_string(&mut text).map_err(|e| format!("{name}: {e}"))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("{name}: larger than {MAX_FILE} bytes, not a hosts file"));
    }
    parse_file_text(&name, &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn forms() {
        let h = parse("node1").unwrap();
        assert_eq!((h.host.as_str(), h.port), ("node1", DEFAULT_PORT));
        assert_eq!(parse("10.0.0.2:9000").unwrap().port, 9000);
        assert_eq!(parse("http://node3:1234/").unwrap().to_string(), "node3:1234");
        assert_eq!(parse("[::1]:10983").unwrap().authority(), "[::1]:10983");
        assert_eq!(parse("[::1]").unwrap().port, DEFAULT_PORT);
        assert!(parse("node:0").unwrap_err().contains("not a port"));
        assert!(parse("::1:10983").unwrap_err().contains("brackets"));
        assert!(parse("ftp://x").unwrap_err().contains("scheme"));
        assert!(parse("a b").is_err());
        assert!(parse(":10983").unwrap_err().contains("no host"));
        let path = parse("http://node:18801/gpuscope").unwrap_err();
        assert!(path.contains("a path is not taken: HOST:PORT or https://HOST:PORT only"), "{path}");
        let tls = parse("https://node:9000").unwrap();
        assert_eq!((tls.scheme, tls.to_string().as_str()), (Scheme::Https, "https://node:9000"));
    }

    #[test]
    fn lists_and_files() {
        let list = parse_list(&["a,b:1".into(), "c".into()]).unwrap();
        assert_eq!(list.len(), 3);
        let text = "# the team's nodes\nnode1\n\n  node2:9000  # the big one\n";
        assert_eq!(parse_file_text("hosts", text).unwrap().len(), 2);
        let err = parse_file_text("hosts", "node1\nnode 2\n").unwrap_err();
        assert!(err.starts_with("hosts, line 2: "), "{err}");
        let two = parse_file_text("hosts", "node1:1 node2:2\n").unwrap_err();
        assert!(two.contains("one host per line"), "{two}");
    }

    /// The same host and port named twice (case, scheme or the default
    /// port aside) is read once, with one note.
    #[test]
    fn a_host_named_twice_is_read_once() {
        let list = parse_list(&["node1,NODE1:10983,https://node1,node2:9,node1:9".into()]).unwrap();
        let (kept, notes) = dedup(list);
        let kept: Vec<String> = kept.iter().map(ToString::to_string).collect();
        assert_eq!(kept, ["node1:10983", "node2:9", "node1:9"]);
        assert_eq!(notes, ["NODE1:10983 is listed more than once: it is read once"]);
    }

    #[test]
    fn the_token_in_clear_text_beyond_loopback_is_warned_of_once_a_host() {
        let list =
            parse_list(&["10.0.0.2,10.0.0.2:10983,node1:9000,127.0.0.1,[::1]:1,LocalHost,https://10.0.0.3".into()]);
        let warnings = clear_text_token_warnings(&list.unwrap());
        assert_eq!(warnings.len(), 2, "{warnings:#?}");
        assert_eq!(
            warnings[0],
            "10.0.0.2:10983 is not a loopback address and speaks plain HTTP: the token (--token-file) and the \
             answers cross the network in clear text; use https://10.0.0.2:10983 with --ca"
        );
        assert!(warnings[1].starts_with("node1:9000 is not a loopback address"), "{}", warnings[1]);
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse_file_text("f", &text);
            let _ = parse(&text);
        }
    }
}
