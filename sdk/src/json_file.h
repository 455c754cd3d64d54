// Internal helpers for the SDK's JSON files (config.json, safetensors headers, shard
// indexes): parse errors become CheckpointError naming the file, line and column.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace shardformer::detail {

// Deepest nesting of arrays and objects accepted (config.json, headers and indexes use a few).
inline constexpr size_t kMaxJsonDepth = 128;

// Parses `text`, read from `source`. Throws CheckpointError naming `source` with the line and
// column of a syntax error or of nesting deeper than kMaxJsonDepth. `callback` is nlohmann's
// parser callback (may be empty).
nlohmann::json parse_json_text(std::string_view text, const std::filesystem::path& source,
                               const nlohmann::json::parser_callback_t& callback = nullptr);

// Reads and parses a JSON file; throws CheckpointError for a missing or unreadable file.
nlohmann::json read_json_file(const std::filesystem::path& path);

// "a string \"x\"", "a floating-point number 1.5", ...: what a value is, for messages.
std::string describe_json(const nlohmann::json& value);

// json[key] as an integer; throws CheckpointError naming `file` and `key` when it is not one.
int64_t json_integer(const nlohmann::json& json, const std::filesystem::path& file,
                     const std::string& key);

}  // namespace shardformer::detail
