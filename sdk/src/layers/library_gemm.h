// Matrix products through the GEMM library the kernels picked for this CPU where it is not ATen's
// (kernels::gemm_enabled: oneDNN or OpenBLAS on CPUs not made by Intel, with gradients; the AMX
// tiles, for inference); through ATen otherwise.
#pragma once

#include <ATen/Tensor.h>

namespace shardformer::layers {

// a [m, k] . b [k, n] (any strides). kernels::gemm when it serves both, runs training's products
// (not the AMX tiles) and no gradient is recorded (inside an autograd node's backward); at::mm
// otherwise.
at::Tensor library_mm(const at::Tensor& a, const at::Tensor& b);

// x [..., k] times a weight [n, k] (k_major false, nn.Linear) or [k, n] (true, HF's Conv1D),
// plus bias [n] (may be undefined). kernels::gemm when it serves, as an autograd node whose
// backward (input, weight and bias gradients) runs on it too (not on the AMX tiles, whose
// training products go to ATen's); packed weights for inference,
// oneDNN's (onednn_packed.h), on AMX tiles (amx_packed.h) or MKL's (mkl_packed.h); ATen's linear /
// addmm otherwise.
at::Tensor linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          bool k_major);

}  // namespace shardformer::layers
