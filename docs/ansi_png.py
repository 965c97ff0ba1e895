#!/usr/bin/env python3
"""Draw a terminal frame (tmux `capture-pane -e -p` output) as a PNG.

Usage: ansi_png.py FRAME.ansi OUT.png [--font REGULAR.ttf] [--size PX]

Understands what tmux writes back: SGR 0/1/2/3/4/7/22/23/24/27, the 16
colours as 30-37/90-97/40-47/100-107 or 38;5;N/48;5;N, 256-colour and
24-bit colours. Needs Pillow; the font is DejaVu Sans Mono (Debian's
fonts-dejavu-core) unless --font names another monospace font.
"""
import argparse
import re
import sys

from PIL import Image, ImageDraw, ImageFont

# The 16 colours every terminal has, in a common dark theme's shades.
PALETTE16 = [
    (0x1e, 0x1e, 0x1e), (0xcd, 0x31, 0x31), (0x0d, 0xbc, 0x79), (0xe5, 0xe5, 0x10),
    (0x24, 0x72, 0xc8), (0xbc, 0x3f, 0xbc), (0x11, 0xa8, 0xcd), (0xcc, 0xcc, 0xcc),
    (0x66, 0x66, 0x66), (0xf1, 0x4c, 0x4c), (0x23, 0xd1, 0x8b), (0xf5, 0xf5, 0x43),
    (0x3b, 0x8e, 0xea), (0xd6, 0x70, 0xd6), (0x29, 0xb8, 0xdb), (0xe5, 0xe5, 0xe5),
]
FG, BG = (0xd4, 0xd4, 0xd4), (0x16, 0x16, 0x16)
# Block and shade characters, as the share of the cell in the foreground.
SHADES = {"█": 1.0, "▓": 0.7, "▒": 0.45, "░": 0.2}
DEFAULT_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"


def colour256(n):
    if n < 16:
        return PALETTE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[n // 6 % 6], steps[n % 6])
    grey = 8 + (n - 232) * 10
    return (grey, grey, grey)


class Style:
    def __init__(self):
        self.reset()

    def reset(self):
        self.fg = self.bg = None
        self.bold = self.dim = self.underline = self.reverse = False

    def apply(self, params):
        codes = [int(p) if p else 0 for p in params.split(";")] if params else [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self.reset()
            elif c == 1:
                self.bold = True
            elif c == 2:
                self.dim = True
            elif c == 22:
                self.bold = self.dim = False
            elif c == 4:
                self.underline = True
            elif c == 24:
                self.underline = False
            elif c == 7:
                self.reverse = True
            elif c == 27:
                self.reverse = False
            elif 30 <= c <= 37:
                self.fg = PALETTE16[c - 30]
            elif 90 <= c <= 97:
                self.fg = PALETTE16[c - 90 + 8]
            elif 40 <= c <= 47:
                self.bg = PALETTE16[c - 40]
            elif 100 <= c <= 107:
                self.bg = PALETTE16[c - 100 + 8]
            elif c == 39:
                self.fg = None
            elif c == 49:
                self.bg = None
            elif c in (38, 48) and i + 1 < len(codes):
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    rgb = colour256(codes[i + 2])
                    i += 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    rgb = tuple(codes[i + 2:i + 5])
                    i += 4
                else:
                    rgb = None
                if c == 38:
                    self.fg = rgb
                else:
                    self.bg = rgb
            i += 1

    def colours(self):
        fg, bg = self.fg or FG, self.bg or BG
        if self.bold and self.fg in PALETTE16[:8]:
            fg = PALETTE16[PALETTE16.index(self.fg) + 8]
        if self.reverse:
            fg, bg = bg, fg
        if self.dim:
            fg = tuple((a + b) // 2 for a, b in zip(fg, bg))
        return fg, bg


SGR = re.compile(r"\x1b\[([0-9;]*)m|\x1b\[[0-9;?]*[A-Za-z]|([^\x1b])", re.S)


def parse(text):
    """Rows of cells: (char, fg, bg, bold, underline)."""
    style = Style()
    rows = []
    for line in text.split("\n"):
        row = []
        for m in SGR.finditer(line):
            if m.group(2) is not None:
                fg, bg = style.colours()
                row.append((m.group(2), fg, bg, style.bold, style.underline))
            elif m.group(0).endswith("m"):
                style.apply(m.group(1))
        rows.append(row)
    while rows and not rows[-1]:
        rows.pop()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("frame")
    ap.add_argument("out")
    ap.add_argument("--font", default=DEFAULT_FONT)
    ap.add_argument("--size", type=int, default=13)
    ap.add_argument("--cols", type=int, default=0, help="width in cells (default: the widest row)")
    ap.add_argument("--rows", type=int, default=0, help="height in cells (default: the rows captured)")
    args = ap.parse_args()

    rows = parse(open(args.frame, encoding="utf-8").read())
    regular = ImageFont.truetype(args.font, args.size)
    bold_path = args.font.replace(".ttf", "-Bold.ttf")
    try:
        bold = ImageFont.truetype(bold_path, args.size)
    except OSError:
        bold = regular
    ascent, descent = regular.getmetrics()
    cw, ch = round(regular.getlength("M")), ascent + descent
    cols = args.cols or max(len(r) for r in rows)
    nrows = args.rows or len(rows)
    pad = 8
    img = Image.new("RGB", (cols * cw + 2 * pad, nrows * ch + 2 * pad), BG)
    draw = ImageDraw.Draw(img)
    for y, row in enumerate(rows[:nrows]):
        for x, (char, fg, bg, is_bold, underline) in enumerate(row[:cols]):
            x0, y0 = pad + x * cw, pad + y * ch
            if bg != BG:
                draw.rectangle([x0, y0, x0 + cw - 1, y0 + ch - 1], fill=bg)
            if char in SHADES:  # drawn as rectangles, so bars have no seams
                share = SHADES[char]
                fill = tuple(round(f * share + b * (1 - share)) for f, b in zip(fg, bg))
                draw.rectangle([x0, y0, x0 + cw - 1, y0 + ch - 1], fill=fill)
            elif char != " ":
                draw.text((x0, y0), char, font=bold if is_bold else regular, fill=fg)
            if underline:
                draw.line([x0, y0 + ascent + 1, x0 + cw - 1, y0 + ascent + 1], fill=fg)
    img = img.quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    img.save(args.out, optimize=True)


if __name__ == "__main__":
    sys.exit(main())
