"""Checks of the numpy reference and its tokenizer helper against real data.

  * spm_tokenizer.py reproduces llama.cpp's tokenizer test vectors for the llama-spm and phi-3
    vocabularies in $TRIAD_TESTDATA/tokenizer (so prompt ids the reference makes are right).
  * On stories260K (a trained model) the reference's perplexity of a TinyStories-like text is
    low (~2.3), far lower than with the wrong (NeoX) RoPE pairing (~26) or with the words
    shuffled, and its greedy continuation of "Once upon a time" is made of English words.
Skips with a message when $TRIAD_TESTDATA lacks the files. Thread-safety: pytest, one process.
"""
import dataclasses
import os
import sys

# Multi-threaded OpenBLAS is many times slower than one thread for these small products on a
# busy 2-core machine; must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True

import ref_model as rm  # noqa: E402
from spm_tokenizer import SpmTokenizer  # noqa: E402

TESTDATA = os.environ.get("TRIAD_TESTDATA", os.path.join(HERE, "..", "..", "..", "shared",
                                                         "testdata"))


# -- real data ------------------------------------------------------------------------------------

def _vectors(name):
    base = os.path.join(TESTDATA, "tokenizer", name)
    if not os.path.exists(base):
        pytest.skip(f"{base} missing")
    inp = open(base + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
    out = open(base + ".out", encoding="utf-8").read().split("\n")
    return base, list(zip(inp, out))


@pytest.mark.parametrize("vocab", ["ggml-vocab-llama-spm.gguf", "ggml-vocab-phi-3.gguf"])
def test_spm_tokenizer_vectors(vocab):
    path, cases = _vectors(vocab)
    tok = SpmTokenizer(path)
    assert len(cases) > 40
    for text, want in cases:
        assert tok.encode(text, add_bos=False, parse_special=False) == \
            [int(t) for t in want.split()], repr(text)


STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
         "sun with her red ball. One day, her mom said, \"Lily, let's go to the park!\" Lily was "
         "very happy. At the park, she saw a big dog and a small cat. They played together all "
         "day, and Lily smiled.")


def _perplexity(model, ids):
    lg = model.logits(ids)
    lg = lg - lg.max(axis=1, keepdims=True)
    lp = lg - np.log(np.exp(lg).sum(axis=1, keepdims=True))
    return float(np.exp(-np.mean(lp[np.arange(len(ids) - 1), ids[1:]])))


def test_stories_reference_is_sane():
    path = os.path.join(TESTDATA, "models", "stories260K.gguf")
    if not os.path.exists(path):
        pytest.skip(f"{path} missing")
    tok = SpmTokenizer(path)
    ids = tok.encode(STORY)
    m = rm.RefModel(path)
    ppl = _perplexity(m, ids)
    wrong = rm.RefModel(path)
    wrong.cfg = dataclasses.replace(wrong.cfg, rope_layout="neox")
    ppl_wrong = _perplexity(wrong, ids)
    shuffled = [ids[0]] + list(np.random.default_rng(0).permutation(ids[1:]))
    assert ppl < 8.0 and ppl * 1.5 < ppl_wrong and ppl * 4 < _perplexity(m, shuffled), \
        (ppl, ppl_wrong)
    gen = m.greedy(tok.encode("Once upon a time"), 32)
    words = tok.decode(gen).replace(",", " ").replace(".", " ").split()
    assert len(words) >= 15 and all(w.isalpha() for w in words), words
