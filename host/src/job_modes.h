// The modes of a job, one file each (job_forward.cpp, job_generate.cpp, job_embed.cpp): each
// runs on every rank of the job's session; `writer` is the one rank that writes the results to
// `out` and the output files.
#pragma once

#include "job_config.h"

#include "shardformer/runtime/session.h"

#include <chrono>
#include <ostream>

namespace shardformer::host {

void run_forward(const JobConfig& config, Session& session, bool writer, std::ostream& out);
void run_generate(const JobConfig& config, Session& session, bool writer, std::ostream& out);
void run_embed(const JobConfig& config, Session& session, bool writer, std::ostream& out);

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace shardformer::host
