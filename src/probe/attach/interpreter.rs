//! The target's interpreter as the very file the kernel runs for it: its
//! Python version read from that file, and, when root attaches, whether
//! the file and the directories above it are closed to everyone but root.
//!
//! Names are never trusted. `/proc/PID/exe` names a path that the
//! process's owner may have deleted and replaced (`x (deleted)` can be a
//! link they flip), and a library mapped into the process can be named
//! like `libpython3.14.so.1.0` whatever it holds. The file is opened once;
//! its version comes from its own bytes and it is run through that same
//! descriptor.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use object::elf::{DT_NEEDED, FileHeader32, FileHeader64, SHT_NOBITS};
use object::read::elf::{FileHeader, SectionHeader};
use object::read::{ReadCache, ReadRef};
use object::{Endian, Endianness, FileKind};

/// CPython 3.13+ keeps `_PyRuntime` in a section of its own, `.PyRuntime`,
/// and the structure opens with `_Py_DebugOffsets`: the 8-byte cookie
/// `xdebugpy`, then `PY_VERSION_HEX` as a `uint64_t`
/// (`Include/internal/pycore_debug_offsets.h`, `GENERATE_DEBUG_SECTION`
/// in `Python/pylifecycle.c`). It is how `sys.remote_exec` itself finds a
/// target, so a 3.14 interpreter always has it.
const RUNTIME_SECTION: &[u8] = b".PyRuntime";
const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";

/// The Python version the interpreter's own file declares: the debug
/// cookie's `PY_VERSION_HEX` where the runtime is linked in, else the
/// `libpython3.X` the file itself needs (a `python3` built with
/// `--enable-shared`, whose runtime the loader finds by that name). `None`
/// for anything else, a script or a file that is not ELF included.
pub fn version_of(file: &File) -> Option<(u32, u32)> {
    let cache = ReadCache::new(file);
    match FileKind::parse(&cache).ok()? {
        FileKind::Elf64 => version_in::<FileHeader64<Endianness>>(&cache),
        FileKind::Elf32 => version_in::<FileHeader32<Endianness>>(&cache),
        _ => None,
    }
}

fn version_in<Elf: FileHeader<Endian = Endianness>>(data: &ReadCache<&File>) -> Option<(u32, u32)> {
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let sections = header.sections(endian, data).ok()?;
    if let Some((_, section)) = sections.section_by_name(endian, RUNTIME_SECTION)
        && section.sh_type(endian) != SHT_NOBITS
    {
        let offset: u64 = section.sh_offset(endian).into();
        let head = data.read_bytes_at(offset, 16).ok()?;
        let (cookie, version) = head.split_at(8);
        if cookie == DEBUG_COOKIE {
            let raw: [u8; 8] = version.try_into().ok()?;
            let hex = if endian.is_little_endian() { u64::from_le_bytes(raw) } else { u64::from_be_bytes(raw) };
            // PY_VERSION_HEX: 0xMMmmppRS.
            return Some((((hex >> 24) & 0xff) as u32, ((hex >> 16) & 0xff) as u32));
        }
    }
    let table = sections.dynamic_table(endian, data).ok()?;
    table.iter().filter(|d| d.tag == DT_NEEDED).find_map(|d| {
        let name = std::str::from_utf8(table.string(d).ok()?).ok()?;
        libpython_version(name)
    })
}

/// `libpython3.14.so.1.0` (or `libpython3.13t.so`) → (3, 14).
pub fn libpython_version(file_name: &str) -> Option<(u32, u32)> {
    parse_version(file_name.strip_prefix("libpython")?.split(".so").next()?)
}

/// `3.14`, `3.13t`, `3.12d` → the major and minor numbers.
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let text = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let (major, minor) = text.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// What root needs to know of one file or directory on the way to the
/// interpreter, without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub dev: u64,
    pub ino: u64,
    pub uid: u32,
    pub mode: u32,
}

impl Node {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self { dev: meta.dev(), ino: meta.ino(), uid: meta.uid(), mode: meta.mode() }
    }

    fn kind(self) -> u32 {
        self.mode & libc::S_IFMT
    }

    /// Owned by root and writable by nobody else.
    fn closed(self) -> bool {
        self.uid == 0 && self.mode & 0o022 == 0
    }
}

/// Reads a path's node without following a link.
pub fn lstat(path: &Path) -> std::io::Result<Node> {
    std::fs::symlink_metadata(path).map(|m| Node::of(&m))
}

/// For root: the held interpreter file must be root's and closed to
/// others, and the path `/proc` names it by must lead to that very file
/// through directories only root can change. Python finds its standard
/// library from the path it is started as, so a root-owned interpreter
/// in a directory the user controls would still run the user's `os.py`.
/// Returns the path to start it as (its `argv[0]`), or why not.
pub fn trusted_path(
    shown: &Path,
    held: Node,
    lstat: impl Fn(&Path) -> std::io::Result<Node>,
) -> Result<PathBuf, String> {
    if held.kind() != libc::S_IFREG || !held.closed() {
        return Err("the file the process runs is not owned by root, or others can write to it".into());
    }
    let text = shown.to_string_lossy();
    if text.ends_with(" (deleted)") {
        return Err("the file the process started from has been deleted or replaced".into());
    }
    if !shown.is_absolute() {
        return Err("the process's executable has no absolute path".into());
    }
    let named = lstat(shown).map_err(|e| format!("{text}: {e}"))?;
    if (named.dev, named.ino) != (held.dev, held.ino) {
        return Err(format!("{text} is no longer the file the process runs"));
    }
    for dir in shown.ancestors().skip(1) {
        let node = lstat(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if node.kind() != libc::S_IFDIR || !node.closed() {
            return Err(format!("{} is not a directory only root can change", dir.display()));
        }
    }
    Ok(shown.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const FILE: u32 = libc::S_IFREG;
    const DIR: u32 = libc::S_IFDIR;

    fn node(ino: u64, uid: u32, mode: u32) -> Node {
        Node { dev: 1, ino, uid, mode }
    }

    fn tree(entries: &[(&str, Node)]) -> impl Fn(&Path) -> std::io::Result<Node> + use<> {
        let map: HashMap<PathBuf, Node> = entries.iter().map(|(p, n)| (PathBuf::from(p), *n)).collect();
        move |p: &Path| map.get(p).copied().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }

    fn system() -> Vec<(&'static str, Node)> {
        vec![
            ("/", node(2, 0, DIR | 0o755)),
            ("/usr", node(3, 0, DIR | 0o755)),
            ("/usr/bin", node(4, 0, DIR | 0o755)),
            ("/usr/bin/python3.14", node(5, 0, FILE | 0o755)),
            ("/tmp", node(6, 0, DIR | 0o1777)),
            ("/home/u", node(7, 1000, DIR | 0o755)),
            ("/home", node(8, 0, DIR | 0o755)),
            ("/home/u/x (deleted)", node(5, 0, FILE | 0o755)),
            ("/opt", node(9, 0, DIR | 0o775)),
            ("/opt/python3.14", node(10, 0, FILE | 0o755)),
        ]
    }

    #[test]
    fn root_runs_a_root_owned_interpreter_in_root_owned_directories() {
        let held = node(5, 0, FILE | 0o755);
        let path = trusted_path(Path::new("/usr/bin/python3.14"), held, tree(&system())).unwrap();
        assert_eq!(path, Path::new("/usr/bin/python3.14"));
    }

    #[test]
    fn a_file_the_user_owns_or_can_write_is_refused_whatever_its_name() {
        let t = tree(&system());
        for held in [node(5, 1000, FILE | 0o755), node(5, 0, FILE | 0o775), node(5, 0, FILE | 0o757)] {
            let err = trusted_path(Path::new("/usr/bin/python3.14"), held, &t).unwrap_err();
            assert!(err.contains("not owned by root"), "{err}");
        }
    }

    #[test]
    fn a_deleted_name_is_never_followed_even_to_a_trusted_file() {
        // The attack: `x (deleted)` flipped to a root-owned interpreter.
        let held = node(5, 0, FILE | 0o755);
        let err = trusted_path(Path::new("/home/u/x (deleted)"), held, tree(&system())).unwrap_err();
        assert!(err.contains("deleted"), "{err}");
    }

    #[test]
    fn a_name_that_now_leads_elsewhere_is_refused() {
        let held = node(99, 0, FILE | 0o755);
        let err = trusted_path(Path::new("/usr/bin/python3.14"), held, tree(&system())).unwrap_err();
        assert!(err.contains("no longer the file"), "{err}");
    }

    #[test]
    fn every_directory_above_must_be_root_s_alone() {
        let held = node(10, 0, FILE | 0o755);
        let err = trusted_path(Path::new("/opt/python3.14"), held, tree(&system())).unwrap_err();
        assert!(err.contains("/opt is not a directory only root can change"), "{err}");
        let mut entries = system();
        entries.push(("/home/u/python3.14", node(11, 0, FILE | 0o755)));
        let held = node(11, 0, FILE | 0o755);
        let err = trusted_path(Path::new("/home/u/python3.14"), held, tree(&entries)).unwrap_err();
        assert!(err.contains("/home/u is not"), "{err}");
        // A link on the way is not a directory.
        let mut entries = system();
        entries.retain(|(p, _)| *p != "/usr/bin");
        entries.push(("/usr/bin", node(4, 0, libc::S_IFLNK | 0o777)));
        let held = node(5, 0, FILE | 0o755);
        assert!(trusted_path(Path::new("/usr/bin/python3.14"), held, tree(&entries)).is_err());
    }

    /// Compiles `source` with `cc` and reads the result's version.
    fn version_of_built(source: &str, args: &[&str]) -> Option<(u32, u32)> {
        let dir = tempfile::tempdir().unwrap();
        let (src, out) = (dir.path().join("x.c"), dir.path().join("x"));
        std::fs::write(&src, source).unwrap();
        let status = std::process::Command::new("cc")
            .current_dir(dir.path())
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .args(args)
            .status()
            .unwrap();
        assert!(status.success());
        version_of(&File::open(&out).unwrap())
    }

    #[test]
    fn the_version_is_the_one_the_runtime_section_declares() {
        let runtime = |hex: &str, cookie: &str| {
            format!(
                "struct o {{ char c[8]; unsigned long long v; }};\n\
                 __attribute__((section(\".PyRuntime\"), used)) struct o _PyRuntime = {{\"{cookie}\", {hex}ULL}};\n\
                 int main(void) {{ return 0; }}\n"
            )
        };
        assert_eq!(version_of_built(&runtime("0x030E00F0", "xdebugpy"), &[]), Some((3, 14)));
        assert_eq!(version_of_built(&runtime("0x030D05F0", "xdebugpy"), &[]), Some((3, 13)));
        assert_eq!(version_of_built(&runtime("0x030E00F0", "notpyth"), &[]), None, "no cookie, no version");
        assert_eq!(version_of_built("int main(void) { return 0; }\n", &[]), None);
    }

    #[test]
    fn or_the_libpython_the_file_itself_needs() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libpython3.14.so.1.0");
        std::fs::write(dir.path().join("lib.c"), "int Py_Fake;\n").unwrap();
        let built = std::process::Command::new("cc")
            .current_dir(dir.path())
            .args(["-shared", "-fPIC", "-Wl,-soname,libpython3.14.so.1.0", "-o"])
            .arg(&lib)
            .arg("lib.c")
            .status()
            .unwrap();
        assert!(built.success());
        let link = format!("-L{}", dir.path().display());
        let main = "extern int Py_Fake; int main(void) { return Py_Fake; }\n";
        assert_eq!(version_of_built(main, &[&link, "-l:libpython3.14.so.1.0"]), Some((3, 14)));
    }

    #[test]
    fn a_script_or_garbage_declares_nothing() {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in
            [("script", &b"#!/bin/sh\necho python3.14\n"[..]), ("elfish", b"\x7fELF\x02\x01\x01"), ("empty", b"")]
        {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(version_of(&File::open(&path).unwrap()), None, "{name}");
        }
    }

    #[test]
    fn versions_come_from_library_names_in_the_file() {
        assert_eq!(libpython_version("libpython3.14.so.1.0"), Some((3, 14)));
        assert_eq!(libpython_version("libpython3.13t.so"), Some((3, 13)));
        assert_eq!(libpython_version("libc.so.6"), None);
        assert_eq!(parse_version("3.12d"), Some((3, 12)));
        assert_eq!(parse_version("3"), None);
    }
}
