// The job config (TOML) read into typed structs. Unknown keys, wrong types and out-of-range
// values are ConfigErrors citing file, line and column. Documented in docs/config.md.
#pragma once

#include <array>
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
  int64_t sp_size = 1;  // the sequence axis of all_to_all and ring_attn
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
  bool enable_sequence_parallelism = false;
  std::string sequence_parallelism_mode = "split_gather";  // all_to_all, ring_attn
  bool enable_sequence_overlap = false;
  std::vector<PolicyOverride> policy;
};

enum class JobMode {
  kForward,
  kGenerate,
  kEmbed,
  kTrain,
  kTranscribe,
  kClassify,
  kSegment,
  kCaption
};

struct ForwardSection {
  std::vector<std::vector<int64_t>> input_ids;  // one token-id list per sequence (right-padded)
  std::filesystem::path output;                 // safetensors file written with the outputs
  bool loss = false;  // also the causal-LM loss of the batch (labels: the ids, padding ignored)
};

// One turn of a conversation given to the model's chat template.
struct ChatMessage {
  std::string role;
  std::string content;
};

// Exactly one of prompts (ids), texts and messages holds the input.
struct GenerateSection {
  std::vector<std::vector<int64_t>> prompts;  // one token-id list per sequence (left-padded)
  std::vector<std::string> texts;             // prompts as text, tokenized with the folder's
  std::vector<ChatMessage> messages;          // one conversation, rendered by its template
  int64_t max_new_tokens = 20;
  std::optional<int64_t> eos_token_id;  // default: the checkpoint's config.json
  std::optional<int64_t> pad_token_id;  // default: the checkpoint's, else eos
  // Sampling: each default comes from generation_config.json, else HF's default.
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  int64_t seed = 0;
  std::vector<std::string> stop;  // a row ends once its text holds one of these
  bool stream = true;             // print text as it is decoded (one prompt or conversation)
  std::filesystem::path output;   // JSON lines: per prompt its text and ids (optional)
};

// Sentence embeddings (sentence-transformers' pooling and normalisation from the model folder).
struct EmbedSection {
  std::vector<std::string> sentences;    // the texts, or:
  std::filesystem::path sentences_file;  // one text per line (blank lines skipped)
  std::filesystem::path output;          // safetensors file: "embeddings" [n, dim]
  int64_t batch_size = 32;
  int64_t max_length = 0;  // tokens per text incl. [CLS] / [SEP]; 0: the model folder's
};

// Speech to text (job.mode = "transcribe") with a Whisper model.
struct TranscribeSection {
  std::vector<std::filesystem::path> audio;  // files libsndfile reads (WAV, FLAC, Ogg, MP3, ...)
  std::filesystem::path output;              // JSON lines: per file its text, ids and segments
  std::optional<std::string> language;       // multilingual models: "en" or "<|en|>"
  std::optional<std::string> task;           // multilingual models: transcribe | translate
};

// Image classification (job.mode = "classify") with a ...ForImageClassification model and the
// folder's image processor.
struct ClassifySection {
  std::vector<std::filesystem::path> images;  // JPEG or PNG files
  int64_t top_k = 5;                          // labels printed and written per image
  int64_t batch_size = 8;                     // images per forward pass
  std::filesystem::path output;  // JSON lines: per image its top labels and probabilities
};

// One prompt of the segment job (segment.prompts): points with their labels, a box, or both, on
// one of the images; coordinates in the image's pixels.
struct SegmentPrompt {
  int64_t image = 0;                          // index into segment.images
  std::vector<std::array<double, 2>> points;  // (x, y)
  std::vector<int64_t> labels;                // per point: 1 on the object, 0 off it
  std::optional<std::array<double, 4>> box;   // x1, y1, x2, y2
};

// Promptable segmentation (job.mode = "segment") with SamModel and the folder's SAM image
// processor: masks written as PNG files of each image's size, with their IoU scores.
struct SegmentSection {
  std::vector<std::filesystem::path> images;  // JPEG or PNG files
  std::vector<SegmentPrompt> prompts;
  bool multimask = true;         // three masks per prompt (SAM's default); false: the single one
  double threshold = 0.0;        // a pixel is in the mask where its logit exceeds this
  std::filesystem::path output;  // folder: <image>_prompt<i>_mask<m>.png and masks.jsonl
};

// Image captioning (job.mode = "caption") with Blip2ForConditionalGeneration: each image with
// the prompt after its image tokens, the caption decoded greedily.
struct CaptionSection {
  std::vector<std::filesystem::path> images;  // JPEG or PNG files
  std::string prompt;                         // the text the caption continues ("": none)
  int64_t max_new_tokens = 20;
  int64_t batch_size = 8;        // images per generation
  std::filesystem::path output;  // JSON lines: per image its caption and ids
};

// Training data (job.mode = "train"): a flat token file or JSON lines, cut into samples.
struct DataSection {
  std::filesystem::path path;    // *.bin (flat ids of `dtype`) or *.jsonl ({"input_ids": [...]})
  std::string dtype = "uint16";  // uint16 | uint32 (a .bin file)
  int64_t seq_len = 0;           // tokens per sample (required)
  int64_t seed = 1234;           // of the sample order (a permutation per epoch)
  bool shuffle = true;
  double eval_fraction = 0.0;    // the last part of the samples, held out for evaluation
  double mlm_probability = 0.0;  // > 0: masked-LM data (needs mask_token_id)
  int64_t mask_token_id = -1;
};

struct TrainSection {
  int64_t steps = 0;                   // optimizer steps of the whole run (required)
  int64_t global_batch_size = 8;       // samples per step over every data-parallel rank
  int64_t micro_batch_size = 0;        // samples per forward/backward; 0: a rank's whole share
  double max_grad_norm = 1.0;          // 0: no clipping
  int64_t zero_stage = 0;              // 1: optimizer states sharded over dp
  int64_t log_every = 1;               // steps between progress lines
  int64_t eval_every = 0;              // steps between evaluations; 0: none
  int64_t eval_batches = 1;            // global batches of held-out samples per evaluation
  std::filesystem::path metrics_file;  // JSON lines: one per step and evaluation
  // fp32 | bf16 | fp16: the compute precision; bf16 and fp16 keep fp32 master weights and
  // optimizer states (model.dtype stays float32), fp16 with a dynamic loss scale.
  std::string precision = "fp32";
  double initial_loss_scale = 65536.0;  // fp16
  int64_t loss_scale_window = 1000;     // fp16: finite steps before the scale doubles
  // Activation checkpointing (the seeds' gradient_checkpoint_config): the first
  // floor(ratio x layers) of each pipeline piece, or the counts listed, one per piece.
  double gradient_checkpointing_ratio = 0.0;
  std::vector<int64_t> num_ckpt_layers_per_stage;
};

struct OptimizerSection {
  std::string name = "adamw";
  double lr = 1e-3;
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;        // on parameters of 2 or more dimensions, as HF's Trainer
  std::string schedule = "linear";  // constant | linear | cosine (HF's, with warm-up)
  int64_t warmup_steps = 0;
};

// Saves during training: HF checkpoints with their training state, dir/step-<N>.
struct CheckpointSection {
  std::filesystem::path dir;  // empty: no saves
  int64_t save_every = 0;     // steps between saves; 0: only at the end
  int64_t keep_last = 0;      // saves kept in dir (older ones are deleted); 0: all
  // "auto": continue from the latest save in dir when there is one; "never": start from
  // model.path (refused when dir holds saves); else the path of a save to continue from.
  std::string resume = "auto";
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
  TranscribeSection transcribe;
  ClassifySection classify;
  SegmentSection segment;
  CaptionSection caption;
  DataSection data;
  TrainSection train;
  OptimizerSection optimizer;
  CheckpointSection checkpoint;
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
