"""A fixed corpus of 200 inputs for the embedding golden test (tests/golden/test_embeddings.py).

What it is: CORPUS, a deterministic list of exactly 200 texts exercising a BERT WordPiece
tokenizer (BertNormalizer: clean text, CJK spacing, accent stripping, lower case;
BertPreTokenizer: whitespace and punctuation splits; WordPiece with [UNK] and its 100-character
word limit) and the encoder: plain sentences, punctuation runs, accents and ligatures, CJK and
other scripts, emoji (ZWJ sequences, skin tones, flags), digits, mixed case, whitespace runs,
tabs / newlines / unusual Unicode spaces, control and format characters, URLs, code, the
tokenizer's own special tokens written in the text, and LONG_COUNT long texts of 300+ words.

Properties:
  * Deterministic: built from literals and random.Random with fixed seeds; no downloads, no
    dependence on the tokenizer (the token counts quoted below were measured with PyPI
    tokenizers on all-MiniLM-L6-v2's tokenizer.json and are checked by the test, not assumed).
  * Long texts (the last LONG_COUNT entries): seven of 300-400 words that fit in 512 tokens with
    [CLS] and [SEP], one of exactly 512 tokens (510 single-token words: the longest input that
    fits), one of exactly 513 tokens (one too many), and three of 600+ tokens.
  * No entry is empty (the API rejects an empty string); whitespace-only and control-only
    entries are there and tokenize to [CLS] [SEP].

Thread-safety: module-level constants only.
"""
from __future__ import annotations

import random

# ----------------------------------------------------------------------------------------------
# Short inputs, by kind
# ----------------------------------------------------------------------------------------------

PLAIN = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
    "The new movie is awesome.",
    "The cat sits outside.",
    "The dog plays in the garden.",
    "How do I reset my password?",
    "Paris is the capital of France.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "She sells sea shells by the sea shore.",
    "The quick brown fox jumps over the lazy dog.",
    "I would like to book a table for two at seven o'clock.",
    "Photosynthesis converts light energy into chemical energy.",
    "The meeting has been moved to Thursday afternoon.",
    "hello",
    "a",
    "Yes.",
    "Embeddings map text to vectors.",
    "What is the weather like tomorrow in Copenhagen?",
    "Neural networks learn representations from data.",
    "Please remember to water the plants while I am away.",
    "The stock market fell sharply after the announcement.",
    "He plays the guitar every evening after dinner.",
    "Our train was delayed by forty minutes because of snow.",
]

PUNCTUATION = [
    "Wait... what?!",
    "Hello, world! How are you? I'm fine; thanks: really.",
    "!!!???...,,,;;;:::",
    "(nested [brackets {and <angles>}])",
    "\"double\" 'single' `back` «guillemets» „low-high“ ‘curly’ “quotes”",
    "em—dash en–dash hyphen-minus ‐ ‑ ‒ ― … · • ※",
    "It's, they're, we've, I'm, you'll, he'd, can't, won't.",
    "a.b.c.d e-f-g-h i_j_k_l m/n/o/p q\\r\\s\\t",
    "#hashtag @mention $100 %50 ^caret &and *star +plus =equals |pipe ~tilde",
    "¿Qué pasa? ¡Hola! 「括弧」『二重』【隅付き】",
    "€100, £50, ¥2000, ₹500, ₿0.5, ¢99",
    "x² + y³ = z⁴; ½ ¼ ¾; ∑∏∫√∞ ≤ ≥ ≠ ≈ → ⇒ ∀∃",
    "© ® ™ ° § ¶ † ‡ ‰ ′ ″",
    "----====____****////",
    "e.g., i.e., etc., vs., Mr., Dr., U.S.A.",
]

ACCENTS = [
    "Le café était très bon.",
    "A naïve façade; résumé, déjà vu, coöperate, jalapeño.",
    "Ærøskøbing is a town in Denmark.",
    "Die Straße ist lang und der Fluß ist breit. STRASSE, ẞ",
    "Crème brûlée à la française, s'il vous plaît.",
    "Ångström, Ölfläche, Übermaß, Çağlayan, Łódź, Žižkov, Dvořák.",
    "São Paulo, Bogotá, Reykjavík, Kraków, Zürich, Malmö.",
    "ÀÁÂÃÄÅ àáâãäå ÈÉÊË èéêë ÌÍÎÏ ìíîï ÒÓÔÕÖ òóôõö ÙÚÛÜ ùúûü Ññ Çç",
    "Ligatures: ﬁ ﬂ ﬀ ﬃ œ Œ æ Æ ĳ Ĳ",
    "Combining: e\u0301 a\u0308 n\u0303 o\u0302 u\u030a (decomposed accents)",
    "İstanbul, ıslak, Iğdır (dotted and dotless i)",
    "ΑΘΗΝΑ ΟΔΟΣ Σοφία σοφός ς (Greek with final sigma)",
    "Ελληνικά: Καλημέρα κόσμε, ή ΐ ΰ",
    "Русский текст: Съешь же ещё этих мягких французских булок, да выпей чаю. ЁЖ ёж",
    "Tiếng Việt có dấu: Xin chào, cảm ơn nhiều.",
]

SCRIPTS = [
    "北京是中国的首都。",
    "我喜欢吃饺子和面条，你呢？",
    "東京は日本の首都です。",
    "ひらがな、カタカナ、漢字を混ぜた文章です。",
    "ｶﾀｶﾅ 半角 と 全角 ＡＢＣ１２３",
    "서울은 한국의 수도입니다.",
    "안녕하세요 세계! 한글 자모: ㄱ ㄴ ㄷ ㅏ ㅓ",
    "Mixed: abc123 ÀÉÎ 中文 日本語 한국어 😀!?",
    "العربية: مَرْحَبًا بِالْعَالَم",
    "עברית: שָׁלוֹם עוֹלָם",
    "हिन्दी: नमस्ते दुनिया, आप कैसे हैं?",
    "ภาษาไทย: สวัสดีครับ ขอบคุณมาก",
    "Ge'ez: ሰላም ዓለም; Georgian: გამარჯობა; Armenian: Բարեւ",
    "𠀀𠀁 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝 (astral plane)",
    "中文English混合text没有空格",
]

EMOJI = [
    "I love pizza 🍕🍕🍕",
    "Party time 🎉🥳🎊!",
    "Thumbs up 👍 👍🏻 👍🏽 👍🏿 (skin tones)",
    "Family: 👨‍👩‍👧‍👦 and 👩‍❤️‍💋‍👨 (ZWJ sequences)",
    "Flags: 🇩🇰 🇯🇵 🇺🇸 🏳️‍🌈 🏴‍☠️",
    "Keycaps 1️⃣ 2️⃣ #️⃣ and variation ❤️ ❤︎ ☺️",
    "😀😃😄😁😆😅😂🤣",
    "weather: ☀️ 🌧️ ⛈️ ❄️ 🌈",
    "emoji🙂inside🙃words",
    "🧑🏾‍💻 writes code; 👩🏼‍🔬 does science",
]

DIGITS = [
    "12345678901234567890",
    "3.14159265358979323846",
    "1,000,000 and 1.000.000 and 1 000 000",
    "Call +1 (555) 123-4567 or 555.987.6543",
    "2024-02-29T23:59:59Z and 12/31/1999 11:59 PM",
    "0x7fffffff 0b1010 0o755 1e-12 6.022e23",
    "Room 101, floor 3, building 42B, zip 10001",
    "v1.2.3-rc.4+build.567",
    "٠١٢٣٤٥٦٧٨٩ (Arabic-Indic digits) ①②③ Ⅳ Ⅻ",
    "99 bottles of beer, 98 bottles of beer, 97 bottles of beer",
]

CASE = [
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG",
    "tHe QuIcK bRoWn FoX",
    "iPhone MacBook YouTube PostgreSQL JavaScript McDonald's",
    "NASA, UNESCO, FIFA, and the WHO",
    "camelCaseIdentifier snake_case_identifier SCREAMING_SNAKE kebab-case",
]

WHITESPACE = [
    "multiple   spaces    between     words",
    "   leading spaces",
    "trailing spaces   ",
    "tabs\tbetween\twords\t\tand\t\t\tmore",
    "line one\nline two\n\nline four\n\n\n",
    "windows\r\nline\r\nendings\rand bare CR",
    "non\u00a0breaking\u00a0spaces and ideographic\u3000space",
    "thin\u2009space, en\u2002space, em\u2003space, line\u2028separator, para\u2029separator",
    "  \t \n ",
    "\n\n\n",
]

CONTROL = [
    "null\x00byte inside",
    "bell\x07 and escape\x1b[31mred\x1b[0m",
    "zero\u200bwidth\u200cnon\u200djoiner",
    "\ufeffbyte order mark at the start",
    "soft\u00adhyphen and word\u2060joiner",
    "replacement \ufffd character",
    "\x01\x02\x03\x04\x05",
    "delete\x7f and C1\x85 \x9f controls",
    "left-to-right\u200e and right-to-left\u200f marks, \u202eoverride\u202c",
    "variation selector a\ufe0f b\U000e0100",
]

URLS = [
    "https://example.com/path/to/page?query=value&other=123#fragment",
    "Visit http://www.example.org or ftp://files.example.net/pub/file.tar.gz today.",
    "mailto:someone@example.com, user.name+tag@sub.domain.co.uk",
    "https://en.wikipedia.org/wiki/Ærøskøbing_(town)",
    "C:\\Users\\Public\\Documents\\report_2024.docx and /usr/local/bin/triad",
    "192.168.0.1:8080, [::1]:443, 2001:db8::ff00:42:8329",
]

CODE = [
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;",
    "<div class=\"note\"><p>Hello &amp; welcome</p></div>",
    "{\"key\": [1, 2, 3], \"nested\": {\"ok\": true, \"none\": null}}",
    "#include <vector>\nstd::vector<float> v(384, 0.0f);",
    "$ grep -rn 'TODO' src/ | wc -l && echo \"done\"",
    "lambda x: [y for y in range(x) if y % 2 == 0]",
    "fn main() { println!(\"{:?}\", vec![1u8; 4]); }",
    "\\frac{a}{b} + \\sqrt{x^2 + y^2} = \\sum_{i=1}^{n} i",
]

# The tokenizer's added special tokens written in text (PyPI tokenizers reads them as themselves;
# lower case is not a special token), and words past WordPiece's 100-character limit ([UNK]).
SPECIAL = [
    "The capital of France is [MASK].",
    "[CLS] written by hand [SEP] in the middle [PAD] [UNK]",
    "[mask] in lower case is plain text",
    "x" * 100,
    "y" * 101 + " then a normal word",
    "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "supercalifragilisticexpialidocious unbelievably uncharacteristically",
    "ab" * 60,
]

MISC = [
    "Q: What is 2+2? A: 4.",
    "TODO: fix bug #1234 (see PR !567).",
    "Dear Sir/Madam, I am writing to inform you that your order has shipped.",
    "Roses are red,\nViolets are blue,\nSugar is sweet,\nAnd so are you.",
    "To be, or not to be: that is the question.",
    "E = mc^2",
    "co-operate vs cooperate vs coöperate",
    "n/a N/A NaN null None undefined",
    "Ok ok OK okay Okay OKAY",
    "The year 1999 was followed by 2000, then 2001.",
    "Tokyo: 東京; Seoul: 서울; Beijing: 北京; Moscow: Москва",
    "She said, \"I'll be there at 5:30 p.m.\" — and she was.",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z",
    "...",
    "'",
    "🙂",
    "中",
    "Ω",
    "42",
]

# ----------------------------------------------------------------------------------------------
# Long inputs
# ----------------------------------------------------------------------------------------------

# Sentences combined by a seeded random.Random into long texts (plain English with some names,
# numbers and punctuation, so a word is about 1.2 tokens).
_SENTENCES = [
    "The village woke slowly as the first light crept over the hills.",
    "Farmers loaded their carts with apples, pears and heavy sacks of grain.",
    "A small boat drifted along the river, its sail barely moving in the still air.",
    "Children ran through the market square, laughing and chasing a stray dog.",
    "The old clock in the tower struck seven, a little late as always.",
    "In 1887 the bridge was rebuilt with stone brought from a quarry twelve miles away.",
    "Merchants argued about prices, while travellers asked for directions to the inn.",
    "The baker's daughter, Anna, carried baskets of warm bread to the neighbours.",
    "Clouds gathered in the west, and the wind carried the smell of coming rain.",
    "Nobody remembered exactly when the well had dried up, but everyone had a theory.",
    "The schoolteacher wrote long lists of words on the board and asked the class to spell them.",
    "Later that afternoon a stranger arrived on horseback, dusty and tired from the road.",
    "He paid for a room with three silver coins and asked whether the ferry still ran.",
    "The innkeeper said it ran twice a day, at nine in the morning and at four.",
    "By evening the rain had started, drumming on the roofs and filling the gutters.",
    "Lamps were lit one by one along the main street, and the shops closed their shutters.",
    "In the kitchen of the inn, a pot of soup simmered beside a pile of onions.",
    "The stranger sat by the fire, reading a worn map and making small notes in pencil.",
    "Some said he was a surveyor; others were sure he was looking for something lost.",
    "When the storm passed, the stars came out, bright and cold above the valley.",
]

# Words that are each one token of MiniLM's vocabulary, for texts of an exact token count.
_ONE_TOKEN_WORDS = [
    "the", "cat", "dog", "runs", "house", "tree", "water", "blue", "green", "small", "big", "city",
    "river", "light", "day", "night", "book", "road", "sun", "moon", "bird", "fish", "hand", "door",
    "old", "new", "red", "black", "white", "stone",
]


def _words(text: str) -> int:
    return len(text.split())


def _long_text(seed: int, min_words: int) -> str:
    """Sentences of _SENTENCES drawn by random.Random(seed) until at least min_words words,
    split into paragraphs."""
    rng = random.Random(seed)
    parts, n = [], 0
    while n < min_words:
        s = rng.choice(_SENTENCES)
        parts.append(s)
        n += _words(s)
        if rng.random() < 0.15:
            parts.append("\n\n")
    return " ".join(parts).replace(" \n\n ", "\n\n").strip()


def _exact_tokens(seed: int, n_tokens: int) -> str:
    """n_tokens - 2 one-token words: n_tokens tokens with [CLS] and [SEP]."""
    rng = random.Random(seed)
    return " ".join(rng.choice(_ONE_TOKEN_WORDS) for _ in range(n_tokens - 2))


def _mixed_long(seed: int, min_words: int) -> str:
    """A long text that tokenizes densely: prose mixed with numbers, code and accented names."""
    rng = random.Random(seed)
    extras = ["v2.3.1", "3.14159", "naïve", "Ærøskøbing", "f(x)=x**2", "2024-06-01", "#42", "e.g.", "東京",
              "O'Brien", "https://example.com/a?b=c"]
    parts, n = [], 0
    while n < min_words:
        s = rng.choice(_SENTENCES)
        if rng.random() < 0.5:
            s = s[:-1] + " (" + rng.choice(extras) + ")."
        parts.append(s)
        n += _words(s)
    return " ".join(parts)


LONG = [
    # 300-400 words of plain prose: between 300 words and 512 tokens.
    _long_text(1, 300),
    _long_text(2, 310),
    _long_text(3, 320),
    _long_text(4, 330),
    _long_text(5, 340),
    _long_text(6, 350),
    _long_text(7, 360),
    # Exactly at, and one past, the 512-position limit.
    _exact_tokens(8, 512),
    _exact_tokens(9, 513),
    # Well past the limit.
    _long_text(10, 600),
    _mixed_long(11, 450),
    _long_text(12, 1000),
]
LONG_COUNT = len(LONG)

# ----------------------------------------------------------------------------------------------
# The corpus
# ----------------------------------------------------------------------------------------------

_SHORT = (PLAIN + PUNCTUATION + ACCENTS + SCRIPTS + EMOJI + DIGITS + CASE + WHITESPACE + CONTROL + URLS
          + CODE + SPECIAL + MISC)


def _fill(short: list, n: int) -> list:
    """short, then sentences made by joining two or three of its plain sentences with random
    separators (seeded) until n entries."""
    rng = random.Random(2024)
    out = list(short)
    seps = [" ", ", and ", "; ", " — ", "\n", "\t", "  ", " / "]
    while len(out) < n:
        k = rng.choice([2, 3])
        out.append(rng.choice(seps).join(rng.sample(PLAIN, k)))
    return out


N_CORPUS = 200
CORPUS = _fill(_SHORT, N_CORPUS - LONG_COUNT) + LONG

assert len(CORPUS) == N_CORPUS, len(CORPUS)
assert all(CORPUS), "no empty input"
assert sum(_words(t) >= 300 for t in LONG) >= 10

if __name__ == "__main__":
    # `python3 embedding_corpus.py [TOKENIZER_JSON]`: entry counts, and token counts of the long
    # texts with PyPI tokenizers when a tokenizer.json is given.
    import sys

    print(f"{len(CORPUS)} entries, {len(_SHORT)} hand-written short, {LONG_COUNT} long")
    if len(sys.argv) > 1:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(sys.argv[1])
        tok.no_truncation()
        tok.no_padding()
        for i, t in enumerate(CORPUS):
            n = len(tok.encode(t).ids)
            if i >= N_CORPUS - LONG_COUNT or n > 64:
                print(f"[{i}] {_words(t)} words, {n} tokens")
