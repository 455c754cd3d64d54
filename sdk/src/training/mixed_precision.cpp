// fp32 master weights for a bf16 / fp16 model, and the dynamic loss scale of fp16 training.
#include "shardformer/training/mixed_precision.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>

namespace shardformer::training {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFloat32;
  if (name == "bf16") return Precision::kBFloat16;
  if (name == "fp16") return Precision::kFloat16;
  throw ConfigError(str("unknown training precision '", name, "' (fp32, bf16 or fp16)"));
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFloat32: return "fp32";
    case Precision::kBFloat16: return "bf16";
    case Precision::kFloat16: return "fp16";
  }
  return "unknown";
}

c10::ScalarType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::kBFloat16: return at::kBFloat16;
    case Precision::kFloat16: return at::kHalf;
    case Precision::kFloat32: break;
  }
  return at::kFloat;
}

LossScaler::LossScaler(LossScaleOptions options, bool enabled)
    : options_(options), enabled_(enabled), scale_(enabled ? options.initial_scale : 1.0) {}

bool LossScaler::update(bool finite) {
  if (!enabled_) return finite;
  if (!finite) {
    scale_ = std::max(options_.min_scale, scale_ * options_.backoff_factor);
    good_steps_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_steps_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    good_steps_ = 0;
  }
  return true;
}

void LossScaler::set_state(double scale, int64_t good_steps, int64_t skipped) {
  scale_ = scale;
  good_steps_ = good_steps;
  skipped_ = skipped;
}

MasterWeights::MasterWeights(Model& model, const std::set<std::string>& owned,
                             c10::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    at::Tensor& p = item.value();
    if (p.scalar_type() != at::kFloat) {
      throw ConfigError(str(
          "mixed-precision training keeps fp32 master weights and loads the "
          "model in float32, but parameter ",
          item.key(), " is ", c10::toString(p.scalar_type()), " (set model.dtype = \"float32\")"));
    }
    if (owned.contains(item.key())) masters_.emplace(item.key(), p.detach().clone());
    p.set_data(p.detach().to(dtype));
  }
}

std::vector<AdamW::Param> MasterWeights::params() const {
  std::vector<AdamW::Param> params;
  for (const auto& [name, master] : masters_) params.push_back({name, master});
  return params;
}

void MasterWeights::take_gradients(const Model& model, double factor) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    const auto it = masters_.find(item.key());
    if (it == masters_.end()) continue;
    const at::Tensor& g = item.value().grad();
    it->second.mutable_grad() = g.defined() ? g.to(at::kFloat).mul_(factor) : at::Tensor();
  }
}

void MasterWeights::copy_to_model(Model& model) const {
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    const auto it = masters_.find(item.key());
    if (it != masters_.end()) item.value().detach().copy_(it->second);
  }
}

at::Tensor MasterWeights::find(const std::string& name) const {
  const auto it = masters_.find(name);
  return it == masters_.end() ? at::Tensor() : it->second;
}

}  // namespace shardformer::training
