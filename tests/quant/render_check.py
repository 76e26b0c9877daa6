#!/usr/bin/env python3
"""Renders a `triad tradeoff` report page in headless Chromium and checks what came out.

    render_check.py PAGE.html OUT.png [--points N] [--min-colours K] [--timeout S]

1. `chromium --headless --dump-dom` (or `chromium-browser`): the page as the browser parsed it
   must hold <svg id="chart-memory"> and <svg id="chart-speed">, each with at least one <circle>
   (exactly N with --points N).
2. `chromium --headless --screenshot=OUT.png --window-size=1400,2000`: OUT.png must exist and not
   be blank: its pixels (decoded here with zlib, stdlib only) must show more than K distinct
   colours (default 16).
Exits 0 when both hold, 1 naming what failed, 2 when Chromium does not run or write its output,
77 (ctest's SKIP_RETURN_CODE in tests/unit/tradeoff_report.cmake) when Chromium is not installed.
Debian: `apt-get install chromium` (scripts/setup.sh installs it).
"""

import argparse
import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(browser, profile, args, timeout):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
           "--user-data-dir=" + profile] + args
    try:
        return subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        print(f"render_check: {os.path.basename(browser)} did not finish within {timeout} s", file=sys.stderr)
        sys.exit(2)


class ChartCounter(html.parser.HTMLParser):
    """Counts <circle> elements inside each <svg id=...> (and frontier polylines)."""

    def __init__(self):
        super().__init__()
        self.stack = []          # open <svg> ids (None for svgs without an id)
        self.circles = {}        # svg id -> circles
        self.polylines = {}      # svg id -> polylines with class "pareto"

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.stack.append(a.get("id"))
            if a.get("id"):
                self.circles.setdefault(a["id"], 0)
                self.polylines.setdefault(a["id"], 0)
        elif self.stack and self.stack[-1]:
            if tag == "circle":
                self.circles[self.stack[-1]] += 1
            elif tag == "polyline" and "pareto" in (a.get("class") or "").split():
                self.polylines[self.stack[-1]] += 1

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "svg":
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag == "svg" and self.stack:
            self.stack.pop()


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_colours(path, limit=100000):
    """Number of distinct pixel values in an 8-bit, non-interlaced PNG (stops counting at limit)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat, ihdr = 8, [], None
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ValueError("truncated PNG chunk")
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if ihdr is None or not idat:
        raise ValueError("PNG without IHDR or IDAT")
    width, height, depth, colour_type, _, _, interlace = ihdr
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(colour_type)
    if depth != 8 or channels is None or interlace != 0:
        raise ValueError(f"unsupported PNG (bit depth {depth}, colour type {colour_type}, interlace {interlace})")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    if len(raw) < height * (stride + 1):
        raise ValueError("PNG image data too short")
    prev = bytearray(stride)
    colours = set()
    for y in range(height):
        start = y * (stride + 1)
        ftype = raw[start]
        row = bytearray(raw[start + 1:start + 1 + stride])
        if ftype == 1:
            for i in range(channels, stride):
                row[i] = (row[i] + row[i - channels]) & 0xFF
        elif ftype == 2:
            row = bytearray((r + p) & 0xFF for r, p in zip(row, prev))
        elif ftype == 3:
            for i in range(stride):
                left = row[i - channels] if i >= channels else 0
                row[i] = (row[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                left = row[i - channels] if i >= channels else 0
                upleft = prev[i - channels] if i >= channels else 0
                row[i] = (row[i] + paeth(left, prev[i], upleft)) & 0xFF
        elif ftype != 0:
            raise ValueError(f"bad PNG filter type {ftype} in row {y}")
        if len(colours) < limit:
            mv = bytes(row)
            colours.update(mv[i:i + channels] for i in range(0, stride, channels))
        prev = row
    return width, height, len(colours)


def main():
    ap = argparse.ArgumentParser(description="Render a tradeoff report page in headless Chromium and check it.")
    ap.add_argument("page", help="the report's HTML page")
    ap.add_argument("png", help="where to write the screenshot")
    ap.add_argument("--points", type=int, help="expected circles per chart (the report's point count)")
    ap.add_argument("--min-colours", type=int, default=16, help="fewer distinct colours than this is 'blank'")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per Chromium run")
    args = ap.parse_args()

    if not os.path.isfile(args.page):
        print(f"render_check: FAIL: no such page: {args.page}", file=sys.stderr)
        return 1
    browser = find_chromium()
    if browser is None:
        print("render_check: SKIP: neither chromium nor chromium-browser is installed "
              "(Debian: apt-get install chromium)", file=sys.stderr)
        return 77
    url = "file://" + os.path.abspath(args.page)
    png = os.path.abspath(args.png)
    errors = []

    with tempfile.TemporaryDirectory(prefix="render_check-") as profile:
        dom = run_chromium(browser, profile, ["--dump-dom", url], args.timeout)
        if dom.returncode != 0 or not dom.stdout.strip():
            print(f"render_check: {browser} --dump-dom failed (exit {dom.returncode}):\n"
                  + dom.stderr.decode(errors="replace")[-2000:], file=sys.stderr)
            return 2
        counter = ChartCounter()
        counter.feed(dom.stdout.decode("utf-8", errors="replace"))
        for chart in ("chart-memory", "chart-speed"):
            if chart not in counter.circles:
                errors.append(f"the rendered DOM has no <svg id=\"{chart}\">")
            elif counter.circles[chart] == 0:
                errors.append(f"<svg id=\"{chart}\"> has no <circle>")
            elif args.points is not None and counter.circles[chart] != args.points:
                errors.append(f"<svg id=\"{chart}\"> has {counter.circles[chart]} circles, expected {args.points}")
            else:
                print(f"render_check: {chart}: {counter.circles[chart]} circles, "
                      f"{counter.polylines[chart]} frontier polyline(s)")

        if os.path.exists(png):
            os.remove(png)
        shot = run_chromium(browser, profile, ["--screenshot=" + png, "--window-size=1400,2000", url], args.timeout)
        if not os.path.isfile(png):
            print(f"render_check: {browser} --screenshot wrote no {png} (exit {shot.returncode}):\n"
                  + shot.stderr.decode(errors="replace")[-2000:], file=sys.stderr)
            return 2

    try:
        width, height, colours = png_colours(png)
    except (ValueError, zlib.error, struct.error) as e:
        errors.append(f"cannot read the screenshot {png}: {e}")
    else:
        if colours < args.min_colours:
            errors.append(f"the screenshot {png} looks blank: {colours} distinct colours "
                          f"(fewer than {args.min_colours})")
        else:
            print(f"render_check: screenshot {width}x{height}, {colours} distinct colours")

    if errors:
        for e in errors:
            print("render_check: FAIL: " + e, file=sys.stderr)
        return 1
    print(f"render_check: OK ({args.page} -> {png})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
