// oneDNN's inference products on weights packed once (sdk/src/layers/onednn_packed.h), with
// oneDNN chosen as the GEMM on any CPU: against fp64 ATen for both weight layouts, with and
// without a bias, at several row counts; the packed copy's products equal the unpacked ones bit
// for bit; when they apply; a weight written in place repacked; freed weights' copies dropped.
#include "layers/onednn_packed.h"
#include "layers/packed_weights.h"

#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/runtime/inference_scope.h"
#include "tensor_util.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <vector>

namespace shardformer::layers {
namespace {

using testing::linear_reference;
using testing::model_weight;
using testing::worst_relative;

class OneDnnPacked : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = kernels::set_gemm_backend(kernels::GemmBackend::kOneDnn); }
  void TearDown() override { kernels::set_gemm_backend(previous_); }

 private:
  kernels::GemmBackend previous_ = kernels::GemmBackend::kAten;
};

// A weight's first product of few rows runs on the weight as it is and its second on the
// packed copy: both within rounding of fp64, and equal bit for bit.
TEST_F(OneDnnPacked, PackedProductsEqualTheUnpackedBitsAndFp64ForBothLayouts) {
  at::manual_seed(0);
  const runtime::InferenceScope inference;
  const int64_t k = 300, n = 70;
  for (const bool k_major : {false, true}) {
    for (const bool with_bias : {false, true}) {
      for (const int64_t rows : {kPackedMinRows, int64_t{197}, int64_t{517}}) {
        SCOPED_TRACE(::testing::Message()
                     << "k_major " << k_major << ", bias " << with_bias << ", rows " << rows);
        const at::Tensor w = k_major ? model_weight({k, n}) : model_weight({n, k});
        const at::Tensor b = with_bias ? at::randn({n}) : at::Tensor();
        const at::Tensor x = at::randn({rows, 1, k});  // [rows, 1, k]
        const int64_t before = packed_weights();
        const at::Tensor unpacked = onednn_packed_linear(x, w, b, k_major);
        ASSERT_TRUE(unpacked.defined()) << "oneDNN's linear is not registered in this LibTorch";
        EXPECT_EQ(packed_weights(), before);  // the first product packs nothing
        const at::Tensor packed = onednn_packed_linear(x, w, b, k_major);
        EXPECT_EQ(packed_weights(), before + 1);
        ASSERT_EQ(packed.sizes().vec(), std::vector<int64_t>({rows, 1, n}));
        EXPECT_TRUE(at::equal(packed, unpacked));
        EXPECT_LT(worst_relative(packed, linear_reference(x, w, b, k_major)), 1e-6);
        // Other row counts read the same copy, still with the unpacked product's bits.
        const at::Tensor more = at::randn({rows + 40, k});
        const at::Tensor again = onednn_packed_linear(more, w, b, k_major);
        EXPECT_EQ(packed_weights(), before + 1);
        const at::Tensor plain = [&] {  // the same weight's values in a tensor never packed
          const c10::InferenceMode off(false);
          return w.clone();
        }();
        EXPECT_TRUE(at::equal(again, onednn_packed_linear(more, plain, b, k_major)));
      }
    }
  }
}

TEST_F(OneDnnPacked, AppliesOnlyOnOneDnnInInferenceScopesAndToEnoughRows) {
  const at::Tensor w = model_weight({16, 8});
  EXPECT_FALSE(onednn_packed_linear(at::randn({64, 8}), w, {}, false).defined());  // no scope
  const runtime::InferenceScope inference;
  EXPECT_TRUE(onednn_packed_linear(at::randn({64, 8}), w, {}, false).defined());
  EXPECT_FALSE(onednn_packed_linear(at::randn({kPackedMinRows - 1, 8}), w, {}, false).defined());
  EXPECT_FALSE(
      onednn_packed_linear(at::randn({64, 8}).to(at::kDouble), w.to(at::kDouble), {}, false)
          .defined());
  EXPECT_FALSE(onednn_packed_linear(at::randn({64, 8}), at::randn({8, 16}).t(), {}, false)
                   .defined());  // a strided weight
  const at::Tensor inference_weight = [] {
    const c10::InferenceMode mode;
    return at::randn({16, 8});
  }();
  EXPECT_FALSE(onednn_packed_linear(at::randn({64, 8}), inference_weight, {}, false).defined());
  for (const kernels::GemmBackend other :
       {kernels::GemmBackend::kAten, kernels::GemmBackend::kOpenBlas}) {
    kernels::set_gemm_backend(other);
    EXPECT_FALSE(onednn_packed_linear(at::randn({64, 8}), w, {}, false).defined());
  }
}

// A first product of kPackAtFirstRows rows or more packs the weight at once; a weight written
// in place is packed anew, and a freed weight's copy is dropped.
TEST_F(OneDnnPacked, PacksAtOnceForManyRowsRepacksWrittenWeightsAndDropsFreedOnes) {
  const runtime::InferenceScope inference;
  const int64_t before = packed_weights();
  {
    at::Tensor w = model_weight({24, 40});
    const at::Tensor x = at::randn({kPackAtFirstRows, 40});
    const at::Tensor first = onednn_packed_linear(x, w, {}, false);
    ASSERT_TRUE(first.defined());
    EXPECT_EQ(packed_weights(), before + 1);
    EXPECT_LT(worst_relative(first, linear_reference(x, w, {}, false)), 1e-6);
    w.mul_(-2);  // an optimizer's step, say: a new version
    const at::Tensor second = onednn_packed_linear(x, w, {}, false);
    EXPECT_LT(worst_relative(second, linear_reference(x, w, {}, false)), 1e-6);
    EXPECT_TRUE(at::equal(second, -2 * first));  // exact: a power of two
    EXPECT_EQ(packed_weights(), before + 1);     // one copy per weight
  }
  EXPECT_EQ(packed_weights(), before);
}

}  // namespace
}  // namespace shardformer::layers
