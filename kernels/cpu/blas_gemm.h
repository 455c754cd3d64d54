// The products through OpenBLAS (scipy-openblas32 from PyPI, symbols prefixed scipy_): one
// single-threaded call per part of the output, the parts split over ATen's intra-op threads.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>

namespace shardformer::kernels {

// out [m, n] (=|+=) a [m, k] . b [k, n] (+ bias [n]) as kernels::gemm defines it, shapes and
// types already checked. Operands whose strides OpenBLAS cannot read (neither rows nor columns
// contiguous) are copied first.
void blas_gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, bool accumulate,
               const at::Tensor& out, int64_t threads);

// "OpenBLAS 0.3.34 (Haswell kernels)": the library's version and the kernels it picked for this
// CPU (OPENBLAS_CORETYPE in the environment overrides its choice).
std::string blas_name();

// The threads OpenBLAS keeps for itself: 1 (none besides the caller's), as it was opened.
int blas_threads();

}  // namespace shardformer::kernels
