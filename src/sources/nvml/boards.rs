//! What a board fixes and a driver is slow to say: its maximum clocks.
//! Each is about 1.4 ms of the driver's CPU (nvmlDeviceGetMaxClockInfo on
//! an H100, driver 580.159.04: tests/gpu/nvml_costs.py), four a GPU: on an
//! 8-GPU node 45 ms, more than every other call of a one-shot together.
//! So they are asked only by outputs that show them (`wanted.rs`), and
//! kept, for the rest of the boot, in `boards` in gpuscope's own directory
//! (`$XDG_RUNTIME_DIR/gpuscope`, else `/tmp/gpuscope-UID`), and a one-shot
//! after the first asks the driver only what moves.
//!
//! An entry counts only while nothing that could change the answer has
//! changed: the same boot (`/proc/sys/kernel/random/boot_id`), the same
//! NVML library file (device, inode, size, modification time), the same
//! driver version, and per board its UUID and VBIOS version (firmware is
//! flashed with the driver unloaded, which nothing else here would see).
//! A file that is not gpuscope's is never replaced; one that does not
//! parse, or is of another key, holds nothing, and the clocks are asked
//! of the driver as before.

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;

use crate::model::MaxClocks;
use crate::util::dirfd::DirFd;
use crate::util::own_files::{self, Payload};

const FILE: &str = "boards";
/// The first line of every such file gpuscope writes.
const MARKER: &str = "gpuscope boards 1";
/// More GPUs than any node has; older entries of the same key go first.
const MAX_ENTRIES: usize = 64;
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// The boot's kept board facts, and where they live.
pub struct Boards {
    dir: DirFd,
    key: String,
    entries: Vec<Entry>,
    changed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    uuid: String,
    vbios: String,
    clocks: MaxClocks,
}

impl Boards {
    /// The facts kept for this boot, library and driver; `None` where they
    /// cannot be told apart from another's (no boot id, a library not
    /// found on disk, a driver version that does not read) or gpuscope
    /// has no directory of its own.
    pub fn open(library: &std::path::Path, driver_version: Option<&str>) -> Option<Self> {
        let boot = std::fs::read_to_string(BOOT_ID).ok()?;
        let lib = std::fs::metadata(library).ok()?;
        let key = key(boot.trim(), &lib, driver_version?)?;
        let dir = own_files::own_dir()?;
        let entries = match own_files::existing(&dir, OsStr::new(FILE)) {
            Ok(Some(text)) => parse(&text, &key),
            Ok(None) | Err(_) => Vec::new(),
        };
        Some(Self { dir, key, entries, changed: false })
    }

    /// The clocks kept for this board with this firmware.
    pub fn get(&self, uuid: &str, vbios: &str) -> Option<MaxClocks> {
        self.entries.iter().find(|e| e.uuid == uuid && e.vbios == vbios).map(|e| e.clocks.clone())
    }

    /// Keeps what the driver said of a board, for the next `save`.
    pub fn put(&mut self, uuid: &str, vbios: &str, clocks: MaxClocks) {
        let Some(entry) = Entry::new(uuid, vbios, clocks) else { return };
        if self.entries.contains(&entry) {
            return;
        }
        self.entries.retain(|e| e.uuid != entry.uuid);
        self.entries.push(entry);
        let over = self.entries.len().saturating_sub(MAX_ENTRIES);
        self.entries.drain(..over);
        self.changed = true;
    }

    /// Writes what `put` added: aside and renamed over, so a reader never
    /// sees half a file, and only over a file gpuscope wrote. A failure
    /// (a full disk, a file of someone else's) costs the next run the
    /// driver's time, nothing more.
    pub fn save(&mut self) {
        if !self.changed {
            return;
        }
        self.changed = false;
        let text = render(&self.key, &self.entries);
        let payload = Payload { name: FILE, text: &text, marker: MARKER, mode: 0o600 };
        let _ = own_files::write_ours(&self.dir, &payload);
    }
}

impl Entry {
    /// `None` where a field could not be written on one line of tokens.
    fn new(uuid: &str, vbios: &str, clocks: MaxClocks) -> Option<Self> {
        (token(uuid) && token(vbios)).then(|| Self { uuid: uuid.to_owned(), vbios: vbios.to_owned(), clocks })
    }
}

/// One non-empty word of printable ASCII, as UUIDs, VBIOS and driver
/// versions are; anything else is not kept rather than escaped.
fn token(s: &str) -> bool {
    !s.is_empty() && s.len() <= 96 && s.bytes().all(|b| b.is_ascii_graphic())
}

fn key(boot: &str, lib: &std::fs::Metadata, driver: &str) -> Option<String> {
    let lib = format!("{}:{}:{}:{}.{:09}", lib.dev(), lib.ino(), lib.size(), lib.mtime(), lib.mtime_nsec());
    (token(boot) && token(driver)).then(|| format!("key {boot} {lib} {driver}"))
}

fn render(key: &str, entries: &[Entry]) -> String {
    let mhz = |v: Option<u32>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let mut text = format!("{MARKER}\n{key}\n");
    for e in entries {
        let c = &e.clocks;
        let line =
            [e.uuid.clone(), e.vbios.clone(), mhz(c.sm_mhz), mhz(c.memory_mhz), mhz(c.graphics_mhz), mhz(c.video_mhz)];
        text.push_str(&line.join(" "));
        text.push('\n');
    }
    text
}

/// The entries of a file written for `key`; none for another key, and a
/// line that does not read is skipped.
fn parse(text: &str, key: &str) -> Vec<Entry> {
    let mut lines = text.lines();
    if lines.next() != Some(MARKER) || lines.next() != Some(key) {
        return Vec::new();
    }
    lines.filter_map(entry).take(MAX_ENTRIES).collect()
}

fn entry(line: &str) -> Option<Entry> {
    let words: Vec<&str> = line.split(' ').collect();
    let [uuid, vbios, sm, memory, graphics, video] = words.as_slice() else { return None };
    let mhz = |w: &str| -> Option<Option<u32>> {
        match w {
            "-" => Some(None),
            _ if w.bytes().all(|b| b.is_ascii_digit()) => w.parse().ok().map(Some),
            _ => None,
        }
    };
    let clocks =
        MaxClocks { sm_mhz: mhz(sm)?, memory_mhz: mhz(memory)?, graphics_mhz: mhz(graphics)?, video_mhz: mhz(video)? };
    Entry::new(uuid, vbios, clocks)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const KEY: &str = "key 5f1c 66306:1234:2048:1700000000.000000001 580.159.04";

    fn clocks(sm: u32) -> MaxClocks {
        MaxClocks { sm_mhz: Some(sm), memory_mhz: Some(2619), graphics_mhz: None, video_mhz: Some(1755) }
    }

    #[test]
    fn entries_come_back_as_written_for_the_same_key_only() {
        let entries = vec![
            Entry::new("GPU-a", "96.00.74.00.01", clocks(1980)).unwrap(),
            Entry::new("GPU-b", "96.00.74.00.01", MaxClocks::default()).unwrap(),
        ];
        let text = render(KEY, &entries);
        assert_eq!(parse(&text, KEY), entries);
        assert!(parse(&text, "key other 1:2:3:4.000000000 580.159.04").is_empty());
        assert!(parse(&text.replacen(MARKER, "gpuscope boards 2", 1), KEY).is_empty());
    }

    #[test]
    fn a_line_that_does_not_read_is_skipped_and_the_rest_kept() {
        let text = format!(
            "{MARKER}\n{KEY}\nGPU-a 96 1980 2619 - 1755\nGPU-b 96 +1 2 3 4\nGPU-c 96 1 2 3\nGPU-d 96 99999999999 1 2 3\n\
             GPU-e 96 1 2 3 4 5\nGPU-f 96 1 2 3 4\n"
        );
        let uuids: Vec<String> = parse(&text, KEY).into_iter().map(|e| e.uuid).collect();
        assert_eq!(uuids, ["GPU-a", "GPU-f"]);
    }

    #[test]
    fn what_cannot_be_one_word_is_not_kept() {
        assert!(Entry::new("GPU a", "96", clocks(1)).is_none());
        assert!(Entry::new("GPU-a", "", clocks(1)).is_none());
        assert!(Entry::new("GPU-a", "96\n", clocks(1)).is_none());
        let meta = std::fs::metadata("/").unwrap();
        assert!(key("boot id", &meta, "580").is_none());
        assert!(key("b", &meta, "").is_none());
        assert!(key("b", &meta, "580.159.04").is_some_and(|k| k.starts_with("key b ") && k.ends_with(" 580.159.04")));
    }

    fn boards_in(dir: &std::path::Path) -> Boards {
        Boards { dir: DirFd::open(dir).unwrap(), key: KEY.into(), entries: Vec::new(), changed: false }
    }

    #[test]
    fn the_newest_entries_are_kept_and_written_only_over_gpuscopes_file() {
        let tmp = tempfile::tempdir().unwrap();
        let mut boards = boards_in(tmp.path());
        for i in 0..70 {
            boards.put(&format!("GPU-{i}"), "96", clocks(i));
        }
        assert_eq!(boards.entries.len(), MAX_ENTRIES);
        assert_eq!(boards.get("GPU-5", "96"), None, "the oldest went first");
        assert_eq!(boards.get("GPU-69", "96"), Some(clocks(69)));
        assert_eq!(boards.get("GPU-69", "97"), None, "other firmware, other clocks");
        boards.save();
        let text = std::fs::read_to_string(tmp.path().join(FILE)).unwrap();
        assert_eq!(parse(&text, KEY).len(), MAX_ENTRIES);

        // The same again changes nothing and writes nothing.
        boards.put("GPU-69", "96", clocks(69));
        assert!(!boards.changed);

        std::fs::write(tmp.path().join(FILE), "someone's notes\n").unwrap();
        let mut boards = boards_in(tmp.path());
        boards.put("GPU-a", "96", clocks(1));
        boards.save();
        assert_eq!(std::fs::read_to_string(tmp.path().join(FILE)).unwrap(), "someone's notes\n");
    }

    proptest! {
        #[test]
        fn any_text_parses_without_panic_into_at_most_the_cap(text in "(?s).{0,2000}") {
            prop_assert!(parse(&text, KEY).len() <= MAX_ENTRIES);
            let framed = format!("{MARKER}\n{KEY}\n{text}");
            for e in parse(&framed, KEY) {
                prop_assert!(token(&e.uuid) && token(&e.vbios));
            }
        }

        #[test]
        fn what_is_rendered_parses_back(
            rows in proptest::collection::vec(("[!-~]{1,40}", "[!-~]{1,20}", proptest::option::of(0u32..), proptest::option::of(0u32..)), 0..10)
        ) {
            let entries: Vec<Entry> = rows
                .into_iter()
                .filter_map(|(u, v, sm, mem)| Entry::new(&u, &v, MaxClocks { sm_mhz: sm, memory_mhz: mem, graphics_mhz: sm, video_mhz: None }))
                .collect();
            prop_assert_eq!(parse(&render(KEY, &entries), KEY), entries);
        }
    }
}
