"""Minimal SentencePiece-style (GGUF tokenizer.ggml.model == "llama") tokenizer for the tests.

What it is: a small, slow, independent re-statement of SPM encoding as GGUF vocabularies use
it, good enough to produce prompt ids for the numpy reference (tests/reference/ref_model.py)
and to turn generated ids back into text. It is NOT the engine's tokenizer and is not tested
against llama.cpp's vectors; golden tests take their prompt ids from `triad tokenize` and use
this only for reports and the reference's own sanity checks.

Algorithm: control / user-defined token texts are matched first (longest first) and emitted
as single ids; other text gets a leading space when tokenizer.ggml.add_space_prefix (default
true) and spaces become U+2581; it starts as one symbol per Unicode character, then the
adjacent pair whose concatenation is a vocabulary piece of highest score is merged (leftmost
on ties) until none is left; a final symbol that is not a piece becomes its UTF-8 bytes as
<0xNN> tokens (or <unk> when the vocab has no byte tokens).

Thread-safety: immutable after construction; safe to share.
"""
from __future__ import annotations

import heapq

from gguf import GGUFReader

SPACE = "\u2581"
T_NORMAL, T_UNKNOWN, T_CONTROL, T_USER, T_UNUSED, T_BYTE = 1, 2, 3, 4, 5, 6


class SpmTokenizer:
    def __init__(self, path: str):
        r = GGUFReader(path)
        f = r.fields
        if f["tokenizer.ggml.model"].contents() != "llama":
            raise ValueError("not an SPM vocabulary")
        self.tokens = list(f["tokenizer.ggml.tokens"].contents())
        n = len(self.tokens)
        self.scores = list(f["tokenizer.ggml.scores"].contents()) if "tokenizer.ggml.scores" in f \
            else [0.0] * n
        self.types = list(f["tokenizer.ggml.token_type"].contents()) \
            if "tokenizer.ggml.token_type" in f else [T_NORMAL] * n

        def get(key, default):
            return f[key].contents() if key in f else default

        self.bos = int(get("tokenizer.ggml.bos_token_id", 1))
        self.eos = int(get("tokenizer.ggml.eos_token_id", 2))
        self.unk = int(get("tokenizer.ggml.unknown_token_id", 0))
        self.add_bos = bool(get("tokenizer.ggml.add_bos_token", True))
        self.add_space_prefix = bool(get("tokenizer.ggml.add_space_prefix", True))
        self.piece_to_id = {}
        for i, t in enumerate(self.tokens):
            if self.types[i] in (T_NORMAL, T_USER, T_UNUSED) or i == self.unk:
                self.piece_to_id.setdefault(t, i)
        self.byte_id = {}
        for i, t in enumerate(self.tokens):
            if self.types[i] == T_BYTE and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                self.byte_id[int(t[3:5], 16)] = i
        self.specials = sorted(((t, i) for i, t in enumerate(self.tokens)
                                if self.types[i] in (T_CONTROL, T_USER) and t),
                               key=lambda p: -len(p[0]))

    # -- encoding -----------------------------------------------------------------------------
    def _encode_plain(self, text: str, first: bool) -> list:
        if not text:
            return []
        if self.add_space_prefix and first:
            text = " " + text
        text = text.replace(" ", SPACE)
        sym = list(text)
        alive = [True] * len(sym)
        nxt = list(range(1, len(sym) + 1))
        prv = list(range(-1, len(sym) - 1))

        heap = []

        def push(i):
            j = nxt[i]
            if j >= len(sym):
                return
            cat = sym[i] + sym[j]
            tid = self.piece_to_id.get(cat)
            if tid is not None:
                heapq.heappush(heap, (-self.scores[tid], i, cat))

        for i in range(len(sym) - 1):
            push(i)
        while heap:
            _, i, cat = heapq.heappop(heap)
            if not alive[i]:
                continue
            j = nxt[i]
            if j >= len(sym) or sym[i] + sym[j] != cat:
                continue  # stale entry
            sym[i] = cat
            alive[j] = False
            nxt[i] = nxt[j]
            if nxt[j] < len(sym):
                prv[nxt[j]] = i
            if prv[i] >= 0:
                push(prv[i])
            push(i)
        ids = []
        i = 0
        while i < len(sym):
            if alive[i]:
                tid = self.piece_to_id.get(sym[i])
                if tid is not None:
                    ids.append(tid)
                else:
                    for b in sym[i].encode("utf-8"):
                        ids.append(self.byte_id.get(b, self.unk))
            i = nxt[i] if alive[i] else i + 1
        return ids

    def encode(self, text: str, add_bos: bool | None = None, parse_special: bool = True) -> list:
        ids = []
        if (self.add_bos if add_bos is None else add_bos) and self.bos >= 0:
            ids.append(self.bos)
        first = True
        pos = 0
        buf = ""
        while pos < len(text):
            hit = None
            if parse_special:
                for t, i in self.specials:
                    if text.startswith(t, pos):
                        hit = (t, i)
                        break
            if hit is None:
                buf += text[pos]
                pos += 1
                continue
            ids += self._encode_plain(buf, first)
            first = first and not buf
            buf = ""
            ids.append(hit[1])
            pos += len(hit[0])
        ids += self._encode_plain(buf, first)
        return ids

    # -- decoding -----------------------------------------------------------------------------
    def decode(self, ids, skip_control: bool = True) -> str:
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            ty = self.types[i]
            if ty == T_BYTE:
                out += bytes([int(t[3:5], 16)])
            elif ty == T_CONTROL:
                if not skip_control:
                    out += t.encode("utf-8")
            else:
                out += t.replace(SPACE, " ").encode("utf-8")
        return out.decode("utf-8", errors="replace")
