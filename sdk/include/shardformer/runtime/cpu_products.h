// Which library runs the CPU's fp32 matrix products: oneDNN, OpenBLAS or ATen's (MKL), chosen
// once from the CPU and the environment variable SHARDFORMER_CPU_GEMM; and how
// decoding's few-row products read their weights (SHARDFORMER_SKINNY_PREFETCH).
#pragma once

#include <string>

namespace shardformer::runtime {

// A line for the log, e.g. "oneDNN (LibTorch's matmul)". Throws ConfigError naming
// SHARDFORMER_CPU_GEMM when it holds anything but 'openblas', 'onednn' or 'aten'.
std::string cpu_products();

// A line for the log: whether the few-row products prefetch their weights, e.g. "measure" before
// any was measured, "measured: 1 row off (33.5 against 27.3 GB/s)" after. Throws ConfigError
// naming SHARDFORMER_SKINNY_PREFETCH when it holds anything but 'measure', 'on' or 'off'.
std::string skinny_products_prefetch();

}  // namespace shardformer::runtime
