#!/usr/bin/env python3
"""Renders a kolo runtime timeline (Chrome trace-event JSON) to a PNG, for the docs.

One row per tensor (the cycle marks on top), time left to right, one colour per phase:
NEGOTIATE_* grey, QUEUE yellow, MEMCPY_IN_FUSION_BUFFER blue, the collective green,
MEMCPY_OUT_FUSION_BUFFER orange, cycle marks red ticks. Python 3 standard library only (zlib writes
the PNG), so it runs wherever CI builds kolo.

usage: kolo_timeline_png.py timeline.json out.png [width]
"""
import json
import struct
import sys
import zlib

COLOURS = {
    "NEGOTIATE": (170, 170, 170),
    "QUEUE": (240, 200, 60),
    "MEMCPY_IN_FUSION_BUFFER": (60, 110, 220),
    "MEMCPY_OUT_FUSION_BUFFER": (240, 140, 40),
}
COLLECTIVE = (40, 170, 80)
MARK = (210, 40, 40)


def write_png(path, width, height, pixels):
    raw = b"".join(b"\x00" + bytes(pixels[y * width * 3:(y + 1) * width * 3]) for y in range(height))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as out:
        out.write(b"\x89PNG\r\n\x1a\n")
        out.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        out.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        out.write(chunk(b"IEND", b""))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 1600
    events = json.load(open(sys.argv[1]))["traceEvents"]
    spans = [e for e in events if e.get("ph") == "X"]
    marks = [e for e in events if e.get("ph") == "i"]
    if not spans:
        sys.exit("no phases in " + sys.argv[1])
    rows = sorted({e["tid"] for e in spans} | {0})
    row_of = {tid: i for i, tid in enumerate(rows)}
    t0 = min(e["ts"] for e in spans)
    t1 = max(e["ts"] + e["dur"] for e in spans)
    row_h = max(2, min(8, 1200 // len(rows)))
    height = row_h * len(rows) + 4
    pixels = bytearray([255] * (width * height * 3))

    def fill(x0, x1, y0, y1, colour):
        x0, x1 = max(0, min(width - 1, x0)), max(0, min(width, max(x1, x0 + 1)))
        for y in range(y0, min(y1, height)):
            row = y * width * 3
            pixels[row + x0 * 3:row + x1 * 3] = bytes(colour) * (x1 - x0)

    scale = (width - 1) / max(t1 - t0, 1e-9)
    for e in spans:
        y = 2 + row_of[e["tid"]] * row_h
        colour = COLOURS.get("NEGOTIATE" if e["name"].startswith("NEGOTIATE") else e["name"], COLLECTIVE)
        fill(int((e["ts"] - t0) * scale), int((e["ts"] + e["dur"] - t0) * scale), y, y + row_h - 1, colour)
    for e in marks:
        x = int((e["ts"] - t0) * scale)
        if 0 <= x < width:
            fill(x, x + 2, 0, row_h + 2, MARK)
    write_png(sys.argv[2], width, height, pixels)
    print("%s: %d rows, %.1f ms" % (sys.argv[2], len(rows), (t1 - t0) / 1000))


if __name__ == "__main__":
    main()
