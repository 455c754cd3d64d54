// BuildContext: module paths and parameter loading from the checkpoint while a model is built.
#include "shardformer/build_context.h"

#include "shardformer/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer {

BuildContext::BuildContext(const Checkpoint& checkpoint, c10::ScalarType dtype, c10::Device device,
                           std::string base_model_prefix)
    : checkpoint_(&checkpoint),
      dtype_(dtype),
      device_(device),
      base_model_prefix_(std::move(base_model_prefix)) {}

BuildContext BuildContext::child(std::string_view name) const {
  BuildContext result = *this;
  result.path_ = name_of(name);
  return result;
}

BuildContext BuildContext::child(int64_t index) const { return child(std::to_string(index)); }

std::string BuildContext::name_of(std::string_view leaf) const {
  return path_.empty() ? std::string(leaf) : path_ + "." + std::string(leaf);
}

const HFConfig& BuildContext::config() const { return checkpoint_->config(); }

std::string BuildContext::resolve(const std::string& name) const {
  if (checkpoint_->contains(name) || base_model_prefix_.empty()) return name;
  const std::string prefix = base_model_prefix_ + ".";
  if (name.starts_with(prefix)) {
    std::string stripped = name.substr(prefix.size());
    if (checkpoint_->contains(stripped)) return stripped;
  } else if (checkpoint_->contains(prefix + name)) {
    return prefix + name;
  }
  return name;  // info() below reports it missing, with suggestions
}

at::Tensor BuildContext::load(std::string_view leaf, const std::vector<int64_t>& shape) const {
  const std::string name = resolve(name_of(leaf));
  const TensorInfo& info = checkpoint_->info(name);
  if (info.shape != shape) {
    throw CheckpointError(str(checkpoint_->directory().string(), ": parameter '", name,
                              "' has shape ", shape_str(info.shape), " in ",
                              checkpoint_->file_of(name).path().filename().string(),
                              " but config.json implies ", shape_str(shape)));
  }
  at::Tensor tensor = checkpoint_->read(name);
  return tensor.to(device_, dtype_);
}

}  // namespace shardformer
