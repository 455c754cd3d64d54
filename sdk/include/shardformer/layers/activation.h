// Activation functions by their HF config names ("gelu_new", "gelu", "relu", ...), computed
// with the same formulas as transformers.activations.
#pragma once

#include <ATen/Tensor.h>

#include <string>
#include <string_view>

namespace shardformer::layers {

enum class Activation { kGeluNew, kGelu, kGeluPytorchTanh, kRelu, kSilu, kTanh, kQuickGelu };

// Throws ModelError naming `where` and the supported names for an unknown name.
Activation parse_activation(std::string_view name, std::string_view where);
at::Tensor apply_activation(Activation activation, const at::Tensor& input);

}  // namespace shardformer::layers
