// The CPU product choice (runtime/cpu_products.h), checked up front so that a bad
// SHARDFORMER_CPU_GEMM stops a job at its start, whatever sizes its products have.
#include "shardformer/runtime/cpu_products.h"

#include "shardformer/error.h"
#include "shardformer/kernels/cpu_kernels.h"

#include <c10/util/Exception.h>

namespace shardformer::runtime {

std::string cpu_products() {
  try {
    return kernels::gemm_name();
  } catch (const c10::Error& e) {
    throw ConfigError(e.what_without_backtrace());
  }
}

}  // namespace shardformer::runtime
