// The CPU product choice (runtime/cpu_products.h), checked up front so that a bad
// SHARDFORMER_CPU_GEMM stops a job at its start, whatever sizes its products have.
#include "shardformer/runtime/cpu_products.h"

#include "shardformer/error.h"
#include "shardformer/kernels/cpu_kernels.h"

#include <c10/util/Exception.h>

namespace shardformer::runtime {

std::string cpu_products() {
  bool packed = false;
  try {
    packed = kernels::gemm_enabled();
  } catch (const c10::Error& e) {
    throw ConfigError(e.what_without_backtrace());
  }
  return (packed ? "packed GEMM (" : "ATen's GEMM (") + kernels::capability() + " kernels)";
}

}  // namespace shardformer::runtime
