// Small string helpers shared by the SDK, host and plugins (no formatting library needed).
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace shardformer {

// Concatenates the stream representation of every argument: str("rank ", 3) == "rank 3".
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// Joins items with a separator: join({"a", "b"}, ", ") == "a, b".
template <typename Range>
std::string join(const Range& items, std::string_view separator) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << separator;
    out << item;
    first = false;
  }
  return out.str();
}

// "[2, 3, 4]" for a shape.
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace shardformer
