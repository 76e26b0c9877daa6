"""Simple numpy encoders for the GGML K-quant block formats Q4_K, Q5_K and Q6_K.

What it is: PyPI gguf 0.19 can dequantize K-quants but not quantize them, and the synthetic
test models (make_synthetic.py) need K-quant weights to exercise the engine's Q4_K/Q5_K/Q6_K
paths. These encoders write valid blocks in the published GGML layouts with plain min/max
rounding (not llama.cpp's error-minimizing search: quality does not matter for a test, the
bytes only have to be valid and deterministic). Correctness of the layout is checked by
tests/reference/test_reference.py against gguf.quants.dequantize.

Block layouts (256 values per super-block, little-endian fp16):
  Q4_K (144 B): d, dmin, scales[12] (8 x 6-bit scale + 8 x 6-bit min), qs[128] (4-bit);
                value = d*sc[j]*q - dmin*m[j] for sub-block j of 32 values.
  Q5_K (176 B): d, dmin, scales[12], qh[32] (bit j of qh[l] = 5th bit of sub-block j, elt l),
                qs[128]; value = d*sc[j]*q - dmin*m[j], q in 0..31.
  Q6_K (210 B): ql[128], qh[64], scales[16] (int8, one per 16 values), d;
                value = d*scales[g]*(q - 32), q in 0..63.

Thread-safety: pure functions.
"""
from __future__ import annotations

import numpy as np

QK_K = 256


def _f16(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def _pack_scale_min(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """sc, mn: [n, 8] ints in 0..63 -> [n, 12] uint8 (GGML get_scale_min_k4 layout)."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((mn[:, 4:8] & 0x0F) << 4)
    return out


def _affine_subblocks(x: np.ndarray, qmax: int):
    """x [n, 8, 32] -> (d fp16 [n], dmin fp16 [n], sc [n,8], mq [n,8], q [n,8,32])."""
    lo = np.minimum(x.min(axis=2), 0.0)            # [n, 8] (<= 0)
    hi = x.max(axis=2)
    scale = np.maximum(hi - lo, 0.0) / qmax         # per sub-block step
    mins = -lo                                      # >= 0
    d = _f16(scale.max(axis=1) / 63.0)
    dmin = _f16(mins.max(axis=1) / 63.0)
    d32 = d.astype(np.float32)[:, None]
    dm32 = dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.rint(scale / np.where(d32 > 0, d32, 1)), 0)
        mq = np.where(dm32 > 0, np.rint(mins / np.where(dm32 > 0, dm32, 1)), 0)
    sc = np.clip(sc, 0, 63).astype(np.int32)
    mq = np.clip(mq, 0, 63).astype(np.int32)
    step = (d32 * sc)[:, :, None]
    off = (dm32 * mq)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step > 0, np.rint((x + off) / np.where(step > 0, step, 1)), 0)
    q = np.clip(q, 0, qmax).astype(np.uint8)
    return d, dmin, sc, mq, q


def _blocks(data: np.ndarray) -> np.ndarray:
    data = np.asarray(data, dtype=np.float32)
    if data.shape[-1] % QK_K != 0:
        raise ValueError(f"row size {data.shape[-1]} is not a multiple of {QK_K}")
    return data.reshape(-1, QK_K)


def _out_shape(data: np.ndarray, block_bytes: int):
    return tuple(data.shape[:-1]) + (data.shape[-1] // QK_K * block_bytes,)


def quantize_q4_k(data: np.ndarray) -> np.ndarray:
    """float rows (last dim % 256 == 0) -> uint8 Q4_K bytes, shape [..., n/256*144]."""
    x = _blocks(data)
    n = x.shape[0]
    d, dmin, sc, mq, q = _affine_subblocks(x.reshape(n, 8, 32), 15)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(n, 128)
    out = np.concatenate([d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2),
                          _pack_scale_min(sc, mq), qs], axis=1)
    return out.reshape(_out_shape(data, 144))


def quantize_q5_k(data: np.ndarray) -> np.ndarray:
    """float rows -> uint8 Q5_K bytes, shape [..., n/256*176]."""
    x = _blocks(data)
    n = x.shape[0]
    d, dmin, sc, mq, q = _affine_subblocks(x.reshape(n, 8, 32), 31)
    low = q & 0x0F
    qs = (low[:, 0::2, :] | (low[:, 1::2, :] << 4)).reshape(n, 128)
    hib = (q >> 4) & 1                                        # [n, 8, 32]
    qh = np.zeros((n, 32), dtype=np.uint8)
    for j in range(8):
        qh |= (hib[:, j, :] << j).astype(np.uint8)
    out = np.concatenate([d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2),
                          _pack_scale_min(sc, mq), qh, qs], axis=1)
    return out.reshape(_out_shape(data, 176))


def quantize_q6_k(data: np.ndarray) -> np.ndarray:
    """float rows -> uint8 Q6_K bytes, shape [..., n/256*210]."""
    x = _blocks(data)
    n = x.shape[0]
    g = x.reshape(n, 16, 16)
    s = np.abs(g).max(axis=2) / 31.0                           # [n, 16] step per group
    d = _f16(s.max(axis=1) / 127.0)
    d32 = d.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.rint(s / np.where(d32 > 0, d32, 1)), 0)
    sc = np.clip(sc, -128, 127).astype(np.int8)
    step = (d32 * sc.astype(np.float32))[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step != 0, np.rint(g / np.where(step != 0, step, 1)), 0)
    u = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(n, 2, 128)   # per half, r in 0..127
    ql = np.zeros((n, 2, 64), dtype=np.uint8)
    qh = np.zeros((n, 2, 32), dtype=np.uint8)
    for k in range(2):            # element r = 64k + b -> nibble k of ql[b]
        ql |= ((u[:, :, 64 * k:64 * k + 64] & 0x0F) << (4 * k)).astype(np.uint8)
    for s4 in range(4):           # element r = 32s + b -> bits 2s..2s+1 of qh[b]
        qh |= (((u[:, :, 32 * s4:32 * s4 + 32] >> 4) & 3) << (2 * s4)).astype(np.uint8)
    out = np.concatenate([ql.reshape(n, 128), qh.reshape(n, 64), sc.view(np.uint8),
                          d.view(np.uint8).reshape(n, 2)], axis=1)
    return out.reshape(_out_shape(data, 210))
