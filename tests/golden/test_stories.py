"""Golden tests on stories260K (a real, trained tiny llama: 5 layers, 64 wide, 8/4 heads,
512-token SPM vocab; $TRIAD_TESTDATA/models/stories260K.gguf): triad vs the numpy reference.

  * Logits of a fixed TinyStories-like text (ids from `triad tokenize`, >= 64 positions), in
    one call, in calls of 7 tokens and one token at a time: max|d|/max|ref| <= 1e-4 and every
    row's rel-L2 <= 1e-4 (F32 weights, no activation rounding; float32 gives ~3e-7).
  * `triad perplexity --ctx 64 --chunks 4` over a longer story equals the reference's
    perplexity under llama.cpp's definition (llama-perplexity: the file is tokenized WITH the
    BOS token in front, cut into chunks of ctx tokens, each chunk's first token replaced by
    BOS, and the tokens after positions ctx/2 .. ctx-2 scored), within 2e-4 relative plus the
    printed rounding.
  * Greedy continuation of "Once upon a time" for 32 tokens: `triad run --temp 0 --ids-out`
    ids equal the reference's greedy ids from the ids of `triad tokenize` (the reference's
    smallest top-1 margin on this path is far above float32 error, so no ties are possible),
    and the streamed text contains the reference's decoding of those ids.
"""
import os
import re

import numpy as np
import pytest

import golden_util as gu
from spm_tokenizer import SpmTokenizer

TEXT = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
        "sun with her red ball. One day, her mom said, \"Lily, let's go to the park!\" Lily was "
        "very happy. At the park, she saw a big dog and a small cat. They played together all "
        "day, and Lily smiled.")
F32_TOL = 1e-4


@pytest.mark.parametrize("chunk", [None, 7, 1], ids=["one_call", "chunk7", "decode"])
def test_stories_logits(stories, chunk):
    ids = gu.tokenize(stories, TEXT)
    assert len(ids) >= 64, f"only {len(ids)} tokens"
    ref = gu.ref_logits(stories, ids)
    got = gu.eval_logits(stories, ids, ref.shape[1], chunk=chunk)
    m = gu.compare_logits(got, ref)
    assert m["max_rel"] <= F32_TOL and m["row_rel_max"] <= F32_TOL, \
        f"chunk={chunk}: {gu.describe(m)}"


def test_stories_greedy(stories):
    prompt = "Once upon a time"
    ids = gu.tokenize(stories, prompt)
    ref = gu.ref_greedy(stories, ids, 32)
    margins = ref["top_logits"][:, 0] - ref["top_logits"][:, 1]
    assert margins.min() > 10 * F32_TOL * ref["row_scale"].max(), \
        "reference path has a near-tie; the exact-equality check would be fragile"
    text, got = gu.run_greedy(stories, prompt, 32)
    want = [int(t) for t in ref["ids"]]
    assert got == want, f"triad greedy ids {got}\nreference      {want}"
    ref_text = SpmTokenizer(stories).decode(want).strip()
    assert ref_text in text, f"stdout {text!r} lacks the reference continuation {ref_text!r}"


LONG_STORY = (
    "Once upon a time, there was a little boy named Tom. Tom had a big red ball. He liked to "
    "play with his ball in the park near his house. One day, Tom went to the park with his mom. "
    "The sun was warm and the sky was blue. Tom threw the ball high in the air. The ball went "
    "up and up, and then it fell into a tree. Tom was sad. He could not get his ball.\n"
    "Tom's mom saw that he was sad. She said, \"Don't worry, Tom. We can ask for help.\" A kind "
    "man came to the tree. He was very tall. He reached up and got the ball for Tom. Tom was so "
    "happy! He said, \"Thank you!\" to the man. The man smiled and said, \"You're welcome.\"\n"
    "After that, Tom and his mom went home. They ate cookies and drank milk. Tom told his dad "
    "about the ball and the tall man. His dad laughed and gave him a big hug. That night, Tom "
    "went to bed with his red ball next to him. He dreamed about the park, the tree and the kind "
    "man. The next day, he wanted to go to the park again, and his mom said yes.\n")


def _ref_perplexity(model, stream, n_ctx, n_chunks, bos):
    nll = []
    for k in range(n_chunks):
        ids = list(stream[k * n_ctx:(k + 1) * n_ctx])
        ids[0] = bos
        lg = gu.ref_logits(model, ids)
        lg = lg - lg.max(axis=1, keepdims=True)
        lp = lg - np.log(np.exp(lg).sum(axis=1, keepdims=True))
        for j in range(n_ctx // 2, n_ctx - 1):
            nll.append(-lp[j, ids[j + 1]])
    return float(np.exp(np.mean(nll))), len(nll)


def test_stories_perplexity(stories, tmp_path):
    gu.require("perplexity")
    n_ctx, n_chunks = 64, 4
    stream = gu.tokenize(stories, LONG_STORY)      # BOS first, as llama-perplexity tokenizes
    assert stream[0] == 1 and len(stream) >= n_ctx * n_chunks, len(stream)
    want, n_scored = _ref_perplexity(stories, stream, n_ctx, n_chunks, 1)
    f = tmp_path / "story.txt"
    f.write_text(LONG_STORY, encoding="utf-8")
    out = gu.run_triad(["perplexity", "-m", stories, "-f", str(f), "--ctx", n_ctx, "--chunks",
                        n_chunks, "--threads", gu.DEFAULT_THREADS]).stdout.decode()
    last = [ln for ln in out.splitlines() if ln.strip()][-1]
    m = re.search(r"perplexity:\s*([0-9.eE+-]+)", last)
    assert m, f"no 'perplexity: <float>' in the last stdout line {last!r}"
    got = float(m.group(1))
    if abs(got - want) <= 2e-4 * want + 1e-4:
        return
    no_bos, _ = _ref_perplexity(stories, stream[1:], n_ctx, n_chunks, 1)  # diagnosis only
    pytest.fail(f"triad perplexity {got}, reference (llama.cpp definition) {want:.6f} over "
                f"{n_scored} tokens; the same without the leading BOS (chunks shifted by one "
                f"token) would be {no_bos:.6f}")
