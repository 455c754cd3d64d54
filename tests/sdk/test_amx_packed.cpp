// Inference products on AMX tiles (sdk/src/layers/amx_packed.h) against fp64 ATen: both weight
// layouts, with and without a bias, row counts off the tiles' multiples, a weight written in place
// repacked, linear_product taking them on the AMX backend, other backends left to theirs.
// Skipped, saying why, without AMX.
#include "layers/amx_packed.h"
#include "layers/library_gemm.h"
#include "layers/packed_weights.h"

#include "shardformer/kernels/amx_gemm.h"
#include "shardformer/runtime/inference_scope.h"
#include "tensor_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <optional>

namespace shardformer::layers {
namespace {

using testing::linear_reference;
using testing::model_weight;
using testing::worst_relative;

// The AMX backend where the tiles exist (the process's choice restored after the case); skipped,
// saying why, elsewhere.
class AmxPacked : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::amx_available()) GTEST_SKIP() << "no AMX-BF16 tiles on this CPU or OS";
    previous_ = kernels::set_gemm_backend(kernels::GemmBackend::kAmx);
  }
  void TearDown() override {
    if (previous_) kernels::set_gemm_backend(*previous_);
  }

 private:
  std::optional<kernels::GemmBackend> previous_;  // unset where SetUp skipped
};

TEST_F(AmxPacked, EqualsFp64ForBothLayoutsBiasesAndRowCounts) {
  at::manual_seed(0);
  const runtime::InferenceScope inference;
  const int64_t k = 200, n = 70;
  for (const bool k_major : {false, true}) {
    for (const bool with_bias : {false, true}) {
      const at::Tensor w = k_major ? model_weight({k, n}) : model_weight({n, k});
      const at::Tensor b = with_bias ? at::randn({n}) : at::Tensor();
      // The first product of fewer than kPackAtFirstRows rows is left to ATen; the second packs.
      EXPECT_FALSE(amx_packed_linear(at::randn({kPackedMinRows, k}), w, b, k_major).defined());
      for (const int64_t rows : {kPackedMinRows, int64_t{100}, int64_t{517}}) {
        SCOPED_TRACE(::testing::Message()
                     << "k_major " << k_major << ", bias " << with_bias << ", rows " << rows);
        const at::Tensor x = at::randn({rows, 1, k});  // [rows, 1, k]
        const at::Tensor y = amx_packed_linear(x, w, b, k_major);
        ASSERT_TRUE(y.defined());
        ASSERT_EQ(y.sizes().vec(), std::vector<int64_t>({rows, 1, n}));
        EXPECT_LT(worst_relative(y, linear_reference(x, w, b, k_major)), 1e-6);
      }
    }
  }
}

TEST_F(AmxPacked, LinearProductTakesThemAndRepacksAWeightWrittenInPlace) {
  at::manual_seed(1);
  const runtime::InferenceScope inference;
  const int64_t before = packed_weights();
  {
    at::Tensor w = model_weight({24, 40});
    const at::Tensor x = at::randn({kPackAtFirstRows, 40});
    const at::Tensor first = linear_product(x, w, {}, false);  // packs at once: many rows
    EXPECT_EQ(packed_weights(), before + 1);
    EXPECT_LT(worst_relative(first, linear_reference(x, w, {}, false)), 1e-6);
    // Not ATen's bits: the tiles' sums run in another order.
    EXPECT_FALSE(at::equal(first, at::linear(x, w)));
    w.mul_(-2);  // an optimizer's step, say: a new version, packed anew
    const at::Tensor second = linear_product(x, w, {}, false);
    EXPECT_LT(worst_relative(second, linear_reference(x, w, {}, false)), 1e-6);
    EXPECT_EQ(packed_weights(), before + 1);  // one copy per weight
  }
  EXPECT_EQ(packed_weights(), before);
}

// Under another backend the tiles take no product.
TEST_F(AmxPacked, OtherBackendsAreLeftTheirProducts) {
  const runtime::InferenceScope inference;
  const at::Tensor w = model_weight({24, 40});
  kernels::set_gemm_backend(kernels::GemmBackend::kAten);
  EXPECT_FALSE(amx_packed_linear(at::randn({kPackAtFirstRows, 40}), w, {}, false).defined());
}

}  // namespace
}  // namespace shardformer::layers
