// Reads the job config (TOML, via toml++) into the structs of job_config.h. Every problem is a
// ConfigError "FILE:LINE:COLUMN: message"; the keys are documented in docs/config.md.
#include "job_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string_view>
#include <system_error>
#include <type_traits>

#include "shardformer/error.h"
#include "shardformer/strings.h"

namespace shardformer::host {
namespace {

using TokenLists = std::vector<std::vector<int64_t>>;
using Names = std::initializer_list<std::string_view>;

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMaxNewTokens = 1000000;
constexpr int64_t kMaxRanks = 1024;  // per parallel axis
constexpr size_t kMaxSuggestionEdits = 2;
constexpr std::array<std::string_view, 10> kSections = {"model",   "parallel", "pipeline", "shard",
                                                        "job",     "forward",  "generate", "embed",
                                                        "plugins", "log"};
const Names kSchedules = {"gpipe", "1f1b", "interleaved"};
const Names kDtypes = {"float32", "float16", "bfloat16", "float64"};
const Names kDevices = {"cpu", "cuda"};
const Names kUnusedActions = {"error", "warn"};
const Names kLogLevels = {"trace", "debug", "info", "warn", "error", "off"};
const Names kShardStyles = {"replicate", "column", "row", "vocab", "embedding_dim"};

// Where a config came from: its name in messages and the folder relative paths start from.
struct Source {
  std::string name;
  std::filesystem::path base_dir;
};

// Throws "NAME:LINE:COLUMN: what"; an unknown position (line 0) reads as 1:1.
[[noreturn]] void fail(const Source& source, const toml::source_position& at,
                       const std::string& what) {
  const bool known = at.line > 0;
  throw ConfigError(
      str(source.name, ":", known ? at.line : 1, ":", known ? at.column : 1, ": ", what));
}

std::string_view type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "nothing";
  }
}

template <typename T>
constexpr toml::node_type node_type_of() {
  if constexpr (std::is_same_v<T, toml::table>) return toml::node_type::table;
  if constexpr (std::is_same_v<T, toml::array>) return toml::node_type::array;
  if constexpr (std::is_same_v<T, std::string>) return toml::node_type::string;
  if constexpr (std::is_same_v<T, int64_t>) return toml::node_type::integer;
  if constexpr (std::is_same_v<T, bool>) return toml::node_type::boolean;
  return toml::node_type::none;
}

std::string with_article(std::string_view noun) {
  return str(std::string_view("aeiou").find(noun.front()) == std::string_view::npos ? "a " : "an ",
             noun);
}

// The node as a T (toml::table, toml::array or toml::value<T>), or a ConfigError at the node
// saying which type `label` must have. Every key and array element is fetched through here.
template <typename T>
const auto& typed(const Source& source, const toml::node& node, const std::string& label) {
  const auto* value = node.as<T>();
  if (value == nullptr) {
    fail(source, node.source().begin,
         str(label, " must be ", with_article(type_name(node_type_of<T>())), ", got ",
             type_name(node.type())));
  }
  return *value;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

// "; did you mean 'x'?" for the closest known name within kMaxSuggestionEdits, else the known
// names.
template <typename Range>
std::string suggestion(std::string_view name, const Range& known) {
  std::string_view best;
  size_t best_distance = kMaxSuggestionEdits + 1;
  for (std::string_view candidate : known) {
    const size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best.empty() ? str(" (known: ", join(known, ", "), ")")
                      : str("; did you mean '", best, "'?");
}

template <typename Range>
bool contains(const Range& names, std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

std::string range_text(int64_t min, int64_t max) {
  return max == kNoMax ? str(">= ", min) : str("in [", min, ", ", max, "]");
}

int64_t checked_integer(const Source& source, const toml::node& node, const std::string& label,
                        int64_t min, int64_t max) {
  const int64_t value = typed<int64_t>(source, node, label).get();
  if (value < min || value > max) {
    fail(source, node.source().begin,
         str(label, " must be ", range_text(min, max), ", got ", value));
  }
  return value;
}

std::string checked_choice(const Source& source, const toml::node& node, const std::string& label,
                           Names allowed) {
  const std::string& value = typed<std::string>(source, node, label).get();
  if (!contains(allowed, value)) {
    fail(source, node.source().begin,
         str(label, " must be one of \"", join(allowed, "\", \""), "\", got \"", value, "\""));
  }
  return value;
}

// A non-empty path string; relative paths are taken from the config's folder.
std::filesystem::path checked_path(const Source& source, const toml::node& node,
                                   const std::string& label) {
  const std::filesystem::path path = typed<std::string>(source, node, label).get();
  if (path.empty()) fail(source, node.source().begin, str(label, " must not be empty"));
  return (path.is_absolute() ? path : source.base_dir / path).lexically_normal();
}

std::vector<std::filesystem::path> checked_paths(const Source& source, const toml::node& node,
                                                 const std::string& label) {
  const auto& items = typed<toml::array>(source, node, label);
  std::vector<std::filesystem::path> paths;
  for (size_t i = 0; i < items.size(); ++i) {
    paths.push_back(checked_path(source, items[i], str(label, "[", i, "]")));
  }
  return paths;
}

// Non-empty array of non-empty arrays of token ids (integers >= 0).
TokenLists checked_token_lists(const Source& source, const toml::node& node,
                               const std::string& label) {
  const auto& rows = typed<toml::array>(source, node, label);
  if (rows.empty()) {
    fail(source, node.source().begin, str(label, " must hold at least one sequence"));
  }
  TokenLists lists;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string row_label = str(label, "[", i, "]");
    const auto& row = typed<toml::array>(source, rows[i], row_label);
    if (row.empty()) fail(source, rows[i].source().begin, str(row_label, " must not be empty"));
    auto& ids = lists.emplace_back();
    for (size_t j = 0; j < row.size(); ++j) {
      ids.push_back(checked_integer(source, row[j], str(row_label, "[", j, "]"), 0, kNoMax));
    }
  }
  return lists;
}

// Non-empty array of integers in [min, max].
std::vector<int64_t> checked_integers(const Source& source, const toml::node& node,
                                      const std::string& label, int64_t min, int64_t max) {
  const auto& items = typed<toml::array>(source, node, label);
  if (items.empty()) fail(source, node.source().begin, str(label, " must not be empty"));
  std::vector<int64_t> values;
  for (size_t i = 0; i < items.size(); ++i) {
    values.push_back(checked_integer(source, items[i], str(label, "[", i, "]"), min, max));
  }
  return values;
}

// One [section]: checked for unknown keys on construction, then read key by key. A missing
// section reads as an empty one.
class SectionReader {
 public:
  SectionReader(const Source& source, const toml::table& root, std::string_view name, Names keys)
      : source_(source), name_(name) {
    if (const toml::node* node = root.get(name)) table_ = &typed<toml::table>(source, *node, name_);
    check_keys(keys);
  }

  // Reads `table` itself (an element of an array of tables), called `name` in messages.
  static SectionReader for_table(const Source& source, const toml::table& table, std::string name,
                                 Names keys) {
    SectionReader reader(source, std::move(name));
    reader.table_ = &table;
    reader.check_keys(keys);
    return reader;
  }

  std::optional<bool> boolean(std::string_view key) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return typed<bool>(source_, node, label).get();
    });
  }
  std::optional<std::string> string(std::string_view key) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return typed<std::string>(source_, node, label).get();
    });
  }
  // An array of tables ([[section.key]] entries), each read with `keys`.
  std::vector<SectionReader> tables(std::string_view key, Names keys) const {
    std::vector<SectionReader> readers;
    read(key, [&](const toml::node& node, const std::string& label) {
      const auto& array = typed<toml::array>(source_, node, label);
      for (size_t i = 0; i < array.size(); ++i) {
        const std::string item = str(label, "[", i, "]");
        readers.push_back(
            for_table(source_, typed<toml::table>(source_, array[i], item), item, keys));
      }
      return 0;
    });
    return readers;
  }

  // Throws "what" at the key's value (the section's header when the key is absent).
  [[noreturn]] void fail_at(std::string_view key, const std::string& what) const {
    const toml::node* node = find(key);
    const toml::source_position at = node     ? node->source().begin
                                     : table_ ? table_->source().begin
                                              : toml::source_position{};
    fail(source_, at, str(label(key), ": ", what));
  }

  // Throws at the section (1:1 when it is missing) unless `key` is present.
  void require(std::string_view key, std::string_view why = {}) const {
    if (find(key) != nullptr) return;
    const toml::source_position at = table_ ? table_->source().begin : toml::source_position{};
    fail(source_, at, str("missing required key ", label(key), why.empty() ? "" : " ", why));
  }

  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return checked_integer(source_, node, label, min, max);
    });
  }
  std::optional<std::string> choice(std::string_view key, Names allowed) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return checked_choice(source_, node, label, allowed);
    });
  }
  std::optional<std::filesystem::path> path(std::string_view key) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return checked_path(source_, node, label);
    });
  }
  std::optional<std::vector<std::filesystem::path>> paths(std::string_view key) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return checked_paths(source_, node, label);
    });
  }
  std::optional<std::vector<int64_t>> integers(std::string_view key, int64_t min,
                                               int64_t max) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return checked_integers(source_, node, label, min, max);
    });
  }
  // A non-empty array of strings.
  std::optional<std::vector<std::string>> strings(std::string_view key) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      const auto& items = typed<toml::array>(source_, node, label);
      if (items.empty()) fail(source_, node.source().begin, str(label, " must not be empty"));
      std::vector<std::string> values;
      for (size_t i = 0; i < items.size(); ++i) {
        values.push_back(typed<std::string>(source_, items[i], str(label, "[", i, "]")).get());
      }
      return values;
    });
  }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  std::optional<TokenLists> token_lists(std::string_view key) const {
    return read(key, [&](const toml::node& node, const std::string& label) {
      return checked_token_lists(source_, node, label);
    });
  }

 private:
  SectionReader(const Source& source, std::string name) : source_(source), name_(std::move(name)) {}

  void check_keys(Names keys) const {
    if (table_ == nullptr) return;
    for (auto&& [key, node] : *table_) {
      if (!contains(keys, key.str())) {
        fail(source_, key.source().begin,
             str("unknown key '", key.str(), "' in [", name_, "]", suggestion(key.str(), keys)));
      }
    }
  }

  const toml::node* find(std::string_view key) const { return table_ ? table_->get(key) : nullptr; }
  std::string label(std::string_view key) const { return str(name_, ".", key); }

  // The value `check` makes of the key's node, or nullopt when the key is absent.
  template <typename Check>
  auto read(std::string_view key, Check check) const
      -> std::optional<std::invoke_result_t<Check, const toml::node&, const std::string&>> {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    return check(*node, label(key));
  }

  const Source& source_;
  std::string name_;
  const toml::table* table_ = nullptr;
};

toml::table parse_toml(const Source& source, const std::string& text) {
  try {
    return toml::parse(text, source.name);
  } catch (const toml::parse_error& error) {
    fail(source, error.source().begin, str("TOML syntax error: ", error.description()));
  }
}

// Top-level keys must be known sections; bare keys above the first header are errors too.
void check_sections(const Source& source, const toml::table& root) {
  for (auto&& [key, node] : root) {
    if (contains(kSections, key.str())) continue;
    fail(source, key.source().begin,
         node.is_table()
             ? str("unknown section [", key.str(), "]", suggestion(key.str(), kSections))
             : str("key '", key.str(), "' is outside any section; put it under a [section]"));
  }
}

// Every section's reader; building them reports unknown keys before any value is read.
struct Sections {
  SectionReader model, parallel, pipeline, shard, job, forward, generate, embed, plugins, log;
};

Sections open_sections(const Source& source, const toml::table& root) {
  return Sections{
      SectionReader(source, root, "model",
                    {"path", "dtype", "device", "unused_tensors", "unused_config_keys"}),
      SectionReader(source, root, "parallel", {"tp_size", "pp_size", "dp_size", "timeout_seconds"}),
      SectionReader(source, root, "pipeline",
                    {"schedule", "num_microbatches", "num_model_chunks", "layers_per_stage"}),
      SectionReader(source, root, "shard",
                    {"enable_tensor_parallelism", "make_vocab_size_divisible_by", "parallel_output",
                     "policy"}),
      SectionReader(source, root, "job", {"mode"}),
      SectionReader(source, root, "forward", {"input_ids", "output", "loss"}),
      SectionReader(source, root, "generate",
                    {"prompts", "max_new_tokens", "eos_token_id", "pad_token_id"}),
      SectionReader(source, root, "embed",
                    {"sentences", "sentences_file", "output", "batch_size", "max_length"}),
      SectionReader(source, root, "plugins", {"paths"}),
      SectionReader(source, root, "log", {"level"}),
  };
}

ModelSection read_model(const SectionReader& reader) {
  ModelSection model;
  model.path = reader.path("path").value_or(model.path);
  model.dtype = reader.choice("dtype", kDtypes).value_or(model.dtype);
  model.device = reader.choice("device", kDevices).value_or(model.device);
  model.unused_tensors =
      reader.choice("unused_tensors", kUnusedActions).value_or(model.unused_tensors);
  model.unused_config_keys =
      reader.choice("unused_config_keys", kUnusedActions).value_or(model.unused_config_keys);
  return model;
}

ParallelSection read_parallel(const SectionReader& reader) {
  ParallelSection parallel;
  parallel.tp_size = reader.integer("tp_size", 1, kMaxRanks).value_or(parallel.tp_size);
  parallel.pp_size = reader.integer("pp_size", 1, kNoMax).value_or(parallel.pp_size);
  parallel.dp_size = reader.integer("dp_size", 1, kNoMax).value_or(parallel.dp_size);
  parallel.timeout_seconds =
      reader.integer("timeout_seconds", 1, 86400).value_or(parallel.timeout_seconds);
  return parallel;
}

PipelineSection read_pipeline(const SectionReader& reader) {
  PipelineSection pipeline;
  pipeline.schedule = reader.choice("schedule", kSchedules).value_or(pipeline.schedule);
  pipeline.num_microbatches =
      reader.integer("num_microbatches", 1, 1 << 20).value_or(pipeline.num_microbatches);
  pipeline.num_model_chunks = reader.integer("num_model_chunks", 1, 64)
                                  .value_or(pipeline.schedule == "interleaved" ? 2 : 1);
  pipeline.layers_per_stage =
      reader.integers("layers_per_stage", 1, 1 << 20).value_or(pipeline.layers_per_stage);
  return pipeline;
}

ShardSection read_shard(const SectionReader& reader) {
  ShardSection shard;
  shard.enable_tensor_parallelism =
      reader.boolean("enable_tensor_parallelism").value_or(shard.enable_tensor_parallelism);
  shard.make_vocab_size_divisible_by = reader.integer("make_vocab_size_divisible_by", 1, 1 << 20)
                                           .value_or(shard.make_vocab_size_divisible_by);
  shard.parallel_output = reader.boolean("parallel_output").value_or(shard.parallel_output);
  for (const SectionReader& entry : reader.tables(
           "policy", {"module", "style", "fused_blocks", "gather_output", "input_is_parallel"})) {
    entry.require("module");
    entry.require("style");
    PolicyOverride rule;
    rule.module = entry.string("module").value_or("");
    rule.style = entry.choice("style", kShardStyles).value_or(rule.style);
    rule.fused_blocks = entry.integer("fused_blocks", 1, 64).value_or(rule.fused_blocks);
    rule.gather_output = entry.boolean("gather_output").value_or(rule.gather_output);
    rule.input_is_parallel = entry.boolean("input_is_parallel").value_or(rule.input_is_parallel);
    shard.policy.push_back(rule);
  }
  return shard;
}

// The mode named by job.mode; generate while it is absent (require_keys reports that).
JobMode read_mode(const SectionReader& reader) {
  const auto mode =
      reader.choice("mode", {job_mode_name(JobMode::kForward), job_mode_name(JobMode::kGenerate),
                             job_mode_name(JobMode::kEmbed)});
  for (const JobMode m : {JobMode::kForward, JobMode::kEmbed}) {
    if (mode == job_mode_name(m)) return m;
  }
  return JobMode::kGenerate;
}

ForwardSection read_forward(const SectionReader& reader) {
  ForwardSection forward;
  forward.input_ids = reader.token_lists("input_ids").value_or(forward.input_ids);
  forward.output = reader.path("output").value_or(forward.output);
  forward.loss = reader.boolean("loss").value_or(forward.loss);
  return forward;
}

GenerateSection read_generate(const SectionReader& reader) {
  GenerateSection generate;
  generate.prompts = reader.token_lists("prompts").value_or(generate.prompts);
  generate.max_new_tokens =
      reader.integer("max_new_tokens", 1, kMaxNewTokens).value_or(generate.max_new_tokens);
  generate.eos_token_id = reader.integer("eos_token_id", 0, kNoMax);
  generate.pad_token_id = reader.integer("pad_token_id", 0, kNoMax);
  return generate;
}

EmbedSection read_embed(const SectionReader& reader) {
  EmbedSection embed;
  embed.sentences = reader.strings("sentences").value_or(embed.sentences);
  embed.sentences_file = reader.path("sentences_file").value_or(embed.sentences_file);
  embed.output = reader.path("output").value_or(embed.output);
  embed.batch_size = reader.integer("batch_size", 1, 1 << 20).value_or(embed.batch_size);
  embed.max_length = reader.integer("max_length", 2, 1 << 20).value_or(embed.max_length);
  if (!embed.sentences.empty() && !embed.sentences_file.empty()) {
    reader.fail_at("sentences_file", "give either embed.sentences or embed.sentences_file");
  }
  return embed;
}

PluginsSection read_plugins(const SectionReader& reader) {
  PluginsSection plugins;
  plugins.paths = reader.paths("paths").value_or(plugins.paths);
  return plugins;
}

LogSection read_log(const SectionReader& reader) {
  LogSection log;
  log.level = reader.choice("level", kLogLevels).value_or(log.level);
  return log;
}

// [pipeline] keys that contradict each other or [parallel]: refused at the key, before any
// rank starts (the stage split against the model's layer count is checked once it is known).
void check_pipeline(const SectionReader& reader, const PipelineSection& p, int64_t pp_size) {
  const bool interleaved = p.schedule == "interleaved";
  if (!interleaved && p.num_model_chunks != 1) {
    reader.fail_at("num_model_chunks",
                   str(p.num_model_chunks, " model chunks per stage need ",
                       "schedule = \"interleaved\" (the schedule is \"", p.schedule, "\")"));
  }
  if (interleaved && p.num_model_chunks < 2) {
    reader.fail_at("num_model_chunks", "the interleaved schedule needs at least 2 model chunks");
  }
  if (interleaved && p.num_microbatches > 0 && p.num_microbatches % pp_size != 0) {
    reader.fail_at("num_microbatches",
                   str(p.num_microbatches, " is not a multiple of parallel.pp_size = ", pp_size,
                       " (the interleaved schedule sends micro-batches in groups of pp_size)"));
  }
  const auto pieces = static_cast<size_t>(pp_size * p.num_model_chunks);
  if (!p.layers_per_stage.empty() && p.layers_per_stage.size() != pieces) {
    reader.fail_at(
        "layers_per_stage",
        str("lists ", p.layers_per_stage.size(), " entries but the pipeline has ", pieces,
            " pieces (pp_size ", pp_size, " x num_model_chunks ", p.num_model_chunks, ")"));
  }
}

// Pipelines pair their messages by tag, which NCCL does not honour: refused before any rank
// starts.
void check_device(const SectionReader& reader, const ModelSection& model, int64_t pp_size) {
  if (model.device == "cuda" && pp_size > 1) {
    reader.fail_at("device", str("\"cuda\" with parallel.pp_size = ", pp_size,
                                 ": pipelines run on CPU ranks (Gloo) only in this version"));
  }
}

// Required keys are checked once every present value is known to be valid.
void require_keys(const Sections& sections, JobMode mode) {
  sections.model.require("path");
  sections.job.require("mode");
  const std::string why = str("(required when job.mode = \"", job_mode_name(mode), "\")");
  if (mode == JobMode::kForward) {
    sections.forward.require("input_ids", why);
    sections.forward.require("output", why);
  } else if (mode == JobMode::kEmbed) {
    sections.embed.require("output", why);
    if (!sections.embed.has("sentences")) sections.embed.require("sentences_file", why);
  } else {
    sections.generate.require("prompts", why);
  }
}

std::string unreadable_reason(const std::filesystem::path& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) return "it is a directory";
  return std::filesystem::exists(path, error) ? "it is not readable" : "no such file";
}

std::string read_text(const std::filesystem::path& path) {
  std::error_code error;
  std::ifstream in(path, std::ios::binary);
  const bool readable = in && !std::filesystem::is_directory(path, error);
  std::ostringstream text;
  if (readable) text << in.rdbuf();
  if (!readable || in.bad()) {
    throw ConfigError(
        str("cannot open config file '", path.string(), "': ", unreadable_reason(path)));
  }
  return text.str();
}

}  // namespace

JobConfig load_job_config(const std::filesystem::path& path) {
  return parse_job_config(read_text(path), path, path.parent_path());
}

JobConfig parse_job_config(const std::string& text, const std::filesystem::path& source,
                           const std::filesystem::path& base_dir) {
  const Source where{source.string(), base_dir};
  const toml::table root = parse_toml(where, text);
  check_sections(where, root);
  const Sections sections = open_sections(where, root);
  JobConfig config;
  config.source = source;
  config.model = read_model(sections.model);
  config.parallel = read_parallel(sections.parallel);
  config.pipeline = read_pipeline(sections.pipeline);
  check_pipeline(sections.pipeline, config.pipeline, config.parallel.pp_size);
  check_device(sections.model, config.model, config.parallel.pp_size);
  config.shard = read_shard(sections.shard);
  config.mode = read_mode(sections.job);
  config.forward = read_forward(sections.forward);
  config.generate = read_generate(sections.generate);
  config.embed = read_embed(sections.embed);
  config.plugins = read_plugins(sections.plugins);
  config.log = read_log(sections.log);
  require_keys(sections, config.mode);
  return config;
}

const char* job_mode_name(JobMode mode) {
  switch (mode) {
    case JobMode::kForward: return "forward";
    case JobMode::kGenerate: return "generate";
    case JobMode::kEmbed: return "embed";
  }
  return "unknown";
}

}  // namespace shardformer::host
