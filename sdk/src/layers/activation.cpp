// Activation functions with the formulas of transformers.activations.
#include "shardformer/layers/activation.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include "inference_kernels.h"

#include <ATen/ATen.h>

#include <array>
#include <cmath>
#include <utility>

namespace shardformer::layers {
namespace {

constexpr std::array<std::pair<std::string_view, Activation>, 8> kNames{{
    {"gelu_new", Activation::kGeluNew},
    {"gelu", Activation::kGelu},
    {"gelu_pytorch_tanh", Activation::kGeluPytorchTanh},
    {"relu", Activation::kRelu},
    {"silu", Activation::kSilu},
    {"swish", Activation::kSilu},
    {"tanh", Activation::kTanh},
    {"quick_gelu", Activation::kQuickGelu},
}};

}  // namespace

Activation parse_activation(std::string_view name, std::string_view where) {
  for (const auto& [known, activation] : kNames) {
    if (known == name) return activation;
  }
  std::vector<std::string_view> names;
  for (const auto& entry : kNames) names.push_back(entry.first);
  throw ModelError(
      str(where, ": unsupported activation '", name, "' (supported: ", join(names, ", "), ")"));
}

at::Tensor apply_activation(Activation activation, const at::Tensor& x) {
  switch (activation) {
    case Activation::kGeluNew:  // OpenAI GPT's tanh approximation, written out as HF does
      if (use_inference_kernel({x})) return kernels::bias_gelu_tanh(x, {});
      return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * at::pow(x, 3.0))));
    case Activation::kGelu: return at::gelu(x);
    case Activation::kGeluPytorchTanh: return at::gelu(x, "tanh");
    case Activation::kRelu: return at::relu(x);
    case Activation::kSilu: return at::silu(x);
    case Activation::kTanh: return at::tanh(x);
    case Activation::kQuickGelu: return x * at::sigmoid(1.702 * x);
  }
  return x;
}

}  // namespace shardformer::layers
