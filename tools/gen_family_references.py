#!/usr/bin/env python3
"""Makes the tiny random checkpoints of tools/family_checkpoints.py with HF transformers (Llama and
its RoPE variants, Mistral, Qwen2, Qwen3, OPT, BLOOM, GPT-NeoX, GPT-J, GPT-Neo, BERT) and writes what the C++ tests compare
against, in the key conventions of tools/gen_gpt2_references.py. HF is the oracle, never our code.

Per checkpoint: MODELS_DIR/<name>/ (save_pretrained, safetensors) and DATA_DIR/<name>.safetensors.
Causal LMs: logits and the base model's last hidden state of a right-padded batch (fp32, eval),
the LM loss (padding labelled -100) and every parameter's gradient (`grad.<name>`, as
named_parameters() names them: a tied head appears once), greedy generations of a left-padded
batch without and with an early end-of-sequence token (unless the entry says generate=False).
BERT: base last hidden state and pooler
output, MLM logits, loss and gradients, classification logits, loss and gradients
(`grad_classification.<name>`). Also DATA_DIR/family_references.json: per checkpoint the
config.json written, the tensors saved, load reports, tying, and checks.

Weights: HF's own init under torch.manual_seed(1234), then every 1-D parameter (norm weights,
biases) gets N(0, 0.1) added, so norms, biases and their sharding (e.g. BLOOM's fused qkv bias)
are visible in the outputs (HF initialises them to exactly 1 and 0), parameters HF leaves all zero
(SAM's positions) get N(0, 0.1), then the table's per-entry
`center_rows` / `scale` adjustments (OPT, BLOOM). The script refuses a checkpoint whose greedy
generation repeats itself (a row with fewer than max_new/2 distinct tokens or a run over 3).
Entries with `layout = "chatglm"` are then rewritten as THUDM's ChatGLM files store the same
model (tools/chatglm_layout.py). Entries with `compare_with` also report where HF's outputs change under those config overrides
(Mistral without its window, RoPE variants with default RoPE).

Rotary embeddings are reset to their initial state before every HF call: dynamic NTK keeps the
longest sequence seen in the module (grow-only) and would otherwise carry state from one call
into the next. Within one generate() call that state does evolve, as HF's does.

usage: gen_family_references.py MODELS_DIR DATA_DIR [--only NAME...]"""
import argparse
import json
import re
import pathlib
import sys
import time

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from family_checkpoints import (CHECKPOINTS, FORWARD_BATCH, GENERATE_PROMPTS,  # noqa: E402
                                MAX_NEW_TOKENS, SEQ2SEQ_TARGETS, WHISPER_DECODER_PROMPT)
from gen_gpt2_references import pad  # noqa: E402
import chatglm_layout  # noqa: E402

SEED = 1234
PERTURB_STD = 0.1
MASK_TOKEN_ID = 103  # BERT: inputs replaced at the masked positions
MLM_POSITIONS = [(0, 1), (0, 4), (1, 2), (3, 0), (3, 7)]
CLASSIFICATION_LABELS = [0, 2, 1, 2]


def reset_rotary(model):
    """Undo dynamic NTK's grow-only state (a no-op for the other RoPE types)."""
    for module in model.modules():
        if hasattr(module, "original_inv_freq") and hasattr(module, "max_seq_len_cached"):
            module.register_buffer("inv_freq", module.original_inv_freq.clone(), persistent=False)
            module.max_seq_len_cached = module.original_max_seq_len


def perturb(model, spec):
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.ndim == 1:
                param.add_(torch.randn_like(param) * PERTURB_STD)
            elif not param.any():  # SAM's relative and absolute positions start at zero
                param.normal_(0, PERTURB_STD)
            if name.endswith(tuple(spec.get("center_rows", ()))):
                param.sub_(param.mean(dim=1, keepdim=True))
            for suffix, factor in spec.get("scale", {}).items():
                if name.endswith(suffix):
                    param.mul_(factor)


def vit_all_heads_class():
    """ViTModel (with pooler) + the classifier under ViTForImageClassification's names."""
    from transformers.models.vit.modeling_vit import ViTModel, ViTPreTrainedModel

    class ViTAllHeads(ViTPreTrainedModel):
        def __init__(self, config):
            super().__init__(config)
            self.vit = ViTModel(config, add_pooling_layer=True)
            self.classifier = nn.Linear(config.hidden_size, config.num_labels)
            self.post_init()

    return ViTAllHeads


def image_classifier_class(spec):
    """The class a vision checkpoint is saved from: ViT's all-heads helper, or the family's own
    classifier where it already holds the base model's pooler (BEiT)."""
    if spec["arch"].startswith("ViT"):
        return vit_all_heads_class()
    return getattr(transformers, spec["arch"])


# transformers 5's ViT, BEiT and Swin parameter names -> the names their checkpoints store (and
# it saves).
VIT_SAVED_NAMES = [(r"\blayers\.(\d+)\.", r"encoder.layer.\1."),
                   (r"(encoder\.layer\.\d+\.)relative_position_bias",
                    r"\1attention.attention.relative_position_bias"),
                   (r"shared_position_bias", "encoder.relative_position_bias"),
                   (r"attention\.q_proj", "attention.attention.query"),
                   (r"attention\.k_proj", "attention.attention.key"),
                   (r"attention\.v_proj", "attention.attention.value"),
                   (r"attention\.o_proj", "attention.output.dense"),
                   (r"mlp\.fc1", "intermediate.dense"), (r"mlp\.fc2", "output.dense")]
SWIN_SAVED_NAMES = [(r"attention\.q_proj", "attention.self.query"),
                    (r"attention\.k_proj", "attention.self.key"),
                    (r"attention\.v_proj", "attention.self.value"),
                    (r"attention\.relative_position_bias\.relative_position_bias_table",
                     "attention.self.relative_position_bias_table"),
                    (r"attention\.o_proj", "attention.output.dense"),
                    (r"mlp\.fc1", "intermediate.dense"), (r"mlp\.fc2", "output.dense")]


def vision_saved_name(spec):
    """The function from a parameter's name to its saved name for the family of `spec`."""
    table = SWIN_SAVED_NAMES if spec["arch"].startswith("Swin") else VIT_SAVED_NAMES

    def saved(name):
        for pattern, replacement in table:
            name = re.sub(pattern, replacement, name)
        return name
    return saved


def encoder_all_heads_class(family):
    """BertModel (with pooler) + MLM head + classifier under the names BertForMaskedLM and
    BertForSequenceClassification use, so one folder loads into BertModel, BertForMaskedLM and
    BertForSequenceClassification with no key missing (each ignores the others' heads, as
    bert-base-uncased's pooler and NSP head are ignored by BertForMaskedLM). family "Roberta":
    the same for RobertaModel, RobertaForMaskedLM (lm_head) and RobertaForSequenceClassification
    (classifier.dense / out_proj); "Ernie": ERNIE's, as BERT's; "Albert": ALBERT's (predictions,
    the pooler as one linear layer)."""
    if family == "Roberta":
        from transformers.models.roberta.modeling_roberta import (
            RobertaClassificationHead, RobertaForMaskedLM, RobertaLMHead, RobertaModel,
            RobertaPreTrainedModel)

        class RobertaAllHeads(RobertaPreTrainedModel):
            _tied_weights_keys = dict(RobertaForMaskedLM._tied_weights_keys)

            def __init__(self, config):
                super().__init__(config)
                self.roberta = RobertaModel(config, add_pooling_layer=True)
                self.lm_head = RobertaLMHead(config)
                self.classifier = RobertaClassificationHead(config)
                self.post_init()

            def get_output_embeddings(self):
                return self.lm_head.decoder

        return RobertaAllHeads

    if family == "Albert":
        from transformers.models.albert.modeling_albert import (AlbertForMaskedLM, AlbertMLMHead,
                                                                AlbertModel,
                                                                AlbertPreTrainedModel)

        class AlbertAllHeads(AlbertPreTrainedModel):
            _tied_weights_keys = dict(AlbertForMaskedLM._tied_weights_keys)

            def __init__(self, config):
                super().__init__(config)
                self.albert = AlbertModel(config, add_pooling_layer=True)
                self.predictions = AlbertMLMHead(config)
                self.classifier = nn.Linear(config.hidden_size, config.num_labels)
                self.post_init()

            def get_output_embeddings(self):
                return self.predictions.decoder

        return AlbertAllHeads

    # BERT and ERNIE (BERT's classes with task-type embeddings) under their own prefix.
    import importlib
    module = importlib.import_module(
        f"transformers.models.{family.lower()}.modeling_{family.lower()}")
    masked_lm, base_model = getattr(module, f"{family}ForMaskedLM"), getattr(module, f"{family}Model")
    mlm_head, pretrained = getattr(module, f"{family}OnlyMLMHead"), getattr(module,
                                                                          f"{family}PreTrainedModel")
    base_name = family.lower()

    class AllHeads(pretrained):
        _tied_weights_keys = dict(masked_lm._tied_weights_keys)

        def __init__(self, config):
            super().__init__(config)
            setattr(self, base_name, base_model(config, add_pooling_layer=True))
            self.cls = mlm_head(config)
            self.classifier = nn.Linear(config.hidden_size, config.num_labels)
            self.post_init()

        def get_output_embeddings(self):
            return self.cls.predictions.decoder

    return AllHeads


def config_class(spec):
    if "config_class" in spec:
        return getattr(transformers, spec["config_class"])
    arch = spec["arch"]
    return getattr(transformers, arch.replace("ForCausalLM", "").replace("ForMaskedLM", "")
                   .replace("ForConditionalGeneration", "") + "Config")


def make_checkpoint(name, spec, folder):
    torch.manual_seed(SEED)
    config = config_class(spec)(**spec["config"])
    if spec.get("kind") == "bert":
        model = encoder_all_heads_class(spec.get("family", "Bert"))(config).eval()
    elif spec.get("kind") == "image_classification":
        model = image_classifier_class(spec)(config).eval()
    else:
        model = getattr(transformers, spec["arch"])(config).eval()
    perturb(model, spec)
    if spec.get("save_dtype"):
        model = model.to(getattr(torch, spec["save_dtype"]))
    model.save_pretrained(folder, safe_serialization=True)
    path = folder / "config.json"
    saved = json.loads(path.read_text())
    if spec.get("kind") in ("bert", "image_classification"):  # the standard class, not the helper
        saved["architectures"] = [spec["arch"]]
    if spec.get("legacy_config"):  # rope settings as older transformers wrote them
        del saved["rope_parameters"]
        saved.update(spec["legacy_config"])
    if spec.get("kind") == "sam":  # SAM's processor for the model's 64 x 64 images
        from transformers.models.sam.image_processing_pil_sam import SamImageProcessorPil
        size = model.config.vision_config.image_size
        SamImageProcessorPil(size={"longest_edge": size},
                             pad_size={"height": size, "width": size},
                             mask_size={"longest_edge": size // 4},
                             mask_pad_size={"height": size // 4, "width": size // 4}
                             ).save_pretrained(folder)
    if spec.get("kind") == "blip2":  # its processor: BLIP's images and a BPE tokenizer
        save_blip2_processor(folder, model.config)
    if spec.get("untied_head"):
        if spec.get("kind") == "blip2":  # the T5 under BLIP-2's language_model
            untie_t5_head(folder, saved["text_config"], model.config.text_config.d_model,
                          "language_model.")
        else:
            untie_t5_head(folder, saved, model.config.d_model)
    if spec.get("kind") == "image_classification":  # HF's ViT processor at the model's size
        from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil
        size = model.config.image_size
        height, width = size if isinstance(size, (list, tuple)) else (size, size)
        ViTImageProcessorPil(size={"height": height, "width": width}).save_pretrained(folder)
    path.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    return sorted(spec["config"])


# What the tiny BLIP-2's tokenizer is trained on: captions of the kind BLIP-2 writes.
BLIP2_CORPUS = [
    "a photograph of a cat sitting on a red couch", "two dogs playing in the snow",
    "a man riding a bicycle down a city street", "a plate of food with rice and vegetables",
    "an aerial view of a river winding through green hills", "a black and white photo of a train",
    "Question: what colour is the sky? Answer: blue", "a close up of a flower with pink petals",
]


def save_blip2_processor(folder, config):
    """Blip2Processor for the tiny checkpoint: BLIP's image processor at the model's image size
    and a byte-level BPE tokenizer trained on BLIP2_CORPUS to fill the vocabulary but its last
    id, then <image> there, as Blip2Processor adds it. With OPT, OPT's special tokens (<s> <pad>
    </s> <unk> first, "</s> $A" as OPT's GPT2Tokenizer adds its bos); with T5, T5's (<pad> </s>
    <unk> first, "$A </s>" as T5's tokenizer adds its eos)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import Blip2Processor, PreTrainedTokenizerFast
    from transformers.models.blip.image_processing_pil_blip import BlipImageProcessorPil
    vocab = config.text_config.vocab_size
    assert config.image_token_index == vocab - 1
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    t5 = not config.use_decoder_only_language_model
    specials = ["<pad>", "</s>", "<unk>"] if t5 else ["<s>", "<pad>", "</s>", "<unk>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab - 1, show_progress=False,
                                  special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(BLIP2_CORPUS * 4, trainer)
    assert tok.get_vocab_size() == vocab - 1, tok.get_vocab_size()
    eos = specials.index("</s>")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>" if t5 else "</s> $A",
                                                       special_tokens=[("</s>", eos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", **({} if t5 else dict(bos_token="</s>")))
    size = config.vision_config.image_size
    processor = Blip2Processor(image_processor=BlipImageProcessorPil(size={"height": size, "width": size}),
                               tokenizer=fast, num_query_tokens=config.num_query_tokens)
    assert fast.convert_tokens_to_ids("<image>") == config.image_token_index
    processor.save_pretrained(folder)


def untie_t5_head(folder, saved, d_model, prefix=""):
    """A flan-T5 checkpoint as older transformers saved it: lm_head.weight of its own beside
    shared.weight (each behind `prefix`) and tie_word_embeddings false in `saved`, the T5's config
    (no scale_decoder_outputs). transformers 5 always ties T5's head when saving; loading, it keeps
    a head whose values differ from shared."""
    from safetensors.torch import load_file
    weights = load_file(str(folder / "model.safetensors"))
    weights[prefix + "lm_head.weight"] = (torch.randn_like(weights[prefix + "shared.weight"])
                                          * d_model ** -0.5)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    saved["tie_word_embeddings"] = False
    saved.pop("scale_decoder_outputs", None)


def load(cls_name, folder, report, key, dtype=torch.float32, **kwargs):
    cls = getattr(transformers, cls_name)
    model, info = cls.from_pretrained(folder, dtype=dtype, output_loading_info=True, **kwargs)
    if info["missing_keys"] or info["mismatched_keys"]:
        raise SystemExit(f"{folder}: {cls_name} re-initialised {info}")
    report[key] = {"class": cls_name, "attn_implementation": model.config._attn_implementation,
                   "unexpected_keys": sorted(info["unexpected_keys"])}
    return model.eval()


def grads(model, prefix, renames=None):
    """Every parameter's gradient; a parameter HF's forward never reads (an untied BERT's
    cls.predictions.bias) has none and is left out. `renames`: parameter name -> the name HF
    saves it under, where they differ (GPT-NeoX's lm_head is stored as embed_out)."""
    renames = renames or {}
    rename = renames if callable(renames) else lambda n: renames.get(n, n)
    return {prefix + rename(n): p.grad.detach().clone() for n, p in model.named_parameters()
            if p.grad is not None}


def longest_run(tokens):
    best = run = 1
    for a, b in zip(tokens, tokens[1:]):
        run = run + 1 if a == b else 1
        best = max(best, run)
    return best


def greedy(model, ids, mask, eos, pad_id, max_new):
    reset_rotary(model)
    return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new,
                          do_sample=False, num_beams=1, eos_token_id=eos, pad_token_id=pad_id)


def causal_outputs(spec, folder, report, ids, mask, labels, dtype, tag):
    """HF's logits, last hidden state, LM loss and every gradient in `dtype`; its LM model."""
    lm = load(spec["arch"], folder, report, f"load_lm{tag}", dtype=dtype)
    base = load(spec["base"], folder, report, f"load_base{tag}", dtype=dtype)
    out = {}
    with torch.no_grad():
        reset_rotary(lm)
        out["forward_logits"] = lm(input_ids=ids, attention_mask=mask).logits
        reset_rotary(base)
        out["forward_last_hidden_state"] = base(input_ids=ids,
                                                attention_mask=mask).last_hidden_state
    reset_rotary(lm)
    loss = lm(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    out["train_loss"] = loss.detach().reshape(1)
    out.update(grads(lm, "grad.", spec.get("saved_names")))
    lm.zero_grad(set_to_none=True)
    return out, lm


def causal_lm_references(spec, folder, report):
    """Outputs, loss and gradients from HF in float64 (the exact values), and HF's own fp32 ones as
    "hf_fp32.<key>": the tests hold an fp32 job to the exact values within the documented
    tolerances, or to twice HF fp32's own distance from them where that is larger. Greedy tokens
    come from HF in fp32, the dtype the job decodes in."""
    out = {}
    ids, mask = pad(spec.get("forward_batch", FORWARD_BATCH), 0, left=False)
    out["forward_input_ids"], out["forward_attention_mask"] = ids, mask
    labels = ids.masked_fill(mask == 0, -100)
    out["train_labels"] = labels
    exact, _ = causal_outputs(spec, folder, report, ids, mask, labels, torch.float64, "_float64")
    out.update(exact)
    hf32, lm = causal_outputs(spec, folder, report, ids, mask, labels, torch.float32, "")
    out.update({f"hf_fp32.{k}": v for k, v in hf32.items()})
    with torch.no_grad():
        # HF in bf16 on the same batch: tests bound a bf16 job's error against forward_logits
        # by this one's.
        low = load(spec["arch"], folder, report, "load_lm_bfloat16", dtype=torch.bfloat16)
        out["forward_logits_bfloat16"] = low(input_ids=ids, attention_mask=mask).logits
        del low

    if spec.get("generate", True):
        generation_references(spec, folder, lm, out, report)
    report["train_loss"] = out["train_loss"].item()

    if "compare_with" in spec:
        report["compare_with"] = compare_check(spec, folder, out, *generation_settings(spec, lm))
    return out


def generation_settings(spec, lm):
    cfg = lm.config
    pad_id = cfg.pad_token_id if cfg.pad_token_id is not None else cfg.eos_token_id
    return spec.get("max_new_tokens", MAX_NEW_TOKENS), pad_id


def generation_references(spec, folder, lm, out, report, new_from=None):
    """Greedy generations of the left-padded prompts, without and with an early eos; refuses a
    checkpoint whose generations repeat themselves. new_from: where the new tokens start in the
    sequences (default: after the prompts; an encoder-decoder model's after its start token)."""
    max_new, pad_id = generation_settings(spec, lm)
    with torch.no_grad():
        gids, gmask = pad(spec.get("generate_prompts", GENERATE_PROMPTS), pad_id, left=True)
        out["generate_input_ids"], out["generate_attention_mask"] = gids, gmask
        seqs = greedy(lm, gids, gmask, None, pad_id, max_new)
        start = gids.shape[1] if new_from is None else new_from
        assert seqs.shape[1] == start + max_new, seqs.shape
        out["generate_sequences"] = seqs
        eos = int(seqs[0, start + 2])
        out["generate_eos_token_id"] = torch.tensor([eos])
        out["generate_eos_sequences"] = greedy(lm, gids, gmask, eos, pad_id, max_new)
        out["generate_pad_token_id"] = torch.tensor([pad_id])
        out["generate_max_new_tokens"] = torch.tensor([max_new])

    new = seqs[:, start:]
    distinct = [len(set(row.tolist())) for row in new]
    runs = [longest_run(row.tolist()) for row in new]
    report["generate_distinct_new_tokens_per_row"] = distinct
    report["generate_longest_repeat_per_row"] = runs
    if min(distinct) < max_new // 2 or max(runs) > 4:
        raise SystemExit(f"{folder}: greedy decoding barely varies: {new.tolist()}")
    report["generate_new_tokens"] = new.tolist()
    report["generate_eos"] = {"eos": eos, "pad": pad_id,
                              "rows": out["generate_eos_sequences"][:, start:].tolist()}


def compare_check(spec, folder, out, max_new, pad_id):
    """The same weights loaded with spec["compare_with"] config overrides (Mistral: no sliding
    window; RoPE variants: default RoPE): where do HF's outputs differ from the reference?"""
    overrides = spec["compare_with"]
    other = getattr(transformers, spec["arch"]).from_pretrained(
        folder, dtype=torch.float32, **overrides).eval()
    with torch.no_grad():
        reset_rotary(other)
        logits = other(input_ids=out["forward_input_ids"],
                       attention_mask=out["forward_attention_mask"]).logits
        seqs = greedy(other, out["generate_input_ids"], out["generate_attention_mask"], None,
                      pad_id, max_new)
    mask = out["forward_attention_mask"].bool()
    diff = (logits - out["forward_logits"]).abs().amax(dim=2)
    width = out["generate_input_ids"].shape[1]
    return {"overrides": overrides,
            "forward_row_lengths": mask.sum(1).tolist(),
            "max_abs_logit_diff_per_row_valid_positions": [
                float(d[m].max()) for d, m in zip(diff, mask)],
            "max_abs_logit_diff_per_row_padded_positions": [
                float(d[~m].max()) if (~m).any() else None for d, m in zip(diff, mask)],
            "valid_positions_that_differ_per_row": [
                [i for i in range(len(d)) if m[i] and d[i] > 1e-5] for d, m in zip(diff, mask)],
            "generate_first_differing_new_token_per_row": [
                first_difference(a[width:], b[width:])
                for a, b in zip(seqs, out["generate_sequences"])]}


def first_difference(a, b):
    """Index of the first differing element, None when equal."""
    unequal = (a != b).nonzero()
    return int(unequal[0]) if len(unequal) else None


def seq2seq_outputs(spec, folder, report, inputs, labels, dtype, tag):
    """An encoder-decoder LM's logits, loss and every gradient in `dtype`, and the base class's
    last hidden state (T5EncoderModel: the encoder's output; WhisperModel: the decoder's); the LM
    model."""
    lm = load(spec["arch"], folder, report, f"load_lm{tag}", dtype=dtype)
    base = load(spec["base"], folder, report, f"load_base{tag}", dtype=dtype)
    inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}
    out = {}
    with torch.no_grad():
        out["forward_logits"] = lm(**inputs).logits
        base_inputs = inputs if spec["kind"] == "speech_seq2seq" else dict(
            input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
        out["forward_last_hidden_state"] = base(**base_inputs).last_hidden_state
    loss = lm(**inputs, labels=labels).loss
    loss.backward()
    out["train_loss"] = loss.detach().reshape(1)
    out.update(grads(lm, "grad."))
    lm.zero_grad(set_to_none=True)
    return out, lm


def seq2seq_forward_references(spec, folder, report, inputs, labels, out):
    """Into `out`: the float64 outputs, loss and gradients (the exact values), HF's fp32 ones as
    "hf_fp32.<key>", and HF's bf16 and fp16 logits (in fp16 HF keeps T5's wo in fp32,
    _keep_in_fp32_modules); returns the fp32 LM model."""
    exact, _ = seq2seq_outputs(spec, folder, report, inputs, labels, torch.float64, "_float64")
    out.update(exact)
    hf32, lm = seq2seq_outputs(spec, folder, report, inputs, labels, torch.float32, "")
    out.update({f"hf_fp32.{k}": v for k, v in hf32.items()})
    with torch.no_grad():
        for dtype, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
            low = load(spec["arch"], folder, report, f"load_lm_{name}", dtype=dtype)
            out[f"forward_logits_{name}"] = low(**{
                k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()
            }).logits
    return lm


def seq2seq_references(spec, folder, report):
    """As causal_lm_references for an encoder-decoder LM: the forward batch is the encoder's input,
    SEQ2SEQ_TARGETS the labels (-100 padded) and their right shift the decoder's input; the base
    class is the encoder alone. Greedy generations return HF's decoder sequences
    (decoder_start_token_id, then the new tokens)."""
    out = {}
    ids, mask = pad(spec.get("forward_batch", FORWARD_BATCH), 0, left=False)
    labels, _ = pad(SEQ2SEQ_TARGETS, -100, left=False)
    shifted = transformers.T5ForConditionalGeneration._shift_right
    lm32 = load(spec["arch"], folder, report, "load_shift")
    decoder_ids = shifted(lm32, labels)
    out["forward_input_ids"], out["forward_attention_mask"] = ids, mask
    out["forward_decoder_input_ids"], out["train_labels"] = decoder_ids, labels
    inputs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
    lm = seq2seq_forward_references(spec, folder, report, inputs, labels, out)
    out["generate_decoder_start_token_id"] = torch.tensor([lm.config.decoder_start_token_id])
    generation_references(spec, folder, lm, out, report, new_from=1)
    report["train_loss"] = out["train_loss"].item()
    return out


def speech_seq2seq_references(spec, folder, report):
    """As seq2seq_references for an audio encoder-decoder (Whisper): the encoder reads random
    log-mel features [4, mels, 2 max_source_positions] (torch.manual_seed(SEED)). Greedy
    generations of 3 feature rows start from WHISPER_DECODER_PROMPT, through GenerationMixin's
    generate (Whisper's own generate() adds its long-form and timestamp logic on top)."""
    out = {}
    config = transformers.AutoConfig.from_pretrained(folder)
    frames = 2 * config.max_source_positions
    torch.manual_seed(SEED)
    features = torch.randn(4, config.num_mel_bins, frames)
    labels, _ = pad(SEQ2SEQ_TARGETS, -100, left=False)
    from transformers.models.whisper.modeling_whisper import shift_tokens_right
    decoder_ids = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
    out["forward_input_features"], out["forward_decoder_input_ids"] = features, decoder_ids
    out["train_labels"] = labels
    inputs = dict(input_features=features, decoder_input_ids=decoder_ids)
    lm = seq2seq_forward_references(spec, folder, report, inputs, labels, out)
    with torch.no_grad():
        max_new, pad_id = spec.get("max_new_tokens", MAX_NEW_TOKENS), config.pad_token_id
        gfeatures = torch.randn(3, config.num_mel_bins, frames)
        prompt = torch.tensor([WHISPER_DECODER_PROMPT] * 3)
        out["generate_input_features"] = gfeatures
        out["generate_decoder_prompt"] = prompt[0]

        def greedy_speech(eos):
            return transformers.GenerationMixin.generate(
                lm, input_features=gfeatures, decoder_input_ids=prompt, max_new_tokens=max_new,
                do_sample=False, num_beams=1, eos_token_id=eos, pad_token_id=pad_id)

        seqs = greedy_speech(None)
        start = prompt.shape[1]
        assert seqs.shape[1] == start + max_new, seqs.shape
        out["generate_sequences"] = seqs
        eos = int(seqs[0, start + 2])
        out["generate_eos_token_id"] = torch.tensor([eos])
        out["generate_eos_sequences"] = greedy_speech(eos)
        out["generate_pad_token_id"] = torch.tensor([pad_id])
        out["generate_max_new_tokens"] = torch.tensor([max_new])
    new = seqs[:, start:]
    distinct = [len(set(row.tolist())) for row in new]
    runs = [longest_run(row.tolist()) for row in new]
    if min(distinct) < max_new // 2 or max(runs) > 4:
        raise SystemExit(f"{folder}: greedy decoding barely varies: {new.tolist()}")
    report["generate_new_tokens"] = new.tolist()
    report["train_loss"] = out["train_loss"].item()
    return out


def bert_references(spec, folder, report):
    # In float64, as causal_lm_references' outputs and gradients.
    f64 = torch.float64
    family = spec.get("family", "Bert")
    base = load(f"{family}Model", folder, report, "load_base", dtype=f64)
    mlm = load(f"{family}ForMaskedLM", folder, report, "load_lm", dtype=f64)
    clf = load(f"{family}ForSequenceClassification", folder, report, "load_classification",
               dtype=f64)
    out = {}
    # RoBERTa's positions count the ids that are not pad_token_id: pad with it.
    original, mask = pad(FORWARD_BATCH, base.config.pad_token_id or 0, left=False)
    ids = original.clone()
    mlm_labels = torch.full_like(ids, -100)
    for row, col in MLM_POSITIONS:
        mlm_labels[row, col] = original[row, col]
        ids[row, col] = MASK_TOKEN_ID
    token_types = torch.zeros_like(ids)
    if base.config.type_vocab_size > 1:
        for row, length in enumerate(mask.sum(1).tolist()):
            token_types[row, (length + 1) // 2:length] = 1  # second "sentence"; padding stays 0
    inputs = dict(input_ids=ids, attention_mask=mask, token_type_ids=token_types)
    out["forward_input_ids"], out["forward_attention_mask"] = ids, mask
    out["forward_token_type_ids"] = token_types
    with torch.no_grad():
        base_out = base(**inputs)
        out["forward_last_hidden_state"] = base_out.last_hidden_state
        out["forward_pooler_output"] = base_out.pooler_output
        out["forward_logits"] = mlm(**inputs).logits
        out["forward_classification_logits"] = clf(**inputs).logits

    loss = mlm(**inputs, labels=mlm_labels).loss
    loss.backward()
    out["train_labels"], out["train_loss"] = mlm_labels, loss.detach().reshape(1)
    out.update(grads(mlm, "grad."))

    cls_labels = torch.tensor(CLASSIFICATION_LABELS)
    closs = clf(**inputs, labels=cls_labels).loss
    closs.backward()
    out["classification_labels"], out["classification_loss"] = cls_labels, closs.detach().reshape(1)
    out.update(grads(clf, "grad_classification."))
    report["train_loss"] = out["train_loss"].item()
    report["classification_loss"] = out["classification_loss"].item()
    report["classification_problem_type"] = clf.config.problem_type
    return out


def host_stream_seed(path, seed=1234, dp_rank=0, stream=0):
    """The seed of the host's random stream of module `path` (layers::Dropout's, in
    sdk/src/layers/dropout.cpp): FNV-1a of the path, mixed with ShardConfig's seed, the
    data-parallel rank and the slice by splitmix64's finaliser."""
    m = (1 << 64) - 1
    h = 0xcbf29ce484222325
    for byte in path.encode():
        h = ((h ^ byte) * 0x100000001b3) & m

    def mix(a, b):
        z = (a + 0x9e3779b97f4a7c15 * (b + 1)) & m
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & m
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & m
        return z ^ (z >> 31)

    return mix(mix(mix(seed, h), dp_rank), stream)


def draw_drop_paths_as_the_host(model, saved_name):
    """HF's stochastic depth (BeitDropPath, SwinDropPath: per sample floor(1 - p + u), the branch
    divided by 1 - p times that) with each module's uniforms drawn in fp32 from a generator seeded
    as the host seeds that module's stream, so that both drop the same samples of the same
    branches; what is compared is HF's placement of the modules, their rates and their math.
    `saved_name` maps HF's module names to the checkpoint's, which the host's paths follow."""
    for name, module in model.named_modules():
        if not type(module).__name__.endswith("DropPath") or module.drop_prob == 0:
            continue
        generator = torch.Generator().manual_seed(host_stream_seed(saved_name(name)))
        keep = 1.0 - module.drop_prob

        def forward(x, generator=generator, keep=keep):
            shape = (x.shape[0],) + (1,) * (x.ndim - 1)
            kept = torch.floor(torch.rand(shape, generator=generator, dtype=torch.float32) + keep)
            return x.div(keep) * kept.to(x.dtype)

        module.forward = forward


def image_classification_outputs(spec, folder, report, pixels, labels, dtype, tag):
    """The base model's last hidden state and pooler output, the classifier's logits, loss and
    every gradient (under the checkpoint's names) in `dtype`. With stochastic depth
    (drop_path_rate > 0) the loss and gradients are training mode's, the host's draws."""
    base = load(spec["base"], folder, report, f"load_base{tag}", dtype=dtype)
    clf = load(spec["arch"], folder, report, f"load_classification{tag}", dtype=dtype)
    pixels = pixels.to(dtype)
    out = {}
    with torch.no_grad():
        base_out = base(pixel_values=pixels)
        out["forward_last_hidden_state"] = base_out.last_hidden_state
        out["forward_pooler_output"] = base_out.pooler_output
        out["forward_logits"] = clf(pixel_values=pixels).logits
    if getattr(clf.config, "drop_path_rate", 0) > 0:
        draw_drop_paths_as_the_host(clf, vision_saved_name(spec))
        clf.train()
    loss = clf(pixel_values=pixels, labels=labels).loss
    loss.backward()
    out["train_loss"] = loss.detach().reshape(1)
    out.update(grads(clf, "grad.", vision_saved_name(spec)))
    report["classification_problem_type"] = clf.config.problem_type
    return out


def image_classification_references(spec, folder, report):
    """ViT, BEiT, Swin: four random images (torch.manual_seed(SEED)) of the config's size,
    classified; float64 (exact) and HF fp32 ("hf_fp32.<key>") outputs, loss and gradients, HF's
    bf16 logits; ViT's positions interpolated for another size, Swin's hidden states at another
    size."""
    config = transformers.AutoConfig.from_pretrained(folder)
    size = config.image_size if isinstance(config.image_size, (list, tuple)) else [
        config.image_size] * 2
    torch.manual_seed(SEED)
    pixels = torch.randn(4, config.num_channels, *size)
    labels = torch.tensor(CLASSIFICATION_LABELS)
    out = {"forward_pixel_values": pixels, "train_labels": labels}
    out.update(image_classification_outputs(spec, folder, report, pixels, labels, torch.float64,
                                            "_float64"))
    hf32 = image_classification_outputs(spec, folder, report, pixels, labels, torch.float32, "")
    out.update({f"hf_fp32.{k}": v for k, v in hf32.items()})
    with torch.no_grad():
        low = load(spec["arch"], folder, report, "load_classification_bfloat16",
                   dtype=torch.bfloat16)
        out["forward_logits_bfloat16"] = low(pixel_values=pixels.to(torch.bfloat16)).logits
        if spec["arch"].startswith("Swin") and not config.use_absolute_embeddings:
            # Swin takes any size (padded to whole patches and windows) without positions.
            base = load(spec["base"], folder, report, "load_base_other_size",
                        dtype=torch.float64)
            other = torch.randn(2, config.num_channels, size[0] - 5, size[1] + 13)
            out["other_size_pixel_values"] = other
            out["other_size_last_hidden_state"] = base(
                pixel_values=other.to(torch.float64)).last_hidden_state
        elif size[0] == size[1]:  # HF interpolates a square grid of positions only
            base = load(spec["base"], folder, report, "load_base_interpolate",
                        dtype=torch.float64)
            other = torch.randn(2, config.num_channels, size[0] + 16, size[1] + 8)
            out["interpolate_pixel_values"] = other
            out["interpolate_last_hidden_state"] = base(
                pixel_values=other.to(torch.float64), interpolate_pos_encoding=True).last_hidden_state
    report["train_loss"] = out["train_loss"].item()
    return out


SAM_PROMPTS = {  # per case: HF SamModel's prompt arguments for a batch of 2 images of 64 x 64
    # Two point batches of three points: on and off the object, not a point, padding.
    "points": dict(input_points=[[[[10.0, 12.0], [40.5, 33.0], [0.0, 0.0]],
                                  [[63.0, 1.0], [20.0, 50.0], [31.0, 31.0]]],
                                 [[[5.0, 60.0], [17.25, 8.0], [44.0, 44.0]],
                                  [[30.0, 30.0], [0.0, 0.0], [0.0, 0.0]]]],
                   input_labels=[[[1, 0, -10], [1, -1, 0]], [[0, 1, 1], [1, -10, -10]]]),
    # Three boxes per image.
    "boxes": dict(input_boxes=[[[2.0, 3.0, 30.0, 40.0], [10.0, 10.0, 60.0, 20.0],
                                [0.0, 0.0, 63.0, 63.0]],
                               [[5.5, 7.0, 9.0, 50.0], [33.0, 1.0, 62.0, 30.0],
                                [20.0, 20.0, 40.0, 44.0]]]),
    # A point and a box per prompt, one mask each (multimask_output false).
    "points_boxes": dict(input_points=[[[[12.0, 20.0]], [[50.0, 9.0]]],
                                       [[[3.0, 3.0]], [[40.0, 60.0]]]],
                         input_labels=[[[1], [0]], [[1], [1]]],
                         input_boxes=[[[4.0, 8.0, 30.0, 33.0], [40.0, 2.0, 63.0, 20.0]],
                                      [[0.0, 0.0, 20.0, 20.0], [25.0, 45.0, 60.0, 63.0]]],
                         multimask_output=False),
    # A point with a mask prompt: random logits at 4 x the embedding grid (filled in below).
    "points_masks": dict(input_points=[[[[30.0, 40.0]]], [[[8.0, 50.0]]]],
                         input_labels=[[[1]], [[0]]], input_masks="random"),
}


def sam_references(spec, folder, report):
    """SAM: two random images (torch.manual_seed(SEED)) with each case of SAM_PROMPTS: pred_masks,
    iou_scores and the image embeddings; the gradient of sum(pred_masks * mask_weights) +
    sum(iou_scores * iou_weights) for the points case (random weights), every parameter's under
    the checkpoint's names (weights N(0, 1 / count)). All in float64 (exact) and HF fp32
    ("hf_fp32.<key>")."""
    config = transformers.AutoConfig.from_pretrained(folder)
    vision = config.vision_config
    torch.manual_seed(SEED)
    pixels = torch.randn(2, 3, vision.image_size, vision.image_size)
    out = {"forward_pixel_values": pixels}
    side = 4 * config.prompt_encoder_config.image_embedding_size
    random_masks = torch.randn(2, 1, side, side) * 3
    for dtype, prefix in ((torch.float64, ""), (torch.float32, "hf_fp32.")):
        model = load(spec["arch"], folder, report, f"load_{dtype}", dtype=dtype)
        for case, prompts in SAM_PROMPTS.items():
            args = {k: (torch.tensor(v, dtype=dtype if k != "input_labels" else torch.long)
                        if isinstance(v, list) else v) for k, v in prompts.items()}
            if args.get("input_masks") == "random":
                args["input_masks"] = random_masks.to(dtype)
            if not prefix:
                out.update({f"{case}_{k}": v for k, v in args.items() if torch.is_tensor(v)})
            with torch.no_grad():
                result = model(pixel_values=pixels.to(dtype), **args)
            out[f"{prefix}{case}_pred_masks"] = result.pred_masks
            out[f"{prefix}{case}_iou_scores"] = result.iou_scores
        with torch.no_grad():
            out[f"{prefix}image_embeddings"] = model.get_image_embeddings(pixels.to(dtype))
        args = {k: torch.tensor(v, dtype=dtype if k != "input_labels" else torch.long)
                for k, v in SAM_PROMPTS["points"].items()}
        result = model(pixel_values=pixels.to(dtype), **args)
        if not prefix:  # N(0, 1 / count): the sum stays of order one, as a mean loss does
            for key, value in (("train_mask_weights", result.pred_masks),
                               ("train_iou_weights", result.iou_scores)):
                out[key] = torch.randn(value.shape, dtype=dtype) / value.numel() ** 0.5
        loss = ((result.pred_masks * out["train_mask_weights"].to(dtype)).sum()
                + (result.iou_scores * out["train_iou_weights"].to(dtype)).sum())
        loss.backward()
        out[f"{prefix}train_loss"] = loss.detach().reshape(1)
        out.update(grads(model, f"{prefix}grad."))
    return out


def blip2_references(spec, folder, report):
    """BLIP-2: two random images (torch.manual_seed(SEED)) with prompts of the image tokens, bos
    and random text ids (a T5 language model: the image tokens, random text ids and eos, as
    Blip2Processor puts T5's tokens): the logits, the LM loss of the text tokens (OPT: image tokens
    -100; T5: random targets, one row padded with -100, their right shift the decoder's input)
    and every parameter's gradient (eval mode: no dropout), in float64 (exact) and HF fp32
    ("hf_fp32.<key>"); HF's greedy generation from the prompt's start in fp32 (T5: the decoder's
    sequences); HF's bf16 and fp16 logits."""
    config = transformers.AutoConfig.from_pretrained(folder)
    vision, text = config.vision_config, config.text_config
    seq2seq = not config.use_decoder_only_language_model
    torch.manual_seed(SEED)
    pixels = torch.randn(2, 3, vision.image_size, vision.image_size)
    image = [config.image_token_index] * config.num_query_tokens
    words = torch.randint(4, config.image_token_index, (2, 6))
    if seq2seq:
        start = torch.tensor([image + [text.eos_token_id]] * 2)
        ids = torch.cat([start[:, :-1], words, start[:, -1:]], 1)
        labels = torch.randint(4, config.image_token_index, (2, 5))
        labels[1, 3:] = -100
        decoder_ids = transformers.T5ForConditionalGeneration._shift_right(
            transformers.T5ForConditionalGeneration(text), labels)
        inputs = dict(input_ids=ids, decoder_input_ids=decoder_ids)
    else:
        start = torch.tensor([image + [text.bos_token_id]] * 2)
        ids = torch.cat([start, words], 1)
        labels = ids.masked_fill(ids == config.image_token_index, -100)
        inputs = dict(input_ids=ids)
    out = {"forward_pixel_values": pixels, "forward_input_ids": ids, "train_labels": labels}
    if seq2seq:
        out["forward_decoder_input_ids"] = inputs["decoder_input_ids"]
    for dtype, prefix in ((torch.float64, ""), (torch.float32, "hf_fp32.")):
        model = load(spec["arch"], folder, report, f"load_{dtype}", dtype=dtype)
        with torch.no_grad():
            out[f"{prefix}forward_logits"] = model(pixel_values=pixels.to(dtype), **inputs).logits
        result = model(pixel_values=pixels.to(dtype), input_ids=ids, labels=labels)
        result.loss.backward()
        out[f"{prefix}train_loss"] = result.loss.detach().reshape(1)
        out.update(grads(model, f"{prefix}grad."))
        if dtype == torch.float32:
            with torch.no_grad():
                seqs = model.generate(pixel_values=pixels, input_ids=start, do_sample=False,
                                      max_new_tokens=MAX_NEW_TOKENS, min_new_tokens=MAX_NEW_TOKENS)
            out["generate_input_ids"], out["generate_sequences"] = start, seqs
    with torch.no_grad():
        # HF in bf16 and fp16: tests bound a job's error against forward_logits by these. In fp16
        # HF keeps the Q-Former and query tokens in fp32 (_keep_in_fp32_modules); in bf16 not.
        for dtype, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
            low = load(spec["arch"], folder, report, f"load_{name}", dtype=dtype)
            kept = torch.float32 if dtype == torch.float16 else dtype
            assert low.qformer.layernorm.weight.dtype == kept and low.query_tokens.dtype == kept
            out[f"forward_logits_{name}"] = low(pixel_values=pixels.to(dtype), **inputs).logits
    report["train_loss"] = out["train_loss"].item()
    report["generate_sequences"] = out["generate_sequences"].tolist()
    return out


def describe(name, spec, folder, passed_keys, report, model_params):
    config = json.loads((folder / "config.json").read_text())
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        saved = {k: (list(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype())
                 for k in f.keys()}
    report["config_json"] = config
    report["config_keys_not_passed"] = sorted(set(config) - set(passed_keys))
    report["files"] = sorted(p.name for p in folder.iterdir())
    report["saved_tensors"] = {k: f"{v[1]}{v[0]}" for k, v in sorted(saved.items())}
    report["grad_params_not_saved"] = sorted(set(model_params) - set(saved))
    report["saved_not_in_grad_params"] = sorted(set(saved) - set(model_params))


def run_one(name, spec, models, data):
    start = time.perf_counter()
    folder = models / name
    passed = make_checkpoint(name, spec, folder)
    report = {"arch": spec["arch"]}
    if spec.get("kind") == "bert":
        out = bert_references(spec, folder, report)
    elif spec.get("kind") == "seq2seq":
        out = seq2seq_references(spec, folder, report)
    elif spec.get("kind") == "speech_seq2seq":
        out = speech_seq2seq_references(spec, folder, report)
    elif spec.get("kind") == "image_classification":
        out = image_classification_references(spec, folder, report)
    elif spec.get("kind") == "sam":
        out = sam_references(spec, folder, report)
    elif spec.get("kind") == "blip2":
        out = blip2_references(spec, folder, report)
    else:
        out = causal_lm_references(spec, folder, report)
    bad = [k for k, v in out.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        raise SystemExit(f"{name}: non-finite values in {bad}")
    save_file({k: v.contiguous() for k, v in out.items()}, str(data / f"{name}.safetensors"))
    params = [k[len("grad."):] for k in out if k.startswith("grad.")]
    describe(name, spec, folder, passed, report, params)
    report["reference_keys"] = sorted(k for k in out if "grad." not in k)
    if spec.get("layout") == "chatglm":  # HF's outputs are the GLM folder's; then its files
        chatglm_layout.convert(folder)
        report["layout"] = "chatglm (tools/chatglm_layout.py)"
    report["seconds"] = round(time.perf_counter() - start, 2)
    return report


def print_summary(name, report):
    saved = report["saved_tensors"]
    print(f"== {name} ({report['arch']}, {report['seconds']} s)")
    print(f"   config.json keys not passed: {report['config_keys_not_passed']}")
    for key in ("rope_parameters", "dtype", "layer_types", "sliding_window"):
        if key in report["config_json"]:
            print(f"   config.json {key}: {json.dumps(report['config_json'][key])}")
    print(f"   {len(saved)} tensors saved, e.g. "
          + ", ".join(f"{k} {v}" for k, v in list(saved.items())[:4]))
    loads = [report[k] for k in ("load_lm", "load_base", "load_classification") if k in report]
    for entry in loads:
        print(f"   {entry['class']}: attn {entry['attn_implementation']}, "
              f"unexpected {entry['unexpected_keys']}")
    if report["grad_params_not_saved"] or report["saved_not_in_grad_params"]:
        print(f"   parameters not saved: {report['grad_params_not_saved']}; saved but not a "
              f"parameter of {report['arch']}: {report['saved_not_in_grad_params']}")
    if "generate_new_tokens" in report:
        print(f"   greedy new tokens: {report['generate_new_tokens']}")
    if "compare_with" in report:
        print(f"   compared with {json.dumps(report['compare_with'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", type=pathlib.Path, help="folder for the <name>/ checkpoints")
    parser.add_argument("data", type=pathlib.Path, help="folder for <name>.safetensors")
    parser.add_argument("--only", nargs="+", choices=sorted(CHECKPOINTS), metavar="NAME",
                        help="just these checkpoints")
    args = parser.parse_args()
    start = time.perf_counter()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    args.models.mkdir(parents=True, exist_ok=True)
    args.data.mkdir(parents=True, exist_ok=True)
    summary_path = args.data / "family_references.json"
    summary = json.loads(summary_path.read_text()) if args.only and summary_path.exists() else {}
    summary["transformers_version"] = transformers.__version__
    summary["torch_version"] = torch.__version__
    summary.setdefault("checkpoints", {})
    for name in args.only or CHECKPOINTS:
        report = run_one(name, CHECKPOINTS[name], args.models, args.data)
        summary["checkpoints"][name] = report
        print_summary(name, report)
    summary_path.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {len(args.only or CHECKPOINTS)} references to {args.data} "
          f"in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
