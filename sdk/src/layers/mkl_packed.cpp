// MKL's packed GEMM, looked up at run time (no MKL header ships with the torch wheel), on weights
// packed once through the cache of packed weights (packed_weights.h).
#include "mkl_packed.h"

#include "packed_weights.h"

#include <ATen/ATen.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace shardformer::layers {
namespace {

// MKL's CBLAS enums and LP64 entry points (MKL_INT = int in the wheel's LP64 MKL).
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112, kAMatrix = 161, kBMatrix = 162,
              kPacked = 151;
// Outputs at least this wide (LM heads) get the activations packed once before the product:
// MKL otherwise packs them again for each block of columns. GPT-2's head [2048, 768] x [768,
// 50257] took 0.97 of the time (median of 7 pairs, the same bits); narrower products gained
// nothing or lost up to 4%.
constexpr int64_t kPackActivationsColumns = 16384;
// The row count MKL packs for. Its layout depends on it: packed for 33 rows, GPT-2's products
// of 2048 rows ran 0-30% slower than unpacked sgemm; packed for 512 (or 2048), products of 64 to
// 6304 rows ran 1.05-1.37x faster (an Emerald Rapids Xeon, 2 threads); for 8192, half as fast.
constexpr int kPackRows = 512;
using PackGetSize = size_t (*)(int identifier, int m, int n, int k);
using Pack = void (*)(int layout, int identifier, int trans, int m, int n, int k, float alpha,
                      const float* src, int ld, float* dest);
using Compute = void (*)(int layout, int transa, int transb, int m, int n, int k, const float* a,
                         int lda, const float* b, int ldb, float beta, float* c, int ldc);

struct MklPackedApi {
  PackGetSize get_size = nullptr;
  Pack pack = nullptr;
  Compute compute = nullptr;
};

const MklPackedApi* api() {
  static const MklPackedApi found = [] {
    MklPackedApi a;
    const char* env = std::getenv("SHARDFORMER_MKL_PACKED");
    if (env != nullptr && std::strcmp(env, "0") == 0) return a;
    a.get_size = reinterpret_cast<PackGetSize>(::dlsym(RTLD_DEFAULT, "cblas_sgemm_pack_get_size"));
    a.pack = reinterpret_cast<Pack>(::dlsym(RTLD_DEFAULT, "cblas_sgemm_pack"));
    a.compute = reinterpret_cast<Compute>(::dlsym(RTLD_DEFAULT, "cblas_sgemm_compute"));
    return a;
  }();
  return found.get_size && found.pack && found.compute ? &found : nullptr;
}

// weight's packed copy as B = weight^T ([n, k]) or weight ([k, n], k_major), through the cache
// of packed weights (undefined while the weight waits for its second product, or past the
// budget).
at::Tensor packed_of(const MklPackedApi& mkl, const at::Tensor& weight, bool k_major, int64_t m) {
  const auto n = static_cast<int>(weight.size(k_major ? 1 : 0));
  const auto k = static_cast<int>(weight.size(k_major ? 0 : 1));
  const auto bytes = static_cast<int64_t>(mkl.get_size(kBMatrix, kPackRows, n, k));
  return packed_weight(weight, k_major, m, PackFormat::kMkl, bytes, [&] {
    at::Tensor packed = at::empty({bytes}, at::kByte);
    // B [k, n]: nn.Linear's weight read transposed, Conv1D's as it is.
    mkl.pack(kRowMajor, kBMatrix, k_major ? kNoTrans : kTrans, kPackRows, n, k, 1.0F,
             weight.const_data_ptr<float>(), k_major ? n : k,
             reinterpret_cast<float*>(packed.data_ptr()));
    return packed;
  });
}

}  // namespace

at::Tensor mkl_packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             bool k_major) {
  const MklPackedApi* mkl = api();
  const int64_t m = packable_rows(x, weight, bias, k_major);
  if (mkl == nullptr || m == 0) return {};
  const int64_t k = weight.size(k_major ? 0 : 1), n = weight.size(k_major ? 1 : 0);
  if (m > INT32_MAX || n > INT32_MAX) return {};
  const at::Tensor packed = packed_of(*mkl, weight, k_major, m);
  if (!packed.defined()) return {};
  const at::Tensor a = x.reshape({m, k}).contiguous();  // [m, k]
  auto out_shape = x.sizes().vec();
  out_shape.back() = n;
  // out [m, n] = bias (broadcast), then += a . weight^T (beta 1), or = a . weight^T (beta 0).
  at::Tensor out = bias.defined() ? bias.contiguous().expand({m, n}).contiguous()
                                  : at::empty({m, n}, x.options());
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  const float* a_data = a.const_data_ptr<float>();
  int a_layout = kNoTrans;
  at::Tensor packed_a;
  if (n >= kPackActivationsColumns) {
    packed_a = at::empty({static_cast<int64_t>(mkl->get_size(kAMatrix, mi, ni, ki))}, at::kByte);
    mkl->pack(kRowMajor, kAMatrix, kNoTrans, mi, ni, ki, 1.0F, a_data, ki,
              reinterpret_cast<float*>(packed_a.data_ptr()));
    a_data = reinterpret_cast<const float*>(packed_a.const_data_ptr());
    a_layout = kPacked;
  }
  mkl->compute(kRowMajor, a_layout, kPacked, mi, ni, ki, a_data, ki,
               reinterpret_cast<const float*>(packed.const_data_ptr()), ki,
               bias.defined() ? 1.0F : 0.0F, out.mutable_data_ptr<float>(), ni);
  return out.view(out_shape);
}

}  // namespace shardformer::layers
