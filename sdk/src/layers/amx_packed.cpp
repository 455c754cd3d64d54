// The AMX products on weights packed once (amx_packed.h).
#include "amx_packed.h"

#include "packed_weights.h"

#include "shardformer/kernels/amx_gemm.h"
#include "shardformer/kernels/cpu_kernels.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

at::Tensor amx_packed_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                             bool k_major) {
  if (kernels::gemm_backend() != kernels::GemmBackend::kAmx) return {};
  const int64_t m = packable_rows(x, weight, bias, k_major);
  if (m == 0) return {};
  const int64_t k = weight.size(k_major ? 0 : 1), n = weight.size(k_major ? 1 : 0);
  const at::Tensor packed =
      packed_weight(weight, k_major, m, PackFormat::kAmx, kernels::amx_packed_elements(n, k) * 2,
                    [&] { return kernels::amx_pack_weight(weight, k_major); });
  if (!packed.defined()) return {};
  auto out_shape = x.sizes().vec();
  out_shape.back() = n;
  // [m, k] with contiguous rows (a view where x has them)
  const at::Tensor rows = x.reshape({m, k});
  return kernels::amx_linear(rows.stride(1) == 1 ? rows : rows.contiguous(), packed, n, bias)
      .view(out_shape);
}

}  // namespace shardformer::layers
