// Rotary position embeddings as HF computes them (cos/sin from fp32 frequencies; rotate_half, or
// GPT-J's interleaved rotate_every_two), with the scalings of `rope_parameters` (transformers 5)
// or `rope_theta` + `rope_scaling` (older checkpoints): default, linear, dynamic NTK and Llama 3.
// Other types are refused by name, and so is any key of the rope object this code does not read.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>

namespace shardformer {
class HFConfig;
}

namespace shardformer::layers {

// Where a family's config.json keeps its rope settings when not under transformers 5's names.
struct RotaryOptions {
  std::string theta_key = "rope_theta";               // GPT-NeoX's older files: rotary_emb_base
  std::string partial_key = "partial_rotary_factor";  // GPT-NeoX's older files: rotary_pct
  std::string max_positions_key = "max_position_embeddings";  // GPT-J: n_positions
  double partial = 1.0;                                       // without any key (GPT-NeoX: 0.25)
  double theta = 10000.0;    // without any key (ChatGLM: 10000 x rope_ratio)
  int64_t rotary_dim = 0;    // > 0: rotated features of each head, whatever the keys (GPT-J)
  bool interleaved = false;  // pairs (0, 1), (2, 3), ... rotate together (GPT-J), not halves
};

class RotaryEmbedding {
 public:
  enum class Type { kDefault, kLinear, kDynamic, kLlama3 };

  // Reads the rope settings of `config` for heads of head_dim (partial_rotary_factor rotates
  // the first part of each head only). Throws CheckpointError naming config.json and the key.
  RotaryEmbedding(const HFConfig& config, int64_t head_dim, const RotaryOptions& options = {});

  // cos, sin [batch, seq, rotary_dim] for positions [batch, seq], in `dtype` (interleaved: each
  // frequency twice in a row, else the halves repeated). Dynamic NTK
  // scales the frequencies for max(positions) + 1 over the batch when that exceeds
  // max_position_embeddings, as HF does for each call that grows past it.
  std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& positions,
                                            c10::ScalarType dtype) const;
  // q [batch, seq, heads, head_dim] and k [batch, seq, kv_heads, head_dim] rotated, in the
  // same layout (the fused kernel without gradients on CPU fp32, ATen's ops otherwise).
  static std::pair<at::Tensor, at::Tensor> apply(const at::Tensor& q, const at::Tensor& k,
                                                 const at::Tensor& cos, const at::Tensor& sin,
                                                 bool interleaved = false);

  Type type() const { return type_; }
  bool interleaved() const { return interleaved_; }
  const at::Tensor& inv_freq() const { return inv_freq_; }  // [rotary_dim / 2] fp32

 private:
  at::Tensor frequencies(double base) const;

  Type type_ = Type::kDefault;
  int64_t dim_ = 0;  // rotated dimensions of each head
  bool interleaved_ = false;
  double theta_ = 10000.0, factor_ = 1.0;
  int64_t max_positions_ = 0;
  at::Tensor inv_freq_;
};

}  // namespace shardformer::layers
