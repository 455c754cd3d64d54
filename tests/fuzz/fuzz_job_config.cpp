// Fuzz target: the job config (TOML) reader, parse_job_config (toml++ and every section's typed
// keys and cross-checks). ConfigError is the expected outcome for a bad config.
#include "job_config.h"

#include "shardformer/error.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardformer::host;
  try {
    const JobConfig config = parse_job_config(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz.toml", "/fuzz");
    // A config that is accepted holds values inside the documented ranges.
    check(!config.model.path.empty(), "model.path is set");
    check(config.parallel.tp_size >= 1 && config.parallel.pp_size >= 1 &&
              config.parallel.sp_size >= 1 && config.parallel.dp_size >= 1,
          "parallel sizes are positive");
    check(config.pipeline.num_model_chunks >= 1, "num_model_chunks is positive");
    check(job_mode_name(config.mode) != std::string("unknown"), "the mode is known");
  } catch (const shardformer::Error&) {
    // A malformed config: refused with an error naming the file, line and column.
  }
  return 0;
}
