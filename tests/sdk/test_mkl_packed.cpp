// MKL's packed-weight products (sdk/src/layers/mkl_packed.h) against fp64 ATen: both weight
// layouts, with and without a bias, at several row counts, an LM head's width; when they apply
// (inference scopes, enough rows) and when a weight is packed (its first product of many rows,
// else its second); a weight written in place repacked; freed weights' copies dropped.
#include "layers/mkl_packed.h"
#include "layers/packed_weights.h"

#include "shardformer/runtime/inference_scope.h"
#include "tensor_util.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

namespace shardformer::layers {
namespace {

using testing::linear_reference;
using testing::model_weight;
using testing::worst_relative;

// The product through the packed copy: a weight's first product is left to ATen (undefined), its
// second packs it.
at::Tensor packed_product(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                          bool k_major) {
  EXPECT_FALSE(mkl_packed_linear(x, w, b, k_major).defined());
  return mkl_packed_linear(x, w, b, k_major);
}

TEST(MklPacked, EqualsFp64ForBothLayoutsBiasesAndRowCounts) {
  at::manual_seed(0);
  const runtime::InferenceScope inference;
  const int64_t k = 200, n = 70;
  for (const bool k_major : {false, true}) {
    for (const bool with_bias : {false, true}) {
      const at::Tensor w = k_major ? model_weight({k, n}) : model_weight({n, k});
      const at::Tensor b = with_bias ? at::randn({n}) : at::Tensor();
      for (const int64_t rows : {kPackedMinRows, int64_t{100}, int64_t{517}}) {
        SCOPED_TRACE(::testing::Message()
                     << "k_major " << k_major << ", bias " << with_bias << ", rows " << rows);
        const at::Tensor x = at::randn({rows, 1, k});  // [rows, 1, k]
        const at::Tensor y = rows == kPackedMinRows
                                 ? packed_product(x, w, b, k_major)
                                 : mkl_packed_linear(x, w, b, k_major);  // packed already
        if (!y.defined()) GTEST_SKIP() << "MKL's packed API is not in this LibTorch";
        ASSERT_EQ(y.sizes().vec(), std::vector<int64_t>({rows, 1, n}));
        EXPECT_LT(worst_relative(y, linear_reference(x, w, b, k_major)), 1e-6);
      }
    }
  }
}

// An LM head's width (kPackActivationsColumns and more) packs the activations too: still
// within fp64's, and equal bit for bit to the same product on a narrower slice of the weight,
// whose activations MKL packs itself.
TEST(MklPacked, WideOutputsPackTheActivationsToo) {
  at::manual_seed(1);
  const runtime::InferenceScope inference;
  const int64_t k = 64, n = 20000, rows = 40;
  const at::Tensor w = model_weight({n, k}), x = at::randn({rows, k});
  const at::Tensor y = packed_product(x, w, {}, false);
  if (!y.defined()) GTEST_SKIP() << "MKL's packed API is not in this LibTorch";
  EXPECT_LT(worst_relative(y, linear_reference(x, w, {}, false)), 1e-6);
  const at::Tensor narrow = [&] {  // [1000, k]: activations not packed
    const c10::InferenceMode off(false);
    return w.narrow(0, 0, 1000).clone();
  }();
  EXPECT_TRUE(at::equal(y.narrow(1, 0, 1000), packed_product(x, narrow, {}, false)));
}

TEST(MklPacked, AppliesOnlyInInferenceScopesAndToEnoughRows) {
  const at::Tensor w = at::randn({16, 8});
  EXPECT_FALSE(mkl_packed_linear(at::randn({64, 8}), w, {}, false).defined());  // no scope
  const runtime::InferenceScope inference;
  EXPECT_FALSE(mkl_packed_linear(at::randn({kPackedMinRows - 1, 8}), w, {}, false).defined());
  EXPECT_FALSE(mkl_packed_linear(at::randn({64, 8}).to(at::kDouble), w.to(at::kDouble), {}, false)
                   .defined());
  EXPECT_FALSE(mkl_packed_linear(at::randn({64, 8}), at::randn({8, 16}).t(), {}, false).defined());
  const at::Tensor inference_weight = [] {
    const c10::InferenceMode mode;
    return at::randn({16, 8});
  }();
  EXPECT_FALSE(mkl_packed_linear(at::randn({64, 8}), inference_weight, {}, false).defined());
}

// A first product of kPackAtFirstRows rows or more packs the weight at once; fewer rows wait
// for the weight's second product.
TEST(MklPacked, ManyRowsPackAtTheFirstProduct) {
  const runtime::InferenceScope inference;
  const at::Tensor w = model_weight({24, 40});
  const int64_t before = packed_weights();
  const at::Tensor x = at::randn({kPackAtFirstRows, 40});
  const at::Tensor y = mkl_packed_linear(x, w, {}, false);
  if (!y.defined()) {
    // The API absent, or the weight left for its second product: a second product tells which.
    if (!mkl_packed_linear(x, w, {}, false).defined()) {
      GTEST_SKIP() << "MKL's packed API is not in this LibTorch";
    }
    FAIL() << kPackAtFirstRows << " rows waited for the second product";
  }
  EXPECT_EQ(packed_weights(), before + 1);
  EXPECT_LT(worst_relative(y, linear_reference(x, w, {}, false)), 1e-6);
  const at::Tensor other = model_weight({24, 40});
  EXPECT_FALSE(mkl_packed_linear(x.narrow(0, 0, kPackAtFirstRows - 1), other, {}, false).defined());
  EXPECT_EQ(packed_weights(), before + 1);
}

TEST(MklPacked, RepacksAWeightWrittenInPlaceAndDropsFreedWeights) {
  const runtime::InferenceScope inference;
  const int64_t before = packed_weights();
  {
    at::Tensor w = model_weight({24, 40});
    const at::Tensor x = at::randn({50, 40});
    EXPECT_FALSE(mkl_packed_linear(x, w, {}, false).defined());  // the first product: ATen's
    EXPECT_EQ(packed_weights(), before);                         // nothing packed yet
    const at::Tensor first = mkl_packed_linear(x, w, {}, false);
    if (!first.defined()) GTEST_SKIP() << "MKL's packed API is not in this LibTorch";
    EXPECT_LT(worst_relative(first, linear_reference(x, w, {}, false)), 1e-6);
    EXPECT_EQ(packed_weights(), before + 1);
    w.mul_(-2);                                                 // an optimizer's step, say
    const at::Tensor second = packed_product(x, w, {}, false);  // a new version: first again
    EXPECT_LT(worst_relative(second, linear_reference(x, w, {}, false)), 1e-6);
    EXPECT_TRUE(at::allclose(second, -2 * first, 1e-5, 1e-5));
    EXPECT_EQ(packed_weights(), before + 1);  // one copy per weight
  }
  EXPECT_EQ(packed_weights(), before);
}

}  // namespace
}  // namespace shardformer::layers
