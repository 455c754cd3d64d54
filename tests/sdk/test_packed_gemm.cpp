// The SDK's products through the kernels' packed GEMM (sdk/src/layers/packed_gemm.h): values and
// the input, weight and bias gradients of its autograd node against fp64 ATen, for both weight
// layouts, with and without a bias, and with only some inputs needing gradients.
#include "layers/packed_gemm.h"

#include "shardformer/kernels/cpu_kernels.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cstdlib>

namespace shardformer::layers {
namespace {

// CTest runs each case in a process of its own: the packed GEMM is chosen here on any CPU (its
// choice is made once, at the first product).
class PackedGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SHARDFORMER_CPU_GEMM", "own", 1);
    ASSERT_TRUE(kernels::gemm_enabled()) << "run this case in a process of its own";
  }
};

double worst_relative(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs() / (want.abs().max() + 1e-30)).max().item<double>();
}

TEST_F(PackedGemm, LinearProductValuesAndGradientsEqualFp64) {
  at::manual_seed(0);
  for (const bool k_major : {false, true}) {
    for (const bool with_bias : {false, true}) {
      for (const bool weight_grad : {false, true}) {
        const int64_t k = 200, n = 70;
        const at::Tensor x = at::randn({3, 9, k}).requires_grad_(true);  // [batch, seq, k]
        const at::Tensor w =
            (k_major ? at::randn({k, n}) : at::randn({n, k})).requires_grad_(weight_grad);
        const at::Tensor b = with_bias ? at::randn({n}).requires_grad_(true) : at::Tensor();
        const at::Tensor y = linear_product(x, w, b, k_major);  // [batch, seq, n]
        const at::Tensor upstream = at::randn_like(y);
        y.backward(upstream);

        const at::Tensor x64 = x.detach().to(at::kDouble).requires_grad_(true);
        const at::Tensor w64 = w.detach().to(at::kDouble).requires_grad_(true);
        const at::Tensor b64 =
            with_bias ? b.detach().to(at::kDouble).requires_grad_(true) : at::Tensor();
        at::Tensor y64 = at::matmul(x64, k_major ? w64 : w64.t());
        if (with_bias) y64 = y64 + b64;
        y64.backward(upstream.to(at::kDouble));

        const std::string what = std::string(k_major ? "Conv1D" : "Linear") +
                                 (with_bias ? " + bias" : "") +
                                 (weight_grad ? ", weight grad" : ", frozen weight");
        ASSERT_EQ(y.sizes(), y64.sizes()) << what;
        EXPECT_LT(worst_relative(y, y64), 1e-6) << what;
        EXPECT_LT(worst_relative(x.grad(), x64.grad()), 1e-6) << what;
        EXPECT_EQ(w.grad().defined(), weight_grad) << what;
        if (weight_grad) EXPECT_LT(worst_relative(w.grad(), w64.grad()), 1e-6) << what;
        if (with_bias) EXPECT_LT(worst_relative(b.grad(), b64.grad()), 1e-6) << what;
        // The node is the packed GEMM's, not ATen's.
        EXPECT_NE(y.grad_fn()->name().find("PackedLinear"), std::string::npos)
            << what << ": " << y.grad_fn()->name();
      }
    }
  }
}

TEST_F(PackedGemm, PackedMmTakesTransposedViewsAndRecordsNoGradientItself) {
  at::manual_seed(1);
  const at::Tensor a = at::randn({40, 30}), b = at::randn({50, 40});
  const at::Tensor y = packed_mm(a.t(), b.t());  // [30, 40] . [40, 50]
  EXPECT_TRUE(at::allclose(y, at::mm(a.t(), b.t()), 1e-5, 1e-5));
  // Inputs that need gradients go to at::mm, which records them.
  const at::Tensor g = a.detach().requires_grad_(true);
  EXPECT_TRUE(packed_mm(g.t(), b.t()).requires_grad());
}

}  // namespace
}  // namespace shardformer::layers
