"""The GPT-2-small-shaped model (124M parameters, random weights made locally with HF
transformers) that the CPU benchmarks share, and the FLOPs of its matrix products."""
import pathlib

HIDDEN, LAYERS, HEADS, VOCAB, POSITIONS = 768, 12, 12, 50257, 1024


def make_checkpoint(path: pathlib.Path) -> None:
    if (path / "model.safetensors").exists():
        return
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=POSITIONS,
                        vocab_size=VOCAB, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    GPT2LMHeadModel(config).save_pretrained(path, safe_serialization=True)


def forward_flops(batch: int, seq: int, causal_half: bool = False) -> float:
    """Matrix-product FLOPs of one forward pass with full logits: the linear layers, the tied
    LM head and attention's two batched products (halved when causal_half: the products a
    causal kernel that skips masked blocks performs)."""
    tokens = batch * seq
    linear = LAYERS * 2 * tokens * (HIDDEN * 3 * HIDDEN + HIDDEN * HIDDEN + 8 * HIDDEN * HIDDEN)
    attention = LAYERS * 2 * 2 * batch * seq * seq * HIDDEN
    head = 2 * tokens * HIDDEN * VOCAB
    return linear + (attention / 2 if causal_half else attention) + head
