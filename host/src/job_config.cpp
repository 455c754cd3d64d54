// Reads the job config (TOML, via toml++) into the structs of job_config.h. Every problem is a
// ConfigError "FILE:LINE:COLUMN: message"; the keys are documented in docs/config.md.
#include "job_config.h"

#include "config_reader.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>
#include <utility>

#include "shardformer/error.h"
#include "shardformer/strings.h"

namespace shardformer::host {
namespace {

using namespace config;

constexpr int64_t kMaxNewTokens = 1000000;
constexpr int64_t kMaxRanks = 1024;  // per parallel axis
// Ranks of a whole job: a rank number is an int (the launcher's WORLD_SIZE).
constexpr int64_t kMaxWorldSize = std::numeric_limits<int>::max();
const std::vector<std::string_view> kSections = {
    "model",    "parallel", "pipeline",   "shard",    "job",        "forward",
    "generate", "embed",    "transcribe", "classify", "segment",    "caption",
    "data",     "train",    "optimizer",  "plugins",  "checkpoint", "log"};
const Names kSchedules = {"gpipe", "1f1b", "interleaved"};
const Names kDtypes = {"float32", "float16", "bfloat16", "float64"};
const Names kDevices = {"cpu", "cuda"};
const Names kUnusedActions = {"error", "warn"};
const Names kLogLevels = {"trace", "debug", "info", "warn", "error", "off"};
const Names kShardStyles = {"replicate", "column", "row", "vocab", "embedding_dim"};
const Names kSequenceModes = {"split_gather", "all_to_all", "ring_attn"};

// Top-level keys must be known sections; bare keys above the first header are errors too.
void check_sections(const Source& source, const toml::table& root) {
  for (auto&& [key, node] : root) {
    if (std::find(kSections.begin(), kSections.end(), key.str()) != kSections.end()) continue;
    fail(source, key.source().begin,
         node.is_table()
             ? str("unknown section [", key.str(), "]", suggestion(key.str(), kSections))
             : str("key '", key.str(), "' is outside any section; put it under a [section]"));
  }
}

// Every section's reader; building them reports unknown keys before any value is read.
struct Sections {
  SectionReader model, parallel, pipeline, shard, job, forward, generate, embed, transcribe,
      classify, segment, caption, data, train, optimizer, checkpoint, plugins, log;
};

Sections open_sections(const Source& source, const toml::table& root) {
  return Sections{
      SectionReader(source, root, "model",
                    {"path", "dtype", "device", "unused_tensors", "unused_config_keys"}),
      SectionReader(source, root, "parallel",
                    {"tp_size", "pp_size", "sp_size", "dp_size", "timeout_seconds"}),
      SectionReader(source, root, "pipeline",
                    {"schedule", "num_microbatches", "num_model_chunks", "layers_per_stage"}),
      SectionReader(source, root, "shard",
                    {"enable_tensor_parallelism", "make_vocab_size_divisible_by", "parallel_output",
                     "enable_sequence_parallelism", "sequence_parallelism_mode",
                     "enable_sequence_overlap", "policy"}),
      SectionReader(source, root, "job", {"mode"}),
      SectionReader(source, root, "forward", {"input_ids", "output", "loss"}),
      SectionReader(source, root, "generate",
                    {"prompts", "prompt", "messages", "max_new_tokens", "eos_token_id",
                     "pad_token_id", "do_sample", "temperature", "top_k", "top_p", "min_p",
                     "repetition_penalty", "seed", "stop", "stream", "output"}),
      SectionReader(source, root, "embed",
                    {"sentences", "sentences_file", "output", "batch_size", "max_length"}),
      SectionReader(source, root, "transcribe", {"audio", "output", "language", "task"}),
      SectionReader(source, root, "classify", {"images", "top_k", "batch_size", "output"}),
      SectionReader(source, root, "segment",
                    {"images", "prompts", "multimask", "threshold", "output"}),
      SectionReader(source, root, "caption",
                    {"images", "prompt", "max_new_tokens", "batch_size", "output"}),
      SectionReader(source, root, "data",
                    {"path", "dtype", "seq_len", "seed", "shuffle", "eval_fraction",
                     "mlm_probability", "mask_token_id"}),
      SectionReader(source, root, "train",
                    {"steps", "global_batch_size", "micro_batch_size", "max_grad_norm",
                     "zero_stage", "log_every", "eval_every", "eval_batches", "metrics_file",
                     "precision", "initial_loss_scale", "loss_scale_window",
                     "gradient_checkpointing_ratio", "num_ckpt_layers_per_stage"}),
      SectionReader(source, root, "optimizer",
                    {"name", "lr", "betas", "eps", "weight_decay", "schedule", "warmup_steps"}),
      SectionReader(source, root, "checkpoint", {"dir", "save_every", "keep_last", "resume"}),
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
  parallel.sp_size = reader.integer("sp_size", 1, kMaxRanks).value_or(parallel.sp_size);
  parallel.dp_size = reader.integer("dp_size", 1, kNoMax).value_or(parallel.dp_size);
  parallel.timeout_seconds =
      reader.integer("timeout_seconds", 1, 86400).value_or(parallel.timeout_seconds);
  return parallel;
}

// tp_size x pp_size x sp_size x dp_size ranks, refused at the key that makes them more than a
// job can have (pp_size and dp_size have no bound of their own): no product of the sizes, such
// as pp_size x num_model_chunks or the world size, can then overflow.
void check_world_size(const SectionReader& reader, const ParallelSection& p) {
  int64_t ranks = p.tp_size * p.sp_size;  // each at most kMaxRanks
  for (const auto& [key, size] : {std::pair{"pp_size", p.pp_size}, {"dp_size", p.dp_size}}) {
    if (__builtin_mul_overflow(ranks, size, &ranks) || ranks > kMaxWorldSize) {
      reader.fail_at(key, str("tp_size x pp_size x sp_size x dp_size = ", p.tp_size, " x ",
                              p.pp_size, " x ", p.sp_size, " x ", p.dp_size,
                              " ranks is more than a job can have (", kMaxWorldSize, ")"));
    }
  }
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
  shard.enable_sequence_parallelism =
      reader.boolean("enable_sequence_parallelism").value_or(shard.enable_sequence_parallelism);
  shard.sequence_parallelism_mode = reader.choice("sequence_parallelism_mode", kSequenceModes)
                                        .value_or(shard.sequence_parallelism_mode);
  shard.enable_sequence_overlap =
      reader.boolean("enable_sequence_overlap").value_or(shard.enable_sequence_overlap);
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
                             job_mode_name(JobMode::kEmbed), job_mode_name(JobMode::kTrain),
                             job_mode_name(JobMode::kTranscribe), job_mode_name(JobMode::kClassify),
                             job_mode_name(JobMode::kSegment), job_mode_name(JobMode::kCaption)});
  for (const JobMode m : {JobMode::kForward, JobMode::kEmbed, JobMode::kTrain, JobMode::kTranscribe,
                          JobMode::kClassify, JobMode::kSegment, JobMode::kCaption}) {
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
  const int inputs = reader.has("prompts") + reader.has("prompt") + reader.has("messages");
  if (inputs > 1) {
    reader.fail_at(reader.has("prompt") ? "prompt" : "messages",
                   "give one of generate.prompts, generate.prompt and generate.messages");
  }
  if (reader.holds_strings("prompts")) {
    generate.texts = reader.strings("prompts").value_or(generate.texts);
  } else {
    generate.prompts = reader.token_lists("prompts").value_or(generate.prompts);
  }
  if (auto prompt = reader.string("prompt")) generate.texts = {*prompt};
  for (const SectionReader& message : reader.tables("messages", {"role", "content"})) {
    message.require("role");
    message.require("content");
    generate.messages.push_back({*message.string("role"), *message.string("content")});
  }
  if (reader.has("messages") && generate.messages.empty()) {
    reader.fail_at("messages", "must hold at least one message");
  }
  generate.do_sample = reader.boolean("do_sample");
  generate.temperature = reader.number("temperature", 1e-6, 1e6);
  generate.top_k = reader.integer("top_k", 0, kNoMax);
  generate.top_p = reader.number("top_p", 0.0, 1.0);
  generate.min_p = reader.number("min_p", 0.0, 1.0);
  generate.repetition_penalty = reader.number("repetition_penalty", 1e-6, 1e6);
  generate.seed = reader.integer("seed", 0, kNoMax).value_or(generate.seed);
  generate.stop = reader.strings("stop").value_or(generate.stop);
  generate.stream = reader.boolean("stream").value_or(generate.stream);
  generate.output = reader.path("output").value_or(generate.output);
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

TranscribeSection read_transcribe(const SectionReader& reader) {
  TranscribeSection transcribe;
  transcribe.audio = reader.paths("audio").value_or(transcribe.audio);
  if (reader.has("audio") && transcribe.audio.empty()) {
    reader.fail_at("audio", "must name at least one audio file");
  }
  transcribe.output = reader.path("output").value_or(transcribe.output);
  transcribe.language = reader.string("language");
  transcribe.task = reader.choice("task", {"transcribe", "translate"});
  return transcribe;
}

CaptionSection read_caption(const SectionReader& reader) {
  CaptionSection caption;
  caption.images = reader.paths("images").value_or(caption.images);
  if (reader.has("images") && caption.images.empty()) {
    reader.fail_at("images", "must name at least one image");
  }
  caption.prompt = reader.string("prompt").value_or(caption.prompt);
  caption.max_new_tokens =
      reader.integer("max_new_tokens", 1, kMaxNewTokens).value_or(caption.max_new_tokens);
  caption.batch_size = reader.integer("batch_size", 1, 4096).value_or(caption.batch_size);
  caption.output = reader.path("output").value_or(caption.output);
  return caption;
}

SegmentSection read_segment(const SectionReader& reader) {
  SegmentSection segment;
  segment.images = reader.paths("images").value_or(segment.images);
  if (reader.has("images") && segment.images.empty()) {
    reader.fail_at("images", "must name at least one image");
  }
  constexpr double kMaxCoordinate = 1e6;
  for (const SectionReader& entry :
       reader.tables("prompts", {"image", "points", "labels", "box"})) {
    SegmentPrompt prompt;
    prompt.image = entry.integer("image", 0, 1 << 20).value_or(0);
    if (prompt.image >= static_cast<int64_t>(segment.images.size())) {
      entry.fail_at("image", str("is image ", prompt.image, " of segment.images, which holds ",
                                 segment.images.size()));
    }
    prompt.points = entry.number_pairs("points", 0, kMaxCoordinate).value_or(prompt.points);
    prompt.labels =
        entry.integers("labels", 0, 1).value_or(std::vector<int64_t>(prompt.points.size(), 1));
    if (prompt.labels.size() != prompt.points.size()) {
      entry.fail_at("labels", str("holds ", prompt.labels.size(), " labels for ",
                                  prompt.points.size(), " points"));
    }
    if (const auto box = entry.numbers("box", 4, 0, kMaxCoordinate)) {
      if ((*box)[2] < (*box)[0] || (*box)[3] < (*box)[1]) {
        entry.fail_at("box", "must be [x1, y1, x2, y2] with x1 <= x2 and y1 <= y2");
      }
      prompt.box = std::array<double, 4>{(*box)[0], (*box)[1], (*box)[2], (*box)[3]};
    }
    if (prompt.points.empty() && !prompt.box) {
      entry.fail_at("points", "a prompt needs points, a box or both");
    }
    segment.prompts.push_back(std::move(prompt));
  }
  segment.multimask = reader.boolean("multimask").value_or(segment.multimask);
  segment.threshold = reader.number("threshold", -1e6, 1e6).value_or(segment.threshold);
  segment.output = reader.path("output").value_or(segment.output);
  return segment;
}

ClassifySection read_classify(const SectionReader& reader) {
  ClassifySection classify;
  classify.images = reader.paths("images").value_or(classify.images);
  if (reader.has("images") && classify.images.empty()) {
    reader.fail_at("images", "must name at least one image file");
  }
  classify.top_k = reader.integer("top_k", 1, 1 << 20).value_or(classify.top_k);
  classify.batch_size = reader.integer("batch_size", 1, 1 << 16).value_or(classify.batch_size);
  classify.output = reader.path("output").value_or(classify.output);
  return classify;
}

DataSection read_data(const SectionReader& reader) {
  DataSection data;
  data.path = reader.path("path").value_or(data.path);
  data.dtype = reader.choice("dtype", {"uint16", "uint32"}).value_or(data.dtype);
  data.seq_len = reader.integer("seq_len", 2, 1 << 24).value_or(data.seq_len);
  data.seed = reader.integer("seed", 0, kNoMax).value_or(data.seed);
  data.shuffle = reader.boolean("shuffle").value_or(data.shuffle);
  data.eval_fraction = reader.number("eval_fraction", 0.0, 0.9).value_or(data.eval_fraction);
  data.mlm_probability = reader.number("mlm_probability", 0.0, 0.99).value_or(data.mlm_probability);
  data.mask_token_id = reader.integer("mask_token_id", 0, kNoMax).value_or(data.mask_token_id);
  if (data.mlm_probability > 0.0 && data.mask_token_id < 0) {
    reader.fail_at("mlm_probability", "masked-LM data needs data.mask_token_id (the [MASK] id)");
  }
  return data;
}

TrainSection read_train(const SectionReader& reader) {
  TrainSection train;
  train.steps = reader.integer("steps", 1, kNoMax).value_or(train.steps);
  train.global_batch_size =
      reader.integer("global_batch_size", 1, 1 << 24).value_or(train.global_batch_size);
  train.micro_batch_size =
      reader.integer("micro_batch_size", 1, 1 << 24).value_or(train.micro_batch_size);
  train.max_grad_norm = reader.number("max_grad_norm", 0.0, 1e30).value_or(train.max_grad_norm);
  train.zero_stage = reader.integer("zero_stage", 0, 1).value_or(train.zero_stage);
  train.log_every = reader.integer("log_every", 1, kNoMax).value_or(train.log_every);
  train.eval_every = reader.integer("eval_every", 0, kNoMax).value_or(train.eval_every);
  train.eval_batches = reader.integer("eval_batches", 1, 1 << 20).value_or(train.eval_batches);
  train.metrics_file = reader.path("metrics_file").value_or(train.metrics_file);
  train.precision = reader.choice("precision", {"fp32", "bf16", "fp16"}).value_or(train.precision);
  train.initial_loss_scale =
      reader.number("initial_loss_scale", 1.0, 1e30).value_or(train.initial_loss_scale);
  train.loss_scale_window =
      reader.integer("loss_scale_window", 1, kNoMax).value_or(train.loss_scale_window);
  train.gradient_checkpointing_ratio = reader.number("gradient_checkpointing_ratio", 0.0, 1.0)
                                           .value_or(train.gradient_checkpointing_ratio);
  train.num_ckpt_layers_per_stage = reader.integers("num_ckpt_layers_per_stage", 0, 1 << 20)
                                        .value_or(train.num_ckpt_layers_per_stage);
  if (!train.num_ckpt_layers_per_stage.empty() && reader.has("gradient_checkpointing_ratio")) {
    reader.fail_at("num_ckpt_layers_per_stage",
                   "give gradient_checkpointing_ratio or num_ckpt_layers_per_stage, not both");
  }
  return train;
}

OptimizerSection read_optimizer(const SectionReader& reader) {
  OptimizerSection o;
  o.name = reader.choice("name", {"adamw"}).value_or(o.name);
  o.lr = reader.number("lr", 0.0, 1e3).value_or(o.lr);
  o.betas = reader.numbers("betas", 2, 0.0, 0.999999999).value_or(o.betas);
  o.eps = reader.number("eps", 0.0, 1.0).value_or(o.eps);
  o.weight_decay = reader.number("weight_decay", 0.0, 1e3).value_or(o.weight_decay);
  o.schedule = reader.choice("schedule", {"constant", "linear", "cosine"}).value_or(o.schedule);
  o.warmup_steps = reader.integer("warmup_steps", 0, kNoMax).value_or(o.warmup_steps);
  return o;
}

CheckpointSection read_checkpoint(const SectionReader& reader) {
  CheckpointSection c;
  c.dir = reader.path("dir").value_or(c.dir);
  c.save_every = reader.integer("save_every", 0, kNoMax).value_or(c.save_every);
  c.keep_last = reader.integer("keep_last", 0, kNoMax).value_or(c.keep_last);
  if (const auto resume = reader.string("resume")) {
    c.resume = *resume == "auto" || *resume == "never" ? *resume : reader.path("resume")->string();
  }
  if (c.dir.empty() && (c.save_every > 0 || c.keep_last > 0)) {
    reader.fail_at(c.save_every > 0 ? "save_every" : "keep_last",
                   "saves need checkpoint.dir, the folder they go to");
  }
  return c;
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

// Sequence-parallel keys against the layout: refused at the key, before any rank starts.
void check_sequence(const Sections& sections, const JobConfig& config) {
  const ShardSection& s = config.shard;
  const ParallelSection& p = config.parallel;
  const SectionReader& shard = sections.shard;
  if (!s.enable_sequence_parallelism) {
    for (const char* key : {"sequence_parallelism_mode", "enable_sequence_overlap"}) {
      if (shard.has(key)) shard.fail_at(key, "needs enable_sequence_parallelism = true");
    }
    if (p.sp_size > 1) {
      sections.parallel.fail_at("sp_size", str(p.sp_size, " sequence-parallel ranks need ",
                                               "shard.enable_sequence_parallelism = true"));
    }
    return;
  }
  const bool split_gather = s.sequence_parallelism_mode == "split_gather";
  if (split_gather && (p.tp_size < 2 || !s.enable_tensor_parallelism)) {
    shard.fail_at("enable_sequence_parallelism",
                  "split_gather splits the sequence over the tensor-parallel ranks: it needs "
                  "parallel.tp_size > 1 and enable_tensor_parallelism = true (all_to_all and "
                  "ring_attn split it over parallel.sp_size)");
  }
  if (split_gather && p.sp_size > 1) {
    sections.parallel.fail_at("sp_size", str(p.sp_size, ": split_gather uses the tp ranks; ",
                                             "sp_size is for all_to_all and ring_attn"));
  }
  if (!split_gather && p.sp_size < 2) {
    shard.fail_at("sequence_parallelism_mode",
                  str("\"", s.sequence_parallelism_mode,
                      "\" splits the sequence over parallel.sp_size ranks: set sp_size > 1"));
  }
  if (!split_gather && s.enable_sequence_overlap) {
    shard.fail_at("enable_sequence_overlap", "applies to split_gather only");
  }
  if (config.mode != JobMode::kForward && config.mode != JobMode::kTrain) {
    shard.fail_at(
        "enable_sequence_parallelism",
        str("runs forward and train jobs; ", job_mode_name(config.mode), " jobs run without it"));
  }
}

// Training keys that contradict each other or the layout: refused at the key.
void check_training(const Sections& sections, const JobConfig& config) {
  const int64_t dp = config.parallel.dp_size;
  if (config.mode != JobMode::kTrain) {
    if (dp > 1) {
      sections.parallel.fail_at("dp_size", str(dp,
                                               ": data parallelism serves job.mode = \"train\""
                                               " (other jobs run one replica)"));
    }
    return;
  }
  const TrainSection& t = config.train;
  if (config.model.dtype != "float32") {
    sections.model.fail_at("dtype",
                           str("\"", config.model.dtype,
                               "\": a train job loads the model "
                               "in float32 (its master weights); train.precision = \"bf16\""
                               " or \"fp16\" computes in half precision"));
  }
  if (t.global_batch_size % dp != 0) {
    sections.train.fail_at(
        "global_batch_size",
        str(t.global_batch_size, " does not divide over parallel.dp_size = ", dp));
  }
  if (t.micro_batch_size > 0 && (t.global_batch_size / dp) % t.micro_batch_size != 0) {
    sections.train.fail_at(
        "micro_batch_size",
        str(t.micro_batch_size, " does not divide a data-parallel rank's share of ",
            t.global_batch_size / dp, " samples"));
  }
  if (t.micro_batch_size > 0 && config.parallel.pp_size > 1) {
    sections.train.fail_at("micro_batch_size",
                           "pipelines split the batch into pipeline.num_microbatches instead");
  }
  const auto pieces =
      static_cast<size_t>(config.parallel.pp_size * config.pipeline.num_model_chunks);
  if (!t.num_ckpt_layers_per_stage.empty() && t.num_ckpt_layers_per_stage.size() != pieces) {
    sections.train.fail_at(
        "num_ckpt_layers_per_stage",
        str("lists ", t.num_ckpt_layers_per_stage.size(), " counts but the pipeline has ", pieces,
            " pieces (pp_size ", config.parallel.pp_size, " x num_model_chunks ",
            config.pipeline.num_model_chunks, ")"));
  }
  if (t.zero_stage > 0 && dp == 1) {
    sections.train.fail_at("zero_stage", "ZeRO shards optimizer states over dp_size > 1 ranks");
  }
  if (t.eval_every > 0 && config.data.eval_fraction == 0.0) {
    sections.train.fail_at("eval_every", "evaluation needs held-out samples (data.eval_fraction)");
  }
  if (config.optimizer.warmup_steps > t.steps) {
    sections.optimizer.fail_at(
        "warmup_steps", str(config.optimizer.warmup_steps, " exceeds train.steps = ", t.steps));
  }
}

// Required keys are checked once every present value is known to be valid.
void require_keys(const Sections& sections, const JobConfig& config) {
  const JobMode mode = config.mode;
  sections.model.require("path");
  sections.job.require("mode");
  const std::string why = str("(required when job.mode = \"", job_mode_name(mode), "\")");
  if (mode == JobMode::kForward) {
    sections.forward.require("input_ids", why);
    sections.forward.require("output", why);
  } else if (mode == JobMode::kEmbed) {
    sections.embed.require("output", why);
    if (!sections.embed.has("sentences")) sections.embed.require("sentences_file", why);
  } else if (mode == JobMode::kTranscribe) {
    sections.transcribe.require("audio", why);
  } else if (mode == JobMode::kClassify) {
    sections.classify.require("images", why);
  } else if (mode == JobMode::kSegment) {
    sections.segment.require("images", why);
    sections.segment.require("prompts", why);
    sections.segment.require("output", why);
  } else if (mode == JobMode::kCaption) {
    sections.caption.require("images", why);
  } else if (mode == JobMode::kTrain) {
    sections.data.require("path", why);
    // A .bin file is cut into samples of seq_len; JSON lines of ids need it (the data reader
    // says so), image lines and class folders do not.
    std::error_code error;
    const std::filesystem::path& data = config.data.path;
    if (data.extension() != ".jsonl" && !std::filesystem::is_directory(data, error)) {
      sections.data.require("seq_len", why);
    }
    sections.train.require("steps", why);
  } else if (!sections.generate.has("prompt") && !sections.generate.has("messages")) {
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
  check_world_size(sections.parallel, config.parallel);
  config.pipeline = read_pipeline(sections.pipeline);
  check_pipeline(sections.pipeline, config.pipeline, config.parallel.pp_size);
  config.shard = read_shard(sections.shard);
  config.mode = read_mode(sections.job);
  config.forward = read_forward(sections.forward);
  config.generate = read_generate(sections.generate);
  config.embed = read_embed(sections.embed);
  config.transcribe = read_transcribe(sections.transcribe);
  config.classify = read_classify(sections.classify);
  config.segment = read_segment(sections.segment);
  config.caption = read_caption(sections.caption);
  config.data = read_data(sections.data);
  config.train = read_train(sections.train);
  config.optimizer = read_optimizer(sections.optimizer);
  config.checkpoint = read_checkpoint(sections.checkpoint);
  check_sequence(sections, config);
  check_training(sections, config);
  config.plugins = read_plugins(sections.plugins);
  config.log = read_log(sections.log);
  require_keys(sections, config);
  return config;
}

const char* job_mode_name(JobMode mode) {
  switch (mode) {
    case JobMode::kForward: return "forward";
    case JobMode::kGenerate: return "generate";
    case JobMode::kEmbed: return "embed";
    case JobMode::kTrain: return "train";
    case JobMode::kTranscribe: return "transcribe";
    case JobMode::kClassify: return "classify";
    case JobMode::kSegment: return "segment";
    case JobMode::kCaption: return "caption";
  }
  return "unknown";
}

}  // namespace shardformer::host
