// Whether the skinny products (decoding's few-row products) ask for their weights ahead of the
// loads: a per-CPU question, answered by timing both ways on the process's own first products
// (docs/benchmarks.md: +23% on an Intel Xeon, -8% on an AMD Zen 3 at one row).
#pragma once

#include <string>

namespace shardformer::kernels {

// kMeasure: each row count (1 .. 8) and weight layout decides for itself, by alternating the
// two ways on its first products and keeping the faster. The environment variable
// SHARDFORMER_SKINNY_PREFETCH = measure | on | off sets the process's mode.
enum class SkinnyPrefetch { kMeasure, kOn, kOff };

// Replaces the mode and returns the one it replaces; setting kMeasure starts the measurement
// afresh. For tests and benchmarks, between products.
SkinnyPrefetch set_skinny_prefetch(SkinnyPrefetch mode);

// For the log and the benchmarks: the mode, and each decided row count with the read rates
// that decided it, e.g. "measured: 1 row off (31.9 against 29.4 GB/s), 8 rows on (...)".
std::string skinny_prefetch_summary();

}  // namespace shardformer::kernels
