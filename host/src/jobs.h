// The jobs the host runs from a job config: forward and generate.
#pragma once

#include "job_config.h"
#include "launcher.h"
#include "plugin_registry.h"

#include "shardformer/vision/image.h"

#include <iosfwd>
#include <optional>
#include <vector>

namespace shardformer::host {

// The number of ranks the job needs (tp x pp x dp). Throws ConfigError for layouts this
// version cannot run, before any rank is started.
int64_t job_world_size(const JobConfig& config);

// Allocator settings around loading: while loading, every large block is mapped and returned to
// the system when freed (the tensor-parallel RSS bound); once the model is built, activations
// reuse freed heap blocks. Both are process-wide (glibc mallopt).
void keep_large_blocks_out_of_the_heap();
void reuse_freed_blocks_for_activations();

// The job's input files, read before any model is built (check_job_inputs).
struct JobInputs {
  std::optional<std::vector<vision::Image>> images;  // classify, segment or caption.images, decoded
  double decode_seconds = 0;
};

struct RunOptions {
  // Runs the job this many times in the same processes (one mesh, a new session each time),
  // logging open files, sockets, mappings and RSS after each: a check for leaks.
  int64_t repeat = 1;
  // Inputs the process has read already (a single-process job: check_job_inputs' result), so
  // that they are not read twice; null: each rank reads its own.
  const JobInputs* inputs = nullptr;
};

// Reads the job's input files that can be checked without a model (classify's and segment's
// images): a bad
// one fails the job with a ConfigError naming its key and file before any rank starts.
JobInputs check_job_inputs(const JobConfig& config);

// Runs this rank's part of the job (rank_env: null for a single process). Rank 0 writes the
// results to `out` (stdout); progress goes to the log. Throws shardformer::Error (or a
// subclass) on bad input or a failed job. Multi-rank jobs first check that every rank runs the
// same job config, host and plugin versions (ConfigError naming the ranks that differ).
void run_job(const JobConfig& config, const PluginRegistry& registry,
             const std::optional<RankEnv>& rank_env, std::ostream& out, const RunOptions& run = {});

}  // namespace shardformer::host
