// How the skinny products (decoding's few-row products) read their weights: with a software
// prefetch, one stream left to the hardware prefetchers, or several streams side by side. A
// per-CPU question, answered by timing the ways on the process's own first products.
#pragma once

#include <string>

namespace shardformer::kernels {

// kMeasure: each row count (1 .. 8) and weight layout decides for itself, by taking the ways in
// turn on its first products and keeping the fastest. kOn, kOff and kStreams force a way
// (kStreams, on Conv1D weights, which cannot stream, reads as kOff). The environment variable
// SHARDFORMER_SKINNY_PREFETCH = measure | on | off | streams sets the process's mode.
enum class SkinnyPrefetch { kMeasure, kOn, kOff, kStreams };

// Replaces the mode and returns the one it replaces; setting kMeasure starts the measurement
// afresh. For tests and benchmarks, between products.
SkinnyPrefetch set_skinny_prefetch(SkinnyPrefetch mode);

// For the log and the benchmarks: the mode, and each decided row count with the read rates
// that decided it, e.g. "measured: 1 row streams (34.2 GB/s; on 29.9, off 31.0), 8 rows on
// (...)".
std::string skinny_prefetch_summary();

}  // namespace shardformer::kernels
