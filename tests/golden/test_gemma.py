"""Golden tests on the real default model, Gemma 3 270M Q4_K_M
($TRIAD_MODELS_DIR/gemma-3-270m-q4_k_m.gguf; skipped when absent).

The file is a conversion of google/gemma-3-270m, the PRE-TRAINED (not instruction-tuned)
model: the numpy reference, given the chat prompt for "What is the capital of France?",
continues by repeating the question rather than answering, while a plain "Q: ... A:" prompt
makes it answer " The capital of France is Paris.". So the chat test checks that triad follows
the reference's greedy path, and the "Paris" check uses the Q/A prompt.

Tolerances (triad rounds activations to 8-bit blocks of 32 for quantized weights): emulating
that in the reference moves the logits of the 16 chat-prompt positions by row rel-L2 <= 0.072
(mean 0.025), keeps top-1 on all 16 rows, and changes a row's gap between its best token and
any other by at most 0.037 x max|row|. Hence: row rel-L2 max <= 0.15, mean <= 0.06, top-1 on
>= 12 of 16 rows, top1_gap <= 0.08 (golden_util.compare_logits); on greedy paths triad may leave
the reference's path only at a step where its token is within 0.08 x max|row| of the best.

Cost: the reference needs ~1 minute (reading the 262144-token vocabulary with GGUFReader and
dequantizing 270M weights); results are cached per (model sha256, ids) in $TRIAD_REF_CACHE, so
later runs take seconds.
"""
import os

import pytest

import golden_util as gu

MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
# "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"
# as ids, from tests/reference/spm_tokenizer.py (pieces: <bos> <start_of_turn> user \n What
# _is _the _capital _of _France ? <end_of_turn> \n <start_of_turn> model \n); the test checks
# the pieces against the file's vocabulary, so a different vocabulary fails loudly.
CHAT_IDS = [2, 105, 2364, 107, 3689, 563, 506, 5279, 529, 7001, 236881, 106, 107, 105, 4368, 107]
CHAT_PIECES = ["<bos>", "<start_of_turn>", "user", "\n", "What", "\u2581is", "\u2581the",
               "\u2581capital", "\u2581of", "\u2581France", "?", "<end_of_turn>", "\n",
               "<start_of_turn>", "model", "\n"]
EOG_IDS = (1, 106)  # <eos>, <end_of_turn>
LOOSE = {"row_rel_max": 0.15, "row_rel_mean": 0.06, "top1": 12 / 16, "top1_gap": 0.08}
PATH_TOL = 0.08


@pytest.fixture(scope="module")
def gemma(models_dir):
    p = os.path.join(models_dir, MODEL_NAME)
    if not os.path.exists(p):
        pytest.skip(f"{p} missing")
    return p


def test_gemma_chat_ids_match_vocab(gemma):
    assert gu.token_pieces(gemma, CHAT_IDS) == CHAT_PIECES


def test_gemma_logits(gemma):
    ref = gu.ref_logits(gemma, CHAT_IDS)
    got = gu.eval_logits(gemma, CHAT_IDS, ref.shape[1])
    m = gu.compare_logits(got, ref)
    assert gu.within(m, LOOSE), f"{gu.describe(m)} (tolerance {LOOSE})"


def test_gemma_chat_greedy(gemma):
    text, got = gu.run_greedy(gemma, "What is the capital of France?", 24, chat=True)
    ref = gu.ref_greedy(gemma, CHAT_IDS, 24)
    gu.check_greedy_path(got, ref, PATH_TOL, eog_ids=EOG_IDS)


def test_gemma_paris(gemma):
    prompt = "Q: What is the capital of France?\nA:"
    ids = gu.tokenize(gemma, prompt)
    ref = gu.ref_greedy(gemma, ids, 16)
    text, got = gu.run_greedy(gemma, prompt, 16)
    gu.check_greedy_path(got, ref, PATH_TOL, eog_ids=EOG_IDS)
    assert "Paris" in text, f"no 'Paris' in {text!r}"


# Perplexity of the default model on a fixed public-domain text: the first 4 chunks of 256 tokens
# of Pride and Prejudice (Debian's r-cran-janeaustenr, written to $TRIAD_MODELS_DIR by
# scripts/fetch_models.sh). Measured 2026-12-02 with this configuration (6 chunks): 20.93; the
# bound leaves ~10% for kernel rounding changes, while a broken kernel or layer moves perplexity
# by orders of magnitude (the reference's single-detail mutations give 8.9 .. 9e6 on English).
PPL_TEXT = "prideprejudice.txt"
PPL_BOUND = 23.0


def test_gemma_perplexity_bound(gemma, models_dir):
    import re
    gu.require("perplexity")
    text = os.path.join(models_dir, PPL_TEXT)
    if not os.path.exists(text):
        pytest.skip(f"{text} missing (scripts/fetch_models.sh writes it with Rscript)")
    out = gu.run_triad(["perplexity", "-m", gemma, "-f", text, "--ctx", "256", "--chunks", "4"],
                       timeout=600)
    last = out.stdout.decode("utf-8", "replace").strip().splitlines()[-1]
    m = re.search(r"perplexity:\s*([0-9.eE+-]+)", last)
    assert m, f"no 'perplexity: <float>' in {last!r}"
    ppl = float(m.group(1))
    assert 1.0 < ppl < PPL_BOUND, f"perplexity {ppl} not below the recorded bound {PPL_BOUND}"
