// fp32 matrix products on Intel's AMX tiles: each operand split into three bf16 parts whose six
// leading cross products, summed in fp32 by the tiles, give the fp32 product to fp32's rounding
// (bf16x6; Henry, Tang and Heinecke, ARITH 2019). The SDK's inference products on weights laid
// out once take them where kernels::gemm_backend() is kAmx (cpu_kernels.h).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>

namespace shardformer::kernels {

// Whether this process can run the AMX products: the CPU has AMX-TILE, AMX-BF16, AVX-512 (F, BW,
// VL) and AVX512-BF16, and Linux grants the process the tiles' state (arch_prctl
// ARCH_REQ_XCOMP_PERM, asked once).
bool amx_available();

// out [m, n] (=|+=) a [m, k] . b [k, n] (+ bias [n]), as kernels::gemm: a and b of any strides,
// out with contiguous rows of any stride; b is split and laid out for the tiles at each call, by
// scalar code that costs more than the tiles gain, so kernels::gemm does not call it yet.
void amx_gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, bool accumulate,
              const at::Tensor& out);

// The bf16 elements of a weight's packed copy: n and k rounded up to 32, three parts.
int64_t amx_packed_elements(int64_t n, int64_t k);

// weight [n, k] (k_major false, nn.Linear) or [k, n] (true, HF's Conv1D), fp32 contiguous, as
// the tiles read it, once for many products: a bf16 tensor of amx_packed_elements(n, k) values.
at::Tensor amx_pack_weight(const at::Tensor& weight, bool k_major);

// out [m, n] = x [m, k] . W^T + bias [n] (may be undefined) for W packed by amx_pack_weight; x
// fp32 with contiguous rows. Threads: ATen's intra-op count.
at::Tensor amx_linear(const at::Tensor& x, const at::Tensor& packed, int64_t n,
                      const at::Tensor& bias);

}  // namespace shardformer::kernels
