"""The tiny random checkpoints of tools/gen_family_references.py, one entry per folder.

Shared choices: hidden size 64 (96 for BLOOM, whose 12 heads must divide it), 5 layers (two
pipeline stages split them unevenly), attention heads divisible by 4 (tp = 1, 2, 4), a vocabulary
of 1013 (divides by no tp size), fp32 weights (one bf16 copy), and a wide init (0.2; 0.1 for
BERT; 0.3 where 0.2 still repeats a token) so greedy decoding changes token from step to step
(gen_family_references.py checks it).

Each entry: `arch` (the class saved, its name lands in config.json's "architectures"), `base` (the
headless class loaded from the same folder for `forward_last_hidden_state`), `config` (keyword
arguments of the family's config class), and optional `save_dtype`, `forward_batch`,
`generate_prompts`, `max_new_tokens`, `compare_with` (config overrides: the script reports where
HF's outputs with them differ, e.g. Mistral without its window, a RoPE variant with default RoPE),
and `center_rows` / `scale` (parameter-name suffixes: rows made zero-mean / weights multiplied after
HF's init, for OPT and BLOOM, whose random inits otherwise decode one token over and over).
"""

# Right-padded forward batch: four rows (pipeline tests split it into 1 to 4 micro-batches) of
# lengths 9, 4, 1 and 11. Rows 0 and 3 are longer than Mistral's sliding window (6).
FORWARD_BATCH = [
    [5, 17, 301, 44, 9, 1000, 3, 77, 512],
    [7, 8, 9, 10],
    [42],
    [900, 901, 902, 903, 904, 905, 13, 14, 15, 16, 17],
]
# A width that divides by 2, 4 and 8 (sequence parallelism splits it without padding; ring
# attention's zig-zag chunks at sp = 4 need a multiple of 8).
EVEN_FORWARD_BATCH = [
    [(31 * i + 7) % 1013 for i in range(16)],
    [(17 * i + 300) % 1013 for i in range(9)],
    [(41 * i + 50) % 1013 for i in range(16)],
    [5, 6, 7],
]
# Left-padded generation prompts (lengths 5, 2, 3).
GENERATE_PROMPTS = [[11, 22, 33, 44, 55], [600, 7], [301, 302, 303]]
MAX_NEW_TOKENS = 10

# Right-padded rows of lengths 9, 6, 8 and 11 for GPT-Neo's local layers (window 6): every
# padding position still has a real token within its window. Where it has none (FORWARD_BATCH's
# rows of 4 and 1), HF's eager attention adds two finfo.min masks, and its fp32 and fp64
# outputs there differ by 0.5: no reference exists for those positions.
WINDOW_FORWARD_BATCH = [
    [5, 17, 301, 44, 9, 1000, 3, 77, 512],
    [7, 8, 9, 10, 11, 12],
    [42, 43, 600, 601, 7, 8, 250, 251],
    [900, 901, 902, 903, 904, 905, 13, 14, 15, 16, 17],
]

# Longer inputs for the dynamic-NTK checkpoint (max_position_embeddings 16): the forward batch
# (width 20) is past 16 from the start; the longest prompt (14) crosses 16 while generating
# (positions 0..23), so both the unscaled and the scaled regime appear in one generation.
LONG_FORWARD_BATCH = [
    [(37 * i + 11) % 1013 for i in range(20)],
    [(53 * i + 5) % 1013 for i in range(7)],
    [42],
    [(71 * i + 400) % 1013 for i in range(17)],
]
LONG_GENERATE_PROMPTS = [
    [(29 * i + 100) % 1013 for i in range(14)],
    [600, 7, 8],
    [(43 * i + 250) % 1013 for i in range(9)],
]

# Encoder-decoder targets (labels), right-padded with -100 to length 7; the decoder reads them
# shifted right from decoder_start_token_id.
SEQ2SEQ_TARGETS = [
    [40, 41, 42, 43, 44, 1],
    [700, 8, 1],
    [3, 999, 250, 251, 252, 253, 1],
    [77, 1],
]
# Sizes shared by the T5 checkpoints: 3 encoder and 2 decoder blocks (num_decoder_layers apart).
T5 = dict(vocab_size=1013, d_model=64, d_kv=16, d_ff=96, num_layers=3, num_decoder_layers=2,
          relative_attention_num_buckets=8, relative_attention_max_distance=20,
          decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)

# BLIP-2's vision encoder and Q-Former in the tiny checkpoints (tiny-blip2 and tiny-blip2-t5).
BLIP2_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    image_size=30, patch_size=10, initializer_range=0.2)
BLIP2_QFORMER = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                     encoder_hidden_size=32, cross_attention_frequency=2, initializer_range=0.2)

# Whisper: 8 mel bins over 32 frames (max_source_positions 16 after the stride-2 convolution), 3
# encoder and 2 decoder layers; no suppressed tokens (a plain greedy reference).
WHISPER = dict(vocab_size=1013, num_mel_bins=8, d_model=64, encoder_layers=3, decoder_layers=2,
               encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=96,
               decoder_ffn_dim=96, max_source_positions=16, max_target_positions=32,
               decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
               begin_suppress_tokens=None, suppress_tokens=None)
# The decoder prompt of the Whisper generations (as <|startoftranscript|> <|en|> <|transcribe|>).
WHISPER_DECODER_PROMPT = [1, 5, 6]

DEFAULT_ROPE = {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}
LLAMA = dict(vocab_size=1013, hidden_size=64, intermediate_size=96, num_hidden_layers=5,
             num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128,
             initializer_range=0.2, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0})

# fp32 rounding moves a tiny Llama's logits by about 5e-7 of their size when tensor parallelism
# sums the row-parallel outputs in another order (measured on HF itself by splitting o_proj and
# down_proj's sums): with logits up to 12 that alone exceeds the tests' atol of 1e-5. Scaling the
# final norm's weight scales the logits without changing any greedy choice, and GPT-2's scaled
# init of the projections writing into the residual stream (1 / sqrt(2 x layers)) keeps the
# residual near GPT-2's (about 10, against 30-80 without).
LLAMA_TUNING = dict(scale={"o_proj.weight": 0.316, "down_proj.weight": 0.316,
                           "model.norm.weight": 0.35})

GLM = dict(vocab_size=1013, hidden_size=64, intermediate_size=96, num_hidden_layers=5,
           num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
           initializer_range=0.15, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
           pad_token_id=0, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                            "partial_rotary_factor": 0.5})

OPT = dict(vocab_size=1013, hidden_size=64, num_hidden_layers=5, ffn_dim=96, num_attention_heads=8,
           max_position_embeddings=64, init_std=0.2, do_layer_norm_before=True)
# A random OPT (ReLU FFN, tied head; post-LN worst) collapses onto a few tokens: the ReLU's
# positive mean makes fc2 write the same vector at every position, and strong random attention
# averages positions together. Zero-mean fc2 rows and halved v/out projections fix both.
# As for Llama (LLAMA_TUNING), the last step before the tied head is scaled down so that the
# logits stay small enough for fp32 rounding to keep within the tests' tolerances: the final
# norm (pre-LN), the last layer's output norm (post-LN, no final norm) or project_out.
OPT_SCALE = {"v_proj.weight": 0.5, "out_proj.weight": 0.5,
             "decoder.final_layer_norm.weight": 0.4, "decoder.final_layer_norm.bias": 0.4,
             "layers.4.final_layer_norm.weight": 0.4, "layers.4.final_layer_norm.bias": 0.4,
             "project_out.weight": 0.4}
OPT_TUNING = dict(center_rows=["fc2.weight"], scale=OPT_SCALE)

# GPT-2 for the sequence-parallel tests, which compare forward passes, losses and gradients
# only (its own tests use tools/gen_gpt2_references.py; this random GPT-2's greedy decoding
# repeats itself, so it makes no generation references): dropout off, as HF's reference runs
# in eval mode and the tests train.
GPT2 = dict(vocab_size=1013, n_embd=64, n_layer=4, n_head=8, n_positions=64, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=0.2, bos_token_id=1012,
            eos_token_id=1012)

GPT_NEOX = dict(vocab_size=1013, hidden_size=64, num_hidden_layers=5, num_attention_heads=4,
                intermediate_size=96, max_position_embeddings=128, initializer_range=0.25,
                bos_token_id=1, eos_token_id=2)
# As LLAMA_TUNING: the projections into the residual stream and the final norm scaled down.
GPT_NEOX_SCALE = {"attention.dense.weight": 0.316, "dense_4h_to_h.weight": 0.316,
                  "final_layer_norm.weight": 0.35}

GPTJ = dict(vocab_size=1013, n_embd=64, n_layer=5, n_head=4, rotary_dim=8, n_inner=96,
            n_positions=128, initializer_range=0.25, bos_token_id=1, eos_token_id=2)
GPTJ_SCALE = {"out_proj.weight": 0.316, "fc_out.weight": 0.316, "ln_f.weight": 0.35}

FALCON = dict(vocab_size=1013, hidden_size=64, num_hidden_layers=5, num_attention_heads=8,
              ffn_hidden_size=96, max_position_embeddings=128, initializer_range=0.25,
              bos_token_id=1, eos_token_id=2,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
# The projections into the residual stream scaled down; the final norm negated (the head is
# tied, as tiny-gpt-neox-seq).
FALCON_SCALE = {"self_attention.dense.weight": 0.316, "dense_4h_to_h.weight": 0.316,
                "ln_f.weight": -0.35}

CHECKPOINTS = {
    "tiny-llama": dict(arch="LlamaForCausalLM", base="LlamaModel", config=LLAMA,
                       **LLAMA_TUNING),
    # tiny-llama's weights with a batch of width 16 (sequence parallelism without padding).
    "tiny-llama-even": dict(arch="LlamaForCausalLM", base="LlamaModel", config=LLAMA,
                            forward_batch=EVEN_FORWARD_BATCH, **LLAMA_TUNING),
    "tiny-gpt2-sp": dict(arch="GPT2LMHeadModel", base="GPT2Model", config_class="GPT2Config",
                         config=GPT2, generate=False),
    "tiny-gpt2-sp-even": dict(arch="GPT2LMHeadModel", base="GPT2Model",
                              config_class="GPT2Config", config=GPT2,
                              forward_batch=EVEN_FORWARD_BATCH, generate=False),
    "tiny-llama-rope-linear": dict(
        arch="LlamaForCausalLM", base="LlamaModel", compare_with=DEFAULT_ROPE,
        config={**LLAMA, "rope_parameters": {"rope_type": "linear", "factor": 4.0,
                                             "rope_theta": 10000.0}}, **LLAMA_TUNING),
    # Dynamic NTK only changes anything past max_position_embeddings: 16 here, longer inputs.
    "tiny-llama-rope-dynamic": dict(
        arch="LlamaForCausalLM", base="LlamaModel", compare_with=DEFAULT_ROPE,
        config={**LLAMA, "max_position_embeddings": 16,
                "rope_parameters": {"rope_type": "dynamic", "factor": 2.0,
                                    "rope_theta": 10000.0}},
        forward_batch=LONG_FORWARD_BATCH, generate_prompts=LONG_GENERATE_PROMPTS, **LLAMA_TUNING),
    # head_dim 8, theta 1e4: wavelengths 6.3, 62.8, 628, 6283. With original 64 and factors 1 / 4
    # (low / high wavelength bounds 64 / 16) one frequency is kept, one smoothed, two divided by 8.
    "tiny-llama-rope-llama3": dict(
        arch="LlamaForCausalLM", base="LlamaModel", compare_with=DEFAULT_ROPE,
        config={**LLAMA, "rope_parameters": {"rope_type": "llama3", "factor": 8.0,
                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                             "original_max_position_embeddings": 64,
                                             "rope_theta": 10000.0}}, **LLAMA_TUNING),
    "tiny-llama-options": dict(
        arch="LlamaForCausalLM", base="LlamaModel",
        config={**LLAMA, "head_dim": 16, "attention_bias": True, "mlp_bias": True,
                "hidden_act": "gelu", "tie_word_embeddings": True, "num_key_value_heads": 4},
        **LLAMA_TUNING),
    # Same seed and config as tiny-llama, saved in bfloat16: its weights are tiny-llama's rounded.
    "tiny-llama-bf16": dict(arch="LlamaForCausalLM", base="LlamaModel", config=LLAMA,
                            save_dtype="bfloat16", **LLAMA_TUNING),
    # SmolLM2's head counts (9 query, 3 KV heads of 8): tp 2 splits them unevenly (6 + 3, 2 + 1).
    "tiny-llama-9-heads": dict(
        arch="LlamaForCausalLM", base="LlamaModel",
        config={**LLAMA, "hidden_size": 72, "num_attention_heads": 9, "num_key_value_heads": 3,
                "head_dim": 8, "tie_word_embeddings": True}, **LLAMA_TUNING),
    # Multi-query attention with an odd head count (Falcon-7B's 71 and 1, scaled down): the KV
    # head is shared by every rank, the 5 query heads split 3 + 2 at tp 2 and 2 + 1 + 1 + 1 at 4.
    "tiny-llama-mqa-5-heads": dict(
        arch="LlamaForCausalLM", base="LlamaModel",
        config={**LLAMA, "hidden_size": 40, "num_attention_heads": 5, "num_key_value_heads": 1,
                "head_dim": 8}, **LLAMA_TUNING),
    "tiny-mistral": dict(
        arch="MistralForCausalLM", base="MistralModel",
        config=dict(vocab_size=1013, hidden_size=64, intermediate_size=96, num_hidden_layers=5,
                    num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128,
                    initializer_range=0.2, sliding_window=6, bos_token_id=1, eos_token_id=2,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
        max_new_tokens=12, compare_with={"sliding_window": None}, **LLAMA_TUNING),
    "tiny-qwen2": dict(
        arch="Qwen2ForCausalLM", base="Qwen2Model",
        config=dict(vocab_size=1013, hidden_size=64, intermediate_size=96, num_hidden_layers=5,
                    num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=128,
                    initializer_range=0.2, tie_word_embeddings=True, bos_token_id=1010,
                    eos_token_id=1011, rope_parameters={"rope_type": "default",
                                                        "rope_theta": 1000000.0}),
        **LLAMA_TUNING),
    "tiny-qwen3": dict(
        arch="Qwen3ForCausalLM", base="Qwen3Model",
        config=dict(vocab_size=1013, hidden_size=64, intermediate_size=96, num_hidden_layers=5,
                    num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                    max_position_embeddings=128, initializer_range=0.3, tie_word_embeddings=False,
                    bos_token_id=1010, eos_token_id=1011,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
        **LLAMA_TUNING),
    # GLM (ChatGLM's architecture in HF): q / k / v biases without an o_proj bias, the fused
    # gate_up_proj, interleaved rotary on half of each 16-wide head, 2 KV heads (shared at tp 4).
    # Init 0.15: at 0.2 fp32 rounding of layer 0's o_proj gradient under all_to_all sp 2 came
    # 5e-8 past the tolerance (HF's own fp32 error there: 2.1e-6).
    "tiny-glm": dict(arch="GlmForCausalLM", base="GlmModel", config=GLM, **LLAMA_TUNING),
    # ChatGLM2 / ChatGLM3 as THUDM's files store it (tools/chatglm_layout.py, after HF's outputs
    # are taken on the GLM folder): query_key_value fused, the original names and config keys,
    # and rope_ratio 50 (ChatGLM3-32K's) for a rope_theta of 500000.
    "tiny-chatglm2": dict(arch="GlmForCausalLM", base="GlmModel", layout="chatglm",
                          config=dict(GLM, rope_parameters={**GLM["rope_parameters"],
                                                            "rope_theta": 500000.0}),
                          **LLAMA_TUNING),
    # GLM-4: the same with the outputs of attention and MLP normed before each residual add.
    "tiny-glm4": dict(arch="Glm4ForCausalLM", base="Glm4Model", config=GLM,
                      scale={**LLAMA_TUNING["scale"], "post_self_attn_layernorm.weight": 0.5,
                             "post_mlp_layernorm.weight": 0.5}),
    "tiny-opt": dict(arch="OPTForCausalLM", base="OPTModel", config=OPT, **OPT_TUNING),
    "tiny-opt-post-ln": dict(arch="OPTForCausalLM", base="OPTModel",
                             config={**OPT, "do_layer_norm_before": False}, **OPT_TUNING),
    "tiny-opt-proj": dict(arch="OPTForCausalLM", base="OPTModel",
                          config={**OPT, "do_layer_norm_before": False,
                                  "word_embed_proj_dim": 32}, **OPT_TUNING),
    # Random BLOOM repeats the current token (its LayerNorm-ed embedding dominates the residual and
    # the head is tied to it); a negated embedding LayerNorm weight turns that preference around.
    "tiny-bloom": dict(
        arch="BloomForCausalLM", base="BloomModel",
        config=dict(vocab_size=1013, hidden_size=96, n_layer=5, n_head=12,
                    initializer_range=0.2, bos_token_id=1, eos_token_id=2),
        scale={"word_embeddings_layernorm.weight": -1.0}),
    # Pythia's layout: parallel residual, a quarter of each 16-wide head rotated (4 features).
    "tiny-gpt-neox": dict(
        arch="GPTNeoXForCausalLM", base="GPTNeoXModel",
        config=dict(GPT_NEOX, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                               "partial_rotary_factor": 0.25}),
        saved_names={"lm_head.weight": "embed_out.weight"}, scale=GPT_NEOX_SCALE),
    # The sequential residual, no attention biases, tied embed_out, 6 heads of 8 (uneven at tp 4:
    # 2 + 2 + 1 + 1), half of each head rotated, written in the older keys rotary_pct and
    # rotary_emb_base (HF still reads them). A negated final norm keeps the tied head from
    # preferring the token it just read (as BLOOM's embedding norm).
    "tiny-gpt-neox-seq": dict(
        arch="GPTNeoXForCausalLM", base="GPTNeoXModel",
        config=dict(GPT_NEOX, hidden_size=48, num_attention_heads=6, use_parallel_residual=False,
                    attention_bias=False, tie_word_embeddings=True, rotary_pct=0.5,
                    rotary_emb_base=500.0),
        legacy_config={"rotary_pct": 0.5, "rotary_emb_base": 500.0},
        scale={**GPT_NEOX_SCALE, "final_layer_norm.weight": -0.35}),
    # GPT-J-6B's layout scaled down: half of each 16-wide head rotated in interleaved pairs, an
    # untied head with a bias, n_inner given.
    "tiny-gptj": dict(arch="GPTJForCausalLM", base="GPTJModel", config=GPTJ, scale=GPTJ_SCALE),
    # Every feature of each head rotated, 6 heads of 8 (uneven at tp 4), n_inner from n_embd.
    "tiny-gptj-full-rotary": dict(
        arch="GPTJForCausalLM", base="GPTJModel",
        config=dict(GPTJ, n_embd=48, n_head=6, n_inner=None, initializer_range=0.3), scale=GPTJ_SCALE),
    # GPT-Neo-125M's layout scaled down: global and local layers alternating (a window of 6, past
    # which rows 0 and 3 of the forward batch reach), no q . k scaling, a tied head (turned
    # away from the token just read by a negated final norm, as tiny-gpt-neox-seq).
    "tiny-gpt-neo": dict(
        arch="GPTNeoForCausalLM", base="GPTNeoModel",
        config=dict(vocab_size=1013, hidden_size=64, num_layers=5, num_heads=4,
                    intermediate_size=96, attention_types=[[["global", "local"], 2],
                                                           [["global"], 1]],
                    window_size=6, max_position_embeddings=64, initializer_range=0.15,
                    bos_token_id=1, eos_token_id=2),
        forward_batch=WINDOW_FORWARD_BATCH, max_new_tokens=12, compare_with={"window_size": 64},
        scale={"out_proj.weight": 0.316, "c_proj.weight": 0.316, "ln_f.weight": -0.35}),
    # Falcon-7B's layout scaled down: multi-query (one KV head for 5 query heads: at tp 2 and 4
    # every rank holds the fused [q..., k, v] and attends with 3 + 2 or 2 + 1 + 1 + 1 of the
    # heads), the parallel block over one norm, rotary, no biases, a tied head.
    "tiny-falcon": dict(
        arch="FalconForCausalLM", base="FalconModel",
        config=dict(FALCON, hidden_size=40, num_attention_heads=5), scale=FALCON_SCALE),
    # Falcon-40B's: new_decoder_architecture (8 query heads in 2 KV groups, ln_attn and ln_mlp).
    "tiny-falcon-40b": dict(
        arch="FalconForCausalLM", base="FalconModel",
        config=dict(FALCON, new_decoder_architecture=True, num_kv_heads=2), scale=FALCON_SCALE),
    # Falcon-RW's: ALiBi (6 heads: the slopes interleave two series; uneven at tp 4), one
    # [q k v] per head, the sequential block, biases.
    "tiny-falcon-rw": dict(
        arch="FalconForCausalLM", base="FalconModel",
        config=dict(FALCON, hidden_size=48, num_attention_heads=6, alibi=True, multi_query=False,
                    parallel_attn=False, bias=True),
        scale=FALCON_SCALE),
    # One folder serves BertModel, BertForMaskedLM and BertForSequenceClassification (see
    # gen_family_references.py: BertAllHeads); config.json names BertForMaskedLM.
    "tiny-bert": dict(
        arch="BertForMaskedLM", base="BertModel", kind="bert",
        config=dict(vocab_size=1013, hidden_size=64, num_hidden_layers=5, num_attention_heads=8,
                    intermediate_size=96, max_position_embeddings=64, type_vocab_size=2,
                    initializer_range=0.1, num_labels=3)),
    # RoBERTa: positions counted past pad_token_id 1 (max_position_embeddings 66 = 64 + 2), one
    # token type, lm_head and the two-layer classification head; one folder serves the three
    # classes, as tiny-bert.
    "tiny-roberta": dict(
        arch="RobertaForMaskedLM", base="RobertaModel", kind="bert", family="Roberta",
        config_class="RobertaConfig",
        config=dict(vocab_size=1013, hidden_size=64, num_hidden_layers=5, num_attention_heads=8,
                    intermediate_size=96, max_position_embeddings=66, type_vocab_size=1,
                    initializer_range=0.1, num_labels=3, pad_token_id=1, bos_token_id=0,
                    eos_token_id=2)),
    # ERNIE: BERT with task-type embeddings (use_task_id; the jobs give every token task 0).
    "tiny-ernie": dict(
        arch="ErnieForMaskedLM", base="ErnieModel", kind="bert", family="Ernie",
        config_class="ErnieConfig",
        config=dict(vocab_size=1013, hidden_size=64, num_hidden_layers=5, num_attention_heads=8,
                    intermediate_size=96, max_position_embeddings=64, type_vocab_size=2,
                    use_task_id=True, task_type_vocab_size=3, initializer_range=0.1,
                    num_labels=3)),
    # ALBERT: embeddings of 32 projected to 64; 4 layers over 2 groups of 2 shared layers
    # (layers 0-1 run group 0, layers 2-3 group 1, each both of its layers); gelu_new.
    "tiny-albert": dict(
        arch="AlbertForMaskedLM", base="AlbertModel", kind="bert", family="Albert",
        config_class="AlbertConfig",
        config=dict(vocab_size=1013, embedding_size=32, hidden_size=64, num_hidden_layers=4,
                    num_hidden_groups=2, inner_group_num=2, num_attention_heads=8,
                    intermediate_size=96, max_position_embeddings=64, type_vocab_size=2,
                    initializer_range=0.1, num_labels=3, pad_token_id=0, bos_token_id=2,
                    eos_token_id=3)),
    # BertForMaskedLM with its own decoder weight and bias (HF then leaves cls.predictions.bias
    # unused).
    "tiny-bert-untied": dict(
        arch="BertForMaskedLM", base="BertModel", kind="bert",
        config=dict(vocab_size=1013, hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
                    intermediate_size=96, max_position_embeddings=64, type_vocab_size=2,
                    initializer_range=0.1, num_labels=3, tie_word_embeddings=False)),
    # T5 v1.0: ReLU, the head tied to shared and its input scaled by d_model^-0.5, as HF 5 writes
    # the config (scale_decoder_outputs). Buckets 8 over distances up to 20: the forward batch's
    # 11 tokens reach the logarithmic buckets. The tied head is turned away from the token just
    # read by a negated final norm (greedy decoding otherwise repeats it).
    "tiny-t5": dict(arch="T5ForConditionalGeneration", base="T5EncoderModel", kind="seq2seq",
                    config=dict(T5, num_heads=4, feed_forward_proj="relu",
                                initializer_factor=1.0),
                    scale={"decoder.final_layer_norm.weight": -1.0}),
    # T5 v1.1 / flan-T5: gated GELU, 6 heads (uneven at tp 4, the bias table's columns too), an
    # lm_head of its own and no scaling, in an older config's terms (tie_word_embeddings false,
    # no scale_decoder_outputs).
    "tiny-t5-v1_1": dict(arch="T5ForConditionalGeneration", base="T5EncoderModel",
                         kind="seq2seq", untied_head=True,
                         config=dict(T5, d_model=48, d_kv=8, num_heads=6,
                                     feed_forward_proj="gated-gelu", initializer_factor=1.0)),
    # Whisper: pre-LN layers, k_proj without a bias, queries scaled before q . k, sinusoidal encoder
    # positions, learned decoder positions (scaled up: with HF's init greedy decoding repeats one
    # token), proj_out tied to the decoder's embedding.
    "tiny-whisper": dict(arch="WhisperForConditionalGeneration", base="WhisperModel",
                         kind="speech_seq2seq", config=dict(WHISPER, init_std=0.1),
                         scale={"model.decoder.embed_positions.weight": 10.0}),
    # ViT: 32 x 32 images in 8 x 8 patches (16 and the class token), pre-LN layers, the pooler and
    # a 3-label classifier in one folder (ViTModel and ViTForImageClassification each ignore the
    # other's head).
    "tiny-vit": dict(arch="ViTForImageClassification", base="ViTModel", kind="image_classification",
                     config_class="ViTConfig",
                     config=dict(hidden_size=64, num_hidden_layers=5, num_attention_heads=8,
                                 intermediate_size=96, image_size=32, patch_size=8,
                                 initializer_range=0.1,
                                 id2label={0: "tabby cat", 1: "golden retriever", 2: "goldfinch"})),
    # ViT's other settings: a non-square image of non-square patches (3 x 10), one channel, no
    # q / k / v biases, gelu_new, a pooler of another width and activation.
    "tiny-vit-options": dict(
        arch="ViTForImageClassification", base="ViTModel", kind="image_classification",
        config_class="ViTConfig",
        config=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=80, image_size=[24, 40], patch_size=[8, 4], num_channels=1,
                    qkv_bias=False, hidden_act="gelu_new", pooler_output_size=48,
                    pooler_act="relu", layer_norm_eps=1e-6, initializer_range=0.1,
                    num_labels=5)),
    # BEiT as its classifiers ship: a relative position bias table per layer, layer scale (0.1 as
    # HF initialises it, then perturbed), no absolute positions, an unbiased key, mean pooling
    # into pooler.layernorm; stochastic depth off (it is random in training).
    "tiny-beit": dict(arch="BeitForImageClassification", base="BeitModel",
                      kind="image_classification", config_class="BeitConfig",
                      config=dict(hidden_size=64, num_hidden_layers=5, num_attention_heads=8,
                                  intermediate_size=96, image_size=32, patch_size=8,
                                  use_relative_position_bias=True, drop_path_rate=0.0,
                                  initializer_range=0.1, num_labels=3)),
    # tiny-beit with stochastic depth (rising to 0.6 over its 5 layers): its training loss and
    # gradients with the host's draws (gen_family_references.py draw_drop_paths_as_the_host).
    "tiny-beit-drop-path": dict(arch="BeitForImageClassification", base="BeitModel",
                                kind="image_classification", config_class="BeitConfig",
                                config=dict(hidden_size=64, num_hidden_layers=5,
                                            num_attention_heads=8, intermediate_size=96,
                                            image_size=32, patch_size=8,
                                            use_relative_position_bias=True, drop_path_rate=0.6,
                                            initializer_range=0.1, num_labels=3)),
    # BEiT's other layout: one bias table shared by every layer (held by each pipeline stage),
    # absolute positions, no layer scale, the class token's final state (final layernorm).
    "tiny-beit-shared": dict(arch="BeitForImageClassification", base="BeitModel",
                             kind="image_classification", config_class="BeitConfig",
                             config=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                         intermediate_size=80, image_size=24, patch_size=8,
                                         use_shared_relative_position_bias=True,
                                         use_absolute_position_embeddings=True,
                                         layer_scale_init_value=0.0, use_mean_pooling=False,
                                         drop_path_rate=0.0, initializer_range=0.1,
                                         num_labels=4)),
    # Swin: 32 x 32 images in 2 x 2 patches (a 16 x 16 grid), windows of 4 x 4, three stages
    # (grids 16, 8, 4: the last one window, unshifted) of 2 blocks, widths 32, 64, 128; a pipeline
    # of two stages splits stage 1 after its first block.
    "tiny-swin": dict(arch="SwinForImageClassification", base="SwinModel",
                      kind="image_classification", config_class="SwinConfig",
                      config=dict(image_size=32, patch_size=2, embed_dim=32, depths=[2, 2, 2],
                                  num_heads=[4, 4, 8], window_size=4, drop_path_rate=0.0,
                                  initializer_range=0.1, num_labels=3)),
    # tiny-swin with stochastic depth (rising to 0.6 over its 6 blocks, on the attention branch
    # only, as HF's SwinLayer has it).
    "tiny-swin-drop-path": dict(arch="SwinForImageClassification", base="SwinModel",
                                kind="image_classification", config_class="SwinConfig",
                                config=dict(image_size=32, patch_size=2, embed_dim=32,
                                            depths=[2, 2, 2], num_heads=[4, 4, 8], window_size=4,
                                            drop_path_rate=0.6, initializer_range=0.1,
                                            num_labels=3)),
    # Swin's other settings: a non-square image (20 x 28: a 5 x 7 grid of 4 x 4 patches) padded to
    # whole windows of 3 (shifted by 1) and merged from odd sizes (to 3 x 4), 2 + 3 blocks, one
    # channel, absolute positions, no q / k / v biases, gelu_new, mlp_ratio 2.5, eps 1e-6.
    "tiny-swin-options": dict(
        arch="SwinForImageClassification", base="SwinModel", kind="image_classification",
        config_class="SwinConfig",
        config=dict(image_size=[20, 28], patch_size=4, num_channels=1, embed_dim=32,
                    depths=[2, 3], num_heads=[4, 4], window_size=3, mlp_ratio=2.5,
                    use_absolute_embeddings=True, qkv_bias=False, hidden_act="gelu_new",
                    layer_norm_eps=1e-6, drop_path_rate=0.0, initializer_range=0.1,
                    num_labels=5)),
    # SAM: 64 x 64 images in 8 x 8 patches (an 8 x 8 grid) through 3 layers, windows of 3 (the
    # grid padded to 9 x 9) but layer 1 global, with relative and absolute positions; a prompt
    # encoder and mask decoder of width 32 (4 heads: tp 4 splits both), 2 two-way blocks. Weights
    # drawn with std 0.2: at HF's 0.02 the masks barely depend on the prompts.
    "tiny-sam": dict(arch="SamModel", kind="sam", config_class="SamConfig",
                     config=dict(vision_config=dict(hidden_size=32, num_hidden_layers=3,
                                                    num_attention_heads=4, image_size=64,
                                                    patch_size=8, window_size=3,
                                                    global_attn_indexes=[1], output_channels=32,
                                                    num_pos_feats=16, mlp_dim=48,
                                                    initializer_range=0.2),
                                 prompt_encoder_config=dict(hidden_size=32, image_size=64,
                                                            patch_size=8, mask_input_channels=8),
                                 mask_decoder_config=dict(hidden_size=32, num_hidden_layers=2,
                                                          num_attention_heads=4, mlp_dim=24,
                                                          iou_head_hidden_dim=20),
                                 initializer_range=0.2)),
    # SAM's other settings: windows of 4 that tile the grid, layers 0 and 3 global, no absolute
    # positions, no qkv bias, gelu_new, mlp_dim 72 (HF derives it from mlp_ratio); a mask decoder of 3 blocks
    # with attention downsampled 4 x, 2 multimask outputs and an IoU head 4 deep.
    "tiny-sam-options": dict(
        arch="SamModel", kind="sam", config_class="SamConfig",
        config=dict(vision_config=dict(hidden_size=48, num_hidden_layers=4, num_attention_heads=4,
                                       image_size=64, patch_size=8, window_size=4,
                                       global_attn_indexes=[0, 3], output_channels=32,
                                       num_pos_feats=16, mlp_ratio=1.5, use_abs_pos=False,
                                       qkv_bias=False, hidden_act="gelu_new",
                                       layer_norm_eps=1e-5, initializer_range=0.2),
                    prompt_encoder_config=dict(hidden_size=32, image_size=64, patch_size=8,
                                               mask_input_channels=8),
                    mask_decoder_config=dict(hidden_size=32, num_hidden_layers=3,
                                             num_attention_heads=4, mlp_dim=40,
                                             attention_downsample_rate=4, num_multimask_outputs=2,
                                             iou_head_depth=4, iou_head_hidden_dim=24),
                    initializer_range=0.2)),
    # BLIP-2: 30 x 30 images in 10 x 10 patches (9 patches and the class token) through a
    # 2-layer vision encoder, 4 query tokens through a 3-layer Q-Former (cross-attention in
    # layers 0 and 2), and a 2-layer OPT language model over the folder's own byte-level BPE
    # tokenizer (320 ids, <image> the last). The vision encoder's weights drawn with std 0.2
    # (HF's default for it is 1e-10: attention by biases alone), the OPT's as tiny-opt's, the
    # language projection's scaled up so that the image steers the caption.
    "tiny-blip2": dict(
        arch="Blip2ForConditionalGeneration", kind="blip2", config_class="Blip2Config",
        config=dict(vision_config=BLIP2_VISION, qformer_config=BLIP2_QFORMER,
                    text_config=dict(model_type="opt", vocab_size=320, hidden_size=32, ffn_dim=64,
                                     num_hidden_layers=2, num_attention_heads=4,
                                     max_position_embeddings=64, word_embed_proj_dim=32,
                                     init_std=0.2, bos_token_id=2, eos_token_id=2,
                                     pad_token_id=1),
                    num_query_tokens=4, image_token_index=319),
        center_rows=OPT_TUNING["center_rows"],
        scale={**OPT_SCALE, "language_projection.weight": 5.0}),
    # BLIP-2 with a T5 language model (as blip2-flan-t5's): tiny-blip2's vision encoder and
    # Q-Former, then a 2 + 2-layer encoder-decoder with flan-T5's gated GELU (its head tied to
    # shared and scaled, as HF 5 writes scale_decoder_outputs) over the same 320 ids. The decoder's
    # final norm negated as tiny-t5's, so greedy decoding does not repeat the token just read.
    "tiny-blip2-t5": dict(
        arch="Blip2ForConditionalGeneration", kind="blip2", config_class="Blip2Config",
        config=dict(vision_config=BLIP2_VISION, qformer_config=BLIP2_QFORMER,
                    text_config=dict(T5, model_type="t5", vocab_size=320, d_model=32, d_kv=8,
                                     d_ff=64, num_heads=4, num_layers=2,
                                     feed_forward_proj="gated-gelu", initializer_factor=1.0),
                    num_query_tokens=4, image_token_index=319),
        scale={"language_model.decoder.final_layer_norm.weight": -1.0,
               "language_projection.weight": 5.0}),
    # The same with an untied head as older transformers saved blip2-flan-t5's
    # (language_model.lm_head.weight, text_config.tie_word_embeddings false: no scaling).
    "tiny-blip2-t5-untied": dict(
        arch="Blip2ForConditionalGeneration", kind="blip2", config_class="Blip2Config",
        untied_head=True,
        config=dict(vision_config=BLIP2_VISION, qformer_config=BLIP2_QFORMER,
                    text_config=dict(T5, model_type="t5", vocab_size=320, d_model=32, d_kv=8,
                                     d_ff=64, num_heads=4, num_layers=2,
                                     feed_forward_proj="gated-gelu", initializer_factor=1.0),
                    num_query_tokens=4, image_token_index=319),
        scale={"language_projection.weight": 5.0}),
}
