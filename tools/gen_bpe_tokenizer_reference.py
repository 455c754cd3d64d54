#!/usr/bin/env python3
"""Writes what tests/sdk/test_tokenizer.cpp compares the C++ Tokenizer against: for each kind of
BPE or Unigram tokenizer real models use, a tokenizer.json with that model's pipeline, trained
here on a small corpus (with HF tokenizers, or SentencePiece for t5 and albert), and HF's ids
and texts for at least 2,000 strings.

Kinds (pipelines as the named models' tokenizer.json files have them):
  gpt2     ByteLevel pre-tokenizer (GPT-2 regex), byte-level BPE
  roberta  the same with RobertaProcessing and a <mask> that takes the space before it (lstrip)
  llama3   Split on Llama-3's regex, ByteLevel without regex, ignore_merges, <|begin_of_text|>
  qwen2    NFC, Split on Qwen2's regex, ByteLevel without regex
  bloom    Split on BLOOM's regex, ByteLevel without regex
  falcon   Punctuation, ByteLevel, Digits, Split of three-digit groups
  llama2   SentencePiece BPE: Prepend + Replace normalizers, byte fallback, <s> template, the
           Replace / ByteFallback / Fuse / Strip decoders
  mistral  SentencePiece BPE with the Metaspace pre-tokenizer (prepend "first") and decoder
  misc     NFKC + Lowercase + Strip, Whitespace and individual Digits, BPE with a
           continuing-subword prefix and an end-of-word suffix, BPEDecoder
  t5       SentencePiece Unigram (nmt_nfkc, some characters unknown) converted by transformers'
           T5Converter: Precompiled charsmap + Strip + Replace, Metaspace, "</s>" template,
           <extra_id_*> special tokens
  albert   SentencePiece Unigram (nmt_nfkc_cf, lowercased) converted by AlbertConverter
           (Replace, NFKD, StripAccents, Lowercase, Precompiled; [CLS] $A [SEP]) with the
           WhitespaceSplit + Metaspace pre-tokenizer of albert-base-v2's tokenizer.json
  unigram  HF tokenizers' UnigramTrainer, no normalizer, Metaspace without splitting (long
           pieces), byte fallback (<0xF0> left out) for the Hangul and emoji it lacks
  smollm2  the real SmolLM2-135M-Instruct tokenizer, when its folder is given (--smollm2)

OUT/unicode_forms.json holds HF tokenizers' NFC, NFD, NFKC and NFKD of every code point that
each changes (the normalizers' sweep); OUT/t5 and OUT/albert get precompiled_sweep.json, their
Precompiled normalizer on every code point alone and after a mapped character.

Each OUT/<kind>/ gets tokenizer.json and reference.json: for every string its ids with and
without special tokens and HF's decode of them (skipping special tokens and not), the decode of
random id sequences, and the pieces DecodeStream gives. The oracle is the tokenizers library;
for smollm2 it is transformers' AutoTokenizer on the model folder, checked equal to it.

    .venv/bin/python tools/gen_bpe_tokenizer_reference.py OUT [--smollm2 DIR] [--only KIND...]"""
import argparse
import io
import json
import pathlib
import random
import sys
import tempfile
import types

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from gen_tokenizer_reference import SENTENCES, read_sentences  # noqa: E402

STRINGS = 2200
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BLOOM_REGEX = r" ?[^(\s|[.,!?…。，、।۔،])]+"

# Pieces the random strings are made of: scripts, marks, emoji with joiners, whitespace kinds.
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿÀÉÎÕÜßœŒ",
    "e\u0301a\u0300o\u0308n\u0303",  # decomposed accents
    "αβγδεζηθικλμνξοπρστυφχψωΣΩ",
    "абвгдежзийклмнопрстуфхцчшщъыьэюяЖЩ",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "あいうえおかきくけこアイウエオカキクケコー",
    "한국어조선말안녕하세요",
    "אבגדהוזחטיכלמנסעפצקרשת",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "कखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसह्ािीुूेैोौ",
    "0123456789٠١٢٣٤٥٦٧٨٩१२३",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~…。，、।۔،«»“”‘’—–",
    "😀😂🤖🎉👍🏽👨‍👩‍👧‍👦🏳️‍🌈❤️‍🔥🫨🇫🇷",
    "\u200b\u200c\u200d\u2060\ufeff",
    "ﬁﬂ①②Ⅻ㎏ｆｕｌｌ",
]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u0085", "\u2003", "\u3000"]
CODE = [
    "def f(x):\n    return x ** 2\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "SELECT name, COUNT(*) FROM users WHERE id > 10 GROUP BY name;",
    "if __name__ == '__main__':\n\tmain()",
    "<div class=\"x\">&nbsp;</div>",
    "x = {'a': 1, \"b\": [2, 3.5e-7]}",
    "    \n\t\t  \n",
    "1234567890 3.14159 1,000,000 0x1F 2026-11-27",
]
# For the Unigram kinds: graphemes the Precompiled normalizer replaces whole (CR LF, decomposed
# and full-width accents, a mark newer than ICU's Unicode after NBSP), byte-token and unknown
# token spellings in the text.
UNIGRAM_STRINGS = [
    "a\r\nb\r\n\r\nc", "cafe\u0301 nai\u0308ve", "\uff21\u0301\uff42\u0308 \uff76\uff9e",
    "x\u00a0\u0897y \u00a0\u1ad3z", "\u2122\x1eg", "\u0345\u1ad3 \u0345\u0301",
    "<0x41><0xF0> <unk>x<unk>", "e\u0301\u0301\u0301\u0301 \U0001F44D\U0001F3FD\u200d",
]


def random_string(rng, sentences, specials):
    parts = []
    for _ in range(rng.randint(1, 6)):
        kind = rng.random()
        if kind < 0.3:
            parts.append(rng.choice(sentences))
        elif kind < 0.55:
            alphabet = rng.choice(ALPHABETS)
            parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))))
        elif kind < 0.7:
            parts.append(rng.choice(SPACES) * rng.randint(1, 3))
        elif kind < 0.82:
            parts.append(rng.choice(CODE))
        elif kind < 0.9 and specials:
            parts.append(rng.choice(specials))
        else:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        if rng.random() < 0.5:
            parts.append(rng.choice(SPACES[:3]))
    return "".join(parts)


def corpus(sentences, rng):
    texts = list(sentences)
    for _ in range(3000):
        texts.append(random_string(rng, sentences, []))
    return texts


def byte_level_bpe(texts, vocab_size, specials, **model_options):
    tok = Tokenizer(models.BPE(**model_options))
    return tok, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                    show_progress=False)


def train(tok, trainer, texts):
    tok.train_from_iterator(texts, trainer)
    return tok


def with_byte_tokens(tok, specials):
    """SentencePiece's layout: the special tokens, then <0x00>..<0xFF>, then the rest."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    ordered = specials + [f"<0x{b:02X}>" for b in range(256)]
    ordered += [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t not in ordered]
    data["model"]["vocab"] = {t: i for i, t in enumerate(ordered)}
    for entry in data["added_tokens"]:
        entry["id"] = data["model"]["vocab"][entry["content"]]
    return Tokenizer.from_str(json.dumps(data))


def build(kind, texts):
    if kind in ("gpt2", "roberta", "llama3", "qwen2", "bloom", "falcon"):
        specials = {
            "gpt2": ["<|endoftext|>"],
            "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
            "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
            "qwen2": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
            "bloom": ["<unk>", "<s>", "</s>", "<pad>"],
            "falcon": [">>TITLE<<", ">>ABSTRACT<<", "<|endoftext|>"],
        }[kind]
        tok, trainer = byte_level_bpe(texts, 3000, specials,
                                      ignore_merges=(kind == "llama3"))
        no_regex = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tok.pre_tokenizer = {
            "gpt2": pre_tokenizers.ByteLevel(add_prefix_space=False),
            "roberta": pre_tokenizers.ByteLevel(add_prefix_space=False),
            "llama3": pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(LLAMA3_REGEX), "isolated"), no_regex]),
            "qwen2": pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(QWEN2_REGEX), "isolated"), no_regex]),
            "bloom": pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(BLOOM_REGEX), "isolated"), no_regex]),
            "falcon": pre_tokenizers.Sequence([
                pre_tokenizers.Punctuation("contiguous"),
                pre_tokenizers.ByteLevel(add_prefix_space=False),
                pre_tokenizers.Digits(individual_digits=False),
                pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), "isolated")]),
        }[kind]
        if kind == "qwen2":
            tok.normalizer = normalizers.NFC()
        tok.decoder = decoders.ByteLevel()
        train(tok, trainer, texts)
        if kind == "roberta":
            tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
            data = json.loads(tok.to_str())
            for entry in data["added_tokens"]:
                if entry["content"] == "<mask>":
                    entry["lstrip"] = True
            tok = Tokenizer.from_str(json.dumps(data))
        elif kind == "llama3":
            tok.post_processor = processors.Sequence([
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                              special_tokens=[("<|begin_of_text|>", 0)])])
        else:
            tok.post_processor = processors.ByteLevel(trim_offsets=False)
        return tok
    if kind in ("llama2", "mistral"):
        specials = ["<unk>", "<s>", "</s>"]
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        if kind == "llama2":
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                                   normalizers.Replace(" ", "▁")])
            trainer_pre = pre_tokenizers.Metaspace(prepend_scheme="never", split=True)
        else:
            trainer_pre = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)
        tok.pre_tokenizer = trainer_pre  # words for training; replaced below for llama2
        trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=specials,
                                      show_progress=False)
        train(tok, trainer, texts)
        if kind == "llama2":
            tok.pre_tokenizer = None
            tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                             decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        else:
            tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
            tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(
                prepend_scheme="first"), decoders.Fuse()])
        tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                           special_tokens=[("<s>", 1)])
        return with_byte_tokens(tok, specials)
    if kind == "misc":
        tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##",
                                   end_of_word_suffix="</w>"))
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                               normalizers.Strip()])
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                     pre_tokenizers.Digits(True)])
        tok.decoder = decoders.BPEDecoder(suffix="</w>")
        trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                      continuing_subword_prefix="##", end_of_word_suffix="</w>",
                                      show_progress=False)
        train(tok, trainer, texts)
        tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
        return tok
    if kind in ("t5", "albert"):
        return sentencepiece_unigram(kind, texts)
    if kind == "unigram":
        return hf_unigram(texts)
    raise ValueError(kind)


def sentencepiece_unigram(kind, texts):
    """A SentencePiece Unigram model trained here, converted as transformers converts T5's and
    ALBERT's (sentencepiece and protobuf are needed only for these kinds)."""
    import sentencepiece as spm
    from transformers.convert_slow_tokenizer import AlbertConverter, T5Converter
    options = {
        "t5": dict(normalization_rule_name="nmt_nfkc", pad_id=0, eos_id=1, unk_id=2, bos_id=-1),
        "albert": dict(normalization_rule_name="nmt_nfkc_cf", pad_id=0, unk_id=1, bos_id=-1,
                       eos_id=-1, control_symbols=["[CLS]", "[SEP]", "[MASK]"]),
    }[kind]
    if kind == "albert":
        texts = [t.lower() for t in texts]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model,
                                   vocab_size=2000, model_type="unigram",
                                   character_coverage=0.995, minloglevel=2, num_threads=1,
                                   **options)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "spm.model"
        path.write_bytes(model.getvalue())
        sp = spm.SentencePieceProcessor(model_file=str(path))
        # What the converters read of a slow T5Tokenizer / AlbertTokenizer.
        slow = types.SimpleNamespace(vocab_file=str(path), _extra_ids=100, legacy=True,
                                     keep_accents=False, do_lower_case=True,
                                     convert_tokens_to_ids=sp.piece_to_id)
        tok = (T5Converter if kind == "t5" else AlbertConverter)(slow).converted()
    if kind == "t5":  # T5TokenizerFast's additional_special_tokens
        tok.add_special_tokens([f"<extra_id_{i}>" for i in range(100)])
    else:  # albert-base-v2's tokenizer.json splits on whitespace first
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    return tok


def hf_unigram(texts):
    """HF's UnigramTrainer, then byte-fallback tokens added and Hangul and emoji pieces taken out
    (so that they fall back to bytes, or to <unk> where <0xF0> is missing)."""
    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(vocab_size=2000, special_tokens=specials, unk_token="<unk>",
                                      show_progress=False)
    train(tok, trainer, texts)
    data = json.loads(tok.to_str())
    missing = set(ALPHABETS[7]) | set(ALPHABETS[13])
    vocab = [e for e in data["model"]["vocab"] if not set(e[0]) & missing]
    vocab += [[f"<0x{b:02X}>", 0.0] for b in range(256) if b != 0xF0]
    data["model"] = {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": True}
    tok = Tokenizer.from_str(json.dumps(data))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=False)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                     decoders.Metaspace(prepend_scheme="always"), decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
    return tok


def stream_pieces(tok, ids):
    from tokenizers.decoders import DecodeStream
    stream = DecodeStream(skip_special_tokens=True)
    return [stream.step(tok, i) or "" for i in ids]


def reference(encode, decode, tok, strings, specials, vocab_size, rng):
    cases = []
    for text in strings:
        ids = encode(text, True)
        plain = encode(text, False)
        cases.append({"text": text, "ids": ids, "ids_plain": plain,
                      "decoded": decode(ids, True), "decoded_special": decode(ids, False)})
    random_ids = []
    for _ in range(300):
        ids = [rng.randrange(vocab_size) for _ in range(rng.randint(1, 12))]
        random_ids.append({"ids": ids, "decoded": decode(ids, True),
                           "decoded_special": decode(ids, False)})
    streams = [{"ids": c["ids"], "pieces": stream_pieces(tok, c["ids"])} for c in cases[:300]]
    return {"cases": cases, "random_ids": random_ids, "streams": streams}


def precompiled_sweep(tok, base):
    """HF's Precompiled normalizer of `tok` on every code point alone, and after `base` (a
    character the charsmap maps): each result that differs from the code point, and each pair
    whose result is not the two results joined (the grapheme replaced whole)."""
    import base64
    charsmap = next(n for n in json.loads(tok.to_str())["normalizer"]["normalizers"]
                    if n["type"] == "Precompiled")["precompiled_charsmap"]
    norm = normalizers.Precompiled(base64.b64decode(charsmap))
    alone, after = {}, {}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        out = norm.normalize_str(chr(cp))
        if out != chr(cp):
            alone[str(cp)] = out
        pair = norm.normalize_str(base + chr(cp))
        if pair != norm.normalize_str(base) + out:
            after[str(cp)] = pair
    return {"charsmap": charsmap, "base": base, "alone": alone, "after_base": after}


def unicode_forms():
    forms = {}
    for form in ["NFC", "NFD", "NFKC", "NFKD"]:
        normalizer = getattr(normalizers, form)()
        changed = {}
        for cp in range(0x110000):
            if 0xD800 <= cp < 0xE000:
                continue
            out = normalizer.normalize_str(chr(cp))
            if out != chr(cp):
                changed[str(cp)] = out
        forms[form] = changed
    return forms


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--smollm2", type=pathlib.Path)
    parser.add_argument("--only", nargs="+", help="write only these kinds")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "unicode_forms.json").write_text(json.dumps(unicode_forms(), ensure_ascii=False))
    sentences = read_sentences(SENTENCES)
    texts = corpus(sentences, random.Random(1))
    kinds = ["gpt2", "roberta", "llama3", "qwen2", "bloom", "falcon", "llama2", "mistral", "misc",
             "t5", "albert", "unigram"]
    if args.only:
        kinds = [k for k in kinds if k in args.only]
    for kind in kinds + (["smollm2"] if args.smollm2 else []):
        rng = random.Random(kind)
        folder = args.out / kind
        folder.mkdir(parents=True, exist_ok=True)
        if kind == "smollm2":
            from transformers import AutoTokenizer
            hf = AutoTokenizer.from_pretrained(args.smollm2)
            tok = Tokenizer.from_file(str(args.smollm2 / "tokenizer.json"))
            encode = lambda t, s: hf.encode(t, add_special_tokens=s)  # noqa: E731
            decode = lambda i, s: hf.decode(i, skip_special_tokens=s)  # noqa: E731
            (folder / "model_dir").write_text(str(args.smollm2.resolve()))
        else:
            tok = build(kind, texts)
            tok.save(str(folder / "tokenizer.json"))
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
            encode = lambda t, s: tok.encode(t, add_special_tokens=s).ids  # noqa: E731
            decode = lambda i, s: tok.decode(i, skip_special_tokens=s)  # noqa: E731
        specials = [t.content for t in tok.get_added_tokens_decoder().values()]
        strings = [s for s in sentences]
        if kind in ("t5", "albert", "unigram"):
            strings += UNIGRAM_STRINGS
        while len(strings) < STRINGS:
            strings.append(random_string(rng, sentences, specials))
        ref = reference(encode, decode, tok, strings, specials,
                        tok.get_vocab_size(with_added_tokens=True), rng)
        if kind == "smollm2":  # the bare library agrees with transformers on this folder
            for case in ref["cases"]:
                assert tok.encode(case["text"]).ids == case["ids"], case["text"]
        (folder / "reference.json").write_text(json.dumps(ref, ensure_ascii=False))
        if kind in ("t5", "albert"):  # t5: NBSP (to a space); albert (case folding): "A"
            sweep = precompiled_sweep(tok, "\u00a0" if kind == "t5" else "A")
            (folder / "precompiled_sweep.json").write_text(json.dumps(sweep, ensure_ascii=False))
        print(f"{kind}: {len(ref['cases'])} strings, vocabulary {tok.get_vocab_size()}")


if __name__ == "__main__":
    main()
