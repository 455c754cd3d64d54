#!/usr/bin/env python3
"""Tokenizes a UTF-8 text file into a flat binary of token ids for the training job's
data loader, with HF transformers' AutoTokenizer from a local model folder.

usage: tokenize_text.py TEXT_FILE MODEL_DIR OUT.bin [--dtype uint16|uint32]
                        [--separator STRING]

- No special tokens are added (add_special_tokens=False): the ids are exactly the text's.
- Documents: the whole file is one document unless --separator is given, in which case the
  text is split on that exact string (e.g. --separator $'\\n\\n\\n'; empty pieces dropped).
  Each document is tokenized on its own, and the documents are joined with the tokenizer's
  eos id between them (not after the last) if it has one, with nothing between them if not.
- Output: the ids back to back, little-endian, uint16 (default) or uint32, no header.
  uint16 is refused when an id could exceed 65535 (len(tokenizer), added tokens included,
  above 65536), with a message suggesting --dtype uint32.
- Prints the token count, the document count and the vocabulary size.
"""
import argparse
import pathlib
import sys

import numpy as np
from transformers import AutoTokenizer
from transformers.utils import logging


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("text", type=pathlib.Path, help="UTF-8 text file")
    parser.add_argument("model", type=pathlib.Path, help="model folder with the tokenizer files")
    parser.add_argument("out", type=pathlib.Path, help="binary file of token ids to write")
    parser.add_argument("--dtype", choices=["uint16", "uint32"], default="uint16")
    parser.add_argument("--separator", default=None,
                        help="split the text into documents on this exact string")
    args = parser.parse_args()

    logging.set_verbosity_error()  # no "sequence longer than model_max_length" warning
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    vocab = len(tokenizer)
    if args.dtype == "uint16" and vocab > 65536:
        sys.exit(f"tokenize_text: the vocabulary of {args.model} has {vocab} entries, so ids "
                 f"go up to {vocab - 1}, which does not fit in uint16 (at most 65535): "
                 f"use --dtype uint32")

    text = args.text.read_text(encoding="utf-8")
    documents = [text] if args.separator is None else [
        d for d in text.split(args.separator) if d]
    eos = tokenizer.eos_token_id
    ids: list[int] = []
    for i, document in enumerate(documents):
        if i and eos is not None:
            ids.append(eos)
        ids.extend(tokenizer(document, add_special_tokens=False)["input_ids"])

    dtype = np.dtype("<u2" if args.dtype == "uint16" else "<u4")
    array = np.asarray(ids, dtype=np.int64)
    if array.size and (array.min() < 0 or array.max() > np.iinfo(dtype).max):
        sys.exit(f"tokenize_text: an id ({array.max()}) does not fit in {args.dtype}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    array.astype(dtype).tofile(args.out)
    print(f"{args.out}: {array.size} tokens from {len(documents)} document(s), "
          f"{args.dtype}; vocabulary {vocab}; eos {eos}")


if __name__ == "__main__":
    main()
