// The SDK's products through the kernels' GEMM libraries, OpenBLAS, oneDNN and the AMX tiles
// (sdk/src/layers/library_gemm.h): values and the input, weight and bias gradients of its autograd
// node against fp64 ATen, for both weight layouts, with and without a bias, and with only some
// inputs needing gradients.
#include "layers/library_gemm.h"

#include "shardformer/kernels/amx_gemm.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "tensor_util.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <optional>
#include <string>

namespace shardformer::layers {
namespace {

// The kernels' GEMM library, OpenBLAS or oneDNN, is chosen here on any CPU (the AMX tiles where
// the CPU has them), and the process's choice restored after the case.
class LibraryGemm : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "amx" && !kernels::amx_available()) {
      GTEST_SKIP() << "no AMX-BF16 tiles on this CPU or OS";
    }
    previous_ = kernels::set_gemm_backend(GetParam() == "openblas" ? kernels::GemmBackend::kOpenBlas
                                          : GetParam() == "amx"    ? kernels::GemmBackend::kAmx
                                                                   : kernels::GemmBackend::kOneDnn);
  }
  void TearDown() override {
    if (previous_) kernels::set_gemm_backend(*previous_);
  }

 private:
  std::optional<kernels::GemmBackend> previous_;  // unset where SetUp skipped
};

using testing::worst_relative;

TEST_P(LibraryGemm, LinearProductValuesAndGradientsEqualFp64) {
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
        // The node is the library's, not ATen's; the AMX tiles leave training's products to
        // ATen (library_gemm.cpp: splitting a new B per call cost more than they gained).
        EXPECT_EQ(y.grad_fn()->name().find("LibraryLinear") != std::string::npos,
                  GetParam() != "amx")
            << what << ": " << y.grad_fn()->name();
      }
    }
  }
}

TEST_P(LibraryGemm, LibraryMmTakesTransposedViewsAndRecordsNoGradientItself) {
  at::manual_seed(1);
  const at::Tensor a = at::randn({40, 30}), b = at::randn({50, 40});
  const at::Tensor y = library_mm(a.t(), b.t());  // [30, 40] . [40, 50]
  EXPECT_TRUE(at::allclose(y, at::mm(a.t(), b.t()), 1e-5, 1e-5));
  // Inputs that need gradients go to at::mm, which records them.
  const at::Tensor g = a.detach().requires_grad_(true);
  EXPECT_TRUE(library_mm(g.t(), b.t()).requires_grad());
}

INSTANTIATE_TEST_SUITE_P(Gemms, LibraryGemm, ::testing::Values("openblas", "onednn", "amx"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace shardformer::layers
