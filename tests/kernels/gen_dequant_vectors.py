#!/usr/bin/env python3
"""Writes dequantization test vectors: random raw blocks per weight type plus the float32 output
of PyPI gguf.quants.dequantize for them (the ground truth dequant_test compares against).

Usage: gen_dequant_vectors.py OUT_DIR

Writes into OUT_DIR, for each type NAME (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
Q3_K, IQ4_NL, IQ4_XS, MXFP4, Q4_K, Q5_K, Q6_K): NAME.raw (the packed blocks) and NAME.f32 (expected little-endian float32), then
MANIFEST (one line per type: "NAME ggml_type_id n_elements", written last so a partial run is
never mistaken for a complete one). Blocks are random bytes, except that every fp16 scale/min
field is overwritten with a finite fp16 value of moderate size (signed, including zeros and a
few subnormals), so the outputs contain no NaN/inf from the scales; the plain F16/BF16/F32
vectors are fully random bit patterns and so include NaN, inf and subnormals on purpose.

If the gguf package is missing it writes OUT_DIR/SKIPPED with the reason and exits 0, so the
ctest fixture succeeds and the test skips with that message. Deterministic (fixed seed).
"""
import os
import sys

SEED = 20240917
N_BLOCKS = 384  # blocks per quantized type; elements for plain types below
N_PLAIN = 4096

# name -> (ggml type id, block elements, block bytes, byte offsets of fp16 scale fields)
QUANT_TYPES = {
    "Q8_0": (8, 32, 34, [0]),
    "Q4_0": (2, 32, 18, [0]),
    "Q4_1": (3, 32, 20, [0, 2]),
    "Q5_0": (6, 32, 22, [0]),
    "Q5_1": (7, 32, 24, [0, 2]),
    "Q2_K": (10, 256, 84, [80, 82]),
    "Q3_K": (11, 256, 110, [108]),
    "IQ4_NL": (20, 32, 18, [0]),
    "IQ4_XS": (23, 256, 136, [0]),
    "MXFP4": (39, 32, 17, []),
    "Q4_K": (12, 256, 144, [0, 2]),
    "Q5_K": (13, 256, 176, [0, 2]),
    "Q6_K": (14, 256, 210, [208]),
}
PLAIN_TYPES = {"F32": (0, 4), "F16": (1, 2), "BF16": (30, 2)}


def random_scales(rng, np, count):
    """Finite fp16 values: mostly +-[2^-12, 4), some zeros (+0/-0) and fp16 subnormals."""
    mag = np.exp2(rng.uniform(-12.0, 2.0, size=count)).astype(np.float16)
    sign = np.where(rng.random(count) < 0.4, -1.0, 1.0).astype(np.float16)
    vals = (mag * sign).view(np.uint16).copy()
    kind = rng.random(count)
    vals[kind < 0.03] = 0x0000  # +0
    vals[(kind >= 0.03) & (kind < 0.05)] = 0x8000  # -0
    sub = (kind >= 0.05) & (kind < 0.08)  # subnormal, random sign
    vals[sub] = rng.integers(1, 0x400, size=int(sub.sum()), dtype=np.uint16) | np.where(
        rng.random(int(sub.sum())) < 0.5, 0x8000, 0).astype(np.uint16)
    assert np.all(np.isfinite(vals.view(np.float16)))
    return vals


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):  # stale vectors from an older run must not survive
        if f == "MANIFEST" or f == "SKIPPED" or f.endswith((".raw", ".f32")):
            os.remove(os.path.join(out, f))
    try:
        import numpy as np
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize
    except ImportError as e:
        msg = f"python package missing ({e}); install gguf (pip install gguf) to run dequant_test"
        with open(os.path.join(out, "SKIPPED"), "w") as fh:
            fh.write(msg + "\n")
        print("gen_dequant_vectors: " + msg)
        return 0

    rng = np.random.default_rng(SEED)
    manifest = []

    def emit(name, type_id, raw, expected):
        assert expected.dtype == np.float32
        with open(os.path.join(out, name + ".raw"), "wb") as fh:
            fh.write(raw.tobytes())
        with open(os.path.join(out, name + ".f32"), "wb") as fh:
            fh.write(expected.astype("<f4").tobytes())
        manifest.append(f"{name} {type_id} {expected.size}")

    for name, (type_id, elem_bytes) in PLAIN_TYPES.items():
        raw = rng.integers(0, 256, size=N_PLAIN * elem_bytes, dtype=np.uint8)
        if name == "F32":
            # Keep most values ordinary floats, with the random bit patterns mixed in.
            vals = rng.standard_normal(N_PLAIN).astype(np.float32).view(np.uint8)
            keep = np.repeat(rng.random(N_PLAIN) < 0.7, 4)
            raw = np.where(keep, vals, raw).astype(np.uint8)
        expected = dequantize(raw, GGMLQuantizationType(type_id)).reshape(-1)
        emit(name, type_id, raw, np.ascontiguousarray(expected, dtype=np.float32))

    for name, (type_id, qk, nbytes, scale_offsets) in QUANT_TYPES.items():
        blocks = rng.integers(0, 256, size=(N_BLOCKS, nbytes), dtype=np.uint8)
        for off in scale_offsets:
            blocks[:, off:off + 2] = random_scales(rng, np, N_BLOCKS).view(np.uint8).reshape(-1, 2)
        if name == "MXFP4":
            # Exponent bytes whose 12 * 2^(e - 128) stays finite, including the subnormal
            # scales of e = 0 and 1.
            blocks[:, 0] = rng.integers(0, 250, size=N_BLOCKS, dtype=np.uint8)
            blocks[:4, 0] = [0, 1, 2, 127]
        if name in ("Q4_K", "Q5_K"):
            # Make sure the extreme 6-bit scales/mins (0 and 63) occur, besides random ones.
            blocks[0, 4:16] = 0x00
            blocks[1, 4:16] = 0xFF
        raw = blocks.reshape(-1)
        expected = dequantize(raw, GGMLQuantizationType(type_id)).reshape(-1)
        assert expected.size == N_BLOCKS * qk
        assert np.all(np.isfinite(expected)), name
        emit(name, type_id, raw, np.ascontiguousarray(expected, dtype=np.float32))

    with open(os.path.join(out, "MANIFEST"), "w") as fh:
        fh.write("\n".join(manifest) + "\n")
    print(f"gen_dequant_vectors: wrote {len(manifest)} types to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
