#!/usr/bin/env bash
# Regenerates docs/dashboard.png, the README's picture, from a real frame of
# `gpuscope --demo`: the dashboard runs in a 120x36 tmux pane (a private
# server socket), the frame is captured with its colours (capture-pane -e)
# and drawn by docs/ansi_png.py (Pillow, installed into target/screenshot-venv
# from PyPI on first use; the DejaVu Sans Mono font, Debian's fonts-dejavu-core).
#
#   bash docs/screenshot.sh            # builds gpuscope, waits 50 s, writes the PNG
#   GPUSCOPE_BIN=path SCREENSHOT_WAIT=20 bash docs/screenshot.sh
set -euo pipefail
cd "$(dirname "$0")/.."

out=${SCREENSHOT_OUT:-docs/dashboard.png}
wait_s=${SCREENSHOT_WAIT:-50}
font=${SCREENSHOT_FONT:-/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf}
for tool in tmux python3; do
  command -v "$tool" >/dev/null || { echo "screenshot.sh: $tool is missing" >&2; exit 1; }
done
[ -r "$font" ] || { echo "screenshot.sh: no font at $font (apt-get install fonts-dejavu-core, or SCREENSHOT_FONT=...)" >&2; exit 1; }

bin=${GPUSCOPE_BIN:-}
if [ -z "$bin" ]; then
  cargo build --locked -q
  bin=target/debug/gpuscope
fi

venv=target/screenshot-venv
if ! "$venv/bin/python" -c 'import PIL' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q Pillow
fi

dir=$(mktemp -d)
trap 'tmux -S "$dir/tmux" kill-server 2>/dev/null || true; rm -rf "$dir"' EXIT
# The demo's rank 0 raises its fragmentation alert within about 15 s and its
# allocation retry at 45 s; by then the history chart has a few columns.
tmux -S "$dir/tmux" -f /dev/null new-session -d -x 120 -y 36 \
  "env -u NO_COLOR LANG=C.UTF-8 LC_ALL=C.UTF-8 $(printf '%q' "$bin") --demo"
sleep "$wait_s"
tmux -S "$dir/tmux" capture-pane -e -p -t 0 > "$dir/frame.ansi"
"$venv/bin/python" docs/ansi_png.py "$dir/frame.ansi" "$out" --font "$font" --cols 120 --rows 36
echo "wrote $out ($(stat -c %s "$out") bytes)"
