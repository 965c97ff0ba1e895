//! User names by uid, asked of the C library one uid at a time
//! (`getpwuid_r`), as `ps` and `top` do.
//!
//! Enumerating the user database instead (`setpwent`/`getpwent`, what
//! sysinfo's `Users` does) walks every account of a directory service on a
//! cluster node joined to LDAP or SSSD, and loads every NSS module the
//! system lists even where the local files hold the answer: 280 KiB of
//! `libnss_systemd` resident in the dashboard for names `/etc/passwd` had.

use std::collections::HashMap;
use std::ffi::CStr;
use std::time::{Duration, Instant};

/// A uid nobody has is asked about again after this long: accounts are
/// created while gpuscope runs, but not every tick.
const RETRY: Duration = Duration::from_secs(60);
/// Distinct uids remembered at most; past that the cache starts afresh.
const MAX_KNOWN: usize = 4096;
/// The largest buffer offered for one entry (groups of a directory service
/// can make entries long).
const MAX_BUF: usize = 1 << 20;

#[derive(Debug, Default)]
pub struct UserNames {
    known: HashMap<u32, String>,
    missing: HashMap<u32, Instant>,
}

impl UserNames {
    /// The name of `uid`, or `None` where the system has none for it.
    pub fn name(&mut self, uid: u32) -> Option<String> {
        if let Some(name) = self.known.get(&uid) {
            return Some(name.clone());
        }
        if self.missing.get(&uid).is_some_and(|at| at.elapsed() < RETRY) {
            return None;
        }
        if self.known.len() + self.missing.len() >= MAX_KNOWN {
            self.known.clear();
            self.missing.clear();
        }
        match lookup(uid) {
            Some(name) => {
                self.missing.remove(&uid);
                self.known.insert(uid, name.clone());
                Some(name)
            }
            None => {
                self.missing.insert(uid, Instant::now());
                None
            }
        }
    }
}

/// One `getpwuid_r`, with a larger buffer while the entry does not fit.
fn lookup(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: `passwd` is a struct of integers and pointers, for which
        // all zeroes is a valid value; getpwuid_r overwrites it.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is to a live local or to `buf`, whose length
        // is the one passed; getpwuid_r writes the entry's strings into
        // `buf` and sets `found` to `&entry` or to null.
        let rc = unsafe { libc::getpwuid_r(uid, &mut entry, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
        if rc == libc::ERANGE && buf.len() < MAX_BUF {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || found.is_null() || entry.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success `pw_name` points to a NUL-terminated string
        // inside `buf`, which lives until the end of this function.
        let name = unsafe { CStr::from_ptr(entry.pw_name) };
        return Some(name.to_string_lossy().into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_this_process_s_user_have_names() {
        let mut users = UserNames::default();
        assert_eq!(users.name(0).as_deref(), Some("root"));
        // SAFETY: getuid cannot fail and touches no memory of ours.
        let me = unsafe { libc::getuid() };
        assert!(users.name(me).is_some_and(|n| !n.is_empty()));
        assert_eq!(users.known.len(), 1 + usize::from(me != 0), "answers are kept");
    }

    #[test]
    fn a_uid_nobody_has_is_none_and_not_asked_again_at_once() {
        let mut users = UserNames::default();
        let nobody = 3_999_999_999;
        assert_eq!(users.name(nobody), None);
        let asked = users.missing[&nobody];
        assert_eq!(users.name(nobody), None);
        assert_eq!(users.missing[&nobody], asked, "not looked up again within the retry period");
        users.missing.insert(nobody, Instant::now() - RETRY - Duration::from_secs(1));
        assert_eq!(users.name(nobody), None);
        assert!(users.missing[&nobody] > asked, "looked up again after it");
    }
}
