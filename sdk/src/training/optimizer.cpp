// AdamW (torch's single-tensor algorithm) and HF's warm-up schedules.
#include "shardformer/training/optimizer.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>

namespace shardformer::training {

double LRSchedule::factor(int64_t step) const {
  if (step < warmup_steps) {
    return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps));
  }
  const auto after = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  switch (kind) {
    case Kind::kConstant: return 1.0;
    case Kind::kLinear: return std::max(0.0, static_cast<double>(total_steps - step) / after);
    case Kind::kCosine: {
      const double progress = static_cast<double>(step - warmup_steps) / after;
      return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * 0.5 * 2.0 * progress)));
    }
  }
  return 1.0;
}

LRSchedule::Kind parse_schedule_kind(const std::string& name) {
  if (name == "constant") return LRSchedule::Kind::kConstant;
  if (name == "linear") return LRSchedule::Kind::kLinear;
  if (name == "cosine") return LRSchedule::Kind::kCosine;
  throw ConfigError(
      str("unknown learning-rate schedule '", name, "' (constant, linear or cosine)"));
}

AdamW::AdamW(std::vector<Param> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++steps_;
  const AdamWOptions& o = options_;
  const double bias1 = 1 - std::pow(o.beta1, static_cast<double>(steps_));
  const double bias2_sqrt = std::sqrt(1 - std::pow(o.beta2, static_cast<double>(steps_)));
  for (Param& p : params_) {
    const at::Tensor& grad = p.tensor.grad();
    if (!grad.defined()) continue;
    State& s = state_[p.name];
    if (!s.exp_avg.defined()) {
      s.exp_avg = at::zeros_like(p.tensor);
      s.exp_avg_sq = at::zeros_like(p.tensor);
    }
    const double decay = p.tensor.dim() >= 2 ? o.weight_decay : 0.0;
    if (decay != 0.0) p.tensor.mul_(1 - lr * decay);
    s.exp_avg.lerp_(grad, 1 - o.beta1);
    s.exp_avg_sq.mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);
    const at::Tensor denom = (s.exp_avg_sq.sqrt() / bias2_sqrt).add_(o.eps);
    p.tensor.addcdiv_(s.exp_avg, denom, -(lr / bias1));
  }
}

std::pair<at::Tensor, at::Tensor> AdamW::moments(const std::string& name) const {
  const auto it = state_.find(name);
  if (it == state_.end()) return {};
  return {it->second.exp_avg, it->second.exp_avg_sq};
}

void AdamW::set_moments(const std::string& name, const at::Tensor& exp_avg,
                        const at::Tensor& exp_avg_sq) {
  const auto it =
      std::find_if(params_.begin(), params_.end(), [&](const Param& p) { return p.name == name; });
  if (it == params_.end()) throw Error(str("optimizer: no parameter named '", name, "'"));
  if (!exp_avg.sizes().equals(it->tensor.sizes()) ||
      !exp_avg_sq.sizes().equals(it->tensor.sizes())) {
    throw Error(str("optimizer state of '", name, "' has shape ", shape_str(exp_avg.sizes().vec()),
                    ", the parameter ", shape_str(it->tensor.sizes().vec())));
  }
  state_[name] = {exp_avg.to(it->tensor.options()).clone(),
                  exp_avg_sq.to(it->tensor.options()).clone()};
}

}  // namespace shardformer::training
