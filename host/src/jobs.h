// The jobs the host runs from a job config: forward and generate.
#pragma once

#include "job_config.h"
#include "plugin_registry.h"

#include <iosfwd>

namespace shardformer::host {

// Runs the job; results go to `out` (stdout), progress to the log. Throws shardformer::Error
// (or a subclass) on bad input or a failed job.
void run_job(const JobConfig& config, const PluginRegistry& registry, std::ostream& out);

}  // namespace shardformer::host
