// Mixed-precision training: the model computes in bf16 or fp16 while the optimizer updates fp32
// master copies of its parameters (and keeps fp32 moments); fp16 adds a dynamic loss scale that
// backs off and skips the step when gradients overflow, as torch's GradScaler does.
#pragma once

#include "shardformer/model.h"
#include "shardformer/training/optimizer.h"

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace shardformer::training {

enum class Precision { kFloat32, kBFloat16, kFloat16 };

// "fp32", "bf16", "fp16"; throws ConfigError otherwise.
Precision parse_precision(const std::string& name);
const char* precision_name(Precision precision);
c10::ScalarType compute_dtype(Precision precision);

struct LossScaleOptions {
  double initial_scale = 65536.0;
  int64_t growth_interval = 1000;  // finite steps in a row before the scale doubles
  double growth_factor = 2.0, backoff_factor = 0.5;
  double min_scale = 1.0;
};

// GradScaler's rule: a step whose gradients hold inf or nan is skipped and halves the scale;
// growth_interval finite steps in a row double it. Disabled: the scale stays 1.
class LossScaler {
 public:
  LossScaler(LossScaleOptions options, bool enabled);
  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }
  int64_t skipped_steps() const { return skipped_; }
  // Records a step's outcome; returns whether its update is applied.
  bool update(bool finite);
  void set_state(double scale, int64_t good_steps, int64_t skipped);

 private:
  LossScaleOptions options_;
  bool enabled_;
  double scale_ = 1.0;
  int64_t good_steps_ = 0, skipped_ = 0;
};

// fp32 copies of the parameters in `owned` (ZeRO-1: this rank's share; else all) made from the
// fp32 model, which is then cast to `dtype` (its floating-point parameters only).
class MasterWeights {
 public:
  MasterWeights(Model& model, const std::set<std::string>& owned, c10::ScalarType dtype);

  // The masters as the optimizer's parameters.
  std::vector<AdamW::Param> params() const;
  // Each master's gradient: the model parameter's, in fp32, times `factor` (unscaling and
  // clipping in one pass).
  void take_gradients(const Model& model, double factor);
  // The updated masters into the model's parameters (rounded to their dtype).
  void copy_to_model(Model& model) const;
  // The master of a parameter, undefined where this rank holds none.
  at::Tensor find(const std::string& name) const;

 private:
  std::map<std::string, at::Tensor> masters_;
};

}  // namespace shardformer::training
