// Tests of the job config reader: parsed values, defaults, path resolution, and that every error
// names the file, the exact line:column of the offending value and the key.
#include "job_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "shardformer/error.h"

namespace shardformer::host {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMinimalGenerate = R"([model]
path = "ckpt"
[job]
mode = "generate"
[generate]
prompts = [[1, 2]]
)";

JobConfig parse(const std::string& text) { return parse_job_config(text, "job.toml", "/base"); }

// The ConfigError message of parsing `text`, or "" (and a test failure) when it parses.
std::string parse_error(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(JobConfig, ReadsShardSectionAndPolicyOverrides) {
  const JobConfig config = parse(std::string(kMinimalGenerate) + R"(
[shard]
enable_tensor_parallelism = false
make_vocab_size_divisible_by = 128
parallel_output = false

[[shard.policy]]
module = "h.*.mlp.c_fc"
style = "replicate"

[[shard.policy]]
module = "h.*.attn.c_attn"
style = "column"
fused_blocks = 3
gather_output = false
input_is_parallel = false
)");
  EXPECT_FALSE(config.shard.enable_tensor_parallelism);
  EXPECT_EQ(config.shard.make_vocab_size_divisible_by, 128);
  EXPECT_FALSE(config.shard.parallel_output);
  ASSERT_EQ(config.shard.policy.size(), 2u);
  EXPECT_EQ(config.shard.policy[0].module, "h.*.mlp.c_fc");
  EXPECT_EQ(config.shard.policy[0].style, "replicate");
  EXPECT_EQ(config.shard.policy[1].fused_blocks, 3);
  EXPECT_FALSE(config.shard.policy[1].input_is_parallel);
}

TEST(JobConfig, ReadsEveryKeyOfAFullConfig) {
  const JobConfig config = parse(R"([model]
path = "/models/gpt2"
dtype = "bfloat16"
device = "cuda"
unused_tensors = "warn"
unused_config_keys = "warn"

[parallel]
tp_size = 2
dp_size = 1

[job]
mode = "forward"

[forward]
input_ids = [[1, 2, 3], [4, 5]]
output = "/out/logits.safetensors"
loss = true

[generate]
prompts = [[7], [8, 9]]
max_new_tokens = 64
eos_token_id = 50256
pad_token_id = 0

[plugins]
paths = ["/opt/plugins", "/usr/lib/shardformer"]

[log]
level = "debug"
)");
  EXPECT_EQ(config.source, fs::path("job.toml"));
  EXPECT_EQ(config.model.path, fs::path("/models/gpt2"));
  EXPECT_EQ(config.model.dtype, "bfloat16");
  EXPECT_EQ(config.model.device, "cuda");
  EXPECT_EQ(config.model.unused_tensors, "warn");
  EXPECT_EQ(config.model.unused_config_keys, "warn");
  EXPECT_EQ(config.parallel.tp_size, 2);
  EXPECT_EQ(config.parallel.pp_size, 1);
  EXPECT_EQ(config.parallel.dp_size, 1);  // dp > 1 serves training (ReadsTheTrainingSections)
  EXPECT_EQ(config.mode, JobMode::kForward);
  EXPECT_EQ(config.forward.input_ids, (std::vector<std::vector<int64_t>>{{1, 2, 3}, {4, 5}}));
  EXPECT_EQ(config.forward.output, fs::path("/out/logits.safetensors"));
  EXPECT_TRUE(config.forward.loss);
  EXPECT_EQ(config.generate.prompts, (std::vector<std::vector<int64_t>>{{7}, {8, 9}}));
  EXPECT_EQ(config.generate.max_new_tokens, 64);
  EXPECT_EQ(config.generate.eos_token_id, 50256);
  EXPECT_EQ(config.generate.pad_token_id, 0);
  EXPECT_EQ(config.plugins.paths, (std::vector<fs::path>{"/opt/plugins", "/usr/lib/shardformer"}));
  EXPECT_EQ(config.log.level, "debug");
}

TEST(JobConfig, ReadsPipelineSection) {
  const JobConfig config = parse(std::string(kMinimalGenerate) + R"(
[parallel]
pp_size = 2
[pipeline]
schedule = "interleaved"
num_microbatches = 4
layers_per_stage = [1, 2, 3, 2]
)");
  EXPECT_EQ(config.parallel.pp_size, 2);
  EXPECT_EQ(config.pipeline.schedule, "interleaved");
  EXPECT_EQ(config.pipeline.num_microbatches, 4);
  EXPECT_EQ(config.pipeline.num_model_chunks, 2);  // interleaved's default
  EXPECT_EQ(config.pipeline.layers_per_stage, (std::vector<int64_t>{1, 2, 3, 2}));
  const JobConfig defaults = parse(kMinimalGenerate);
  EXPECT_EQ(defaults.pipeline.schedule, "1f1b");
  EXPECT_EQ(defaults.pipeline.num_microbatches, 0);
  EXPECT_EQ(defaults.pipeline.num_model_chunks, 1);
  EXPECT_TRUE(defaults.pipeline.layers_per_stage.empty());
}

TEST(JobConfig, AppliesDefaultsForAbsentKeys) {
  const JobConfig config = parse(kMinimalGenerate);
  EXPECT_EQ(config.mode, JobMode::kGenerate);
  EXPECT_EQ(config.model.dtype, "float32");
  EXPECT_EQ(config.model.device, "cpu");
  EXPECT_EQ(config.parallel.tp_size, 1);
  EXPECT_EQ(config.parallel.pp_size, 1);
  EXPECT_EQ(config.parallel.dp_size, 1);
  EXPECT_EQ(config.generate.max_new_tokens, 20);
  EXPECT_FALSE(config.generate.eos_token_id.has_value());
  EXPECT_FALSE(config.generate.pad_token_id.has_value());
  EXPECT_TRUE(config.forward.input_ids.empty());
  EXPECT_TRUE(config.forward.output.empty());
  EXPECT_TRUE(config.plugins.paths.empty());
  EXPECT_EQ(config.log.level, "info");
}

TEST(JobConfig, AllowsAnIncompleteSectionOfTheOtherMode) {
  const JobConfig config = parse(std::string(kMinimalGenerate) + "[forward]\noutput = \"o\"\n");
  EXPECT_EQ(config.mode, JobMode::kGenerate);
  EXPECT_TRUE(config.forward.input_ids.empty());
  EXPECT_EQ(config.forward.output, fs::path("/base/o"));
}

TEST(JobConfig, ResolvesRelativePathsAgainstTheBaseDir) {
  const JobConfig config = parse_job_config(R"([model]
path = "checkpoints/../gpt2"
[job]
mode = "forward"
[forward]
input_ids = [[1]]
output = "./out/logits.safetensors"
[plugins]
paths = ["plugins", "/abs/./lib", "../shared"]
)",
                                            "job.toml", "/jobs/a");
  EXPECT_EQ(config.model.path, fs::path("/jobs/a/gpt2"));
  EXPECT_EQ(config.forward.output, fs::path("/jobs/a/out/logits.safetensors"));
  EXPECT_EQ(config.plugins.paths,
            (std::vector<fs::path>{"/jobs/a/plugins", "/abs/lib", "/jobs/shared"}));
}

TEST(JobConfig, NamesJobModes) {
  EXPECT_STREQ(job_mode_name(JobMode::kForward), "forward");
  EXPECT_STREQ(job_mode_name(JobMode::kGenerate), "generate");
  EXPECT_STREQ(job_mode_name(JobMode::kTrain), "train");
}

constexpr const char* kMinimalTrain = R"([model]
path = "ckpt"
[job]
mode = "train"
[data]
path = "tokens.bin"
seq_len = 64
[train]
steps = 10
)";

// JSON lines and a folder of images need no seq_len at the config (the data reader asks for it
// where the lines hold token ids).
TEST(JobConfig, TrainOnJsonLinesOrAFolderNeedsNoSeqLen) {
  const std::string head = "[model]\npath = \"m\"\n[job]\nmode = \"train\"\n[train]\nsteps = 2\n";
  EXPECT_EQ(parse(head + "[data]\npath = \"d.jsonl\"\n").data.seq_len, 0);
  const std::string folder = ::testing::TempDir();
  EXPECT_EQ(parse(head + "[data]\npath = \"" + folder + "\"\n").data.path,
            std::filesystem::path(folder).lexically_normal());
}

TEST(JobConfig, ReadsTheTrainingSections) {
  const JobConfig config = parse(R"([model]
path = "ckpt"
[parallel]
dp_size = 2
tp_size = 2
[job]
mode = "train"
[data]
path = "ids.jsonl"
dtype = "uint32"
seq_len = 128
seed = 7
shuffle = false
eval_fraction = 0.1
mlm_probability = 0.15
mask_token_id = 103
[train]
steps = 100
global_batch_size = 16
micro_batch_size = 4
max_grad_norm = 0.5
zero_stage = 1
precision = "fp16"
initial_loss_scale = 1024
gradient_checkpointing_ratio = 0.5
loss_scale_window = 200
log_every = 10
eval_every = 50
eval_batches = 2
metrics_file = "m.jsonl"
[optimizer]
name = "adamw"
lr = 3e-4
betas = [0.9, 0.95]
eps = 1e-6
weight_decay = 0
schedule = "cosine"
warmup_steps = 10
[checkpoint]
dir = "runs/a"
save_every = 25
keep_last = 3
resume = "saves/step-5"
)");
  EXPECT_EQ(config.mode, JobMode::kTrain);
  EXPECT_EQ(config.data.path, "/base/ids.jsonl");
  EXPECT_EQ(config.data.dtype, "uint32");
  EXPECT_EQ(config.data.seq_len, 128);
  EXPECT_EQ(config.data.seed, 7);
  EXPECT_FALSE(config.data.shuffle);
  EXPECT_DOUBLE_EQ(config.data.eval_fraction, 0.1);
  EXPECT_DOUBLE_EQ(config.data.mlm_probability, 0.15);
  EXPECT_EQ(config.data.mask_token_id, 103);
  EXPECT_EQ(config.train.steps, 100);
  EXPECT_EQ(config.train.global_batch_size, 16);
  EXPECT_EQ(config.train.micro_batch_size, 4);
  EXPECT_DOUBLE_EQ(config.train.max_grad_norm, 0.5);
  EXPECT_EQ(config.train.zero_stage, 1);
  EXPECT_EQ(config.train.precision, "fp16");
  EXPECT_DOUBLE_EQ(config.train.initial_loss_scale, 1024.0);
  EXPECT_EQ(config.train.loss_scale_window, 200);
  EXPECT_DOUBLE_EQ(config.train.gradient_checkpointing_ratio, 0.5);
  EXPECT_EQ(config.train.log_every, 10);
  EXPECT_EQ(config.train.eval_every, 50);
  EXPECT_EQ(config.train.eval_batches, 2);
  EXPECT_EQ(config.train.metrics_file, "/base/m.jsonl");
  EXPECT_DOUBLE_EQ(config.optimizer.lr, 3e-4);
  EXPECT_EQ(config.optimizer.betas, (std::vector<double>{0.9, 0.95}));
  EXPECT_DOUBLE_EQ(config.optimizer.eps, 1e-6);
  EXPECT_DOUBLE_EQ(config.optimizer.weight_decay, 0.0);  // an integer reads as a number
  EXPECT_EQ(config.optimizer.schedule, "cosine");
  EXPECT_EQ(config.optimizer.warmup_steps, 10);
  EXPECT_EQ(config.checkpoint.dir, "/base/runs/a");
  EXPECT_EQ(config.checkpoint.save_every, 25);
  EXPECT_EQ(config.checkpoint.keep_last, 3);
  EXPECT_EQ(config.checkpoint.resume, "/base/saves/step-5");

  const JobConfig defaults = parse(kMinimalTrain);
  EXPECT_EQ(defaults.train.global_batch_size, 8);
  EXPECT_EQ(defaults.optimizer.schedule, "linear");
  EXPECT_EQ(defaults.optimizer.betas, (std::vector<double>{0.9, 0.999}));
  EXPECT_EQ(defaults.checkpoint.resume, "auto");
  EXPECT_EQ(defaults.train.precision, "fp32");
  EXPECT_DOUBLE_EQ(defaults.train.initial_loss_scale, 65536.0);
  EXPECT_TRUE(defaults.checkpoint.dir.empty());
}

// A config that must fail, where ("LINE:COLUMN") and what the message must say.
struct ErrorCase {
  std::string name;
  std::string text;
  std::string where;
  std::vector<std::string> parts;
};

void PrintTo(const ErrorCase& error_case, std::ostream* out) { *out << error_case.name; }

class JobConfigErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(JobConfigErrorTest, CitesFileLineColumnAndKey) {
  const ErrorCase& error_case = GetParam();
  const std::string message = parse_error(error_case.text);
  EXPECT_EQ(message.rfind("job.toml:" + error_case.where + ": ", 0), 0u) << message;
  for (const std::string& part : error_case.parts) {
    EXPECT_TRUE(contains(message, part)) << "'" << part << "' not in: " << message;
  }
}

const ErrorCase kErrorCases[] = {
    {"TrainNeedsData",
     "[model]\npath = \"m\"\n[job]\nmode = \"train\"\n[train]\nsteps = 2\n",
     "1:1",
     {"missing required key data.path (required when job.mode = \"train\")"}},
    {"TrainOnATokenFileNeedsSeqLen",
     "[model]\npath = \"m\"\n[job]\nmode = \"train\"\n[data]\npath = \"d.bin\"\n[train]\nsteps = "
     "2\n",
     "5:1",
     {"missing required key data.seq_len"}},
    {"TrainNeedsSteps",
     "[model]\npath = \"m\"\n[job]\nmode = \"train\"\n[data]\npath = \"d.bin\"\nseq_len = 8\n",
     "1:1",
     {"missing required key train.steps"}},
    {"TrainBatchNotDividingOverDp",
     "[parallel]\ndp_size = 3\n[job]\nmode = \"train\"\n[train]\nsteps = 1\nglobal_batch_size = "
     "8\n",
     "7:21",
     {"train.global_batch_size: 8 does not divide over parallel.dp_size = 3"}},
    {"TrainMicroBatchNotDividingTheShare",
     "[parallel]\ndp_size = 2\n[job]\nmode = \"train\"\n[train]\nsteps = 1\nglobal_batch_size = 8\n"
     "micro_batch_size = 3\n",
     "8:20",
     {"train.micro_batch_size: 3 does not divide a data-parallel rank's share of 4 samples"}},
    {"TrainZeroWithoutDp",
     "[job]\nmode = \"train\"\n[train]\nsteps = 1\nzero_stage = 1\n",
     "5:14",
     {"train.zero_stage: ZeRO shards optimizer states over dp_size > 1 ranks"}},
    {"TrainEvalWithoutHeldOutData",
     "[job]\nmode = \"train\"\n[train]\nsteps = 4\neval_every = 2\n",
     "5:14",
     {"train.eval_every: evaluation needs held-out samples (data.eval_fraction)"}},
    {"TrainWarmupLongerThanRun",
     "[job]\nmode = \"train\"\n[train]\nsteps = 4\n[optimizer]\nwarmup_steps = 5\n",
     "6:16",
     {"optimizer.warmup_steps: 5 exceeds train.steps = 4"}},
    {"TrainPrecisionUnknown",
     "[job]\nmode = \"train\"\n[train]\nsteps = 4\nprecision = \"half\"\n",
     "5:13",
     {"train.precision must be one of \"fp32\", \"bf16\", \"fp16\""}},
    {"TrainHalfModelDtype",
     "[model]\ndtype = \"bfloat16\"\n[job]\nmode = \"train\"\n[train]\nsteps = 4\n",
     "2:9",
     {"model.dtype: \"bfloat16\": a train job loads the model in float32",
      "train.precision = \"bf16\""}},
    {"DataMaskedWithoutMaskId",
     "[data]\nmlm_probability = 0.15\n",
     "2:19",
     {"data.mlm_probability: masked-LM data needs data.mask_token_id"}},
    {"TrainCheckpointingBothWays",
     "[train]\ngradient_checkpointing_ratio = 0.5\nnum_ckpt_layers_per_stage = [1]\n",
     "3:29",
     {"train.num_ckpt_layers_per_stage: give gradient_checkpointing_ratio or "
      "num_ckpt_layers_per_stage, not both"}},
    {"TrainCheckpointedLayersPerStageCount",
     "[parallel]\npp_size = 2\n[job]\nmode = \"train\"\n[train]\nsteps = 4\n"
     "num_ckpt_layers_per_stage = [1, 2, 3]\n",
     "7:29",
     {"train.num_ckpt_layers_per_stage: lists 3 counts but the pipeline has 2 pieces"}},
    {"TrainCheckpointingRatioAboveOne",
     "[train]\ngradient_checkpointing_ratio = 1.5\n",
     "2:32",
     {"train.gradient_checkpointing_ratio"}},
    {"TrainLossScaleBelowOne",
     "[train]\ninitial_loss_scale = 0.5\n",
     "2:22",
     {"train.initial_loss_scale"}},
    {"OptimizerBetasCount",
     "[optimizer]\nbetas = [0.9]\n",
     "2:9",
     {"optimizer.betas must hold 2 numbers, got 1"}},
    {"OptimizerBetaOutOfRange",
     "[optimizer]\nbetas = [0.9, 1.5]\n",
     "2:15",
     {"optimizer.betas[1] must be in [0, 1"}},
    {"OptimizerLrNotANumber",
     "[optimizer]\nlr = \"fast\"\n",
     "2:6",
     {"optimizer.lr must be a float, got string"}},
    {"OptimizerUnknownSchedule",
     "[optimizer]\nschedule = \"cosin\"\n",
     "2:12",
     {"optimizer.schedule must be one of \"constant\", \"linear\", \"cosine\""}},
    {"CheckpointSavesWithoutDir",
     "[checkpoint]\nsave_every = 5\n",
     "2:14",
     {"checkpoint.save_every: saves need checkpoint.dir"}},
    {"DataParallelOutsideTraining",
     "[parallel]\ndp_size = 2\n[job]\nmode = \"generate\"\n",
     "2:11",
     {"parallel.dp_size: 2: data parallelism serves job.mode = \"train\""}},
    {"SyntaxError",
     "[model]\npath = \"m\"\n[parallel]\ntp_size = = 2\n",
     "4:11",
     {"TOML syntax error"}},
    {"IntegerOverflow",
     "[parallel]\ntp_size = 99999999999999999999\n",
     "2:31",
     {"TOML syntax error"}},
    {"InvalidUtf8", "[model]\npath = \"\xff\"\n", "2:8", {"TOML syntax error"}},
    {"UnknownSectionWithSuggestion",
     "[model]\npath = \"m\"\n[paralel]\ntp_size = 2\n",
     "3:2",
     {"unknown section [paralel]", "did you mean 'parallel'?"}},
    {"UnknownSectionListsKnown",
     "[training]\nsteps = 2\n",
     "1:2",
     {"unknown section [training]",
      "known: model, parallel, pipeline, shard, job, forward, generate"}},
    {"PipelineUnknownSchedule",
     "[pipeline]\nschedule = \"1f1f\"\n",
     "2:12",
     {"pipeline.schedule must be one of \"gpipe\", \"1f1b\", \"interleaved\", got \"1f1f\""}},
    {"PipelineLayersNotAList",
     "[pipeline]\nlayers_per_stage = 4\n",
     "2:20",
     {"pipeline.layers_per_stage must be an array, got integer"}},
    {"PipelineLayersEmpty",
     "[pipeline]\nlayers_per_stage = []\n",
     "2:20",
     {"pipeline.layers_per_stage must not be empty"}},
    {"PipelineLayersZero",
     "[pipeline]\nlayers_per_stage = [4, 0]\n",
     "2:24",
     {"pipeline.layers_per_stage[1] must be in [1, 1048576], got 0"}},
    {"PipelineChunksWithoutInterleaving",
     "[pipeline]\nschedule = \"1f1b\"\nnum_model_chunks = 2\n",
     "3:20",
     {"pipeline.num_model_chunks: 2 model chunks per stage need schedule = \"interleaved\""}},
    {"PipelineInterleavedWithOneChunk",
     "[pipeline]\nschedule = \"interleaved\"\nnum_model_chunks = 1\n",
     "3:20",
     {"pipeline.num_model_chunks: the interleaved schedule needs at least 2 model chunks"}},
    {"PipelineInterleavedMicrobatchesNotMultiple",
     "[parallel]\npp_size = 2\n[pipeline]\nschedule = \"interleaved\"\nnum_microbatches = 3\n",
     "5:20",
     {"pipeline.num_microbatches: 3 is not a multiple of parallel.pp_size = 2"}},
    {"PipelineLayersWrongLength",
     "[parallel]\npp_size = 2\n[pipeline]\nlayers_per_stage = [2, 2, 4]\n",
     "4:20",
     {"pipeline.layers_per_stage: lists 3 entries but the pipeline has 2 pieces"}},
    // Found by fuzzing (tests/fuzz): pp_size x num_model_chunks overflowed int64.
    {"PipelineSizeOverflows",
     "[parallel]\npp_size = 9223372036854775807\n[pipeline]\nschedule = \"interleaved\"\n",
     "2:11",
     {"parallel.pp_size: tp_size x pp_size x sp_size x dp_size = 1 x 9223372036854775807 x 1 x 1 "
      "ranks is more than a job can have (2147483647)"}},
    {"WorldSizeTooLarge",
     "[parallel]\ntp_size = 2\npp_size = 65536\ndp_size = 16384\n",
     "4:11",
     {"parallel.dp_size: tp_size x pp_size x sp_size x dp_size = 2 x 65536 x 1 x 16384 ranks"}},
    {"PipelineMicrobatchesZero",
     "[pipeline]\nnum_microbatches = 0\n",
     "2:20",
     {"pipeline.num_microbatches"}},
    {"EmbedBothSentenceSources",
     "[embed]\nsentences = [\"a\"]\nsentences_file = \"s.txt\"\n",
     "3:18",
     {"embed.sentences_file: give either embed.sentences or embed.sentences_file"}},
    {"EmbedSentenceNotString",
     "[embed]\nsentences = [\"a\", 3]\n",
     "2:19",
     {"embed.sentences[1] must be a string, got integer"}},
    {"UnusedTensorsUnknownAction",
     "[model]\npath = \"m\"\nunused_tensors = \"ignore\"\n",
     "3:18",
     {"model.unused_tensors must be one of \"error\", \"warn\", got \"ignore\""}},
    {"ForwardLossNotBoolean",
     "[forward]\nloss = \"yes\"\n",
     "2:8",
     {"forward.loss must be a boolean, got string"}},
    {"KeyOutsideSection", "# job\nmode = \"forward\"\n", "2:1", {"'mode' is outside any section"}},
    {"UnknownKeyWithSuggestion",
     "[model]\npath = \"m\"\n[parallel]\ntp_sise = 2\n",
     "4:1",
     {"unknown key 'tp_sise' in [parallel]", "did you mean 'tp_size'?"}},
    {"UnknownKeySuggestsWithinTwoEdits",
     "[parallel]\ntp_szie = 2\n",
     "2:1",
     {"unknown key 'tp_szie' in [parallel]", "did you mean 'tp_size'?"}},
    {"UnknownKeyNoSuggestionBeyondTwoEdits",
     "[parallel]\ntpsz = 2\n",
     "2:1",
     {"unknown key 'tpsz' in [parallel]",
      "(known: tp_size, pp_size, sp_size, dp_size, timeout_seconds)"}},
    {"ShardPolicyUnknownStyle",
     "[shard]\n[[shard.policy]]\nmodule = \"h.*.mlp.c_fc\"\nstyle = \"diagonal\"\n",
     "4:9",
     {"shard.policy[0].style", "diagonal"}},
    {"ShardPolicyMissingModule",
     "[[shard.policy]]\nstyle = \"replicate\"\n",
     "1:1",
     {"missing required key shard.policy[0].module"}},
    {"ShardPolicyUnknownKey",
     "[[shard.policy]]\nmodule = \"wte\"\nstyle = \"vocab\"\nfused_block = 3\n",
     "4:1",
     {"unknown key 'fused_block' in [shard.policy[0]]", "did you mean 'fused_blocks'?"}},
    {"ShardBooleanWrongType",
     "[shard]\nparallel_output = 1\n",
     "2:19",
     {"shard.parallel_output must be a boolean, got integer"}},
    {"UnknownKeyListsKnown",
     "[log]\n  verbose = true\n",
     "2:3",
     {"unknown key 'verbose' in [log]", "known: level"}},
    {"WrongTypeInteger",
     "[model]\npath = \"m\"\n[parallel]\ntp_size = \"2\"\n",
     "4:11",
     {"parallel.tp_size must be an integer, got string"}},
    {"WrongTypeString", "[model]\npath = 3\n", "2:8", {"model.path must be a string, got integer"}},
    {"WrongTypeBoolean",
     "[log]\nlevel = true\n",
     "2:9",
     {"log.level must be a string, got boolean"}},
    {"WrongTypeArray",
     "[generate]\nprompts = 5\n",
     "2:11",
     {"generate.prompts must be an array, got integer"}},
    {"WrongTypeRow",
     "[generate]\nprompts = [1, 2]\n",
     "2:12",
     {"generate.prompts[0] must be an array, got integer"}},
    {"WrongTypeToken",
     "[forward]\ninput_ids = [[1, 2.5]]\n",
     "2:18",
     {"forward.input_ids[0][1] must be an integer, got float"}},
    {"WrongTypeSection", "parallel = 2\n", "1:12", {"parallel must be a table, got integer"}},
    {"WrongTypeArrayOfTables",
     "[[model]]\npath = \"m\"\n",
     "1:1",
     {"model must be a table, got array"}},
    {"WrongTypePluginPath",
     "[plugins]\npaths = [\"a\", 1]\n",
     "2:15",
     {"plugins.paths[1] must be a string, got integer"}},
    {"TpSizeBelowOne",
     "[parallel]\ntp_size = 0\n",
     "2:11",
     {"parallel.tp_size must be in [1, 1024], got 0"}},
    {"PpSizeNegative",
     "[parallel]\npp_size = -2\n",
     "2:11",
     {"parallel.pp_size must be >= 1, got -2"}},
    {"DpSizeBelowOne",
     "[parallel]\ndp_size = 0\n",
     "2:11",
     {"parallel.dp_size must be >= 1, got 0"}},
    {"MaxNewTokensAboveRange",
     "[generate]\nmax_new_tokens = 1000001\n",
     "2:18",
     {"generate.max_new_tokens must be in [1, 1000000], got 1000001"}},
    {"MaxNewTokensZero",
     "[generate]\nmax_new_tokens = 0\n",
     "2:18",
     {"generate.max_new_tokens must be in [1, 1000000], got 0"}},
    {"EosNegative",
     "[generate]\neos_token_id = -1\n",
     "2:16",
     {"generate.eos_token_id must be >= 0, got -1"}},
    {"PadNegative",
     "[generate]\npad_token_id = -7\n",
     "2:16",
     {"generate.pad_token_id must be >= 0, got -7"}},
    {"NegativeTokenId",
     "[generate]\nprompts = [[1, -2]]\n",
     "2:16",
     {"generate.prompts[0][1] must be >= 0, got -2"}},
    {"EmptySequence",
     "[forward]\ninput_ids = [[1], []]\n",
     "2:19",
     {"forward.input_ids[1] must not be empty"}},
    {"NoSequences",
     "[generate]\nprompts = []\n",
     "2:11",
     {"generate.prompts must hold at least one sequence"}},
    {"UnknownMode",
     "[job]\nmode = \"training\"\n",
     "2:8",
     {"job.mode must be one of \"forward\", \"generate\", \"embed\", \"train\", \"transcribe\", "
      "\"classify\", \"segment\", \"caption\", got \"training\""}},
    {"CaptionMaxNewTokensZero",
     "[caption]\nimages = [\"a.png\"]\nmax_new_tokens = 0\n",
     "3:18",
     {"caption.max_new_tokens must be in [1, 1000000], got 0"}},
    {"CaptionPromptNotAString",
     "[caption]\nimages = [\"a.png\"]\nprompt = 3\n",
     "3:10",
     {"caption.prompt must be a string"}},
    {"SegmentLabelsForOtherPoints",
     "[segment]\nimages = [\"a.png\"]\n[[segment.prompts]]\npoints = [[1, 2], [3, 4]]\n"
     "labels = [1]\n",
     "5:10",
     {"segment.prompts[0].labels: holds 1 labels for 2 points"}},
    {"SegmentPointNotAPair",
     "[segment]\nimages = [\"a.png\"]\n[[segment.prompts]]\npoints = [[1, 2, 3]]\n",
     "4:11",
     {"segment.prompts[0].points[0] must be [x, y], two numbers"}},
    {"SegmentPromptWithoutPointsOrBox",
     "[segment]\nimages = [\"a.png\"]\n[[segment.prompts]]\nimage = 0\n",
     "3:1",
     {"a prompt needs points, a box or both"}},
    {"SegmentBoxUpsideDown",
     "[segment]\nimages = [\"a.png\"]\n[[segment.prompts]]\nbox = [10, 10, 5, 20]\n",
     "4:7",
     {"segment.prompts[0].box: must be [x1, y1, x2, y2]"}},
    {"UnknownLogLevel",
     "[log]\nlevel = \"verbose\"\n",
     "2:9",
     {"log.level must be one of \"trace\", \"debug\", \"info\", \"warn\", \"error\", \"off\""}},
    {"UnknownDtype",
     "[model]\npath = \"m\"\ndtype = \"int8\"\n",
     "3:9",
     {"model.dtype must be one of", "\"bfloat16\"", "got \"int8\""}},
    {"UnknownDevice",
     "[model]\npath = \"m\"\ndevice = \"tpu\"\n",
     "3:10",
     {"model.device must be one of \"cpu\", \"cuda\", got \"tpu\""}},
    {"EmptyPath", "[model]\npath = \"\"\n", "2:8", {"model.path must not be empty"}},
    {"MissingModelPath",
     "# job\n\n[model]\ndtype = \"float32\"\n",
     "3:1",
     {"missing required key model.path"}},
    {"MissingModelSection",
     "[job]\nmode = \"generate\"\n",
     "1:1",
     {"missing required key model.path"}},
    {"MissingJobMode", "[model]\npath = \"m\"\n[job]\n", "3:1", {"missing required key job.mode"}},
    {"MissingJobSection", "[model]\npath = \"m\"\n", "1:1", {"missing required key job.mode"}},
    {"MissingForwardSection",
     "[model]\npath = \"m\"\n[job]\nmode = \"forward\"\n",
     "1:1",
     {"missing required key forward.input_ids", "required when job.mode = \"forward\""}},
    {"MissingForwardOutput",
     "[model]\npath = \"m\"\n[job]\nmode = \"forward\"\n[forward]\ninput_ids = [[1]]\n",
     "5:1",
     {"missing required key forward.output"}},
    {"MissingGeneratePrompts",
     "[model]\npath = \"m\"\n[job]\nmode = \"generate\"\n[generate]\nmax_new_tokens = 3\n",
     "5:1",
     {"missing required key generate.prompts", "required when job.mode = \"generate\""}},
    {"MissingTranscribeAudio",
     "[model]\npath = \"m\"\n[job]\nmode = \"transcribe\"\n[transcribe]\ntask = \"translate\"\n",
     "5:1",
     {"missing required key transcribe.audio", "required when job.mode = \"transcribe\""}},
    {"UnknownTranscribeTask",
     "[model]\npath = \"m\"\n[job]\nmode = \"transcribe\"\n[transcribe]\naudio = [\"a.wav\"]\n"
     "task = \"summarize\"\n",
     "7:8",
     {"transcribe.task must be one of \"transcribe\", \"translate\", got \"summarize\""}},
    {"TranscribeWithSequenceParallelism",
     "[model]\npath = \"m\"\n[parallel]\ntp_size = 2\n[shard]\nenable_sequence_parallelism = "
     "true\n[job]\n"
     "mode = \"transcribe\"\n[transcribe]\naudio = [\"a.wav\"]\n",
     "6:31",
     {"runs forward and train jobs; transcribe jobs run without it"}},
};

INSTANTIATE_TEST_SUITE_P(Cases, JobConfigErrorTest, ::testing::ValuesIn(kErrorCases),
                         [](const auto& info) { return info.param.name; });

// Each test gets its own folder under the system temp folder, removed afterwards.
class LoadJobConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("shardformer_job_config_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }

  std::string load_error(const fs::path& path) const {
    try {
      load_job_config(path);
    } catch (const ConfigError& error) {
      return error.what();
    }
    ADD_FAILURE() << "no ConfigError loading " << path;
    return "";
  }

  fs::path dir_;
};

TEST_F(LoadJobConfigTest, ResolvesPathsAgainstTheConfigFolder) {
  const fs::path path = write("job.toml", kMinimalGenerate);
  const JobConfig config = load_job_config(path);
  EXPECT_EQ(config.source, path);
  EXPECT_EQ(config.model.path, (dir_ / "ckpt").lexically_normal());
}

TEST_F(LoadJobConfigTest, ErrorsCiteTheFilePath) {
  const fs::path path = write("bad.toml", "[parallel]\ntp_size = \"two\"\n");
  const std::string message = load_error(path);
  EXPECT_EQ(message.rfind(path.string() + ":2:11: ", 0), 0u) << message;
  EXPECT_TRUE(contains(message, "parallel.tp_size")) << message;
}

TEST_F(LoadJobConfigTest, ReportsAMissingFile) {
  const fs::path path = dir_ / "absent.toml";
  const std::string message = load_error(path);
  EXPECT_TRUE(contains(message, "cannot open config file '" + path.string() + "'")) << message;
  EXPECT_TRUE(contains(message, "no such file")) << message;
}

TEST_F(LoadJobConfigTest, ReportsADirectory) {
  const std::string message = load_error(dir_);
  EXPECT_TRUE(contains(message, "cannot open config file '" + dir_.string() + "'")) << message;
  EXPECT_TRUE(contains(message, "is a directory")) << message;
}

}  // namespace
}  // namespace shardformer::host
