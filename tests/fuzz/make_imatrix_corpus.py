#!/usr/bin/env python3
"""Writes the imatrix fuzz seeds into tests/fuzz/corpus/imatrix/ with PyPI gguf: valid files
(one matrix, stacked experts, an expert that saw no tokens) and malformed ones (wrong
general.type, a missing counts tensor, mismatched expert counts, negative or NaN sums, F16
sums, an unexpected tensor). Deterministic; run it again after changing the format rules.
"""
import os
import sys

import numpy as np
from gguf import GGUFWriter

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "imatrix")


def write(name, tensors, gtype="imatrix"):
    path = os.path.join(OUT, name + ".gguf")
    w = GGUFWriter(path, "imatrix")
    w.add_string("general.type", gtype)
    w.add_array("imatrix.datasets", ["calib.txt"])
    w.add_uint32("imatrix.chunk_count", 2)
    w.add_uint32("imatrix.chunk_size", 64)
    for n, a in tensors.items():
        w.add_tensor(n, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(1)
    s = lambda *shape: (rng.random(shape) * 10).astype(np.float32)
    c = lambda *v: np.array(v, dtype=np.float32)
    write("valid_one", {"blk.0.ffn_up.weight.in_sum2": s(8), "blk.0.ffn_up.weight.counts": c(128)})
    write("valid_experts", {"blk.0.ffn_up_exps.weight.in_sum2": s(3, 8),
                            "blk.0.ffn_up_exps.weight.counts": c(5, 0, 7).reshape(3, 1),
                            "blk.0.attn_q.weight.in_sum2": s(8), "blk.0.attn_q.weight.counts": c(2)})
    write("bad_type", {"x.in_sum2": s(8), "x.counts": c(1)}, gtype="model")
    write("bad_no_counts", {"x.in_sum2": s(8)})
    write("bad_counts_only", {"x.counts": c(1)})
    write("bad_expert_mismatch", {"x.in_sum2": s(2, 8), "x.counts": c(1, 2, 3).reshape(3, 1)})
    write("bad_negative", {"x.in_sum2": -s(8), "x.counts": c(1)})
    write("bad_nan", {"x.in_sum2": np.full(8, np.nan, dtype=np.float32), "x.counts": c(1)})
    write("bad_f16", {"x.in_sum2": s(8).astype(np.float16), "x.counts": c(1)})
    write("bad_extra_tensor", {"x.in_sum2": s(8), "x.counts": c(1), "x.weight": s(8)})
    print(f"wrote {len(os.listdir(OUT))} seeds to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
