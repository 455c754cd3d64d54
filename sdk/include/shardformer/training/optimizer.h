// AdamW as torch.optim.AdamW computes it (its single-tensor algorithm, decoupled weight decay),
// over any subset of a model's parameters (ZeRO-1 gives each data-parallel rank its share),
// HF's weight-decay groups, and HF's learning-rate schedules with warm-up.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardformer::training {

struct AdamWOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;  // applied to the parameters of 2 or more dimensions only
};

// HF's get_{constant,linear,cosine}_schedule_with_warmup: the multiplier of the base rate at
// step s (0-based; the first step of a warm-up has rate 0).
struct LRSchedule {
  enum class Kind { kConstant, kLinear, kCosine };
  Kind kind = Kind::kCosine;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  double factor(int64_t step) const;
};

// "constant", "linear", "cosine"; throws ConfigError otherwise.
LRSchedule::Kind parse_schedule_kind(const std::string& name);

class AdamW {
 public:
  struct Param {
    std::string name;
    at::Tensor tensor;  // a parameter (its .grad() is read)
  };
  AdamW(std::vector<Param> params, AdamWOptions options);

  // One update of every parameter with a gradient, at learning rate `lr`.
  void step(double lr);

  const std::vector<Param>& params() const { return params_; }
  const AdamWOptions& options() const { return options_; }
  int64_t steps() const { return steps_; }

  // exp_avg and exp_avg_sq of a parameter (undefined before its first update), and setting
  // them back with the step count (a resumed run).
  std::pair<at::Tensor, at::Tensor> moments(const std::string& name) const;
  void set_moments(const std::string& name, const at::Tensor& exp_avg,
                   const at::Tensor& exp_avg_sq);
  void set_steps(int64_t steps) { steps_ = steps; }

 private:
  struct State {
    at::Tensor exp_avg, exp_avg_sq;
  };
  std::vector<Param> params_;
  AdamWOptions options_;
  std::map<std::string, State> state_;
  int64_t steps_ = 0;
};

}  // namespace shardformer::training
