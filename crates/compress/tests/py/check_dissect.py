#!/usr/bin/env python3
"""Differential check of ringshare-compress against dissect.util (an
independent Python implementation of the [MS-XCA] decompressors and LZ4).

Usage: check_dissect.py DIR
  DIR/<case>.raw            the original bytes
  DIR/<case>.<alg>          ringshare's compressed form (alg: lz77, lznt1, lz77_huffman, lz4)
      -> dissect decompresses it; must equal <case>.raw
Exit 0 when every check agrees, 1 otherwise; 3 when dissect is missing.
"""
import pathlib
import sys

try:
    from dissect.util.compression import lz4, lznt1, lzxpress, lzxpress_huffman
except ImportError as e:  # the Rust test turns this into a skip
    print(f"dissect.util not importable: {e}")
    sys.exit(3)

DECOMPRESS = {
    "lz77": lzxpress.decompress,
    "lznt1": lznt1.decompress,
    "lz77_huffman": lzxpress_huffman.decompress,
}


def dissect_decompress(alg, data, size):
    if alg == "lz77_huffman":
        # dissect decodes LZ77+Huffman until its read position reaches the end
        # of the input: it needs slack after the stream (which ends where the
        # [MS-XCA] 2.2.4 decoder stops reading, as the spec's example does),
        # then decodes the end symbol as a match, so compare the prefix.
        return bytes(DECOMPRESS[alg](data + bytes(4)))[:size]
    if alg == "lz4":
        return bytes(lz4.decompress(data, uncompressed_size=size))
    return bytes(DECOMPRESS[alg](data))


def main():
    d = pathlib.Path(sys.argv[1])
    bad = 0
    checked = 0
    for raw_path in sorted(d.glob("*.raw")):
        case = raw_path.stem
        raw = raw_path.read_bytes()
        for alg in ("lz77", "lznt1", "lz77_huffman", "lz4"):
            p = d / f"{case}.{alg}"
            if not p.exists():
                continue
            checked += 1
            try:
                got = dissect_decompress(alg, p.read_bytes(), len(raw))
            except Exception as e:  # noqa: BLE001 - report every failure
                print(f"{case} {alg}: dissect raised {e!r}")
                bad += 1
                continue
            if got != raw:
                print(f"{case} {alg}: dissect gave {len(got)} bytes, want {len(raw)}"
                      f" (first difference at {first_diff(got, raw)})")
                bad += 1
    print(f"dissect.util checked {checked} streams, {bad} disagreed")
    return 1 if bad else 0


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


if __name__ == "__main__":
    sys.exit(main())
