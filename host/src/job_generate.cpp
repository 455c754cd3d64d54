// The generate job: greedy generation with a KV cache from token-id prompts; rank 0 prints the
// new tokens of every prompt.
#include "job_modes.h"

#include "shardformer/log.h"
#include "shardformer/strings.h"

#include <algorithm>

namespace shardformer::host {

void run_generate(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const GenerateSection& g = config.generate;
  const GenerationConfig generation =
      session.generation_config(g.max_new_tokens, g.eos_token_id, g.pad_token_id);
  const auto start = std::chrono::steady_clock::now();
  const GenerationResult result = session.generate(g.prompts, generation);
  const double elapsed = seconds_since(start);
  int64_t produced = 0;
  for (size_t i = 0; i < result.new_tokens.size(); ++i) {
    if (writer) out << "generated[" << i << "]: " << join(result.new_tokens[i], " ") << "\n";
    produced += static_cast<int64_t>(result.new_tokens[i].size());
  }
  log::info(str("generate: ", produced, " tokens for ", g.prompts.size(), " prompts in ", elapsed,
                " s (", produced / std::max(elapsed, 1e-9), " tokens/s)"));
}

}  // namespace shardformer::host
