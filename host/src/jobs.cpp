// Running a job on one rank: its mesh and session (checkpoint, model built through its plugin,
// pipeline), then the job's mode (job_modes.h).
#include "jobs.h"

#include "job_modes.h"
#include "rank_agreement.h"
#include "watchdog.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/dtype.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/runtime/activity.h"
#include "shardformer/runtime/cpu_block_cache.h"
#include "shardformer/runtime/cpu_products.h"
#include "shardformer/runtime/cuda_support.h"
#include "shardformer/runtime/session.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <thread>

namespace shardformer::host {
namespace {

// Open file descriptors and how many of them are sockets, and the number of memory mappings.
struct OpenResources {
  int fds = 0, sockets = 0, mappings = 0;
};

OpenResources open_resources() {
  OpenResources r;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    r.fds += 1;
    const std::filesystem::path target = std::filesystem::read_symlink(entry.path(), error);
    if (!error && target.string().rfind("socket:", 0) == 0) r.sockets += 1;
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) r.mappings += 1;
  return r;
}

// Whether the resources after job `done` of `total` are logged at info level: after jobs
// 1, 2, 5, 10, 20, 50, ... and the last.
bool report_resources_after(int64_t done, int64_t total) {
  if (done == total) return true;
  int64_t scale = 1;
  while (scale * 10 <= done) scale *= 10;
  return done == scale || done == 2 * scale || done == 5 * scale;
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

// The session options a job config describes.
SessionOptions session_options(const JobConfig& config, c10::ScalarType dtype, c10::Device device) {
  SessionOptions options;
  options.checkpoint = config.model.path;
  options.dtype = dtype;
  options.device = device;
  options.origin = config.source.string();
  options.shard.enable_tensor_parallelism = config.shard.enable_tensor_parallelism;
  options.shard.make_vocab_size_divisible_by = config.shard.make_vocab_size_divisible_by;
  options.shard.parallel_output = config.shard.parallel_output;
  options.shard.enable_sequence_parallelism = config.shard.enable_sequence_parallelism;
  options.shard.sequence_parallelism_mode =
      parse_sequence_mode(config.shard.sequence_parallelism_mode);
  options.shard.enable_sequence_overlap = config.shard.enable_sequence_overlap;
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

// CPU, or the GPU of this rank on its machine: local rank i takes device i, or device i mod the
// GPU count where the machine has fewer GPUs than ranks (NCCL cannot put two ranks on one GPU,
// so those ranks' collectives are staged through host memory over Gloo: shares_gpu).
c10::Device job_device(const JobConfig& config, int local_rank, int local_world_size,
                       bool& shares_gpu) {
  shares_gpu = false;
  if (config.model.device == "cuda") {
    try {
      runtime::load_cuda_support();
    } catch (const Error& e) {
      throw ConfigError(str(config.source.string(), ": model.device = \"cuda\": ", e.what()));
    }
    if (!torch::cuda::is_available()) {
      throw ConfigError(
          str(config.source.string(), ": model.device = \"cuda\" but no CUDA device is visible"));
    }
    const auto count = static_cast<int>(torch::cuda::device_count());
    shares_gpu = local_world_size > count;
    if (shares_gpu && local_rank == 0) {
      log::warn(str(local_world_size, " ranks on this machine share ", count,
                    " GPU(s): their collectives go through host memory over Gloo (NCCL needs a "
                    "GPU per rank); for speed, run a rank per GPU"));
    }
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
  }
  return c10::Device(c10::kCPU);
}

// One job on this rank's mesh: its session (checkpoint, model built through its plugin,
// pipeline), then the job's mode.
void run_one_job(const JobConfig& config, const PluginRegistry& registry,
                 const distributed::ProcessMesh* mesh, int rank, c10::Device device,
                 c10::ScalarType dtype, std::ostream& out, const JobInputs* inputs) {
  keep_large_blocks_out_of_the_heap();
  log::info(str("RSS before loading: ", rss_mib().first, " MiB"));
  const auto start = std::chrono::steady_clock::now();
  const ModelFactory factory = [&](const ModelArgs& args) {
    const PluginInfo& plugin = registry.find(args.architecture);
    log::info(str("checkpoint ", config.model.path.string(), ": ", args.architecture, ", ",
                  args.checkpoint->total_numel(), " parameters in ",
                  args.checkpoint->files().size(), " file(s); served by plugin '", plugin.name,
                  "' ", plugin.version));
    if (const PipelineStageManager* stages = args.parallel->pipeline) {
      const LayerRange first = stages->layers(0);
      log::info(str("pipeline stage ", stages->stage(), " of ", stages->num_stages(), ": layers [",
                    first.begin, ", ", first.end, ")",
                    stages->num_chunks() > 1
                        ? str(" and ", stages->num_chunks() - 1, " more chunks")
                        : std::string()));
    }
    if (mesh != nullptr) {
      check_ranks_agree(*mesh, "plugin",
                        {{"plugin", str(plugin.name, " ", plugin.version, " (SDK ABI ",
                                        plugin.abi_major, ".", plugin.abi_minor, ", LibTorch ",
                                        plugin.torch_version, ") for ", args.architecture)}});
    }
    const runtime::PhaseScope phase(str("building the model (plugin '", plugin.name, "')"));
    return registry.create_model(args);
  };
  // A train job that continues a save builds its model from the save.
  const std::filesystem::path resume =
      config.mode == JobMode::kTrain ? train_resume_checkpoint(config) : std::filesystem::path();
  SessionOptions options = session_options(config, dtype, device);
  if (!resume.empty()) options.checkpoint = resume;
  const runtime::PhaseScope loading(str("loading ", config.model.path.string()));
  Session session(std::move(options), factory, mesh);
  log::info(str("model built in ", seconds_since(start), " s (", c10::toString(dtype), ", ",
                device.str(), ", dp ", config.parallel.dp_size, ", pp ", config.parallel.pp_size,
                ", sp ", config.parallel.sp_size, ", tp ", config.parallel.tp_size, "); RSS ",
                rss_mib().first, " MiB"));
  reuse_freed_blocks_for_activations();
  inject_test_failure(-1);

  // Every stage ends generation with the tokens; only the last one has forward's output,
  // which every tp and sp rank holds whole.
  const bool first_tp_rank = !mesh || (mesh->coordinate().tp == 0 && mesh->coordinate().sp == 0);
  const runtime::PhaseScope running(str("running the ", job_mode_name(config.mode), " job"));
  switch (config.mode) {
    case JobMode::kForward:
      run_forward(config, session, first_tp_rank && session.holds_output(), out);
      break;
    case JobMode::kGenerate: run_generate(config, session, rank == 0, out); break;
    case JobMode::kEmbed:
      run_embed(config, session, first_tp_rank && session.holds_output(), out);
      break;
    case JobMode::kTranscribe: run_transcribe(config, session, rank == 0, out); break;
    case JobMode::kClassify:
      run_classify(config, session, first_tp_rank && session.holds_output(), out, inputs);
      break;
    case JobMode::kSegment: run_segment(config, session, first_tp_rank, out, inputs); break;
    case JobMode::kCaption: run_caption(config, session, rank == 0, out, inputs); break;
    case JobMode::kTrain: run_train(config, session, resume, rank, out); break;
  }
}

}  // namespace

// glibc raises its mmap threshold after the first large free; parameter-sized blocks then come
// from the heap, and freed loading temporaries stay resident (70 MiB of a 350M model's tp=4
// rank). A fixed 1 MiB threshold returns every large block to the system when it is freed.
void keep_large_blocks_out_of_the_heap() { mallopt(M_MMAP_THRESHOLD, 1 << 20); }

// Once the model is built, activations reuse freed blocks: a fresh mapping per large tensor cost
// every layer a round of page faults and page zeroing (12% of an embedding job's time and 11%
// of a GPT-2 forward's in perf). The block cache keeps freed blocks of 1 MiB and more, up to
// twice the peak of those in use, more when that thrashes (runtime/cpu_block_cache.h).
void reuse_freed_blocks_for_activations() { runtime::install_cpu_block_cache(); }

void inject_test_failure(int64_t step) {
  if (!runtime::is_test_fault_rank() || std::getenv("SHARDFORMER_TEST_FAIL_AT") != nullptr) return;
  const char* fail_step = std::getenv("SHARDFORMER_TEST_FAIL_STEP");
  if ((fail_step != nullptr ? std::atoll(fail_step) : -1) != step) return;
  runtime::fail_now(step < 0 ? std::string("once its model was built")
                             : str("after training step ", step));
}

// The CPUs this process may run on (taskset, a cgroup's cpuset), not every CPU of the machine:
// ranks sized by the machine's count would oversubscribe the ones they were given.
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) {
    return static_cast<int>(std::thread::hardware_concurrency());
  }
  return CPU_COUNT(&set);
}

int64_t job_world_size(const JobConfig& config) {
  const ParallelSection& p = config.parallel;
  return p.tp_size * p.pp_size * p.sp_size * p.dp_size;
}

void run_job(const JobConfig& config, const PluginRegistry& registry,
             const std::optional<RankEnv>& rank_env, std::ostream& out, const RunOptions& run) {
  const int64_t world = job_world_size(config);
  const int rank = rank_env ? rank_env->rank : 0;
  if ((world > 1 && !rank_env) || (rank_env && rank_env->world_size != world)) {
    throw ConfigError(str(config.source.string(), ": the job needs ", world, " ranks (dp_size ",
                          config.parallel.dp_size, " x pp_size ", config.parallel.pp_size,
                          " x sp_size ", config.parallel.sp_size, " x tp_size ",
                          config.parallel.tp_size, ") but ", rank_env ? rank_env->world_size : 1,
                          " were started"));
  }
  if (rank_env) {  // ranks of one machine share the CPUs the job may run on
    at::set_num_threads(std::max(1, usable_cpus() / std::max(1, rank_env->local_world_size)));
  }
  if (rank_env) publish_rank_activity(rank);
  // The mesh outlives the error handler below: a failing rank records its error before its
  // connections close, so the launcher can tell the cause from its peers' broken collectives.
  std::unique_ptr<distributed::ProcessMesh> mesh;
  try {
    bool shares_gpu = false;
    const c10::Device device = job_device(config, rank_env ? rank_env->local_rank : 0,
                                          rank_env ? rank_env->local_world_size : 1, shares_gpu);
    const c10::ScalarType dtype =
        parse_model_dtype(config.model.dtype, config.source.string() + ": model.dtype");
    if (device.is_cpu()) {
      log::info(str(
          "CPU products: ", runtime::cpu_products(), ", ", at::get_num_threads(),
          " threads; few-row products' weight prefetch: ", runtime::skinny_products_prefetch()));
    }
    if (world > 1) {
      const runtime::PhaseScope phase("joining the job's ranks");
      // c10d bounds most of the rendezvous by the timeout, but not all of it; the margin lets
      // its own, more precise errors come first.
      const Watchdog watchdog(
          std::chrono::seconds(config.parallel.timeout_seconds) + std::chrono::seconds(2),
          str("rank ", rank, ": the rendezvous at ", rank_env->master_addr, ":",
              rank_env->master_port,
              " (parallel.timeout_seconds = ", config.parallel.timeout_seconds, ")"));
      distributed::MeshOptions options;
      options.master_addr = rank_env->master_addr;
      options.master_port = rank_env->master_port;
      options.timeout = std::chrono::seconds(config.parallel.timeout_seconds);
      options.cuda = device.is_cuda();
      if (shares_gpu) options.host_staging = distributed::MeshOptions::HostStaging::kCudaTensors;
      options.launcher_store = rank_env->launcher_store;
      mesh = std::make_unique<distributed::ProcessMesh>(
          rank,
          distributed::MeshShape{.dp = config.parallel.dp_size,
                                 .pp = config.parallel.pp_size,
                                 .sp = config.parallel.sp_size,
                                 .tp = config.parallel.tp_size},
          options);
      check_ranks_agree(*mesh, "job", job_identity(config));
    }
    for (int64_t job = 1; job <= run.repeat; ++job) {
      run_one_job(config, registry, mesh.get(), rank, device, dtype, out, run.inputs);
      if (run.repeat > 1) {
        const OpenResources r = open_resources();
        const std::string line =
            str("resources after job ", job, " of ", run.repeat, ": ", r.fds, " open files (",
                r.sockets, " sockets), ", r.mappings, " mappings, RSS ", rss_mib().first, " MiB");
        report_resources_after(job, run.repeat) ? log::info(line) : log::debug(line);
      }
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
  const runtime::BlockCacheStats blocks = runtime::cpu_block_cache_stats();
  if (blocks.hits + blocks.misses > 0) {
    log::info(str("activation blocks: ", blocks.hits, " reused, ", blocks.misses, " mapped (",
                  blocks.refaults, " of them again after an eviction), ", blocks.mapped_bytes >> 20,
                  " MiB kept at up to ", blocks.limit, " x the peak in use"));
  }
}

}  // namespace shardformer::host
