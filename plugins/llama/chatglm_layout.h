// ChatGLM2 / ChatGLM3's original tensor names (transformer.encoder.layers.N..., the fused
// query_key_value) seen as HF's GLM names, as HF's GLM conversion script maps them.
#pragma once

#include "llama_config.h"

#include "shardformer/checkpoint_io/checkpoint.h"

#include <vector>

namespace shardformer::llama {

// The stored rotary frequencies: recomputed from config.json as HF's GLM does.
inline constexpr const char* kChatGlmInvFreq = "transformer.rotary_pos_emb.inv_freq";

// Views of every tensor of a ChatGLM checkpoint under GLM's names (model.layers.N.self_attn.
// q_proj / k_proj / v_proj from the rows of query_key_value, ...).
std::vector<TensorView> chatglm_views(const LlamaConfig& config, const Checkpoint& checkpoint);

}  // namespace shardformer::llama
