// Forward and generate jobs: the rank's mesh and session (checkpoint, model built through its
// plugin, pipeline), then the job's mode.
#include "jobs.h"

#include "shardformer/checkpoint.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/dtype.h"
#include "shardformer/error.h"
#include "shardformer/generation.h"
#include "shardformer/log.h"
#include "shardformer/losses.h"
#include "shardformer/padding.h"
#include "shardformer/runtime/session.h"
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
#include <cstdio>
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
// throwing (SHARDFORMER_TEST_FAIL_MODE=throw, the default) or by SIGKILL (=kill). It first
// prints the steady clock (system-wide), so a test can time how fast the job ends after.
void inject_test_failure(int rank) {
  const char* fail_rank = std::getenv("SHARDFORMER_TEST_FAIL_RANK");
  if (fail_rank == nullptr || std::atoi(fail_rank) != rank) return;
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
  std::fprintf(stderr, "injecting a failure on rank %d at steady-clock ns %lld\n", rank,
               static_cast<long long>(now.count()));
  std::fflush(stderr);
  const char* mode = std::getenv("SHARDFORMER_TEST_FAIL_MODE");
  if (mode != nullptr && std::string(mode) == "kill") std::raise(SIGKILL);
  throw Error(str("injected failure on rank ", rank, " (SHARDFORMER_TEST_FAIL_RANK)"));
}

// The session options a job config describes.
SessionOptions session_options(const JobConfig& config, c10::ScalarType dtype,
                               c10::Device device) {
  SessionOptions options;
  options.checkpoint = config.model.path;
  options.dtype = dtype;
  options.device = device;
  options.origin = config.source.string();
  options.shard.enable_tensor_parallelism = config.shard.enable_tensor_parallelism;
  options.shard.make_vocab_size_divisible_by = config.shard.make_vocab_size_divisible_by;
  options.shard.parallel_output = config.shard.parallel_output;
  for (const PolicyOverride& o : config.shard.policy) {
    options.overrides.add({o.module, ShardStyle{.kind = parse_shard_kind(o.style),
                                                .fused_blocks = o.fused_blocks,
                                                .gather_output = o.gather_output,
                                                .input_is_parallel = o.input_is_parallel}});
  }
  const PipelineSection& p = config.pipeline;
  options.pipeline.schedule = pipeline::parse_schedule(p.schedule);
  options.pipeline.num_microbatches = p.num_microbatches;
  options.pipeline.num_model_chunks = p.num_model_chunks;
  if (!p.layers_per_stage.empty()) options.pipeline.layers_per_stage = p.layers_per_stage;
  const auto action = [](const std::string& name) {
    return name == "warn" ? UnusedAction::kWarn : UnusedAction::kError;
  };
  options.usage = {action(config.model.unused_tensors), action(config.model.unused_config_keys)};
  return options;
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

void run_forward(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const ForwardSection& f = config.forward;
  const ModelShape shape = session.model().shape();
  check_token_ids(f.input_ids, shape.vocab_size, "forward.input_ids");
  size_t longest = 0;
  for (const auto& ids : f.input_ids) longest = std::max(longest, ids.size());
  if (shape.max_positions > 0 && static_cast<int64_t>(longest) > shape.max_positions) {
    throw ConfigError(str("forward.input_ids: a sequence of ", longest,
                          " tokens exceeds the model's ", shape.max_positions, " positions"));
  }
  const PaddedBatch batch = right_pad(f.input_ids, 0);
  const c10::Device device = session.model().parameters().front().device();
  const ForwardInputs inputs{.input_ids = batch.input_ids.to(device),
                             .attention_mask = batch.attention_mask.to(device)};
  const auto start = Clock::now();
  const at::Tensor output = session.forward(inputs);  // defined where holds_output()
  const double elapsed = seconds_since(start);
  at::Tensor loss;
  if (f.loss) {  // HF's labels = input_ids, padding ignored
    const at::Tensor labels = inputs.input_ids.masked_fill(inputs.attention_mask == 0, kIgnoreIndex);
    loss = session.loss(inputs, labels);
  }
  if (!writer) return;
  std::map<std::string, at::Tensor> tensors{{session.model().output_name(), output},
                                            {"input_ids", batch.input_ids},
                                            {"attention_mask", batch.attention_mask}};
  if (loss.defined()) tensors["loss"] = loss.detach().reshape({1}).cpu();
  save_safetensors(f.output, tensors);
  out << "forward: " << session.model().output_name() << " " << shape_str(output.sizes().vec())
      << " written to " << f.output.string() << " (" << elapsed * 1e3 << " ms)\n";
  if (loss.defined()) out << "forward: loss " << loss.item<double>() << "\n";
}

void run_generate(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const GenerateSection& g = config.generate;
  const GenerationConfig generation =
      session.generation_config(g.max_new_tokens, g.eos_token_id, g.pad_token_id);
  const auto start = Clock::now();
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
    if (world > 1) {
      distributed::MeshOptions options;
      options.master_addr = rank_env->master_addr;
      options.master_port = rank_env->master_port;
      options.timeout = std::chrono::seconds(config.parallel.timeout_seconds);
      options.cuda = device.is_cuda();
      options.launcher_store = rank_env->launcher_store;
      mesh = std::make_unique<distributed::ProcessMesh>(
          rank,
          distributed::MeshShape{.pp = config.parallel.pp_size, .tp = config.parallel.tp_size},
          options);
    }

    keep_large_blocks_out_of_the_heap();
    log::info(str("RSS before loading: ", rss_mib().first, " MiB"));
    const auto start = Clock::now();
    const ModelFactory factory = [&](const ModelArgs& args) {
      const PluginInfo& plugin = registry.find(args.architecture);
      log::info(str("checkpoint ", config.model.path.string(), ": ", args.architecture, ", ",
                    args.checkpoint->total_numel(), " parameters in ",
                    args.checkpoint->files().size(), " file(s); served by plugin '", plugin.name,
                    "' ", plugin.version));
      if (const PipelineStageManager* stages = args.parallel->pipeline) {
        const LayerRange first = stages->layers(0);
        log::info(str("pipeline stage ", stages->stage(), " of ", stages->num_stages(),
                      ": layers [", first.begin, ", ", first.end, ")",
                      stages->num_chunks() > 1
                          ? str(" and ", stages->num_chunks() - 1, " more chunks")
                          : std::string()));
      }
      return registry.create_model(args);
    };
    Session session(session_options(config, dtype, device), factory, mesh.get());
    log::info(str("model built in ", seconds_since(start), " s (", c10::toString(dtype), ", ",
                  device.str(), ", tp ", config.parallel.tp_size, ", pp ", config.parallel.pp_size,
                  "); RSS ", rss_mib().first, " MiB"));
    inject_test_failure(rank);

    // Every stage ends generation with the tokens; only the last one has forward's output.
    const bool first_tp_rank = !mesh || mesh->coordinate().tp == 0;
    switch (config.mode) {
      case JobMode::kForward:
        run_forward(config, session, first_tp_rank && session.holds_output(), out);
        break;
      case JobMode::kGenerate: run_generate(config, session, rank == 0, out); break;
    }
  } catch (const std::exception& e) {
    record_rank_error(e.what(), exit_code_for(e));
    if (mesh) {
      // A failed rank leaves at once: tearing down its process groups while peers are gone or
      // failing can take seconds, and the job must end within one.
      log::error(e.what());
      std::fflush(nullptr);
      std::_Exit(exit_code_for(e));
    }
    throw;
  }
  const auto [now, peak] = rss_mib();
  log::info(str("peak RSS: ", peak, " MiB (now ", now, " MiB)"));
}

}  // namespace shardformer::host
