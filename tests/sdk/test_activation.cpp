// The activations against HF's formulas (transformers.activations) evaluated in fp64 with
// autograd: values and input gradients, with and without gradients enabled; and reading one
// from config.json.
#include "shardformer/layers/activation.h"

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/error.h"
#include "shardformer/layers/config_activation.h"
#include "test_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>

namespace shardformer::layers {
namespace {

at::Tensor hf_gelu_new(const at::Tensor& x) {
  return 0.5 * x * (1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * at::pow(x, 3.0))));
}

TEST(Activation, GeluNewValueAndGradientEqualHfFormula) {
  at::manual_seed(0);
  // Both tails of the tanh, zero and a non-contiguous input (the ATen path).
  const at::Tensor base = at::cat({at::randn({4, 257}) * 4, at::zeros({1, 257})});
  for (const at::Tensor& data : {base, base.t()}) {
    const at::Tensor x = data.detach().requires_grad_(true);
    const at::Tensor y = apply_activation(Activation::kGeluNew, x);
    const at::Tensor upstream = at::randn_like(y);
    y.backward(upstream);

    const at::Tensor x64 = data.to(at::kDouble).detach().requires_grad_(true);
    const at::Tensor y64 = hf_gelu_new(x64);
    y64.backward(upstream.to(at::kDouble));
    EXPECT_TRUE(at::allclose(y.to(at::kDouble), y64, 1e-6, 1e-6));
    // d/dx has terms of both signs: compared against their size, as the kernels' tests do.
    const at::Tensor err = (x.grad().to(at::kDouble) - x64.grad()).abs();
    const at::Tensor scale = upstream.to(at::kDouble).abs() * (1.0 + x64.detach().abs());
    EXPECT_LT((err / scale).max().item<double>(), 1e-6);
    EXPECT_TRUE(at::equal(apply_activation(Activation::kGeluNew, data), y.detach()));
  }
}

// config_activation reads the key (marking it read for the unused-key check), falls back where
// it is absent, and names the file, the key and the value it cannot serve.
TEST(Activation, ConfigActivationReadsTheKeyOrItsDefaultAndNamesBadValues) {
  const HFConfig config = HFConfig::parse(
      R"({"hidden_act": "quick_gelu", "activation_function": "swish2"})", "/models/m/config.json");
  EXPECT_EQ(config_activation(config, "hidden_act", "gelu"), Activation::kQuickGelu);
  EXPECT_TRUE(config.was_read("hidden_act"));
  EXPECT_EQ(config_activation(config, "hidden_activation", "relu"), Activation::kRelu);
  testing::expect_error<ModelError>(
      [&] { config_activation(config, "activation_function", "gelu"); },
      {"/models/m/config.json: activation_function", "unsupported activation 'swish2'",
       "gelu_new"});
}

}  // namespace
}  // namespace shardformer::layers
