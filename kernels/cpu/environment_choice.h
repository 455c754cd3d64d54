// An environment variable naming one of a few choices (SHARDFORMER_CPU_GEMM,
// SHARDFORMER_SKINNY_PREFETCH): read once by each choice, anything else refused by name.
#pragma once

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace shardformer::kernels {

// The variable's value, "" where it is unset or empty; a value not among `allowed` throws
// "NAME is 'value': use 'a', 'b' or 'c'".
inline std::string environment_choice(const char* name,
                                      std::initializer_list<const char*> allowed) {
  const char* env = std::getenv(name);
  const std::string value = env != nullptr ? env : "";
  if (value.empty() ||
      std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return value == a; })) {
    return value;
  }
  std::string options;
  size_t i = 0;
  for (const char* a : allowed) {
    options += std::string(i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + "'" + a + "'";
    ++i;
  }
  TORCH_CHECK(false, name, " is '", value, "': use ", options);
  return value;
}

}  // namespace shardformer::kernels
