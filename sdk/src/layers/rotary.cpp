// Rotary embeddings: frequencies per rope type (in fp32, as HF), cos/sin per position, rotation.
#include "shardformer/layers/rotary.h"

#include "inference_kernels.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::layers {
namespace {

RotaryEmbedding::Type parse_type(const HFConfig& config, const std::string& name) {
  if (name == "default") return RotaryEmbedding::Type::kDefault;
  if (name == "linear") return RotaryEmbedding::Type::kLinear;
  if (name == "dynamic") return RotaryEmbedding::Type::kDynamic;
  if (name == "llama3") return RotaryEmbedding::Type::kLlama3;
  throw CheckpointError(str(config.path().string(), ": rope type '", name,
                            "' is not supported (default, linear, dynamic, llama3)"));
}

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// GPT-J's rotate_every_two: (x0, x1, x2, x3, ...) -> (-x1, x0, -x3, x2, ...).
at::Tensor rotate_every_two(const at::Tensor& x) {
  const at::Tensor pairs = x.unflatten(-1, {x.size(-1) / 2, 2});  // [..., dim / 2, 2]
  return at::stack({-pairs.select(-1, 1), pairs.select(-1, 0)}, -1).flatten(-2);
}

at::Tensor rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                  bool interleaved) {
  const auto turn = [&](const at::Tensor& r) {
    return r * cos + (interleaved ? rotate_every_two(r) : rotate_half(r)) * sin;
  };
  const int64_t dim = cos.size(-1);
  if (dim == x.size(-1)) return turn(x);
  // partial rotary: the features past rotary_dim pass through
  return at::cat({turn(x.narrow(-1, 0, dim)), x.narrow(-1, dim, x.size(-1) - dim)}, -1);
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const HFConfig& config, int64_t head_dim,
                                 const RotaryOptions& options)
    : interleaved_(options.interleaved) {
  max_positions_ = config.get_int(options.max_positions_key);
  theta_ = config.get_double(options.theta_key, options.theta);
  double partial = config.get_double(options.partial_key, options.partial);
  // transformers 5 writes rope_parameters (theta inside); older checkpoints rope_scaling.
  std::optional<HFConfig> rope = config.get_object("rope_parameters");
  if (!rope) rope = config.get_object("rope_scaling");
  double low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max = max_positions_;
  if (rope) {
    type_ = parse_type(config, rope->get_string("rope_type", rope->get_string("type", "default")));
    theta_ = rope->get_double("rope_theta", theta_);
    partial = rope->get_double("partial_rotary_factor", partial);
    if (type_ != Type::kDefault) factor_ = rope->get_double("factor");
    if (type_ == Type::kLlama3) {
      low_freq_factor = rope->get_double("low_freq_factor");
      high_freq_factor = rope->get_double("high_freq_factor");
      original_max = rope->get_int("original_max_position_embeddings");
    }
    rope->refuse_unread("keys of a rope type this version does not implement");
  }
  dim_ = options.rotary_dim > 0 ? options.rotary_dim
                                : static_cast<int64_t>(static_cast<double>(head_dim) * partial);
  if (dim_ < 2 || dim_ % 2 != 0 || dim_ > head_dim || !(factor_ > 0)) {
    throw CheckpointError(str(config.path().string(), ": rotary dimension ", dim_, " (head_dim ",
                              head_dim, " x partial_rotary_factor ", partial, ") or factor ",
                              factor_, " is invalid"));
  }
  inv_freq_ = frequencies(theta_);
  if (type_ == Type::kLinear) inv_freq_ = inv_freq_ / factor_;
  if (type_ == Type::kLlama3) {  // HF's _compute_llama3_parameters, in fp32
    const double low_wavelen = static_cast<double>(original_max) / low_freq_factor;
    const double high_wavelen = static_cast<double>(original_max) / high_freq_factor;
    const at::Tensor wavelen = 2 * M_PI / inv_freq_;
    at::Tensor scaled = at::where(wavelen > low_wavelen, inv_freq_ / factor_, inv_freq_);
    const at::Tensor smooth = (static_cast<double>(original_max) / wavelen - low_freq_factor) /
                              (high_freq_factor - low_freq_factor);
    const at::Tensor smoothed = (1 - smooth) * scaled / factor_ + smooth * scaled;
    const at::Tensor medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen);
    inv_freq_ = at::where(medium, smoothed, scaled);
  }
}

at::Tensor RotaryEmbedding::frequencies(double base) const {
  const at::Tensor exponents = at::arange(0, dim_, 2, at::kLong).to(at::kFloat) / dim_;
  return 1.0 / at::pow(base, exponents);  // [dim / 2] fp32
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(const at::Tensor& positions,
                                                           c10::ScalarType dtype) const {
  at::Tensor inv_freq = inv_freq_;
  if (type_ == Type::kDynamic) {
    const int64_t seq_len = positions.max().item<int64_t>() + 1;
    if (seq_len > max_positions_) {  // HF: base x (f s / max - (f - 1))^(d / (d - 2)), fp32
      const at::Tensor ratio = at::full({}, factor_ * static_cast<double>(seq_len), at::kFloat) /
                                   static_cast<double>(max_positions_) -
                               (factor_ - 1);
      const at::Tensor base = theta_ * at::pow(ratio, static_cast<double>(dim_) / (dim_ - 2));
      const at::Tensor exponents = at::arange(0, dim_, 2, at::kLong).to(at::kFloat) / dim_;
      inv_freq = 1.0 / at::pow(base, exponents);
    }
  }
  const at::Tensor freqs =  // [batch, seq, dim / 2]
      positions.to(at::kFloat).unsqueeze(-1) * inv_freq.to(positions.device());
  const at::Tensor angles =  // [batch, seq, dim]
      interleaved_ ? freqs.repeat_interleave(2, -1) : at::cat({freqs, freqs}, -1);
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::apply(const at::Tensor& q, const at::Tensor& k,
                                                         const at::Tensor& cos,
                                                         const at::Tensor& sin, bool interleaved) {
  const bool per_token = cos.size(0) == q.size(0) && cos.size(1) == q.size(1);  // no broadcast
  if (!interleaved && per_token && use_inference_kernel({q, k, cos, sin})) {
    return {kernels::rotary(q, cos, sin), kernels::rotary(k, cos, sin)};
  }
  const at::Tensor c = cos.unsqueeze(2), s = sin.unsqueeze(2);  // [batch, seq, 1, dim]
  return {rotate(q, c, s, interleaved), rotate(k, c, s, interleaved)};
}

}  // namespace shardformer::layers
