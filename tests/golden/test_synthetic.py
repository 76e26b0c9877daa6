"""Golden tests on synthetic random-weight models: triad's logits vs the numpy reference.

Models come from tests/reference/make_synthetic.py (llama, llama with a sliding window, llama
with partial rotary + linear rope scaling, llama with YaRN, qwen2, qwen3, gemma3, qwen3moe, qwen2moe,
Mixtral in its stacked and per-expert tensor layouts, deepseek2 (latent attention) shaped like V3 and
like V2-Lite, glm4moe, gpt-oss (sinks, alternating windows, clamped SwiGLU), and the llama weights
stored
as every weight type). Every test runs 80 tokens (longer than the 10-12 token sliding windows)
at positions 0..79 through `triad eval-logits`, in one forward call, in calls of 7 tokens, and
one token at a time (the decode path through the KV cache), and compares with the reference.

Metrics (golden_util.compare_logits): max_rel = max|triad - ref| / max|ref| over the whole
[80, vocab] matrix; row rel-L2 = ||triad_i - ref_i|| / ||ref_i|| per row; top-1 agreement.

Tolerances and why:
  * F32 and F16 weights (no activation rounding in the engine; the reference dequantizes F16
    exactly): max_rel <= 1e-4 and every row's rel-L2 <= 1e-4. Float32 accumulation over
    <= 512 terms through 2-7 layers gives ~1e-6; a wrong RoPE pair, mask or norm gives > 1e-2.
  * Quantized weights (Q4_0 ... Q8_0, Q4_K/Q5_K/Q6_K, the Q4_K_M-like gemma mix): the engine
    rounds activations to 8-bit blocks of 32 before multiplying. Emulating exactly that in the
    reference (ref_model act_quant=True) moves these models' logits by row rel-L2 <= 0.043
    (mean 0.026-0.028) and keeps top-1 on >= 92% of rows; float32-level noise before the
    rounding alone moves them by ~1% (rounding flips), and random-weight logits have many
    near-ties. So: row rel-L2 max <= 0.12, mean <= 0.06 (about 3x / 2x margins), top-1 on
    >= 80% of rows, and where top-1 differs, triad's pick is at most 0.06 x max|ref row| below
    the reference's best ("top1_gap"; observed <= 0.021). Mis-decoded weights (wrong scale,
    min sign, nibble order) move rows by 0.2-1 and fail. test_reference.py re-checks that the
    emulation stays inside these bounds.
  * BF16 weights (activations rounded to bf16): emulation moves rows by <= 0.012 (mean 0.008);
    tolerance row rel-L2 max <= 0.04, mean <= 0.02, top-1 >= 0.9, top1_gap <= 0.02.
"""
import os
import subprocess

import numpy as np
import pytest

import golden_util as gu
import make_synthetic

N_POS = 80


def sequence() -> list:
    """BOS then 79 fixed pseudo-random ids (byte tokens, pieces and unused ids alike)."""
    rng = np.random.default_rng(20240611)
    return [1] + [int(t) for t in rng.integers(3, make_synthetic.N_VOCAB, N_POS - 1)]


F32_MODELS = ["llama", "llama_swa", "llama_rope", "qwen2", "qwen3", "gemma3", "llama_f16", "qwen3moe",
              "qwen2moe", "mixtral", "mixtral_split", "deepseek2", "deepseek2_lite", "glm4moe", "gpt-oss",
              "llama_yarn"]
QUANT_MODELS = ["llama_q8_0", "llama_q4_0", "llama_q4_1", "llama_q5_0", "llama_q5_1",
                "llama_q4_k", "llama_q5_k", "llama_q6_k", "gemma3_q4_k_m"]

F32_TOL = gu.F32_TOL
QUANT_TOL = gu.QUANT_TOL
BF16_TOL = gu.BF16_TOL


def _logits_pair(synthetic_dir, name, chunk, threads=gu.DEFAULT_THREADS):
    path = os.path.join(synthetic_dir, name + ".gguf")
    toks = sequence()
    ref = gu.ref_logits(path, toks)
    got = gu.eval_logits(path, toks, ref.shape[1], chunk=chunk, threads=threads)
    return got, ref


@pytest.mark.parametrize("chunk", [None, 7, 1], ids=["one_call", "chunk7", "decode"])
@pytest.mark.parametrize("name", F32_MODELS)
def test_f32_logits(synthetic_dir, name, chunk):
    got, ref = _logits_pair(synthetic_dir, name, chunk)
    m = gu.compare_logits(got, ref)
    assert m["max_rel"] <= F32_TOL and m["row_rel_max"] <= F32_TOL, \
        f"{name} chunk={chunk}: {gu.describe(m)} (tolerance {F32_TOL})"


@pytest.mark.parametrize("name,chunk", [("gemma3", 5), ("llama", None), ("qwen3moe", 7), ("deepseek2", 7),
                                        ("gpt-oss", 3)])
def test_f32_two_threads(synthetic_dir, name, chunk):
    got, ref = _logits_pair(synthetic_dir, name, chunk, threads=2)
    m = gu.compare_logits(got, ref)
    assert m["max_rel"] <= F32_TOL and m["row_rel_max"] <= F32_TOL, \
        f"{name} chunk={chunk} threads=2: {gu.describe(m)}"


LONG_MODELS = ["llama_yarn_4k", "llama_rope_4k"]


def long_sequence(n=4096) -> list:
    rng = np.random.default_rng(4096)
    return [1] + [int(t) for t in rng.integers(3, make_synthetic.N_VOCAB, n - 1)]


@pytest.mark.parametrize("chunk", [None, 1000], ids=["one_call", "chunk1000"])
@pytest.mark.parametrize("name", LONG_MODELS)
def test_long_positions_with_rope_scaling(synthetic_dir, name, chunk):
    """Positions up to 4095 on models trained (by their metadata) for 1024 and stretched x4 by
    YaRN or linear scaling: every row against the reference, so positions far beyond the original
    context are checked, through the split attention (several 512-key segments) on two threads."""
    path = os.path.join(synthetic_dir, name + ".gguf")
    toks = long_sequence()
    ref = gu.ref_logits(path, toks)
    got = gu.eval_logits(path, toks, ref.shape[1], chunk=chunk, threads=2)
    m = gu.compare_logits(got, ref)
    assert m["max_rel"] <= F32_TOL and m["row_rel_max"] <= F32_TOL, \
        f"{name} chunk={chunk}: {gu.describe(m)} (tolerance {F32_TOL})"


def _check_loose(name, m, tol):
    assert gu.within(m, tol), f"{name}: {gu.describe(m)} (tolerance {tol})"


@pytest.mark.parametrize("chunk", [None, 1], ids=["one_call", "decode"])
@pytest.mark.parametrize("name", QUANT_MODELS)
def test_quantized_logits(synthetic_dir, name, chunk):
    got, ref = _logits_pair(synthetic_dir, name, chunk)
    _check_loose(f"{name} chunk={chunk}", gu.compare_logits(got, ref), QUANT_TOL)


@pytest.mark.parametrize("name,chunk", [("llama_q4_k", None), ("gemma3_q4_k_m", 5)])
def test_quantized_two_threads(synthetic_dir, name, chunk):
    got, ref = _logits_pair(synthetic_dir, name, chunk, threads=2)
    _check_loose(f"{name} chunk={chunk} threads=2", gu.compare_logits(got, ref), QUANT_TOL)


@pytest.mark.parametrize("chunk", [None, 1], ids=["one_call", "decode"])
def test_bf16_logits(synthetic_dir, chunk):
    got, ref = _logits_pair(synthetic_dir, "llama_bf16", chunk)
    _check_loose(f"llama_bf16 chunk={chunk}", gu.compare_logits(got, ref), BF16_TOL)


def test_quantized_differs_from_f32_weights(synthetic_dir):
    """The Q4_K file must be computed with its own (dequantized) weights: its logits are much
    closer to the reference on the Q4_K file than to the F32 model it was made from."""
    got, ref_q = _logits_pair(synthetic_dir, "llama_q4_k", None)
    ref_f = gu.ref_logits(os.path.join(synthetic_dir, "llama.gguf"), sequence())
    to_q = gu.compare_logits(got, ref_q)["row_rel_mean"]
    to_f = gu.compare_logits(got, ref_f)["row_rel_mean"]
    assert to_q * 3 < to_f, f"rel-L2 to Q4_K reference {to_q:.3g}, to F32 reference {to_f:.3g}"


def test_qwen3moe_routing_cases_are_covered(synthetic_dir):
    """The qwen3moe logits tests above are only as strong as the routing they exercise. On the
    reference's routing of the test sequence: exact probability ties at the top-k boundary occur
    (experts 6 and 7 share their router rows) and go to the lower id, and among the 7-token
    calls some expert gets exactly one token and some none (so a token alone on its expert, and
    experts skipped in a batch, are both compared against the reference)."""
    path = os.path.join(synthetic_dir, "qwen3moe.gguf")
    rm = gu.reference_model(path)
    rm.logits(sequence())
    n_expert = rm.cfg.n_expert
    ties = [(il, t, ch) for il, t, p, ch in rm.moe_trace if p[6] == p[7] and (6 in ch) != (7 in ch)]
    assert ties, "no top-k tie between experts 6 and 7 in the test sequence"
    assert all(6 in ch for _, _, ch in ties), ties
    alone = skipped = 0
    for il in range(rm.cfg.n_layer):
        routes = [ch for l, _, _, ch in rm.moe_trace if l == il]
        for c0 in range(0, len(routes), 7):
            counts = np.bincount([e for ch in routes[c0:c0 + 7] for e in ch], minlength=n_expert)
            alone += int((counts == 1).sum())
            skipped += int((counts == 0).sum())
    assert alone > 0 and skipped > 0, (alone, skipped)


def _variant(tmp_path, tag, spec_edit=None, weights_edit=None, name="qwen3moe", base_edit=None):
    """A synthetic model written to tmp_path: the weights of SPECS[name] (with base_edit), then
    weights_edit on them, written under the spec with spec_edit (metadata only)."""
    from dataclasses import replace
    spec = replace(next(s for s in make_synthetic.SPECS if s.name == name), **(base_edit or {}))
    w = make_synthetic.make_weights(spec)
    if weights_edit:
        weights_edit(w)
    path = str(tmp_path / f"{name}_{tag}.gguf")
    make_synthetic.write_model(path, replace(spec, **(spec_edit or {})), w, lambda n: "f32")
    return path


def _moe_variant(tmp_path, tag, spec_edit=None, weights_edit=None):
    return _variant(tmp_path, tag, spec_edit, weights_edit, "qwen3moe", {"n_layer": 2})


@pytest.mark.parametrize("tag,spec_edit,weights_edit,message", [
    ("used_gt_count", {"n_expert_used": 9}, None, "expert_used_count' = 9 exceeds"),
    ("no_experts", {"n_expert": 0}, None, "expert_count"),
    ("missing_up", None, lambda w: w.pop("blk.1.ffn_up_exps.weight"), "missing tensor 'blk.1.ffn_up_exps.weight'"),
    ("seven_stacked", None, lambda w: w.update({"blk.0.ffn_down_exps.weight": w["blk.0.ffn_down_exps.weight"][:7]}),
     "(8 experts)"),
    ("router_rows", None, lambda w: w.update({"blk.1.ffn_gate_inp.weight": w["blk.1.ffn_gate_inp.weight"][:5]}),
     "blk.1.ffn_gate_inp.weight"),
])
def test_qwen3moe_bad_metadata_is_a_clear_load_error(tmp_path, tag, spec_edit, weights_edit, message):
    path = _moe_variant(tmp_path, tag, spec_edit, weights_edit)
    p = subprocess.run([gu.triad_bin(), "eval-logits", "-m", path, "--tokens", "1,2,3", "--out",
                        str(tmp_path / "x.f32")], capture_output=True, timeout=60)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode != 0 and message in err, err[-2000:]
    assert "terminate" not in err and "Sanitizer" not in err, err[-2000:]


def test_deepseek2_routing_cases_are_covered(synthetic_dir):
    """deepseek2.gguf's logits tests exercise what its routing adds: on the reference's routing
    of the test sequence, some tokens' experts differ from the plain top-k of their scores (the
    selection bias and the group limit change the choice), and the two tied experts (6 and 7,
    equal router rows and biases) meet at the top-k boundary, where the lower id must win."""
    rm = gu.reference_model(os.path.join(synthetic_dir, "deepseek2.gguf"))
    rm.logits(sequence())
    k = rm.cfg.n_expert_used
    changed = [ch for _, _, p, ch in rm.moe_trace if sorted(ch) != sorted(np.argsort(-p, kind="stable")[:k].tolist())]
    assert len(changed) >= 10, len(changed)
    ties = [ch for _, _, p, ch in rm.moe_trace if (6 in ch) != (7 in ch)]
    assert ties and all(6 in ch for ch in ties), ties


def _deepseek_variant(tmp_path, tag, spec_edit=None, weights_edit=None, name="deepseek2"):
    return _variant(tmp_path, tag, spec_edit, weights_edit, name)


@pytest.mark.parametrize("tag,spec_edit,weights_edit,name,message", [
    ("no_v_b", None, lambda w: w.pop("blk.2.attn_v_b.weight"), "deepseek2", "missing tensor 'blk.2.attn_v_b.weight'"),
    ("no_k_b", None, lambda w: [w.pop("blk.0.attn_k_b.weight"), w.pop("blk.0.attn_v_b.weight")], "deepseek2",
     "missing tensor 'blk.0.attn_k_b.weight' (nor has it 'blk.0.attn_kv_b.weight')"),
    ("k_b_heads", None, lambda w: w.update({"blk.1.attn_k_b.weight": w["blk.1.attn_k_b.weight"][:3]}), "deepseek2",
     "'blk.1.attn_k_b.weight' has shape"),
    ("kv_b_rows", None, lambda w: w.update({"blk.1.attn_kv_b.weight": w["blk.1.attn_kv_b.weight"][:-1]}),
     "deepseek2_lite", "'blk.1.attn_kv_b.weight' has shape"),
    ("groups", {"groups": (3, 2)}, None, "deepseek2", "expert_group_count' = 3 must divide"),
    ("group_used", {"groups": (4, 1)}, None, "deepseek2", "expert_group_used_count' = 1"),
    ("dense_lead", {"dense_lead": 4}, None, "deepseek2", "leading_dense_block_count' = 4 is out of range"),
    ("no_exps", None, lambda w: w.pop("blk.1.ffn_gate_exps.weight"), "deepseek2",
     "missing tensor 'blk.1.ffn_gate_exps.weight'"),
    ("temperature", {"extra": (("attention.temperature_scale", 0.5),)}, None, "deepseek2",
     "attention.temperature_scale' (attention temperature tuning) is not supported"),
    ("q_lora_huge", {"extra": (("attention.kv_lora_rank", 1 << 31),)}, None, "deepseek2_lite", "kv_lora_rank"),
    ("bad_yarn_base", {"extra": (("rope.freq_base", 1.0),)}, None, "deepseek2", "YaRN needs rope.freq_base > 1"),
    ("yarn_factor_tiny", {"extra": (("rope.scaling.factor", 1e-39),)}, None, "deepseek2", "RoPE or attention scaling out of range"),
    ("latent_width", {"kv_lora": 40}, None, "deepseek2", "'blk.0.attn_kv_a_mqa.weight' has shape [128, 64], expected [128, 56]"),
])
def test_deepseek2_bad_model_is_a_clear_load_error(tmp_path, tag, spec_edit, weights_edit, name, message):
    rc, err = _load_error(tmp_path, _deepseek_variant(tmp_path, tag, spec_edit, weights_edit, name))
    assert rc != 0 and message in err, err[-2000:]


def _add_nextn_layer(w):
    """A multi-token-prediction layer after deepseek2.gguf's 3 (as the converter appends them)."""
    rng = np.random.default_rng(5)
    w["blk.3.nextn.eh_proj.weight"] = rng.standard_normal((128, 256)).astype(np.float32)
    w["blk.3.nextn.enorm.weight"] = np.ones(128, np.float32)
    w["blk.3.attn_norm.weight"] = np.ones(128, np.float32)
    w["blk.3.attn_kv_a_mqa.weight"] = rng.standard_normal((32, 128)).astype(np.float32)  # misshapen on purpose


def test_deepseek2_nextn_layers_are_not_run(synthetic_dir, tmp_path):
    """block_count includes nextn_predict_layers appended layers: they are neither bound nor run,
    so the file computes exactly what deepseek2.gguf does."""
    path = _deepseek_variant(tmp_path, "nextn", {"nextn": 1}, _add_nextn_layer)
    toks = sequence()
    a = gu.eval_logits(path, toks, make_synthetic.N_VOCAB)
    b = gu.eval_logits(os.path.join(synthetic_dir, "deepseek2.gguf"), toks, make_synthetic.N_VOCAB)
    assert np.array_equal(a, b)
    assert gu.reference_model(path).cfg.n_layer == 3


def test_glm4moe_without_qk_norm(tmp_path):
    """GLM-4.5-Air files have no attn_q_norm / attn_k_norm (the 355B model has them): the same
    architecture loads without them and matches the reference computed without them."""
    def drop(w):
        for k in [k for k in w if k.endswith(("attn_q_norm.weight", "attn_k_norm.weight"))]:
            w.pop(k)
    path = _deepseek_variant(tmp_path, "glm_no_qk_norm", None, drop, name="glm4moe")
    toks = sequence()
    ref = gu.ref_logits(path, toks)
    m = gu.compare_logits(gu.eval_logits(path, toks, ref.shape[1], chunk=7), ref)
    assert m["max_rel"] <= F32_TOL and m["row_rel_max"] <= F32_TOL, gu.describe(m)


def test_glm4moe_needs_its_selection_bias(tmp_path):
    path = _deepseek_variant(tmp_path, "glm_no_bias", None, lambda w: w.pop("blk.2.exp_probs_b.bias"), name="glm4moe")
    rc, err = _load_error(tmp_path, path)
    assert rc != 0 and "missing tensor 'blk.2.exp_probs_b.bias'" in err, err[-2000:]


@pytest.mark.parametrize("tag,edit,message", [
    ("no_sinks", lambda w: w.pop("blk.3.attn_sinks.weight"), "missing tensor 'blk.3.attn_sinks.weight'"),
    ("no_expert_bias", lambda w: w.pop("blk.0.ffn_up_exps.bias"), "missing tensor 'blk.0.ffn_up_exps.bias'"),
    ("expert_bias_shape", lambda w: w.update({"blk.1.ffn_down_exps.bias": w["blk.1.ffn_down_exps.bias"][:3]}),
     "'blk.1.ffn_down_exps.bias' has shape [128, 3], expected [128, 4]"),
    ("no_o_bias", lambda w: w.pop("blk.2.attn_output.bias"), "missing tensor 'blk.2.attn_output.bias'"),
])
def test_gpt_oss_bad_model_is_a_clear_load_error(tmp_path, tag, edit, message):
    rc, err = _load_error(tmp_path, _deepseek_variant(tmp_path, tag, None, edit, name="gpt-oss"))
    assert rc != 0 and message in err, err[-2000:]


def test_gpt_oss_mxfp4_experts(synthetic_dir, tmp_path):
    """gpt-oss ships its experts in MXFP4: `triad quantize ... MXFP4_MOE` writes them so (the rest
    Q8_0), and the logits follow the reference on the same blocks with the engine's activation
    rounding emulated (routing flips would otherwise dominate: without it rows move by ~0.35)."""
    path = str(tmp_path / "gpt-oss-mxfp4.gguf")
    subprocess.run([gu.triad_bin(), "quantize", os.path.join(synthetic_dir, "gpt-oss.gguf"), path, "MXFP4_MOE"],
                   check=True, capture_output=True, timeout=120)
    toks = sequence()
    assert gu.reference_model(path).tensor_types["blk.0.ffn_up_exps.weight"] == "MXFP4"
    ref = gu.ref_logits(path, toks, act_quant=True)
    for chunk in (None, 1):
        _check_loose(f"gpt-oss MXFP4_MOE chunk={chunk}",
                     gu.compare_logits(gu.eval_logits(path, toks, ref.shape[1], chunk=chunk), ref), QUANT_TOL)


@pytest.mark.parametrize("chunk", [None, 7, 1], ids=["one_call", "chunk7", "decode"])
def test_quantized_experts(synthetic_dir, chunk):
    """qwen3moe with Q5_0 experts (stacked) and matrices (on AVX-512 the experts are re-laid at
    load like every other matrix: engine_test checks that). The logits follow the reference on the same blocks with the
    engine's activation rounding emulated (as for gpt-oss's MXFP4 experts: routing flips would
    otherwise dominate)."""
    path = os.path.join(synthetic_dir, "qwen3moe_q5_0.gguf")
    assert gu.reference_model(path).tensor_types["blk.0.ffn_down_exps.weight"] == "Q5_0"
    toks = sequence()
    ref = gu.ref_logits(path, toks, act_quant=True)
    _check_loose(f"qwen3moe_q5_0 chunk={chunk}",
                 gu.compare_logits(gu.eval_logits(path, toks, ref.shape[1], chunk=chunk), ref), QUANT_TOL)


def test_mixtral_layouts_compute_the_same(synthetic_dir):
    """mixtral.gguf and mixtral_split.gguf hold the same weights in the two tensor layouts: the
    logits must be bitwise equal (the layout changes only where each expert's bytes are)."""
    toks = sequence()
    a, b = (gu.eval_logits(os.path.join(synthetic_dir, n + ".gguf"), toks, make_synthetic.N_VOCAB, chunk=7)
            for n in ("mixtral", "mixtral_split"))
    assert np.array_equal(a, b)


def _load_error(tmp_path, path):
    p = subprocess.run([gu.triad_bin(), "eval-logits", "-m", path, "--tokens", "1,2,3", "--out",
                        str(tmp_path / "x.f32")], capture_output=True, timeout=60)
    err = p.stderr.decode("utf-8", "replace")
    assert "terminate" not in err and "Sanitizer" not in err, err[-2000:]
    return p.returncode, err


def _split_variant(tmp_path, tag, edit, type_of=lambda n: "f32"):
    spec = next(s for s in make_synthetic.SPECS if s.name == "mixtral_split")
    w = make_synthetic.make_weights(spec)
    edit(w)
    path = str(tmp_path / f"split_{tag}.gguf")
    make_synthetic.write_model(path, spec, w, type_of)
    return path


@pytest.mark.parametrize("tag,edit,type_of,message", [
    ("missing_expert", lambda w: w.pop("blk.1.ffn_up.2.weight"), None, "missing tensor 'blk.1.ffn_up.2.weight'"),
    ("extra_expert", lambda w: w.update({"blk.0.ffn_down.4.weight": w["blk.0.ffn_down.0.weight"]}), None,
     "'blk.0.ffn_down.4.weight' is one expert more than expert_count (4)"),
    ("no_experts", lambda w: [w.pop(f"blk.0.ffn_gate.{e}.weight") for e in range(4)], None,
     "missing tensor 'blk.0.ffn_gate_exps.weight'"),
    ("misshapen", lambda w: w.update({"blk.1.ffn_gate.3.weight": w["blk.1.ffn_gate.3.weight"][:64]}), None,
     "'blk.1.ffn_gate.3.weight' has shape"),
    ("mixed_types", lambda w: None, lambda n: "f16" if n == "blk.0.ffn_up.1.weight" else "f32",
     "'blk.0.ffn_up.1.weight' has type F16, but expert 0's is F32"),
])
def test_mixtral_split_layout_errors(tmp_path, tag, edit, type_of, message):
    path = _split_variant(tmp_path, tag, edit, type_of or (lambda n: "f32"))
    rc, err = _load_error(tmp_path, path)
    assert rc != 0 and message in err, err[-2000:]


def test_dense_arch_with_experts_is_refused(tmp_path):
    spec = next(s for s in make_synthetic.SPECS if s.name == "qwen3moe")
    from dataclasses import replace
    path = str(tmp_path / "qwen3_experts.gguf")
    make_synthetic.write_model(path, replace(spec, arch="qwen3"), make_synthetic.make_weights(spec), lambda n: "f32")
    rc, err = _load_error(tmp_path, path)
    assert rc != 0 and "qwen3 with experts is not supported" in err, err[-2000:]


@pytest.mark.parametrize("name", ["llama", "llama_swa", "qwen2", "qwen3", "gemma3", "qwen3moe", "qwen2moe",
                                  "mixtral_split", "deepseek2", "deepseek2_lite", "glm4moe", "gpt-oss"])
def test_greedy_run(synthetic_dir, name):
    """`triad run --temp 0` follows the reference's greedy path (F32: only an exact tie within
    1e-4 of the row's scale may make them part)."""
    path = os.path.join(synthetic_dir, name + ".gguf")
    prompt = "Once upon a time, there was a little girl"
    ids = gu.tokenize(path, prompt)
    _, got = gu.run_greedy(path, prompt, 24)
    ref = gu.ref_greedy(path, ids, 24)
    gu.check_greedy_path(got, ref, F32_TOL, eog_ids=(2,))
