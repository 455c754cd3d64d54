// The generate job: greedy generation with a KV cache from token-id prompts; rank 0 prints the
// new tokens of every prompt.
#include "job_modes.h"

#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"

#include <algorithm>

namespace shardformer::host {
namespace {

// The prompts, lengths and special token ids must fit the model: a value from the job config
// fails naming its key, one from the checkpoint's config.json naming that file.
void check_generate_inputs(const JobConfig& config, const Session& session,
                           const GenerationConfig& generation) {
  const GenerateSection& g = config.generate;
  const ModelShape shape = session.model().shape();
  check_token_ids(config, g.prompts, "generate.prompts", shape.vocab_size);
  const size_t longest = longest_sequence(g.prompts);
  const auto length = static_cast<int64_t>(g.prompts[longest].size());
  if (shape.max_positions > 0 && length + g.max_new_tokens > shape.max_positions) {
    throw ConfigError(str(config.source.string(), ": generate.max_new_tokens: generate.prompts[",
                          longest, "] (", length, " tokens) + max_new_tokens (", g.max_new_tokens,
                          ") = ", length + g.max_new_tokens, " exceeds the model's ",
                          shape.max_positions, " positions"));
  }
  const auto check_id = [&](const char* name, int64_t id, bool from_job_config) {
    if (id >= 0 && id < shape.vocab_size) return;
    const std::string outside =
        str(" = ", id, " is outside the model's vocabulary [0, ", shape.vocab_size, ")");
    if (from_job_config) {
      throw ConfigError(str(config.source.string(), ": generate.", name, outside));
    }
    throw CheckpointError(str(session.checkpoint().config().path().string(), ": ", name, outside,
                              " (set generate.", name, " in the job config to override it)"));
  };
  if (generation.eos_token_id) {
    check_id("eos_token_id", *generation.eos_token_id, g.eos_token_id.has_value());
  }
  check_id("pad_token_id", generation.pad_token_id, g.pad_token_id.has_value());
}

}  // namespace

void run_generate(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const GenerateSection& g = config.generate;
  const GenerationConfig generation =
      session.generation_config(g.max_new_tokens, g.eos_token_id, g.pad_token_id);
  check_generate_inputs(config, session, generation);
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
