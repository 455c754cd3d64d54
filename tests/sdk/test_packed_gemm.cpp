// The SDK's products through the kernels' GEMMs, the packed one, OpenBLAS and oneDNN
// (sdk/src/layers/packed_gemm.h): values and the input, weight and bias gradients of its autograd
// node against fp64 ATen, for both weight layouts, with and without a bias, and with only some
// inputs needing gradients; inference products on weights packed once (cached_packed_linear).
#include "layers/packed_gemm.h"

#include "layers/packed_weights.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/runtime/inference_scope.h"
#include "tensor_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <string>
#include <utility>
#include <vector>

namespace shardformer::layers {
namespace {

// The kernels' GEMM, the packed one, OpenBLAS or oneDNN, is chosen here on any CPU, and the
// process's choice restored after the case.
class PackedGemm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    previous_ =
        kernels::set_gemm_backend(GetParam() == "own"        ? kernels::GemmBackend::kOwn
                                  : GetParam() == "openblas" ? kernels::GemmBackend::kOpenBlas
                                                             : kernels::GemmBackend::kOneDnn);
  }
  void TearDown() override { kernels::set_gemm_backend(previous_); }

 private:
  kernels::GemmBackend previous_ = kernels::GemmBackend::kAten;
};

using testing::worst_relative;

TEST_P(PackedGemm, LinearProductValuesAndGradientsEqualFp64) {
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
        if (weight_grad) {
          EXPECT_LT(worst_relative(w.grad(), w64.grad()), 1e-6) << what;
        }
        if (with_bias) {
          EXPECT_LT(worst_relative(b.grad(), b64.grad()), 1e-6) << what;
        }
        // The node is the packed GEMM's, not ATen's.
        EXPECT_NE(y.grad_fn()->name().find("PackedLinear"), std::string::npos)
            << what << ": " << y.grad_fn()->name();
      }
    }
  }
}

TEST_P(PackedGemm, PackedMmTakesTransposedViewsAndRecordsNoGradientItself) {
  at::manual_seed(1);
  const at::Tensor a = at::randn({40, 30}), b = at::randn({50, 40});
  const at::Tensor y = packed_mm(a.t(), b.t());  // [30, 40] . [40, 50]
  EXPECT_TRUE(at::allclose(y, at::mm(a.t(), b.t()), 1e-5, 1e-5));
  // Inputs that need gradients go to at::mm, which records them.
  const at::Tensor g = a.detach().requires_grad_(true);
  EXPECT_TRUE(packed_mm(g.t(), b.t()).requires_grad());
}

// Inference products on weights packed once (cached_packed_linear): the same bits as the
// products that pack the weight themselves (kernels::linear), for both layouts, with and without
// a bias, at row counts around the GEMM's blocks; a weight packed at its second product (or its
// first of kPackAtFirstRows rows), repacked once written in place, dropped once freed; only the
// packed GEMM, only in inference scopes, only past the skinny kernel's rows.
TEST_P(PackedGemm, CachedWeightsGiveTheBitsOfPerProductPacking) {
  at::manual_seed(2);
  const int64_t k = 900, n = 150;  // k past one block of depth, n not whole panels
  // Weights made outside the scope, as a model's are: an inference scope's tensors have no
  // version counter, and are never packed.
  std::vector<std::pair<at::Tensor, at::Tensor>> layers;  // (weight, bias) per layout and bias
  for (const bool k_major : {false, true}) {
    for (const bool with_bias : {false, true}) {
      layers.emplace_back(k_major ? at::randn({k, n}) : at::randn({n, k}),
                          with_bias ? at::randn({n}) : at::Tensor());
    }
  }
  at::Tensor w = at::randn({n, k});
  EXPECT_FALSE(cached_packed_linear(at::randn({64, k}), w, {}, false).defined());  // no scope
  const runtime::InferenceScope inference;
  const int64_t before = packed_weights();
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool k_major = i >= 2;
    const auto& [weight, b] = layers[i];
    // The first product leaves the weight unpacked; the second packs it.
    EXPECT_FALSE(cached_packed_linear(at::randn({40, k}), weight, b, k_major).defined());
    for (const int64_t rows : {kernels::kSkinnyRows + 1, int64_t{197}, int64_t{301}}) {
      SCOPED_TRACE(::testing::Message()
                   << "k_major " << k_major << ", bias " << b.defined() << ", rows " << rows);
      const at::Tensor x = at::randn({rows, 1, k});  // [rows, 1, k]
      const at::Tensor y = cached_packed_linear(x, weight, b, k_major);
      if (GetParam() != "own") {
        EXPECT_FALSE(y.defined());  // the libraries pack within each call
        continue;
      }
      ASSERT_TRUE(y.defined());
      ASSERT_EQ(y.sizes().vec(), std::vector<int64_t>({rows, 1, n}));
      EXPECT_TRUE(at::equal(y, kernels::linear(x, weight, b, k_major)));
    }
    EXPECT_FALSE(
        cached_packed_linear(at::randn({kernels::kSkinnyRows, k}), weight, b, k_major).defined());
  }
  if (GetParam() != "own") return;
  EXPECT_EQ(packed_weights(), before + 4);
  layers.clear();
  EXPECT_EQ(packed_weights(), before);  // freed weights' copies dropped
  const at::Tensor x = at::randn({kPackAtFirstRows, k});
  const at::Tensor first = cached_packed_linear(x, w, {}, false);  // packed at once
  ASSERT_TRUE(first.defined());
  EXPECT_EQ(packed_weights(), before + 1);
  w.mul_(-2);  // an optimizer's step, say: a new version
  const at::Tensor second = cached_packed_linear(x, w, {}, false);
  ASSERT_TRUE(second.defined());
  EXPECT_TRUE(at::equal(second, kernels::linear(x, w, {}, false)));
  EXPECT_TRUE(at::equal(second, -2 * first));  // exact: a power of two
  EXPECT_EQ(packed_weights(), before + 1);     // one copy per weight
}

INSTANTIATE_TEST_SUITE_P(Gemms, PackedGemm, ::testing::Values("own", "openblas", "onednn"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace shardformer::layers
