#!/usr/bin/env python3
"""Generates the GGUF seed corpus in tests/fuzz/corpus/gguf/ (and the tokenizer seeds in
tests/fuzz/corpus/tokenizer/) with the gguf Python package.

Valid seeds are written by gguf-py's GGUFWriter (an implementation independent of Triad's), so
tests/unit/gguf_test.cpp also parses them and checks the values written here. Malformed seeds are
valid images with a few bytes patched, or short hand-built images. The tensors are tiny synthetic
arrays (no model weights); the whole corpus stays well under 200 KB.

Run from anywhere: python3 tests/fuzz/make_corpus.py  (rewrites the generated files; the
fuzzer never writes into this folder: scripts/fuzz.sh works on a copy).
"""
import os
import struct
import tempfile

import numpy as np
import gguf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")
Q = gguf.GGMLQuantizationType


def build(fill, alignment=None, arch="llama"):
    """Runs fill(writer) on a fresh GGUFWriter and returns the file bytes."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.gguf")
        w = gguf.GGUFWriter(path, arch=arch)
        if alignment is not None:
            w.add_custom_alignment(alignment)
        fill(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            return f.read()


def fill_minimal(w):
    w.add_string("general.name", "minimal")


def fill_all_types(w):
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.25)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo\nworld")
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", -1.5e300)
    w.add_array("t.arr_str", ["a", "", "ccc"])
    w.add_array("t.arr_f32", [1.5, -2.0, 3.25])
    w.add_array("t.arr_i32", [7, -8, 9, 10])
    w.add_array("t.arr_bool", [True, False])
    w.add_array("t.nested", [[1, 2], [3], [4, 5, 6]])
    rng = np.random.default_rng(1234)
    w.add_tensor("f32.2d", rng.standard_normal((2, 4)).astype(np.float32))  # ne = [4, 2]
    w.add_tensor("f16.1d", np.arange(8, dtype=np.float16))
    # Quantized tensors: raw bytes with shape [rows, bytes per row].
    q8 = rng.integers(0, 256, size=(2, 34), dtype=np.uint8)
    w.add_tensor("q8_0.2d", q8, raw_dtype=Q.Q8_0)  # ne = [32, 2]
    q4k = rng.integers(0, 256, size=(1, 144), dtype=np.uint8)
    w.add_tensor("q4_k.1d", q4k, raw_dtype=Q.Q4_K)  # ne = [256, 1]
    w.add_tensor("i32.1d", np.array([1, -2, 3], dtype=np.int32))


def add_letter_vocab(w):
    """The tiny models' vocabulary: <unk> <s> </s> and the letters a..m, SPM-style."""
    tokens = ["<unk>", "<s>", "</s>"] + [chr(ord("a") + k) for k in range(13)]
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens)
    w.add_array("tokenizer.ggml.scores", [float(-k) for k in range(len(tokens))])
    w.add_array("tokenizer.ggml.token_type", [2, 3, 3] + [1] * 13)


def fill_tiny_llama(w):
    w.add_uint32("llama.context_length", 64)
    w.add_uint32("llama.embedding_length", 8)
    w.add_uint32("llama.block_count", 1)
    w.add_uint32("llama.feed_forward_length", 16)
    w.add_uint32("llama.attention.head_count", 2)
    w.add_uint32("llama.attention.head_count_kv", 1)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    add_letter_vocab(w)
    rng = np.random.default_rng(7)
    f = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)
    w.add_tensor("token_embd.weight", f(16, 8))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", f(8, 8))
    w.add_tensor("blk.0.attn_k.weight", f(4, 8))
    w.add_tensor("blk.0.attn_v.weight", f(4, 8))
    w.add_tensor("blk.0.attn_output.weight", f(8, 8))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("blk.0.ffn_gate.weight", f(16, 8).astype(np.float16))
    w.add_tensor("blk.0.ffn_up.weight", f(16, 8).astype(np.float16))
    w.add_tensor("blk.0.ffn_down.weight", f(8, 16).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))


def fill_tiny_qwen3moe(w):
    """A mixture-of-experts layer: 4 experts of FFN 8, 2 used, stacked in 3-D tensors."""
    a = "qwen3moe."
    w.add_uint32(a + "context_length", 64)
    w.add_uint32(a + "embedding_length", 8)
    w.add_uint32(a + "block_count", 1)
    w.add_uint32(a + "feed_forward_length", 16)
    w.add_uint32(a + "attention.head_count", 2)
    w.add_uint32(a + "attention.head_count_kv", 1)
    w.add_uint32(a + "attention.key_length", 4)
    w.add_uint32(a + "attention.value_length", 4)
    w.add_float32(a + "attention.layer_norm_rms_epsilon", 1e-6)
    w.add_uint32(a + "expert_count", 4)
    w.add_uint32(a + "expert_used_count", 2)
    w.add_uint32(a + "expert_feed_forward_length", 8)
    add_letter_vocab(w)
    rng = np.random.default_rng(11)
    f = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)
    w.add_tensor("token_embd.weight", f(16, 8))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", f(8, 8))
    w.add_tensor("blk.0.attn_k.weight", f(4, 8))
    w.add_tensor("blk.0.attn_v.weight", f(4, 8))
    w.add_tensor("blk.0.attn_q_norm.weight", np.ones(4, dtype=np.float32))
    w.add_tensor("blk.0.attn_k_norm.weight", np.ones(4, dtype=np.float32))
    w.add_tensor("blk.0.attn_output.weight", f(8, 8))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("blk.0.ffn_gate_inp.weight", f(4, 8))
    w.add_tensor("blk.0.ffn_gate_exps.weight", f(4, 8, 8).astype(np.float16))
    w.add_tensor("blk.0.ffn_up_exps.weight", f(4, 8, 8).astype(np.float16))
    w.add_tensor("blk.0.ffn_down_exps.weight", f(4, 8, 8).astype(np.float16))
    w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))


def find(data, needle, start=0):
    k = data.find(needle, start)
    assert k >= 0, needle
    return k


def tensor_info_at(data, name):
    """Offset of the u32 n_dims field following tensor name `name` in the info section."""
    k = find(data, struct.pack("<Q", len(name)) + name)
    return k + 8 + len(name)


def patch(data, at, fmt, value):
    b = bytearray(data)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def raw_header(version, n_tensors, n_kv):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def raw_str(s):
    return struct.pack("<Q", len(s)) + s


def fill_tiny_deepseek2(w):
    """Latent attention (kv rank 4 + 4 rotary dims, split attn_k_b / attn_v_b) and a routed layer
    with sigmoid scores, a selection bias, 2 groups of 2 experts and a shared expert."""
    a = "deepseek2."
    for key, v in [("context_length", 64), ("embedding_length", 8), ("block_count", 1),
                   ("feed_forward_length", 16), ("attention.head_count", 2), ("attention.head_count_kv", 2),
                   ("attention.key_length", 8), ("attention.value_length", 4), ("attention.key_length_mla", 6),
                   ("attention.value_length_mla", 3), ("attention.kv_lora_rank", 4), ("rope.dimension_count", 4),
                   ("expert_count", 4), ("expert_used_count", 2), ("expert_feed_forward_length", 8),
                   ("expert_shared_count", 1), ("expert_gating_func", 2), ("expert_group_count", 2),
                   ("expert_group_used_count", 1), ("leading_dense_block_count", 0)]:
        w.add_uint32(a + key, v)
    w.add_float32(a + "attention.layer_norm_rms_epsilon", 1e-6)
    w.add_bool(a + "expert_weights_norm", True)
    w.add_float32(a + "expert_weights_scale", 2.5)
    add_letter_vocab(w)
    rng = np.random.default_rng(12)
    f = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)
    w.add_tensor("token_embd.weight", f(16, 8))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("blk.0.attn_q.weight", f(12, 8))
    w.add_tensor("blk.0.attn_kv_a_mqa.weight", f(8, 8))
    w.add_tensor("blk.0.attn_kv_a_norm.weight", np.ones(4, dtype=np.float32))
    w.add_tensor("blk.0.attn_k_b.weight", f(2, 4, 2))
    w.add_tensor("blk.0.attn_v_b.weight", f(2, 3, 4))
    w.add_tensor("blk.0.attn_output.weight", f(8, 6))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(8, dtype=np.float32))
    w.add_tensor("blk.0.ffn_gate_inp.weight", f(4, 8))
    w.add_tensor("blk.0.exp_probs_b.bias", f(4))
    w.add_tensor("blk.0.ffn_gate_exps.weight", f(4, 8, 8))
    w.add_tensor("blk.0.ffn_up_exps.weight", f(4, 8, 8))
    w.add_tensor("blk.0.ffn_down_exps.weight", f(4, 8, 8))
    w.add_tensor("blk.0.ffn_gate_shexp.weight", f(8, 8))
    w.add_tensor("blk.0.ffn_up_shexp.weight", f(8, 8))
    w.add_tensor("blk.0.ffn_down_shexp.weight", f(8, 8))
    w.add_tensor("output_norm.weight", np.ones(8, dtype=np.float32))


def charsmap(keys: dict, root_base: int = 1) -> bytes:
    """A SentencePiece precompiled charsmap for single-byte keys: the uint32 size of a darts-clone
    double array, the array, then the NUL-terminated replacements (keys: byte -> replacement)."""
    strings, offsets = b"", {}
    for k, r in keys.items():
        offsets[k] = len(strings)
        strings += r.encode() + b"\0"
    units = {0: root_base << 10}
    for k in keys:
        node = root_base ^ k
        units[node] = (1 << 10) | (1 << 8) | k  # label k, a leaf, base 1
        units[node ^ 1] = offsets[k]             # the value unit: the replacement's offset
    n = max(units) + 1
    arr = b"".join(struct.pack("<I", units.get(i, 0)) for i in range(n))
    return struct.pack("<I", len(arr)) + arr + strings


def fill_t5_vocab(w, cmap):
    pieces = ["<pad>", "</s>", "<unk>", "\u2581", "\u2581a", "a", "b", "bb", "\u2581A", "x", "\u2581Hello"]
    w.add_string("tokenizer.ggml.model", "t5")
    w.add_array("tokenizer.ggml.tokens", pieces)
    w.add_array("tokenizer.ggml.scores", [0.0, 0.0, 0.0] + [-1.0 - 0.5 * k for k in range(len(pieces) - 3)])
    w.add_array("tokenizer.ggml.token_type", [3, 3, 2] + [1] * (len(pieces) - 3))
    w.add_bool("tokenizer.ggml.add_space_prefix", True)
    w.add_bool("tokenizer.ggml.remove_extra_whitespaces", True)
    if cmap is not None:
        w.add_key_value("tokenizer.ggml.precompiled_charsmap", list(cmap), gguf.GGUFValueType.ARRAY,
                        sub_type=gguf.GGUFValueType.UINT8)


def tokenizer_seeds(tiny: bytes) -> dict:
    """Seeds for tokenizer_fuzz (corpus/tokenizer): a Unigram vocabulary with a charsmap mapping
    'A' -> 'a' and 'B' -> 'bb', without one, with the map's size header past its end, and with a
    replacement offset past the strings; the GGUF seeds' llama vocabulary is replayed as well."""
    cmap = charsmap({0x41: "a", 0x42: "bb"})
    seeds = {
        "valid_t5_charsmap.gguf": build(lambda w: fill_t5_vocab(w, cmap)),
        "valid_t5_no_charsmap.gguf": build(lambda w: fill_t5_vocab(w, None)),
        "bad_t5_charsmap_size.gguf": build(lambda w: fill_t5_vocab(w, struct.pack("<I", 1 << 20) + cmap[4:])),
        "bad_t5_charsmap_offset.gguf": build(lambda w: fill_t5_vocab(w, cmap[:4 + 4 * 65] + struct.pack("<I", 999) + cmap[4 + 4 * 66:])),
        "valid_llama_vocab.gguf": tiny,
    }
    return seeds


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}
    seeds["valid_minimal.gguf"] = build(fill_minimal)
    all_types = build(fill_all_types, alignment=64)
    seeds["valid_all_types.gguf"] = all_types
    seeds["valid_v2.gguf"] = patch(all_types, 4, "<I", 2)  # v2 and v3 share one layout
    tiny = build(fill_tiny_llama)
    seeds["valid_tiny_llama.gguf"] = tiny

    moe = build(fill_tiny_qwen3moe, arch="qwen3moe")
    seeds["valid_tiny_qwen3moe.gguf"] = moe
    # The experts' 3-D shape with a huge third dimension.
    seeds["bad_expert_dims.gguf"] = patch(moe, tensor_info_at(moe, b"blk.0.ffn_up_exps.weight") + 4 + 16,
                                          "<Q", 1 << 40)

    ds = build(fill_tiny_deepseek2, arch="deepseek2")
    seeds["valid_tiny_deepseek2.gguf"] = ds
    # attn_k_b's head count (third dimension) huge.
    seeds["bad_latent_heads.gguf"] = patch(ds, tensor_info_at(ds, b"blk.0.attn_k_b.weight") + 4 + 16, "<Q", 1 << 40)

    seeds["bad_magic.gguf"] = b"GGUG" + tiny[4:]
    seeds["bad_version1.gguf"] = patch(tiny, 4, "<I", 1)
    seeds["bad_truncated.gguf"] = all_types[: len(all_types) // 2]
    seeds["bad_kv_count.gguf"] = patch(tiny, 16, "<Q", 1 << 60)
    seeds["bad_tensor_count.gguf"] = patch(tiny, 8, "<Q", 1 << 62)
    key = b"tokenizer.ggml.tokens"
    arr = find(tiny, raw_str(key)) + 8 + len(key) + 4  # value type, then element type
    seeds["bad_array_count.gguf"] = patch(tiny, arr + 4, "<Q", 1 << 60)
    seeds["bad_array_elem_type.gguf"] = patch(tiny, arr, "<I", 13)
    nd = tensor_info_at(all_types, b"f32.2d")
    seeds["bad_dims_overflow.gguf"] = patch(patch(all_types, nd + 4, "<Q", 1 << 40), nd + 12, "<Q", 1 << 40)
    seeds["bad_n_dims.gguf"] = patch(all_types, nd, "<I", 5)
    seeds["bad_tensor_type.gguf"] = patch(all_types, nd + 4 + 16, "<I", 99)
    seeds["bad_tensor_offset.gguf"] = patch(all_types, nd + 4 + 16 + 4, "<Q", 1 << 20)
    seeds["bad_misaligned.gguf"] = patch(all_types, nd + 4 + 16 + 4, "<Q", 4)
    # Arrays nested 9 deep (the limit is 8), each holding one array, innermost one u8.
    deep = raw_header(3, 0, 1) + raw_str(b"deep") + struct.pack("<I", 9)
    for _ in range(8):
        deep += struct.pack("<IQ", 9, 1)
    deep += struct.pack("<IQB", 0, 1, 7)
    seeds["bad_deep_nesting.gguf"] = deep
    seeds["bad_alignment.gguf"] = (raw_header(3, 0, 1) + raw_str(b"general.alignment") +
                                   struct.pack("<II", 4, 48))
    seeds["bad_bool.gguf"] = raw_header(3, 0, 1) + raw_str(b"b") + struct.pack("<IB", 7, 2)

    out_tok = os.path.join(os.path.dirname(OUT), "tokenizer")
    os.makedirs(out_tok, exist_ok=True)
    for name, data in sorted(tokenizer_seeds(tiny).items()):
        with open(os.path.join(out_tok, name), "wb") as f:
            f.write(data)
        print(f"tokenizer/{name:28s} {len(data):6d} bytes")

    total = 0
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        total += len(data)
        print(f"{name:28s} {len(data):6d} bytes")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
