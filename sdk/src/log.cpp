// spdlog behind the logging facade. Compiled without LibTorch on the include path so that
// Debian's spdlog sees Debian's fmt, not the copy shipped in the torch wheel.
#include "shardformer/log.h"

#include "shardformer/error.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

namespace shardformer::log {
namespace {

std::atomic<int> g_rank{0};

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

// The process-wide logger, writing to stderr so that stdout carries only job results.
spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto made = spdlog::stderr_color_mt("shardformer");
    made->set_pattern("[%H:%M:%S.%e] [rank 0] [%^%l%$] %v");
    if (const char* env = std::getenv("SPDLOG_LEVEL")) {
      made->set_level(spdlog::level::from_str(env));
    } else {
      made->set_level(spdlog::level::info);
    }
    return made;
  }();
  return *instance;
}

}  // namespace

Level parse_level(std::string_view name) {
  if (name == "trace") return Level::kTrace;
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn" || name == "warning") return Level::kWarn;
  if (name == "error") return Level::kError;
  if (name == "off") return Level::kOff;
  throw ConfigError("unknown log level '" + std::string(name) +
                    "' (expected trace, debug, info, warn, error or off)");
}

void init(int rank, Level level) {
  g_rank = rank;
  logger().set_pattern("[%H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
  set_level(level);
}

void set_level(Level level) {
  const char* env = std::getenv("SPDLOG_LEVEL");
  logger().set_level(env ? spdlog::level::from_str(env) : to_spdlog(level));
}

int rank() { return g_rank; }

bool enabled(Level level) { return level != Level::kOff && logger().should_log(to_spdlog(level)); }

void trace(std::string_view message) { logger().trace("{}", message); }
void debug(std::string_view message) { logger().debug("{}", message); }
void info(std::string_view message) { logger().info("{}", message); }
void warn(std::string_view message) { logger().warn("{}", message); }
void error(std::string_view message) { logger().error("{}", message); }

}  // namespace shardformer::log
