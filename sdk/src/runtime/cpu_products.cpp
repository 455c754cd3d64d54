// The CPU product choices (runtime/cpu_products.h), checked up front so that a bad
// SHARDFORMER_CPU_GEMM or SHARDFORMER_SKINNY_PREFETCH stops a job at its start, whatever sizes
// its products have.
#include "shardformer/runtime/cpu_products.h"

#include "shardformer/error.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/kernels/skinny_prefetch.h"

#include <c10/util/Exception.h>

namespace shardformer::runtime {

std::string cpu_products() {
  try {
    return kernels::gemm_name();
  } catch (const c10::Error& e) {
    throw ConfigError(e.what_without_backtrace());
  }
}

std::string skinny_products_prefetch() {
  try {
    return kernels::skinny_prefetch_summary();
  } catch (const c10::Error& e) {
    throw ConfigError(e.what_without_backtrace());
  }
}

}  // namespace shardformer::runtime
