#!/usr/bin/env python3
"""Writes the safetensors seed corpus (tests/fuzz/corpus/safetensors/): valid files written by
PyPI `safetensors` (the format's reference implementation, independent of our reader) with known
values that tests/unit/safetensors_test.cpp checks, hand-built files for the dtypes numpy lacks
(BF16, FP8 with DeepSeek-style block scales), and malformed variants. The corpus is checked in;
rerun this only to change it:  python3 tests/fuzz/make_safetensors_corpus.py"""
import json
import os
import struct

import numpy as np
from safetensors.numpy import save

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")


def raw(header: dict, data: bytes, pad_to=8) -> bytes:
    """A file from a header and a data section (as the reference pads: spaces to 8 bytes)."""
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % pad_to)
    return struct.pack("<Q", len(h)) + h + data


def write(name: str, blob: bytes):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(blob)


def main():
    os.makedirs(OUT, exist_ok=True)
    # Valid, by the reference writer. The values are what the C++ test expects.
    write("valid_f32_f16", save({"a": np.arange(6, dtype=np.float32).reshape(2, 3),
                                 "b": (np.arange(4, dtype=np.float16) * np.float16(0.5)),
                                 "empty": np.zeros((0, 3), dtype=np.float32)},
                                metadata={"format": "pt"}))
    write("valid_ints", save({"i8": np.array([-1, 2, -3], dtype=np.int8), "u8": np.array([255], dtype=np.uint8),
                              "i64": np.array([[1 << 40]], dtype=np.int64), "f64": np.array([0.25], dtype=np.float64)}))
    # BF16: 1.0, -2.0, 0.5 (top halves of the f32 bits).
    bf = struct.pack("<3H", 0x3F80, 0xC000, 0x3F00)
    write("valid_bf16", raw({"w": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}, bf))
    # FP8 E4M3 weight [2, 3] with a [1, 1] F32 scale_inv (one 128x128 block): codes 0x38 = 1.0,
    # 0x40 = 2.0, 0xB8 = -1.0, 0x00, 0x30 = 0.5, 0x44 = 3.0; scale 0.5.
    w8 = bytes([0x38, 0x40, 0xB8, 0x00, 0x30, 0x44])
    sc = struct.pack("<f", 0.5)
    write("valid_fp8_block_scaled", raw({"w.weight": {"dtype": "F8_E4M3", "shape": [2, 3], "data_offsets": [0, 6]},
                                         "w.weight_scale_inv": {"dtype": "F32", "shape": [1, 1], "data_offsets": [6, 10]}},
                                        w8 + sc))
    # Malformed: each must be refused with a clear error.
    good = save({"a": np.arange(4, dtype=np.float32)})
    n = struct.unpack("<Q", good[:8])[0]
    write("bad_truncated", good[:-3])
    write("bad_header_len_past_end", struct.pack("<Q", 1 << 40) + good[8:])
    write("bad_header_len_huge", struct.pack("<Q", (1 << 64) - 1) + good[8:])
    write("bad_not_json", struct.pack("<Q", 8) + b"{nope!!}" + b"\0" * 16)
    write("bad_dtype", raw({"a": {"dtype": "Q4_K", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 16))
    write("bad_negative_shape", raw({"a": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}}, b"\0" * 16))
    write("bad_size_mismatch", raw({"a": {"dtype": "F32", "shape": [5], "data_offsets": [0, 16]}}, b"\0" * 16))
    write("bad_overlap", raw({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, b"\0" * 16))
    write("bad_hole", raw({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, b"\0" * 16))
    write("bad_shape_overflow", raw({"a": {"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": [0, 16]}}, b"\0" * 16))
    write("bad_deep", struct.pack("<Q", 400) + b"{" + b'"a":[' * 40 + b"1" + b"]" * 40 + b"}" + b" " * (400 - 2 - 40 * 6 - 1))
    write("bad_metadata_not_string", raw({"__metadata__": {"k": 1}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4))
    # An index (the fuzz target parses every input as one too).
    write("index_two_shards", json.dumps({"metadata": {"total_size": 20},
                                          "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                         "b": "model-00002-of-00002.safetensors"}}).encode())
    write("index_bad_path", json.dumps({"weight_map": {"a": "../../etc/passwd"}}).encode())
    print("wrote", len(os.listdir(OUT)), "files to", OUT)


if __name__ == "__main__":
    main()
