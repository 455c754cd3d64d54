#!/usr/bin/env python3
"""Writes sdk/src/tokenizer/unicode_tables.inc, the character tables of the WordPiece tokenizer,
for two flavours: Python's `unicodedata` (what transformers' slow BertTokenizer sees) and the
Rust `tokenizers` library (BertNormalizer / BertPreTokenizer, probed code point by code point).

Run with the project venv (it needs the `tokenizers` package):
    .venv/bin/python tools/gen_unicode_tables.py sdk/src/tokenizer/unicode_tables.inc
Every table is checked against unicodedata and tokenizers over all 0x110000 code points before
the file is written; a mismatch stops the script."""
import argparse
import sys
import unicodedata

import tokenizers
from tokenizers import normalizers, pre_tokenizers

MAX_CP = 0x110000
SURROGATES = range(0xD800, 0xE000)

# Bits of the flag word; keep in sync with sdk/src/tokenizer/unicode.h.
PY_CONTROL = 1 << 0         # slow _is_control: category C* except \t \n \r
PY_CLEAN_SPACE = 1 << 1     # slow _is_whitespace: ' ' \t \n \r or category Zs
PY_SPLIT_SPACE = 1 << 2     # Python str.isspace(): what str.split() splits on
PY_PUNCT = 1 << 3           # slow _is_punctuation: ASCII non-alphanumerics or category P*
PY_MN = 1 << 4              # category Mn
PY_CASED = 1 << 5           # cased and not case-ignorable (Final_Sigma context of str.lower)
PY_CASE_IGNORABLE = 1 << 6  # case-ignorable (Final_Sigma context of str.lower)
RS_CONTROL = 1 << 7         # removed by BertNormalizer's clean_text (besides U+0000, U+FFFD)
RS_SPACE = 1 << 8           # Rust char::is_whitespace
RS_PUNCT = 1 << 9           # BertPreTokenizer's is_bert_punc
RS_MN = 1 << 10             # dropped by BertNormalizer's strip_accents after NFD
PY_CJK = 1 << 11            # slow _is_chinese_char
RS_CJK = 1 << 12            # padded with spaces by BertNormalizer's handle_chinese_chars

# transformers' BasicTokenizer._is_chinese_char (tokenizers starts the fifth range at 0x2B920).
CHINESE_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                  (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
HANGUL_S, HANGUL_L, HANGUL_V, HANGUL_T = 0xAC00, 0x1100, 0x1161, 0x11A7
HANGUL_V_COUNT, HANGUL_T_COUNT, HANGUL_S_COUNT = 21, 28, 11172


def code_points():
    return (cp for cp in range(MAX_CP) if cp not in SURROGATES)


def python_flags(cp):
    c = chr(cp)
    cat = unicodedata.category(c)
    flags = 0
    if c not in "\t\n\r" and cat.startswith("C"):
        flags |= PY_CONTROL
    if c in " \t\n\r" or cat == "Zs":
        flags |= PY_CLEAN_SPACE
    if c.isspace():
        flags |= PY_SPLIT_SPACE
    ascii_punct = 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
    if ascii_punct or cat.startswith("P"):
        flags |= PY_PUNCT
    if cat == "Mn":
        flags |= PY_MN
    if any(lo <= cp <= hi for lo, hi in CHINESE_RANGES):
        flags |= PY_CJK
    # str.lower() turns U+03A3 into final sigma when the first non-case-ignorable character
    # before it is cased; two probes separate "case-ignorable" from "cased".
    after_cased = ("A" + c + "\u03a3").lower()[-1] == "\u03c2"
    alone = (c + "\u03a3").lower()[-1] == "\u03c2"
    if alone:
        flags |= PY_CASED
    elif after_cased:
        flags |= PY_CASE_IGNORABLE
    return flags


class RustProbe:
    """Asks the installed tokenizers library how it treats each code point."""

    def __init__(self):
        self.clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                                strip_accents=False, lowercase=False)
        self.strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                                strip_accents=True, lowercase=False)
        self.lower = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                                strip_accents=False, lowercase=True)
        self.chinese = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True,
                                                  strip_accents=False, lowercase=False)
        self.nfd = normalizers.NFD()
        self.pre = pre_tokenizers.BertPreTokenizer()

    def flags(self, cp):
        c = chr(cp)
        flags = 0
        cleaned = self.clean.normalize_str("a" + c + "b")
        if cleaned == "ab" and cp not in (0, 0xFFFD):
            flags |= RS_CONTROL
        pieces = [p for p, _ in self.pre.pre_tokenize_str("a" + c + "b")]
        if pieces == ["a", "b"]:
            flags |= RS_SPACE
        elif pieces == ["a", c, "b"]:
            flags |= RS_PUNCT
        elif pieces != ["a" + c + "b"]:
            sys.exit(f"U+{cp:04X}: unexpected BertPreTokenizer pieces {pieces!r}")
        if cleaned == "a b" and not flags & RS_SPACE:
            sys.exit(f"U+{cp:04X}: clean_text maps it to a space but it is not Rust whitespace")
        if self.nfd.normalize_str(c) == c and self.strip.normalize_str(c) == "":
            flags |= RS_MN
        return flags


def canonical_decomposition(cp):
    """Single-step canonical decomposition as a list of code points, [] if none."""
    fields = unicodedata.decomposition(chr(cp)).split()
    if not fields or fields[0].startswith("<"):
        return []
    return [int(f, 16) for f in fields]


def is_hangul_syllable(cp):
    return HANGUL_S <= cp < HANGUL_S + HANGUL_S_COUNT


def build_tables():
    probe = RustProbe()
    flags = [0] * MAX_CP
    lower_py, lower_rs = {}, {}
    decomposition, composes = {}, {}
    rust_no_decomposition = []
    ccc = [0] * MAX_CP
    for cp in code_points():
        c = chr(cp)
        flags[cp] = python_flags(cp) | probe.flags(cp)
        ccc[cp] = unicodedata.combining(c)
        if c.lower() != c:
            lower_py[cp] = [ord(x) for x in c.lower()]
        rs = probe.lower.normalize_str(c)
        if rs != c:
            lower_rs[cp] = [ord(x) for x in rs]
        padded = probe.chinese.normalize_str(c)
        if padded == " " + c + " ":
            flags[cp] |= RS_CJK
        elif padded != c:
            sys.exit(f"U+{cp:04X}: tokenizers' handle_chinese_chars gives {padded!r}")
        parts = canonical_decomposition(cp)
        if parts:
            decomposition[cp] = parts
            composes[cp] = len(parts) == 2 and unicodedata.normalize("NFC", c) == c
        rust_nfd = probe.nfd.normalize_str(c)
        if rust_nfd != unicodedata.normalize("NFD", c):
            if rust_nfd != c:
                sys.exit(f"U+{cp:04X}: tokenizers' NFD {rust_nfd!r} is neither Python's "
                         "nor the identity")
            rust_no_decomposition.append(cp)
    return flags, lower_py, lower_rs, decomposition, composes, rust_no_decomposition, ccc, probe


# Reference implementations of what unicode.cpp does with the tables, used to check them.
def nfd(text, decomposition, ccc, skip=frozenset()):
    out = []

    def push(cp):
        if is_hangul_syllable(cp):
            index = cp - HANGUL_S
            out.append(HANGUL_L + index // (HANGUL_V_COUNT * HANGUL_T_COUNT))
            out.append(HANGUL_V + (index % (HANGUL_V_COUNT * HANGUL_T_COUNT)) // HANGUL_T_COUNT)
            if index % HANGUL_T_COUNT:
                out.append(HANGUL_T + index % HANGUL_T_COUNT)
        elif cp in decomposition and cp not in skip:
            for part in decomposition[cp]:
                push(part)
        else:
            out.append(cp)

    for ch in text:
        push(ord(ch))
    for i in range(1, len(out)):  # stable insertion sort of each run of non-starters
        j = i
        while j > 0 and ccc[out[j]] != 0 and ccc[out[j - 1]] > ccc[out[j]]:
            out[j - 1], out[j] = out[j], out[j - 1]
            j -= 1
    return out


def nfc(text, decomposition, composes, ccc):
    pairs = {(parts[0], parts[1]): cp for cp, parts in decomposition.items() if composes[cp]}
    cps = nfd(text, decomposition, ccc)
    out = []
    starter = None
    last_ccc = 0
    for cp in cps:
        c_ccc = ccc[cp]
        adjacent = last_ccc == 0 and len(out) - 1 == starter
        if starter is not None and (last_ccc < c_ccc or adjacent):
            s = out[starter]
            composed = None
            if HANGUL_L <= s < HANGUL_L + 19 and HANGUL_V <= cp < HANGUL_V + HANGUL_V_COUNT:
                lv_index = (s - HANGUL_L) * HANGUL_V_COUNT + cp - HANGUL_V
                composed = HANGUL_S + lv_index * HANGUL_T_COUNT
            elif (is_hangul_syllable(s) and (s - HANGUL_S) % HANGUL_T_COUNT == 0
                  and HANGUL_T < cp < HANGUL_T + HANGUL_T_COUNT):
                composed = s + cp - HANGUL_T
            else:
                composed = pairs.get((s, cp))
            if composed is not None:
                out[starter] = composed
                continue
        if c_ccc == 0:
            starter = len(out)
        last_ccc = c_ccc
        out.append(cp)
    return out


def check(flags, lower_py, lower_rs, decomposition, composes, rust_no_decomposition, ccc, probe):
    skip = frozenset(rust_no_decomposition)
    multi = {cp for cp, m in {**lower_py, **lower_rs}.items() if len(m) > 1}
    if multi != {0x130} or lower_py[0x130] != [0x69, 0x307] or lower_rs[0x130] != [0x69, 0x307]:
        sys.exit(f"multi-character lowercase mappings changed: {sorted(multi)}")
    for cp in set(lower_py) & set(lower_rs):
        if lower_py[cp] != lower_rs[cp]:
            sys.exit(f"U+{cp:04X}: Python and Rust lowercase differ")
    for cp in set(lower_py) - set(lower_rs):
        sys.exit(f"U+{cp:04X}: lowercased by Python but not by tokenizers")
    for cp in code_points():
        c = chr(cp)
        if nfd(c, decomposition, ccc) != [ord(x) for x in unicodedata.normalize("NFD", c)]:
            sys.exit(f"U+{cp:04X}: table NFD differs from unicodedata")
        want_nfc = [ord(x) for x in unicodedata.normalize("NFC", c)]
        if nfc(c, decomposition, composes, ccc) != want_nfc:
            sys.exit(f"U+{cp:04X}: table NFC differs from unicodedata")
        stripped = [x for x in nfd(c, decomposition, ccc, skip) if not flags[x] & RS_MN]
        if stripped != [ord(x) for x in probe.strip.normalize_str(c)]:
            sys.exit(f"U+{cp:04X}: table strip_accents differs from tokenizers")
    samples = ["e\u0301\u0323\u0307", "\u1100\u1161\u11a8", "A\u030a\u0301", "\u0958\u093c",
               "d\u0323\u0307", "q\u0307\u0323", "\u0344\u0301", "\u00c5\u0327 \u212b",
               "\uac00\u11a8", "\u1e9b\u0323"]
    for s in samples:
        want = [ord(x) for x in unicodedata.normalize("NFC", s)]
        if nfc(s, decomposition, composes, ccc) != want:
            sys.exit(f"{s!r}: table NFC differs from unicodedata")
        if nfd(s, decomposition, ccc) != [ord(x) for x in unicodedata.normalize("NFD", s)]:
            sys.exit(f"{s!r}: table NFD differs from unicodedata")


def runs(values, skip_value):
    """(first, last, value) for each maximal run of equal values other than skip_value;
    surrogates take the value of their neighbours so they never split a run."""
    out = []
    start = 0
    for cp in range(1, MAX_CP + 1):
        if cp < MAX_CP and (values[cp] == values[start] or cp in SURROGATES):
            continue
        if values[start] != skip_value:
            out.append((start, cp - 1, values[start]))
        start = cp
    return out


def emit_rows(lines, name, ctype, rows, width=100):
    """A C++ array of brace-initialized rows, packed into lines of at most `width` columns."""
    lines.append(f"constexpr {ctype} {name}[] = {{")
    line = "   "
    for row in rows:
        item = "{" + ", ".join(row) + "},"
        if len(line) + 1 + len(item) > width:
            lines.append(line)
            line = "   "
        line += " " + item
    if line.strip():
        lines.append(line)
    lines.append("};")
    lines.append("")


def write(path, flags, lower_py, lower_rs, decomposition, composes, rust_no_decomposition, ccc):
    lines = [
        "// Character tables of the WordPiece tokenizer, included only by unicode.cpp. "
        "Generated by",
        f"// tools/gen_unicode_tables.py from Python {sys.version_info.major}."
        f"{sys.version_info.minor}'s unicodedata (Unicode {unicodedata.unidata_version})",
        f"// and tokenizers {tokenizers.__version__}; do not edit.",
        "",
    ]
    hexs = lambda v: f"0x{v:X}"
    emit_rows(lines, "kFlagRanges", "FlagRange",
              [(hexs(a), hexs(b), hexs(v)) for a, b, v in runs(flags, 0)])
    emit_rows(lines, "kCombiningClassRanges", "CombiningClassRange",
              [(hexs(a), hexs(b), str(v)) for a, b, v in runs(ccc, 0)])
    single = lambda table: {cp: m[0] for cp, m in table.items() if len(m) == 1}
    common = single(lower_py)
    emit_rows(lines, "kLowercase", "CaseMapping",
              [(hexs(cp), hexs(m)) for cp, m in sorted(common.items())])
    rust_only = {cp: m for cp, m in single(lower_rs).items() if cp not in common}
    emit_rows(lines, "kLowercaseRustOnly", "CaseMapping",
              [(hexs(cp), hexs(m)) for cp, m in sorted(rust_only.items())])
    emit_rows(lines, "kDecompositions", "Decomposition",
              [(hexs(cp), hexs(p[0]), hexs(p[1]) if len(p) > 1 else "0",
                "true" if composes[cp] else "false") for cp, p in sorted(decomposition.items())])
    lines.append("constexpr char32_t kRustNoDecomposition[] = {")
    for i in range(0, len(rust_no_decomposition), 8):
        lines.append("    " + " ".join(hexs(cp) + "," for cp in rust_no_decomposition[i:i + 8]))
    lines.append("};")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output", help="path of unicode_tables.inc to write")
    args = parser.parse_args()
    tables = build_tables()
    check(*tables)
    write(args.output, *tables[:-1])


if __name__ == "__main__":
    main()
