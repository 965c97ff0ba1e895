#!/usr/bin/env bash
# Builds what users install: a manylinux2014 (glibc 2.17) Python wheel and a
# plain tarball of the same binary, for this machine's architecture (--arch
# all: x86_64 and aarch64, as CI builds them), then checks them with
# packaging/check.py. It installs what it needs, and says so first: maturin
# and zig from PyPI into target/packaging-venv (zig links against glibc 2.17
# whatever this machine's glibc is), the Rust target from rustup, and, only
# to run another architecture's build here and only as root, Debian's
# qemu-user and that architecture's C library (apt-get).
#
#   packaging/build.sh [--arch x86_64|aarch64|all] [--out DIR]
#
# Output in DIR (default dist/): gpuscope-VERSION-py3-none-manylinux2014_ARCH
# .manylinux_2_17_ARCH.whl, gpuscope-VERSION-ARCH-unknown-linux-gnu.tar.gz with
# its .sha256, and SHA256SUMS over all of them. Then:
#   pip install dist/gpuscope-VERSION-py3-none-manylinux2014_ARCH.manylinux_2_17_ARCH.whl
set -euo pipefail
cd "$(dirname "$0")/.."

host=$(uname -m)
case "$host" in
  x86_64|aarch64) arches=("$host") ;;
  *) arches=(x86_64 aarch64) ;;
esac
out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --arch) shift; case "${1:-}" in all) arches=(x86_64 aarch64) ;; x86_64|aarch64) arches=("$1") ;;
              *) echo "build.sh: --arch takes x86_64, aarch64 or all, not '${1:-}'" >&2; exit 2 ;; esac ;;
    --out) shift; out="${1:?--out needs a directory}" ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# The tools, pinned: a wheel is only as reproducible as what built it.
MATURIN_VERSION=1.16.0
ZIG_VERSION=0.17.1
tools="${GPUSCOPE_PACKAGING_VENV:-$PWD/target/packaging-venv}"
if ! "$tools/bin/maturin" --version 2>/dev/null | grep -q " $MATURIN_VERSION\$" ||
   ! "$tools/bin/python" -c "import ziglang, importlib.metadata as m; assert m.version('ziglang') == '$ZIG_VERSION'" 2>/dev/null; then
  echo "build.sh: installing maturin $MATURIN_VERSION and zig (ziglang $ZIG_VERSION) from PyPI into $tools"
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check "maturin==$MATURIN_VERSION" "ziglang==$ZIG_VERSION"
fi
# maturin looks for zig as `python -m ziglang` with the first python on PATH.
export PATH="$tools/bin:$PATH"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
mkdir -p "$out"

for arch in "${arches[@]}"; do
  triple="$arch-unknown-linux-gnu"
  if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
    echo "build.sh: installing the Rust target $triple (rustup target add)"
    rustup target add "$triple"
  fi
  if [ "$arch" != "$host" ] && [ "$(id -u)" = 0 ] &&
     { ! command -v "qemu-$arch" >/dev/null || [ ! -d "/usr/$triple" ]; }; then
    pkg_arch=$([ "$arch" = aarch64 ] && echo arm64 || echo amd64)
    echo "build.sh: installing qemu-user and libc6-$pkg_arch-cross with apt-get, to run the $arch build here"
    apt-get update -qq && apt-get install -y -qq qemu-user "libc6-$pkg_arch-cross" >/dev/null
  fi
  echo "build.sh: building the $arch wheel (release, zig, manylinux2014)"
  maturin build --release --locked --zig --compatibility manylinux2014 --target "$triple" --out "$out"
done

# The tarballs carry the very binary of the wheel, with completions and the
# man page made by whichever of the binaries runs here.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
docs_from=""
for arch in "$host" "${arches[@]}"; do
  wheel="$out/gpuscope-$version-py3-none-manylinux2014_$arch.manylinux_2_17_$arch.whl"
  [ -f "$wheel" ] || continue
  mkdir -p "$stage/$arch"
  python3 - "$wheel" "$stage/$arch/gpuscope" "$version" <<'PY'
import os, sys, zipfile
wheel, dest, version = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf, open(dest, "wb") as f:
    f.write(zf.read("gpuscope-%s.data/scripts/gpuscope" % version))
os.chmod(dest, 0o755)
PY
  if [ -z "$docs_from" ]; then
    if [ "$arch" = "$host" ]; then docs_from=("$stage/$arch/gpuscope")
    else docs_from=("qemu-$arch" -L "/usr/$arch-linux-gnu" "$stage/$arch/gpuscope"); fi
  fi
done
docs="$stage/docs"
mkdir -p "$docs/completions" "$docs/man"
"${docs_from[@]}" completions bash >"$docs/completions/gpuscope.bash"
"${docs_from[@]}" completions zsh >"$docs/completions/_gpuscope"
"${docs_from[@]}" completions fish >"$docs/completions/gpuscope.fish"
"${docs_from[@]}" man >"$docs/man/gpuscope.1"

for arch in "${arches[@]}"; do
  name="gpuscope-$version-$arch-unknown-linux-gnu"
  dir="$stage/$name"
  mkdir -p "$dir"
  cp "$stage/$arch/gpuscope" "$dir/gpuscope"
  cp -r "$docs/completions" "$docs/man" "$dir/"
  cp README.md LICENSE-MIT LICENSE-APACHE "$dir/"
  # Same bytes for the same inputs: fixed owner, order and times.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$stage" -czf "$out/$name.tar.gz" "$name"
  (cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
done

(cd "$out" && sha256sum gpuscope-"$version"-*.whl gpuscope-"$version"-*.tar.gz >SHA256SUMS)
files=()
for arch in "${arches[@]}"; do
  files+=("$out/gpuscope-$version-py3-none-manylinux2014_$arch.manylinux_2_17_$arch.whl"
          "$out/gpuscope-$version-$arch-unknown-linux-gnu.tar.gz")
done
python3 packaging/check.py "${files[@]}"
echo "build.sh: install with: pip install ${files[0]}"
