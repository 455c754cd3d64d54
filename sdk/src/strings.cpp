// String helpers of the SDK that need a definition out of line.
#include "shardformer/strings.h"

namespace shardformer {

std::string shape_str(const std::vector<int64_t>& shape) {
  return str("[", join(shape, ", "), "]");
}

}  // namespace shardformer
