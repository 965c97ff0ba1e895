#!/usr/bin/env python3
"""Checks what packaging/build.sh made, the way an old GPU server would see it.

    check.py WHEEL_OR_TARBALL ...   every check below; exit 1 naming each failure
    check.py --elf FILE [--max-glibc 2.17] [--machine x86_64|aarch64]
                                    only the ELF checks on one file

For every wheel and tarball:
- the wheel's tag (file name and WHEEL file) claims manylinux2014 /
  manylinux_2_17 for the architecture it names, and nothing older or newer;
- the gpuscope program inside is an ELF for that architecture, needs no
  glibc symbol version above the tag's (GLIBC_2.17), and links only
  libraries the manylinux policy lets a wheel assume on the system;
- the simulated NVML embedded in it (the `--demo` driver, written out and
  loaded at run time) passes the same checks: it runs on the same machine;
- the wheel has the `gpuscope` and `gpuscope_probe` packages, and its
  gpuscope_probe is byte for byte the probe the binary injects;
- the wheel ships LICENSE-MIT and LICENSE-APACHE in its .dist-info and
  names them (License-File), with the license expression;
- a tarball holds the program, completions, the man page, the README and
  both licenses, and its .sha256 file matches.
Where the architecture is this machine's, the wheel is installed with pip
into a fresh virtual environment (no index, no dependencies) and run:
`gpuscope --version`, `gpuscope --demo -1`, `python -m gpuscope --version`,
`python -c "import gpuscope_probe"`, and the Python API's suite
(tests/python) against the installed package. Where it is not, and qemu-user with a
sysroot for it is present (packaging/build.sh installs them), the program
runs `--demo -1` under qemu.

Standard library only; the ELF reading follows the System V gABI and the
GNU symbol-versioning sections (.gnu.version_r: Elf_Verneed / Elf_Vernaux).
"""

import argparse
import hashlib
import io
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile

# manylinux2014 == manylinux_2_17 (PEP 599 / PEP 600).
MAX_GLIBC = (2, 17)
# The libraries PEP 599 lets a manylinux2014 wheel link against without
# bundling them; gpuscope needs only a few of them.
ALLOWED_NEEDED = {
    "libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libdl.so.2", "librt.so.1",
    "libc.so.6", "libnsl.so.1", "libutil.so.1", "libpthread.so.0", "libresolv.so.2",
    "libX11.so.6", "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6",
    "libGL.so.1", "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}
MACHINES = {62: "x86_64", 183: "aarch64"}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG_RE = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


class ElfError(ValueError):
    pass


class Elf:
    """The parts of a 64-bit little-endian ELF file these checks read."""

    def __init__(self, data, origin):
        self.data = data
        self.origin = origin
        if data[:4] != b"\x7fELF":
            raise ElfError("%s: not an ELF file" % origin)
        if data[4] != 2 or data[5] != 1:
            raise ElfError("%s: not a 64-bit little-endian ELF" % origin)
        (self.machine,) = struct.unpack_from("<H", data, 18)
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data):
            raise ElfError("%s: no section headers" % origin)
        self.sections = [self._section(shoff + i * shentsize) for i in range(shnum)]
        names = self.sections[shstrndx]
        for sec in self.sections:
            sec["name"] = self._cstr(names["offset"] + sec["name_off"])

    def _section(self, at):
        name_off, kind, _flags, _addr, offset, size, link, _info, _align, _entsize = struct.unpack_from(
            "<IIQQQQIIQQ", self.data, at
        )
        return {"name_off": name_off, "type": kind, "offset": offset, "size": size, "link": link}

    def _cstr(self, at):
        end = self.data.find(b"\0", at)
        if end < 0:
            raise ElfError("%s: unterminated string" % self.origin)
        return self.data[at:end].decode("ascii", "replace")

    def section(self, name):
        return next((s for s in self.sections if s["name"] == name), None)

    def version_needs(self):
        """{library: {version names}} from .gnu.version_r."""
        sec = self.section(".gnu.version_r")
        needs = {}
        if sec is None:
            return needs
        strtab = self.sections[sec["link"]]["offset"]
        at = sec["offset"]
        while True:
            _ver, cnt, file_off, aux, nxt = struct.unpack_from("<HHIII", self.data, at)
            lib = self._cstr(strtab + file_off)
            names = needs.setdefault(lib, set())
            aat = at + aux
            for _ in range(cnt):
                _hash, _flags, _other, name_off, anext = struct.unpack_from("<IHHII", self.data, aat)
                names.add(self._cstr(strtab + name_off))
                if anext == 0:
                    break
                aat += anext
            if nxt == 0:
                return needs
            at += nxt

    def needed(self):
        """DT_NEEDED entries of the dynamic section."""
        sec = self.section(".dynamic")
        if sec is None:
            return []
        strtab = self.sections[sec["link"]]["offset"]
        out = []
        for at in range(sec["offset"], sec["offset"] + sec["size"], 16):
            tag, val = struct.unpack_from("<qQ", self.data, at)
            if tag == 0:
                break
            if tag == 1:
                out.append(self._cstr(strtab + val))
        return out


def glibc_versions(elf):
    found = set()
    for names in elf.version_needs().values():
        for name in names:
            m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.(\d+))?", name)
            if m:
                found.add(tuple(int(x) for x in m.groups() if x is not None))
    return found


def check_elf(elf, machine, max_glibc):
    """A list of problems, empty when the file would load on that machine."""
    problems = []
    got = MACHINES.get(elf.machine, "machine %d" % elf.machine)
    if got != machine:
        problems.append("%s: built for %s, the package says %s" % (elf.origin, got, machine))
    too_new = sorted(v for v in glibc_versions(elf) if v[:2] > max_glibc)
    if too_new:
        problems.append(
            "%s: needs %s, above GLIBC_%d.%d (it will not start on an older system)"
            % (elf.origin, ", ".join("GLIBC_" + ".".join(map(str, v)) for v in too_new), *max_glibc)
        )
    extra = sorted(set(elf.needed()) - ALLOWED_NEEDED)
    if extra:
        problems.append("%s: links %s, which a manylinux system need not have" % (elf.origin, ", ".join(extra)))
    return problems


def embedded_elves(data, origin):
    """Complete ELF images inside another file (include_bytes! keeps them whole)."""
    out = []
    at = data.find(b"\x7fELF", 1)
    while at > 0:
        try:
            out.append(Elf(data[at:], "%s (embedded at byte %d)" % (origin, at)))
        except (ElfError, struct.error, IndexError):
            pass
        at = data.find(b"\x7fELF", at + 1)
    return out


def check_program(data, origin, machine, max_glibc):
    problems = []
    try:
        elf = Elf(data, origin)
    except (ElfError, struct.error) as err:
        return [str(err)]
    problems += check_elf(elf, machine, max_glibc)
    inner = [e for e in embedded_elves(data, origin) if e.section(".gnu.version_r") is not None]
    if not inner:
        problems.append("%s: no embedded simulated NVML found (gpuscope --demo would not work)" % origin)
    for e in inner:
        problems += check_elf(e, machine, max_glibc)
    return problems


def wheel_tag(name):
    m = TAG_RE.match(os.path.basename(name))
    if not m:
        raise ValueError("%s: not a wheel file name" % name)
    return m.groupdict()


def check_wheel(path):
    problems = []
    tag = wheel_tag(path)
    plats = tag["plat"].split(".")
    arches = {p.split("_", 1)[1] if p.startswith("manylinux2014_") else p.split("_", 3)[-1] for p in plats}
    if len(arches) != 1:
        return ["%s: platform tags name several architectures: %s" % (path, tag["plat"])], None
    machine = arches.pop()
    expected = {"manylinux2014_" + machine, "manylinux_2_17_" + machine}
    if set(plats) != expected:
        problems.append("%s: platform tags %s, expected %s" % (path, tag["plat"], ".".join(sorted(expected))))
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        info = "%s-%s.dist-info/WHEEL" % (tag["name"], tag["version"])
        wheel_meta = zf.read(info).decode()
        tags = sorted(line.split(":", 1)[1].strip() for line in wheel_meta.splitlines() if line.startswith("Tag:"))
        want = sorted("%s-%s-%s" % (tag["py"], tag["abi"], p) for p in plats)
        if tags != want:
            problems.append("%s: WHEEL says %s, the file name %s" % (path, tags, want))
        if "Root-Is-Purelib: false" not in wheel_meta:
            problems.append("%s: a wheel with a program in it must not be purelib" % path)
        script = "%s-%s.data/scripts/gpuscope" % (tag["name"], tag["version"])
        if script not in names:
            return problems + ["%s: no %s" % (path, script)], machine
        for module in ("gpuscope/__init__.py", "gpuscope/__main__.py", "gpuscope/types.py",
                       "gpuscope_probe/__init__.py"):
            if module not in names:
                problems.append("%s: no %s" % (path, module))
        problems += check_wheel_licenses(zf, path, "%s-%s.dist-info" % (tag["name"], tag["version"]))
        problems += check_program(zf.read(script), "%s:%s" % (os.path.basename(path), script), machine, MAX_GLIBC)
    return problems, machine


LICENSES = ("LICENSE-MIT", "LICENSE-APACHE")


def check_wheel_licenses(zf, path, dist_info):
    """Both license texts in .dist-info/licenses/ (PEP 639), named in METADATA."""
    problems = []
    names = set(zf.namelist())
    if dist_info + "/METADATA" not in names:
        return ["%s: no %s/METADATA" % (path, dist_info)]
    metadata = zf.read(dist_info + "/METADATA").decode()
    headers = metadata.split("\n\n", 1)[0].splitlines()
    for lic in LICENSES:
        if "%s/licenses/%s" % (dist_info, lic) not in names:
            problems.append("%s: no %s/licenses/%s" % (path, dist_info, lic))
        if "License-File: " + lic not in headers:
            problems.append("%s: METADATA names no License-File %s" % (path, lic))
    if "License-Expression: MIT OR Apache-2.0" not in headers:
        problems.append("%s: METADATA has no License-Expression: MIT OR Apache-2.0" % path)
    return problems


def check_tarball(path):
    problems = []
    machine = next((m for m in MACHINES.values() if m in os.path.basename(path)), None)
    if machine is None:
        return ["%s: the name says no architecture" % path]
    sums = path + ".sha256"
    if not os.path.isfile(sums):
        problems.append("%s: no %s" % (path, os.path.basename(sums)))
    else:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        with open(sums) as f:
            line = f.read().split()
        if line[:2] != [digest, os.path.basename(path)]:
            problems.append("%s: checksum file does not match (sha256sum -c would fail)" % sums)
    with tarfile.open(path) as tf:
        members = {m.name.split("/", 1)[-1]: m for m in tf.getmembers() if "/" in m.name}
        for want in ("gpuscope", "README.md", "completions/gpuscope.bash", "completions/_gpuscope",
                     "completions/gpuscope.fish", "man/gpuscope.1") + LICENSES:
            if want not in members:
                problems.append("%s: no %s in it" % (path, want))
        prog = members.get("gpuscope")
        if prog is not None:
            if not prog.mode & 0o111:
                problems.append("%s: gpuscope is not executable" % path)
            data = tf.extractfile(prog).read()
            problems += check_program(data, "%s:gpuscope" % os.path.basename(path), machine, MAX_GLIBC)
    return problems


def run(cmd, **kw):
    """Runs cmd; a problem string when it fails, else None."""
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300, **kw)
    if proc.returncode != 0:
        return "`%s` exited %d:\n%s" % (" ".join(cmd), proc.returncode, proc.stdout.decode(errors="replace")[-2000:])
    return None


def install_and_run(wheel):
    """Installs the wheel into a fresh venv and runs what a new user would."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="gpuscope-wheel-") as tmp:
        venv = os.path.join(tmp, "venv")
        steps = [
            [sys.executable, "-m", "venv", venv],
            [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel],
        ]
        for cmd in steps:
            err = run(cmd)
            if err:
                return [err]
        gpuscope = os.path.join(venv, "bin", "gpuscope")
        py = os.path.join(venv, "bin", "python")
        env = dict(os.environ, HOME=tmp, XDG_RUNTIME_DIR=tmp, XDG_CONFIG_HOME=os.path.join(tmp, "config"))
        env.pop("GPUSCOPE_NVML_LIB", None)
        for cmd in ([gpuscope, "--version"], [gpuscope, "--demo", "-1"], [py, "-m", "gpuscope", "--version"],
                    [py, "-c", "import gpuscope_probe; gpuscope_probe.start; gpuscope_probe.stop"]):
            err = run(cmd, env=env, cwd=tmp)
            if err:
                problems.append(err)
        problems += same_probe(gpuscope, py, env, tmp)
        # The Python API's suite against the installed package (not the
        # checkout's python/: neither PYTHONPATH nor GPUSCOPE_BIN is set).
        suite = os.path.join(REPO, "tests", "python")
        api_env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "GPUSCOPE_BIN")}
        err = run([py, "-m", "unittest", "discover", "-s", suite, "-t", suite], env=api_env, cwd=tmp)
        if err:
            problems.append(err)
    return problems


def same_probe(gpuscope, py, env, cwd):
    """The module pip installed must be the probe `gpuscope run` injects."""
    out = subprocess.run([gpuscope, "probe", "path"], stdout=subprocess.PIPE, env=env, cwd=cwd, timeout=60)
    injected = out.stdout.decode().strip()
    mod = subprocess.run([py, "-c", "import gpuscope_probe; print(gpuscope_probe.__file__)"],
                         stdout=subprocess.PIPE, env=env, cwd=cwd, timeout=60).stdout.decode().strip()
    try:
        with open(injected, "rb") as a, open(mod, "rb") as b:
            if a.read() != b.read():
                return ["the wheel's gpuscope_probe (%s) differs from the probe gpuscope injects (%s)" % (mod, injected)]
    except OSError as err:
        return ["comparing the probe files: %s" % err]
    return []


def run_under_qemu(wheel, machine):
    """Runs the foreign-architecture program under qemu-user, when present."""
    qemu = shutil.which("qemu-%s" % machine) or shutil.which("qemu-%s-static" % machine)
    sysroot = "/usr/%s-linux-gnu" % machine
    if qemu is None or not os.path.isdir(sysroot):
        return None
    tag = wheel_tag(wheel)
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory(prefix="gpuscope-qemu-") as tmp:
        prog = os.path.join(tmp, "gpuscope")
        with open(prog, "wb") as f:
            f.write(zf.read("%s-%s.data/scripts/gpuscope" % (tag["name"], tag["version"])))
        os.chmod(prog, 0o755)
        env = dict(os.environ, HOME=tmp, XDG_RUNTIME_DIR=tmp, QEMU_LD_PREFIX=sysroot)
        err = run([qemu, "-L", sysroot, prog, "--demo", "-1"], env=env, cwd=tmp)
        return [err] if err else []


def host_machine():
    m = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m.lower(), m)


def check_paths(paths):
    problems = []
    for path in paths:
        if path.endswith(".whl"):
            found, machine = check_wheel(path)
            problems += found
            if found:
                continue
            if machine == host_machine():
                problems += install_and_run(path)
                print("%s: installed in a fresh venv and ran" % os.path.basename(path))
            else:
                ran = run_under_qemu(path, machine)
                if ran is None:
                    problems.append("%s: no qemu-%s with a sysroot here to run it (packaging/build.sh installs them)"
                                    % (path, machine))
                else:
                    problems += ran
                    print("%s: ran --demo -1 under qemu-%s" % (os.path.basename(path), machine))
        elif path.endswith(".tar.gz"):
            problems += check_tarball(path)
        else:
            problems.append("%s: neither a wheel nor a tarball" % path)
    return problems


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--elf", help="check one ELF file (and what it embeds) only")
    ap.add_argument("--max-glibc", default="2.17")
    ap.add_argument("--machine", default=host_machine())
    args = ap.parse_args(argv)
    if args.elf:
        limit = tuple(int(x) for x in args.max_glibc.split("."))
        with open(args.elf, "rb") as f:
            problems = check_program(f.read(), args.elf, args.machine, limit)
    elif args.paths:
        problems = check_paths(args.paths)
    else:
        ap.error("name wheels or tarballs, or --elf FILE")
    for p in problems:
        print("FAIL " + p, file=sys.stderr)
    if not problems:
        print("ok: %s" % ", ".join(os.path.basename(p) for p in (args.paths or [args.elf])))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
