//! The code only start-up runs, handed back to the kernel once the
//! dashboard is running.
//!
//! A release build groups the functions a dashboard runs on every tick
//! into `.text.hot`, and the ones it ran in its first seconds and never
//! after (parsing the command line and the config, loading NVML, setting up
//! the terminal: about 580 KiB) into `.text.once`; the other modes' code is
//! in `.text.modes`, and the rest of `.text` is code no profiled run
//! reached (packaging/hot_text.ld). Pages of code are mapped while it runs
//! and, as with the relocation table (`relocations`), stay mapped and
//! counted in resident memory for the process's whole life. Once start-up
//! is over, every code section but `.text.hot` is dropped from the page
//! tables: its pages lie in a read-only mapping of the executable that
//! nothing writes, so this loses nothing. Should any of that code run
//! again (NVML loaded anew after a driver restart, a sort taking another
//! path), the kernel maps it from the file again, as it does for code never
//! run before.
//!
//! The sections are found by name in the executable's section headers
//! (`/proc/self/exe`), which survive `strip`. A build without the linker
//! script has no `.text.once`, and nothing is dropped: its code is not
//! grouped, and a tick's would go too.

/// The section the linker script puts start-up code in.
const SECTION: &[u8] = b".text.once";
/// The code sections dropped with it: the other modes', and what no
/// profiled run reached.
const ALSO: [&[u8]; 2] = [b".text.modes", b".text"];

/// The pages to give back once start-up is over, worked out while it
/// runs: nothing but this type's own `release` and the C library's
/// madvise runs after the first page goes, since any other code run then
/// (a destructor, a file read) would be mapped again, and the kernel's
/// pages around it with it.
#[derive(Debug)]
pub struct Startup {
    parts: [std::ops::Range<usize>; 6],
}

impl Startup {
    /// The whole pages of `.text.once` and of `ALSO`, in memory, each split
    /// around the two pages of `release`'s own code (which runs once, after
    /// start-up, so is not in `.text.hot`): returning from madvise would
    /// map them again otherwise. `None` where `.text.once` is not found.
    #[cfg(all(target_os = "linux", target_pointer_width = "64", target_endian = "little"))]
    pub fn locate() -> Option<Self> {
        let mut exe = std::fs::File::open("/proc/self/exe").ok()?;
        let [once, modes, cold] = find_all(&mut exe, [SECTION, ALSO[0], ALSO[1]])?;
        let bias = crate::relocations::load_bias()?;
        let page = usize::try_from(crate::sources::procstat::page_size()).ok()?;
        let here = Self::release as fn(&Self) -> Option<usize> as usize / page * page;
        let kept = here..here.saturating_add(2 * page);
        let pages = |section: Option<(u64, u64)>| -> Option<[std::ops::Range<usize>; 2]> {
            let Some((addr, size)) = section else { return Some([0..0, 0..0]) };
            let start = bias.checked_add(usize::try_from(addr).ok()?)?;
            let first = start.checked_next_multiple_of(page)?;
            let end = start.checked_add(usize::try_from(size).ok()?)? / page * page;
            Some([first..end.min(kept.start), first.max(kept.end)..end])
        };
        let ([a, b], [c, d], [e, f]) = (pages(Some(once?))?, pages(modes)?, pages(cold)?);
        Some(Self { parts: [a, b, c, d, e, f] })
    }

    #[cfg(not(all(target_os = "linux", target_pointer_width = "64", target_endian = "little")))]
    pub fn locate() -> Option<Self> {
        None
    }

    /// Gives the pages back; returns how many bytes, or `None` where the
    /// kernel refused.
    pub fn release(&self) -> Option<usize> {
        let mut released = 0;
        for part in self.parts.iter().filter(|p| p.start < p.end) {
            // SAFETY: the part holds whole pages of one of this executable's
            // code sections (`locate`), mapped from the file read-only and
            // never written; MADV_DONTNEED on such a private file mapping
            // only unmaps pages the kernel maps again from the file when
            // they next run.
            let rc =
                unsafe { libc::madvise(part.start as *mut libc::c_void, part.end - part.start, libc::MADV_DONTNEED) };
            if rc != 0 {
                return None;
            }
            released += part.end - part.start;
        }
        Some(released)
    }
}

/// Section headers beyond this many are not a program's: refused rather
/// than read.
const MAX_SECTIONS: u64 = 4096;
/// Nor is a table of section names this long.
const MAX_NAMES: u64 = 1 << 20;

/// The link-time address and size of the section named `name` in a
/// little-endian 64-bit ELF file; `None` for anything else, or a file that
/// does not hold together.
#[cfg(test)]
fn find(file: &mut (impl std::io::Read + std::io::Seek), name: &[u8]) -> Option<(u64, u64)> {
    find_all(file, [name])?[0]
}

/// The link-time address and size of each section named in `wanted`, over
/// one reading of the section table of a little-endian 64-bit ELF file:
/// `None` for anything else or a file that does not hold together, else
/// each name's section where there is one.
fn find_all<const N: usize>(
    file: &mut (impl std::io::Read + std::io::Seek),
    wanted: [&[u8]; N],
) -> Option<[Option<(u64, u64)>; N]> {
    let header = read_at(file, 0, 64)?;
    if header.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let (shoff, entsize, count, names) =
        (word(&header, 0x28)?, half(&header, 0x3A)?, half(&header, 0x3C)?, half(&header, 0x3E)?);
    if entsize != 64 || count > MAX_SECTIONS || names >= count {
        return None;
    }
    let table = read_at(file, shoff, entsize.checked_mul(count)?)?;
    let section = |i: u64| table.get(usize::try_from(i.checked_mul(entsize)?).ok()?..)?.get(..64);
    let strings = section(names)?;
    let (names_at, names_len) = (word(strings, 0x18)?, word(strings, 0x20)?);
    if names_len > MAX_NAMES {
        return None;
    }
    let names = read_at(file, names_at, names_len)?;
    let named = |name: &[u8]| {
        (0..count).filter_map(section).find_map(|s| {
            let at = usize::try_from(u32::from_le_bytes(s.get(..4)?.try_into().ok()?)).ok()?;
            let rest = names.get(at..)?;
            let named = rest.get(..name.len())? == name && rest.get(name.len()) == Some(&0);
            named.then(|| Some((word(s, 0x10)?, word(s, 0x20)?)))?
        })
    };
    Some(wanted.map(named))
}

fn read_at(file: &mut (impl std::io::Read + std::io::Seek), offset: u64, len: u64) -> Option<Vec<u8>> {
    file.seek(std::io::SeekFrom::Start(offset)).ok()?;
    let mut buf = vec![0; usize::try_from(len).ok()?];
    file.read_exact(&mut buf).ok()?;
    Some(buf)
}

fn word(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn half(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Cursor;

    /// An ELF header, then section headers for the null section, `.text`,
    /// `.text.once` and the names, then the names.
    fn elf(sections: &[(&str, u64, u64)]) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut at = Vec::new();
        for (name, _, _) in sections.iter().chain([&(".shstrtab", 0, 0)]) {
            at.push(u32::try_from(names.len()).unwrap());
            names.extend(name.as_bytes());
            names.push(0);
        }
        let count = sections.len() + 2;
        let names_at = 64 + 64 * count;
        let mut out = vec![0u8; 64];
        out[..6].copy_from_slice(b"\x7fELF\x02\x01");
        out[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
        out[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        out[0x3C..0x3E].copy_from_slice(&u16::try_from(count).unwrap().to_le_bytes());
        out[0x3E..0x40].copy_from_slice(&u16::try_from(count - 1).unwrap().to_le_bytes());
        out.extend([0u8; 64]);
        let names_len = names.len() as u64;
        let rows = sections.iter().map(|&(_, a, s)| (a, s, 0)).chain([(0, names_len, names_at as u64)]);
        for (i, (addr, size, offset)) in rows.enumerate() {
            let mut h = [0u8; 64];
            h[..4].copy_from_slice(&at[i].to_le_bytes());
            h[0x10..0x18].copy_from_slice(&addr.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&offset.to_le_bytes());
            h[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            out.extend(h);
        }
        out.extend(names);
        out
    }

    #[test]
    fn the_section_is_found_by_its_whole_name() {
        let file = elf(&[(".text", 0x1000, 0x500), (".text.once", 0x2000, 0x9000), (".text.once2", 7, 7)]);
        assert_eq!(find(&mut Cursor::new(&file), SECTION), Some((0x2000, 0x9000)));
        let without = elf(&[(".text", 0x1000, 0x500), (".text.oncelike", 1, 1)]);
        assert_eq!(find(&mut Cursor::new(&without), SECTION), None);
    }

    #[test]
    fn a_build_without_the_script_has_nothing_to_give_back() {
        // Test binaries are linked without packaging/hot_text.ld.
        let mut exe = std::fs::File::open("/proc/self/exe").unwrap();
        assert_eq!(find(&mut exe, b".text"), find(&mut exe, b".text"), "reads the same twice");
        assert!(find(&mut exe, b".text").is_some(), "a real executable's sections are read");
        assert_eq!(find(&mut exe, SECTION), None);
        if cfg!(all(target_os = "linux", target_endian = "little")) {
            assert!(Startup::locate().and_then(|s| s.release()).is_none());
        }
    }

    proptest! {
        /// Any bytes, or a good file cut or scribbled on: an answer or
        /// `None`, never a panic or a huge allocation.
        #[test]
        fn broken_files_never_panic(
            noise in prop::collection::vec(any::<u8>(), 0..400),
            cut in 0usize..600,
            at in 0usize..600,
            byte in any::<u8>(),
        ) {
            let _ = find(&mut Cursor::new(&noise), SECTION);
            let mut file = elf(&[(".text.once", 0x2000, 0x9000)]);
            if let Some(b) = file.get_mut(at) {
                *b = byte;
            }
            file.truncate(cut);
            let _ = find(&mut Cursor::new(&file), SECTION);
        }
    }
}
