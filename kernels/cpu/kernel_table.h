// The kernels' raw entry points, compiled once per instruction set (kernels/CMakeLists.txt) into
// namespaces named by CPU_CAPABILITY; dispatch.cpp picks one table at run time.
#pragma once

#include <cstdint>

namespace shardformer::kernels {

struct KernelTable {
  // y[m, n] = x[m, k] . W + bias: W is [n, k] (k_major false) or [k, n] (k_major true).
  void (*skinny_linear)(const float* x, int64_t m, int64_t k, const float* w, int64_t n,
                        bool k_major, const float* bias, float* y);
  // y[r, :] = gelu_tanh(x[r, :] + bias) for rows x cols.
  void (*bias_gelu_tanh)(const float* x, const float* bias, float* y, int64_t rows, int64_t cols);
  // sum = x + residual; y = LayerNorm(sum) * weight + bias, per row.
  void (*add_layer_norm)(const float* x, const float* residual, const float* weight,
                         const float* bias, float* sum, float* y, int64_t rows, int64_t cols,
                         float eps);
  // y = weight * x / sqrt(mean(x^2) + eps), per row.
  void (*rms_norm)(const float* x, const float* weight, float* y, int64_t rows, int64_t cols,
                   float eps);
};

namespace DEFAULT {
extern const KernelTable table;
}
namespace AVX2 {
extern const KernelTable table;
}
namespace AVX512 {
extern const KernelTable table;
}

}  // namespace shardformer::kernels
