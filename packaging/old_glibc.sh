#!/usr/bin/env bash
# Installs a built wheel the way a user on an old GPU server would, on a real
# old glibc: Debian 11 "bullseye" (glibc 2.31, as Ubuntu 20.04; RHEL 8 has
# 2.28), made with debootstrap from Debian's archive, with only Python in it.
# There it runs `pip install WHEEL`, `gpuscope --version`, `gpuscope --demo
# -1`, `gpuscope --demo --json` and `import gpuscope_probe`.
#
#   sudo packaging/old_glibc.sh WHEEL [ROOT]     (ROOT: default target/bullseye)
#
# Needs root (debootstrap, chroot, mounting /proc in the chroot) and Debian's
# package archive. ROOT is made by this script and marked as such; an existing
# ROOT without that mark is left alone and the script stops.
set -euo pipefail
cd "$(dirname "$0")/.."

wheel="${1:?usage: packaging/old_glibc.sh WHEEL [ROOT]}"
root="${2:-$PWD/target/bullseye}"
mark="$root/.made-by-gpuscope-packaging"
[ -f "$wheel" ] || { echo "old_glibc.sh: no wheel at $wheel" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "old_glibc.sh: needs root (debootstrap and chroot)" >&2; exit 2; }

if [ ! -f "$mark" ]; then
  if [ -e "$root" ] && [ -n "$(ls -A "$root" 2>/dev/null)" ]; then
    echo "old_glibc.sh: $root exists and was not made by this script; name another ROOT" >&2
    exit 2
  fi
  command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
  debootstrap --variant=minbase bullseye "$root" http://deb.debian.org/debian >/dev/null
  chroot "$root" apt-get install -y -qq python3-venv >/dev/null
  touch "$mark"
fi

mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT
work=$(chroot "$root" mktemp -d /tmp/gpuscope-wheel.XXXXXX)
cp "$wheel" "$root$work/"
name=$(basename "$wheel")
chroot "$root" /bin/sh -ec "
  echo \"glibc: \$(getconf GNU_LIBC_VERSION), \$(python3 --version)\"
  python3 -m venv $work/venv
  $work/venv/bin/pip install -q --no-index --no-deps $work/$name
  export HOME=$work XDG_RUNTIME_DIR=$work
  $work/venv/bin/gpuscope --version
  $work/venv/bin/gpuscope --demo -1
  $work/venv/bin/gpuscope --demo --json >$work/snapshot.json
  $work/venv/bin/python -c 'import json; d = json.load(open(\"$work/snapshot.json\")); print(len(d[\"gpus\"]), \"GPUs in --json\")'
  $work/venv/bin/python -c 'import gpuscope_probe; print(\"import gpuscope_probe: ok\")'
  $work/venv/bin/python -m gpuscope --version
"
rm -rf "${root:?}$work"
echo "old_glibc.sh: $name installed and ran on Debian 11 (glibc 2.31)"
