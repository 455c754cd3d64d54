// Activation functions with the formulas of transformers.activations.
#include "shardformer/layers/activation.h"

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/error.h"
#include "shardformer/layers/config_activation.h"
#include "shardformer/strings.h"

#include "inference_kernels.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

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

constexpr double kGeluCubic = 0.044715;

// HF's gelu_new, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as one autograd node that
// keeps only its input: written out op by op, autograd keeps four [tokens, 4 x hidden / tp]
// tensors a layer (0.5 x, the tanh, 1 + tanh and the product), the largest activations of a
// GPT-2 block. The backward recomputes the tanh from x.
struct GeluNew : torch::autograd::Function<GeluNew> {
  static at::Tensor formula(const at::Tensor& x) {
    // Gradients are off here: in the forward of the node below, or called without them.
    if (kernel_layout(x)) return kernels::bias_gelu_tanh(x, {});
    // On a GPU, ATen's tanh GELU is the same formula in one kernel instead of eight (a decode
    // step is bound by launching kernels). In fp32 it equals HF's ops within the tests' 1e-5. In
    // fp16 / bf16 HF rounds after every op and the one kernel only at its end, 2.5 units in the
    // last place from HF (the CPU keeps HF's ops and equals HF there): nearer to fp32, and what
    // the GPU check asks of every family in bf16 (docs/benchmarks.md, GPU).
    if (x.is_cuda()) return at::gelu(x, "tanh");
    return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + kGeluCubic * at::pow(x, 3.0))));
  }

  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    ctx->save_for_backward({x});
    return formula(x);
  }

  // d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 * 0.044715 x^2), t the tanh above.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    if (kernel_layout(x) && grads[0].scalar_type() == at::kFloat) {
      return {kernels::gelu_tanh_backward(x, grads[0].contiguous())};
    }
    const double k = std::sqrt(2.0 / M_PI);
    const at::Tensor x2 = x * x;
    const at::Tensor t = at::tanh(k * x * (1.0 + kGeluCubic * x2));
    const at::Tensor slope =
        0.5 * (1.0 + t) + (0.5 * k) * x * (1.0 - t * t) * (1.0 + 3.0 * kGeluCubic * x2);
    return {grads[0] * slope};
  }
};

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

Activation config_activation(const HFConfig& config, const std::string& key,
                             const std::string& fallback) {
  return parse_activation(config.get_string(key, fallback), config.path().string() + ": " + key);
}

at::Tensor apply_activation(Activation activation, const at::Tensor& x) {
  switch (activation) {
    case Activation::kGeluNew:  // OpenAI GPT's tanh approximation, HF's formula (GeluNew)
      if (!at::GradMode::is_enabled() || !x.requires_grad()) return GeluNew::formula(x);
      return GeluNew::apply(x);
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
