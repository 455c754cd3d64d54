// The machine's fp32 multiply-add peak, measured: the ceiling a GEMM's GFLOP/s is compared with.
#pragma once

// GFLOP/s of independent fused multiply-add chains on `threads` threads at the widest vectors
// this CPU runs (AVX-512, else AVX2), best of a few runs of about 0.1 s.
double fma_peak_gflops(int threads);

// "AVX-512", "AVX2" or "scalar": the vectors fma_peak_gflops used.
const char* fma_peak_isa();
