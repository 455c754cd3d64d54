// Logging facade over spdlog. Kept free of spdlog and fmt includes because the LibTorch
// wheel ships its own fmt; the implementation is compiled without any torch header.
#pragma once

#include <string>
#include <string_view>

namespace shardformer::log {

enum class Level { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Parses "trace", "debug", "info", "warn", "error", "off"; throws ConfigError otherwise.
Level parse_level(std::string_view name);

// Sets the rank shown in every line and the level. SPDLOG_LEVEL, when set, wins over `level`.
void init(int rank, Level level);
void set_level(Level level);
int rank();
// Whether a message of `level` would be written.
bool enabled(Level level);

void trace(std::string_view message);
void debug(std::string_view message);
void info(std::string_view message);
void warn(std::string_view message);
void error(std::string_view message);

}  // namespace shardformer::log
