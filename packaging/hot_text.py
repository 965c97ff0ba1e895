#!/usr/bin/env python3
"""Writes packaging/hot_text.ld from callgrind profiles of gpuscope's modes.

Why: the release binary holds about 6 MB of machine code, and a dashboard
runs about 1.5 MB of it, spread over the whole of `.text`. The kernel maps
file pages around each one that faults (fault-around), so scattered code
costs resident memory far beyond what runs: 3.6 MiB of `.text` resident
where grouping what runs brings it to 1.8 MiB. The linker script this
writes puts every function a profiled run executed into one output
section, `.text.hot`, ahead of the rest (`INSERT BEFORE .text`, which GNU
ld and LLD both read as an addition to their default layout).

Section names are `.text.<symbol>` (`.text.unlikely.<symbol>` for cold
functions). Symbols carry hashes that change with the compiler, the
dependencies' versions and the build flags (the crate disambiguator
`Cs<hash>_` of v0 mangling, legacy mangling's `17h<hash>E`, LTO's
`.llvm.<n>` and the `.<n>` of a function's numbered copies); they become
wildcards, so the script keeps working across
toolchains and rebuilds, and only renamed or new functions fall out until
it is generated again. The repository builds with v0 symbols
(`.cargo/config.toml`), which name each generic instance by its type
arguments: under legacy names every instance of a generic function had
the same name but for its hash, so the wildcard for the one instance a
tick ran took all of them into the hot pages (440 KiB of a 1.2 MiB tick
group, measured when the switch was made).

Usage: hot_text.py OUT.ld BINARY CALLGRIND.OUT...  (BINARY: the program
the profiles ran; the profiles in the order their modes should be laid
out, the first mode's functions first).
Standard library, and binutils' `nm` (demangling Rust's v0 symbols).
"""

import os
import re
import subprocess
import sys

OBJECT = re.compile(r"^(c?ob)=\((\d+)\)(?: (.*))?$")
FUNCTION = re.compile(r"^(c?fn)=\((\d+)\)(?: (.*))?$")


def executed(profile, binary):
    """Mangled names of the functions of `binary` that ran in `profile`
    (a callgrind output written with --demangle=no). Names are given once,
    at first use, and referred to by number after that."""
    objects, functions, ran = {}, {}, set()
    current = None
    with open(profile, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = OBJECT.match(line)
            if m:
                kind, number, name = m.groups()
                if name:
                    objects[number] = name
                if kind == "ob":
                    current = number
                continue
            m = FUNCTION.match(line)
            if m:
                kind, number, name = m.groups()
                if name:
                    functions[number] = name
                # Only `fn=` opens the costs of a function that ran in the
                # current object; `cfn=` names a callee, whose object is `cob=`.
                if kind == "fn" and objects.get(current) == binary:
                    ran.add(number)
    return {functions[n] for n in ran if n in functions}


SORT = "core::slice::sort::"
# The same path in v0 mangling, to tell whether a profile ran a sort at all.
SORT_MANGLED = "4core5slice4sort"


def generic_args(demangled):
    """The first two generic arguments of a demangled instance
    (`f::<T, F>`: the element type and the comparison, for a sort), or
    None."""
    start = demangled.find("::<")
    if start < 0:
        return None
    args, depth, current = [], 0, ""
    for c in demangled[start + 3 :]:
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            if depth == 0:
                break
            depth -= 1
        if c == "," and depth == 0:
            args.append(current.strip())
            current = ""
            continue
        current += c
    args.append(current.strip())
    return tuple(args[:2]) if len(args) >= 2 else None


def sort_routines(binary):
    """The standard library's sort routines in `binary`: each one's mangled
    name and generic arguments, from `nm`, read once for all profiles."""
    try:
        mangled = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
        demangled = subprocess.run(
            ["nm", "-C", "--defined-only", binary], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"hot_text.py: nm could not list {binary}'s symbols: {e}")
    table = []
    for m, d in zip(mangled.splitlines(), demangled.splitlines()):
        m, d = m.split(" ", 2), d.split(" ", 2)
        if len(m) == 3 and len(d) == 3 and m[1] in "tT" and SORT in d[2]:
            table.append((m[2], generic_args(d[2])))
    return table


def sort_kin(routines, names):
    """Every routine of the standard library's sorts (`routines`) for the
    element types and comparisons of the sorts in `names`. Which of them a
    sort runs depends on how far from sorted its input comes: the profiled
    dashboard may only ever see rows already in order (merges, no
    quicksort), where a user's come shuffled, and one routine left out
    costs the 64 KiB the kernel maps around it."""
    ran = {args for name, args in routines if name in names and args}
    return {name for name, args in routines if args in ran}


def pattern(symbol):
    """The symbol with its build-specific hashes made wildcards; None for
    what has no section of its own (addresses, callgrind's pseudo-names).
    Plain C names (`main`, compiler-builtins' `floor`, ring's assembly
    helpers) are kept as they are: each one left out costs the 64 KiB of
    cold code the kernel maps around it."""
    if not symbol.startswith(("_R", "_ZN")):
        return symbol if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", symbol) else None
    symbol = re.sub(r"\.llvm\.\d+$", ".llvm.*", symbol)
    # LLVM's numbered copies of a local function (`lookup_width.737`): the
    # number is not the same from one link to the next, not even between
    # the profiled build and the one linked with this script (seen: .737
    # and .727 for the same code), so any copy of a function that ran is
    # kept hot.
    symbol = re.sub(r"(?<!\.llvm)\.\d+$", ".*", symbol)
    if symbol.startswith("_R"):
        return re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", symbol)
    return re.sub(r"17h[0-9a-f]{16}E", "17h*E", symbol)


# The C runtime's start-up code: the program's entry (`_start`, from
# crt1.o, Scrt1.o for a PIE) and GCC's frame and clone-table registration
# (crtbegin.o, crtbeginS.o). Every run executes them, but they sit in plain
# `.text` sections of their own objects, which no function name selects,
# and at the very start of `.text`: left there, they alone bring in the
# 64 KiB of cold code the kernel maps around them.
CRT = ["*crt1.o(.text)", "*crtbegin*.o(.text)"]


# Large constants no dashboard reads (the embedded simulator, the probe's
# source), put in a section of their own by the program: placed after all
# of `.rodata` instead of among the constants every tick reads, so the
# pages mapped around those do not hold them. A name outside `.rodata.*`,
# which `.rodata`'s own rule would take first.
COLD = [
    "SECTIONS",
    "{",
    "  .gpuscope.cold : { KEEP(*(.gpuscope.cold)) }",
    "}",
    "INSERT AFTER .rodata;",
    "",
]


def section(mode, index):
    """The output section a mode's functions go to: the first mode's (the
    dashboard's ticks) and what a dashboard runs only minutes in (a mode
    named `-late`) to `.text.hot`; the dashboard's start-up to
    `.text.once`, which the dashboard hands back to the kernel once it runs
    (src/startup_code.rs); the other modes' to `.text.modes`."""
    if index == 0 or mode.endswith("-late"):
        return ".text.hot"
    return ".text.once" if mode.endswith("-start") else ".text.modes"


def script(groups):
    out = [
        "/* Generated by packaging/hot_text.sh from callgrind profiles: every",
        "   function the profiled modes ran, grouped ahead of the rest of .text",
        "   so that what runs shares pages (see packaging/hot_text.py). */",
        "SECTIONS",
        "{",
    ]
    seen = set()
    current = None
    for index, (mode, patterns) in enumerate(groups):
        fresh = sorted(p for p in patterns if p not in seen)
        seen.update(fresh)
        name = section(mode, index)
        if name != current:
            if current is not None:
                out.append("  }")
            out += [f"  {name} :", "  {"]
            current = name
        out.append(f"    /* {mode}: {len(fresh)} */")
        if mode.endswith("-start"):
            out.extend(f"    {c}" for c in CRT)
        out.extend(f"    *(.text.{p} .text.unlikely.{p})" for p in fresh)
    out += ["  }", "}", "INSERT BEFORE .text;", ""]
    out += COLD
    return "\n".join(out)


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    out, binary, profiles = argv[1], os.path.realpath(argv[2]), argv[3:]
    groups, routines = [], None
    for profile in profiles:
        names = executed(profile, binary)
        if not names:
            sys.exit(f"hot_text.py: {profile}: no function of {binary} ran (wrong binary, or not --demangle=no?)")
        if any(SORT_MANGLED in n for n in names):
            routines = routines if routines is not None else sort_routines(binary)
            names |= sort_kin(routines, names)
        mode = profile.rsplit("/", 1)[-1].removeprefix("callgrind.").removesuffix(".out")
        groups.append((mode, {p for p in map(pattern, names) if p}))
    with open(out, "w", encoding="utf-8") as f:
        f.write(script(groups))
    total = len(set().union(*(g for _, g in groups)))
    print(f"hot_text.py: {out}: {total} patterns from {len(profiles)} profiles")


if __name__ == "__main__":
    main(sys.argv)
