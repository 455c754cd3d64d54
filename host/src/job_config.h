// The job config (TOML) read into typed structs. Unknown keys, wrong types and out-of-range
// values are ConfigErrors citing file, line and column. Documented in docs/config.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace shardformer::host {

struct ModelSection {
  std::filesystem::path
      path;  // checkpoint folder; relative paths are resolved against the config's folder
  std::string dtype = "float32";  // float32 | float16 | bfloat16 | float64
  std::string device = "cpu";     // cpu | cuda
  // A checkpoint tensor no module reads / a config.json key the model does not implement:
  // "error" stops the job (the default), "warn" logs it and runs.
  std::string unused_tensors = "error";
  std::string unused_config_keys = "error";
};

struct ParallelSection {
  int64_t tp_size = 1;
  int64_t pp_size = 1;
  int64_t dp_size = 1;
  int64_t timeout_seconds = 120;  // rendezvous and collective limit
};

// How a pipeline (pp_size > 1) splits the model and schedules micro-batches.
struct PipelineSection {
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved
  // Micro-batches per batch; 0: min(batch, pp_size) (interleaved: pp_size).
  int64_t num_microbatches = 0;
  int64_t num_model_chunks = 1;  // virtual stages per stage (interleaved: >= 2, default 2)
  // Layers of each piece in model order (pp_size x num_model_chunks entries); empty: an even
  // split with the remainder on the middle pieces.
  std::vector<int64_t> layers_per_stage;
};

// One [[shard.policy]] entry: overrides the plugin's rule for the modules it matches.
struct PolicyOverride {
  std::string module;               // dotted path pattern, "*" = one component
  std::string style = "replicate";  // replicate | column | row | vocab | embedding_dim
  int64_t fused_blocks = 1;
  bool gather_output = false;
  bool input_is_parallel = true;
};

// ColossalAI's ShardConfig keys that this version implements, and policy overrides.
struct ShardSection {
  bool enable_tensor_parallelism = true;
  int64_t make_vocab_size_divisible_by = 64;
  bool parallel_output = true;
  std::vector<PolicyOverride> policy;
};

enum class JobMode { kForward, kGenerate, kEmbed };

struct ForwardSection {
  std::vector<std::vector<int64_t>> input_ids;  // one token-id list per sequence (right-padded)
  std::filesystem::path output;                 // safetensors file written with the outputs
  bool loss = false;  // also the causal-LM loss of the batch (labels: the ids, padding ignored)
};

struct GenerateSection {
  std::vector<std::vector<int64_t>> prompts;  // one token-id list per sequence (left-padded)
  int64_t max_new_tokens = 20;
  std::optional<int64_t> eos_token_id;  // default: the checkpoint's config.json
  std::optional<int64_t> pad_token_id;  // default: the checkpoint's, else eos
};

// Sentence embeddings (sentence-transformers' pooling and normalisation from the model folder).
struct EmbedSection {
  std::vector<std::string> sentences;    // the texts, or:
  std::filesystem::path sentences_file;  // one text per line (blank lines skipped)
  std::filesystem::path output;          // safetensors file: "embeddings" [n, dim]
  int64_t batch_size = 32;
  int64_t max_length = 0;  // tokens per text incl. [CLS] / [SEP]; 0: the model folder's
};

struct PluginsSection {
  std::vector<std::filesystem::path>
      paths;  // searched before SHARDFORMER_PLUGIN_PATH and the default
};

struct LogSection {
  std::string level = "info";  // trace | debug | info | warn | error | off
};

struct JobConfig {
  std::filesystem::path source;  // the file read, or a name such as "<embedded>"
  ModelSection model;
  ParallelSection parallel;
  PipelineSection pipeline;
  ShardSection shard;
  JobMode mode = JobMode::kGenerate;
  ForwardSection forward;
  GenerateSection generate;
  EmbedSection embed;
  PluginsSection plugins;
  LogSection log;
};

// Reads and validates a job config file. Throws ConfigError "FILE:LINE:COLUMN: message".
JobConfig load_job_config(const std::filesystem::path& path);
// Same, from text; `source` names it in errors, and relative paths resolve against `base_dir`.
JobConfig parse_job_config(const std::string& text, const std::filesystem::path& source,
                           const std::filesystem::path& base_dir);

const char* job_mode_name(JobMode mode);

}  // namespace shardformer::host
