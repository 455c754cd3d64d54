// Which code runs the CPU's fp32 matrix products: the kernels' packed GEMM, OpenBLAS or ATen's
// (MKL), chosen once from the CPU and the environment variable SHARDFORMER_CPU_GEMM.
#pragma once

#include <string>

namespace shardformer::runtime {

// A line for the log, e.g. "packed GEMM (AVX512 kernels)". Throws ConfigError naming
// SHARDFORMER_CPU_GEMM when it holds anything but 'own', 'openblas' or 'aten'.
std::string cpu_products();

}  // namespace shardformer::runtime
