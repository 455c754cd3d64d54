// Forward and generate jobs: load the checkpoint, build the model through its plugin, run.
#include "jobs.h"

#include "shardformer/checkpoint.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/dtype.h"
#include "shardformer/error.h"
#include "shardformer/generation.h"
#include "shardformer/log.h"
#include "shardformer/pipeline/pipeline_generate.h"
#include "shardformer/pipeline/pipeline_runner.h"
#include "shardformer/safetensors.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <malloc.h>
#include <sys/resource.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <thread>

namespace shardformer::host {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Resident set size now and at its peak, in MiB (Linux).
std::pair<double, double> rss_mib() {
  std::ifstream status("/proc/self/status");
  double now = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) now = std::stod(line.substr(6)) / 1024.0;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {now, static_cast<double>(usage.ru_maxrss) / 1024.0};
}

// glibc raises its mmap threshold after the first large free; parameter-sized blocks then come
// from the heap, and freed loading temporaries stay resident (70 MiB of a 350M model's tp=4
// rank). A fixed 1 MiB threshold returns every large block to the system when it is freed.
void keep_large_blocks_out_of_the_heap() { mallopt(M_MMAP_THRESHOLD, 1 << 20); }

// Test hook: SHARDFORMER_TEST_FAIL_RANK=N makes rank N fail once its model is built, by
// throwing (SHARDFORMER_TEST_FAIL_MODE=throw, the default) or by SIGKILL (=kill).
void inject_test_failure(int rank) {
  const char* fail_rank = std::getenv("SHARDFORMER_TEST_FAIL_RANK");
  if (fail_rank == nullptr || std::atoi(fail_rank) != rank) return;
  const char* mode = std::getenv("SHARDFORMER_TEST_FAIL_MODE");
  if (mode != nullptr && std::string(mode) == "kill") std::raise(SIGKILL);
  throw Error(str("injected failure on rank ", rank, " (SHARDFORMER_TEST_FAIL_RANK)"));
}

// A [[shard.policy]] override that matches no module of the model is most likely a typo.
void warn_unmatched_overrides(const JobConfig& config, const Model& model) {
  std::vector<std::string> modules;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    modules.push_back(name.substr(0, name.rfind('.')));
  }
  for (const PolicyOverride& o : config.shard.policy) {
    const bool used = std::any_of(modules.begin(), modules.end(), [&](const std::string& path) {
      return Policy::matches(o.module, path);
    });
    if (!used) {
      log::warn(str(config.source.string(), ": [[shard.policy]] module '", o.module,
                    "' matches no module of the model"));
    }
  }
}

ParallelContext parallel_context(const JobConfig& config, const distributed::ProcessMesh& mesh) {
  ParallelContext parallel;
  parallel.tp = &mesh.tp();
  parallel.config.enable_tensor_parallelism = config.shard.enable_tensor_parallelism;
  parallel.config.make_vocab_size_divisible_by = config.shard.make_vocab_size_divisible_by;
  parallel.config.parallel_output = config.shard.parallel_output;
  for (const PolicyOverride& o : config.shard.policy) {
    parallel.policy.add({o.module, ShardStyle{.kind = parse_shard_kind(o.style),
                                              .fused_blocks = o.fused_blocks,
                                              .gather_output = o.gather_output,
                                              .input_is_parallel = o.input_is_parallel}});
  }
  return parallel;
}

// CPU, or the GPU of this rank on its machine (local rank modulo the visible devices).
c10::Device job_device(const JobConfig& config, int local_rank) {
  if (config.model.device == "cuda") {
    if (!torch::cuda::is_available()) {
      throw ConfigError(
          str(config.source.string(), ": model.device = \"cuda\" but no CUDA device is visible"));
    }
    const auto count = static_cast<int>(torch::cuda::device_count());
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
  }
  return c10::Device(c10::kCPU);
}

// The architecture to build: the first of config.json's "architectures".
std::string architecture_of(const Checkpoint& checkpoint) {
  const auto architectures = checkpoint.config().architectures();
  if (architectures.empty()) {
    throw CheckpointError(checkpoint.config().path().string() +
                          ": no \"architectures\" entry names the model class to build");
  }
  return architectures.front();
}

// This rank's pipeline stage: the model's layers split as [pipeline] says. Errors name the
// config file.
PipelineStageManager stage_manager(const JobConfig& config, const Checkpoint& checkpoint,
                                   int64_t stage) {
  const PipelineSection& p = config.pipeline;
  const std::optional<int64_t> layers = checkpoint.config().num_hidden_layers();
  if (!layers) {
    throw ConfigError(
        str(checkpoint.config().path().string(),
            ": no layer count (num_hidden_layers, n_layer, num_layers) to split over ",
            "parallel.pp_size = ", config.parallel.pp_size, " stages"));
  }
  try {
    std::optional<std::vector<int64_t>> list;
    if (!p.layers_per_stage.empty()) list = p.layers_per_stage;
    return PipelineStageManager(config.parallel.pp_size, stage, *layers, p.num_model_chunks, list);
  } catch (const ConfigError& e) {
    throw ConfigError(str(config.source.string(), ": ", e.what()));
  }
}

// The runner options of [pipeline] for a batch of `batch` sequences.
pipeline::PipelineOptions pipeline_options(const JobConfig& config, int64_t batch) {
  const PipelineSection& p = config.pipeline;
  pipeline::PipelineOptions options;
  options.schedule = pipeline::parse_schedule(p.schedule);
  const int64_t pp = config.parallel.pp_size;
  options.num_microbatches = p.num_microbatches > 0 ? p.num_microbatches
                             : options.schedule == pipeline::ScheduleKind::kInterleaved
                                 ? pp
                                 : std::min(batch, pp);
  try {
    pipeline::check_schedule(options.schedule, {pp, options.num_microbatches, p.num_model_chunks});
  } catch (const ConfigError& e) {
    throw ConfigError(str(config.source.string(), ": ", e.what()));
  }
  if (options.num_microbatches > batch) {
    throw ConfigError(str(config.source.string(), ": pipeline.num_microbatches = ",
                          options.num_microbatches, " exceeds the batch of ", batch, " sequences"));
  }
  return options;
}

// Right-pads token-id lists into input_ids and attention_mask [batch, max_len].
std::pair<at::Tensor, at::Tensor> right_pad(const std::vector<std::vector<int64_t>>& sequences,
                                            int64_t pad_token_id) {
  size_t max_len = 0;
  for (const auto& s : sequences) max_len = std::max(max_len, s.size());
  const auto batch = static_cast<int64_t>(sequences.size());
  at::Tensor ids = at::full({batch, static_cast<int64_t>(max_len)}, pad_token_id, at::kLong);
  at::Tensor mask = at::zeros({batch, static_cast<int64_t>(max_len)}, at::kLong);
  for (int64_t row = 0; row < batch; ++row) {
    const auto& s = sequences[row];
    const auto n = static_cast<int64_t>(s.size());
    ids[row].narrow(0, 0, n).copy_(at::tensor(s, at::kLong));
    mask[row].narrow(0, 0, n).fill_(1);
  }
  return {ids, mask};
}

void check_token_ids(const std::vector<std::vector<int64_t>>& sequences, int64_t vocab_size,
                     const std::string& key) {
  for (size_t row = 0; row < sequences.size(); ++row) {
    for (int64_t id : sequences[row]) {
      if (id >= vocab_size) {
        throw ConfigError(str(key, "[", row, "] has token id ", id,
                              ", outside the model's vocabulary [0, ", vocab_size, ")"));
      }
    }
  }
}

// pp: the pipeline group when the model is a pipeline stage, else null.
void run_forward(const JobConfig& config, Model& model, const distributed::ProcessGroup* pp,
                 bool writer, std::ostream& out) {
  const ForwardSection& f = config.forward;
  check_token_ids(f.input_ids, model.shape().vocab_size, "forward.input_ids");
  size_t longest = 0;
  for (const auto& ids : f.input_ids) longest = std::max(longest, ids.size());
  if (const int64_t limit = model.shape().max_positions;
      limit > 0 && static_cast<int64_t>(longest) > limit) {
    throw ConfigError(str("forward.input_ids: a sequence of ", longest,
                          " tokens exceeds the model's ", limit, " positions"));
  }
  auto [ids, mask] = right_pad(f.input_ids, 0);
  const c10::Device device = model.parameters().front().device();
  const auto start = Clock::now();
  const ForwardInputs inputs{.input_ids = ids.to(device), .attention_mask = mask.to(device)};
  at::Tensor output;
  if (pp != nullptr) {
    pipeline::PipelineRunner runner(model, *pp, pipeline_options(config, ids.size(0)));
    output = runner.forward(inputs);  // defined on the last stage
  } else {
    torch::NoGradGuard no_grad;
    output = model.forward(inputs);
  }
  const double elapsed = seconds_since(start);
  if (!writer) return;
  save_safetensors(f.output,
                   {{model.output_name(), output}, {"input_ids", ids}, {"attention_mask", mask}});
  out << "forward: " << model.output_name() << " " << shape_str(output.sizes().vec())
      << " written to " << f.output.string() << " (" << elapsed * 1e3 << " ms)\n";
}

void run_generate(const JobConfig& config, const Checkpoint& checkpoint, Model& model,
                  const distributed::ProcessGroup* pp, bool writer, std::ostream& out) {
  const GenerateSection& g = config.generate;
  const HFConfig& hf = checkpoint.config();
  GenerationConfig generation;
  generation.max_new_tokens = g.max_new_tokens;
  generation.eos_token_id = g.eos_token_id;
  if (!generation.eos_token_id && hf.get_optional_int("eos_token_id")) {
    generation.eos_token_id = hf.get_optional_int("eos_token_id");
  }
  generation.pad_token_id = g.pad_token_id.value_or(
      hf.get_optional_int("pad_token_id").value_or(generation.eos_token_id.value_or(0)));

  const auto start = Clock::now();
  const GenerationResult result =
      pp != nullptr ? pipeline::pipeline_greedy_generate(model, *pp, g.prompts, generation)
                    : greedy_generate(model, g.prompts, generation);
  const double elapsed = seconds_since(start);
  int64_t produced = 0;
  for (size_t i = 0; i < result.new_tokens.size(); ++i) {
    if (writer) out << "generated[" << i << "]: " << join(result.new_tokens[i], " ") << "\n";
    produced += static_cast<int64_t>(result.new_tokens[i].size());
  }
  log::info(str("generate: ", produced, " tokens for ", g.prompts.size(), " prompts in ", elapsed,
                " s (", produced / std::max(elapsed, 1e-9), " tokens/s)"));
}

}  // namespace

int64_t job_world_size(const JobConfig& config) {
  const ParallelSection& p = config.parallel;
  if (p.dp_size > 1) {
    throw ConfigError(
        str(config.source.string(), ": parallel.dp_size = ", p.dp_size,
            ": this version runs tensor and pipeline parallelism only (dp_size = 1)"));
  }
  return p.tp_size * p.pp_size * p.dp_size;
}

void run_job(const JobConfig& config, const PluginRegistry& registry,
             const std::optional<RankEnv>& rank_env, std::ostream& out) {
  const int64_t world = job_world_size(config);
  const int rank = rank_env ? rank_env->rank : 0;
  if ((world > 1 && !rank_env) || (rank_env && rank_env->world_size != world)) {
    throw ConfigError(str(config.source.string(), ": the job needs ", world, " ranks (tp_size ",
                          config.parallel.tp_size, " x pp_size ", config.parallel.pp_size, ") but ",
                          rank_env ? rank_env->world_size : 1, " were started"));
  }
  if (rank_env) {  // ranks of one machine share its cores
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    at::set_num_threads(std::max(1, cores / std::max(1, rank_env->local_world_size)));
  }
  // The mesh outlives the error handler below: a failing rank records its error before its
  // connections close, so the launcher can tell the cause from its peers' broken collectives.
  std::unique_ptr<distributed::ProcessMesh> mesh;
  try {
    const c10::Device device = job_device(config, rank_env ? rank_env->local_rank : 0);
    const c10::ScalarType dtype =
        parse_model_dtype(config.model.dtype, config.source.string() + ": model.dtype");
    std::optional<ParallelContext> parallel;
    if (world > 1) {
      distributed::MeshOptions options;
      options.master_addr = rank_env->master_addr;
      options.master_port = rank_env->master_port;
      options.timeout = std::chrono::seconds(config.parallel.timeout_seconds);
      options.cuda = device.is_cuda();
      mesh = std::make_unique<distributed::ProcessMesh>(
          rank,
          distributed::MeshShape{.pp = config.parallel.pp_size, .tp = config.parallel.tp_size},
          options);
      parallel = parallel_context(config, *mesh);
    }

    keep_large_blocks_out_of_the_heap();
    log::info(str("RSS before loading: ", rss_mib().first, " MiB"));
    auto start = Clock::now();
    const Checkpoint checkpoint(config.model.path);
    const std::string architecture = architecture_of(checkpoint);
    const PluginInfo& plugin = registry.find(architecture);
    log::info(str("checkpoint ", config.model.path.string(), ": ", architecture, ", ",
                  checkpoint.total_numel(), " parameters in ", checkpoint.files().size(),
                  " file(s); served by plugin '", plugin.name, "' ", plugin.version));

    std::optional<PipelineStageManager> stages;
    const bool pipelined = config.parallel.pp_size > 1;
    if (pipelined && device.is_cuda()) {
      throw ConfigError(str(config.source.string(), ": model.device = \"cuda\" with parallel.",
                            "pp_size = ", config.parallel.pp_size,
                            ": pipelines run on CPU ranks (Gloo) only in this version"));
    }
    if (pipelined) {
      stages = stage_manager(config, checkpoint, mesh->coordinate().pp);
      parallel->pipeline = &*stages;
      const LayerRange first = stages->layers(0);
      log::info(str("pipeline stage ", stages->stage(), " of ", stages->num_stages(), ": layers [",
                    first.begin, ", ", first.end, ")",
                    stages->num_chunks() > 1
                        ? str(" and ", stages->num_chunks() - 1, " more chunks")
                        : std::string()));
    }
    ModelArgs args{&checkpoint, architecture, dtype, device, parallel ? &*parallel : nullptr};
    const std::shared_ptr<Model> model = registry.create_model(args);
    log::info(str("model built in ", seconds_since(start), " s (", c10::toString(dtype), ", ",
                  device.str(), ", tp ", config.parallel.tp_size, ", pp ", config.parallel.pp_size,
                  "); RSS ", rss_mib().first, " MiB"));
    // A stage holds only some modules: an override may match another stage's.
    if (parallel && !pipelined) warn_unmatched_overrides(config, *model);
    if (parallel && parallel->tensor_parallel() && model->sharding().empty()) {
      log::warn(
          str("plugin '", plugin.name, "' split no parameter: every rank holds the whole model"));
    }
    inject_test_failure(rank);

    // Every stage ends generation with the tokens; only the last one has forward's output.
    const distributed::ProcessGroup* pp = pipelined ? &mesh->pp() : nullptr;
    const bool first_tp_rank = !mesh || mesh->coordinate().tp == 0;
    switch (config.mode) {
      case JobMode::kForward:
        run_forward(config, *model, pp, first_tp_rank && (!stages || stages->is_last_stage()), out);
        break;
      case JobMode::kGenerate: run_generate(config, checkpoint, *model, pp, rank == 0, out); break;
    }
  } catch (const std::exception& e) {
    record_rank_error(e.what());
    throw;
  }
  const auto [now, peak] = rss_mib();
  log::info(str("peak RSS: ", peak, " MiB (now ", now, " MiB)"));
}

}  // namespace shardformer::host
