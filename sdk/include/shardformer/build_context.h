// BuildContext: what a building block sees while the model is built — its module path and
// the checkpoint it loads its parameters from, already converted to the model's dtype/device.
#pragma once

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <string_view>
#include <vector>

namespace shardformer {

class Checkpoint;
class HFConfig;

class BuildContext {
 public:
  // base_model_prefix is HF's (e.g. "transformer" for GPT-2): checkpoints of the base model
  // store names without it and those of head models with it; both load into either model.
  BuildContext(const Checkpoint& checkpoint, c10::ScalarType dtype, c10::Device device,
               std::string base_model_prefix = "");

  // The context of a child module: ctx.child("h").child("0") has path "h.0".
  BuildContext child(std::string_view name) const;
  BuildContext child(int64_t index) const;

  // Dotted module path, "" at the root.
  const std::string& path() const { return path_; }
  // path + "." + leaf (or leaf at the root).
  std::string name_of(std::string_view leaf) const;

  // Reads parameter `leaf` of this module from the checkpoint, checks its shape and returns
  // it in the model's dtype and device. Throws CheckpointError naming the checkpoint, the
  // parameter and both shapes on a mismatch.
  at::Tensor load(std::string_view leaf, const std::vector<int64_t>& shape) const;

  const HFConfig& config() const;
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  c10::ScalarType dtype() const { return dtype_; }
  c10::Device device() const { return device_; }

 private:
  // The checkpoint name holding parameter `name` (which may differ by the base-model prefix).
  std::string resolve(const std::string& name) const;

  const Checkpoint* checkpoint_;
  c10::ScalarType dtype_;
  c10::Device device_;
  std::string base_model_prefix_;
  std::string path_;
};

}  // namespace shardformer
