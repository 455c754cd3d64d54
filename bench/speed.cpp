// One side of the CPU speed suite (bench/bench_speed.py starts it, alternating with HF): loads a
// checkpoint through the host's plugins the way a host job does, then times forward passes and
// greedy decoding and prints one JSON line per measurement (median of --repeats after a warm-up).
// --kernel-times adds one more forward per shape and one more generation per decode shape, timed
// kernel by kernel (kernel_timing.h), with each tp rank's wait in shared-memory barriers: where
// their time goes.
// --device cuda times the same on a GPU (tools/gpu_check.py), each call ending in a sync.
// --op-counts adds one more generation per decode shape, counting the ATen operators the host
// calls (outermost calls only, with their time): the per-token dispatch cost of decoding.
#include "jobs.h"
#include "plugin_registry.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/dtype.h"
#include "shardformer/kernels/kernel_timing.h"
#include "shardformer/kernels/skinny_prefetch.h"
#include "shardformer/runtime/cuda_support.h"
#include "shardformer/runtime/session.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <array>
#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace shardformer;
namespace po = boost::program_options;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// "4x512,1x64" -> {{4, 512}, {1, 64}}
std::vector<std::pair<int64_t, int64_t>> parse_shapes(const std::string& text) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t x = item.find('x');
    if (x == std::string::npos) throw std::invalid_argument("expected BxN, got '" + item + "'");
    shapes.emplace_back(std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1)));
  }
  return shapes;
}

// The median of `repeats` timed calls after one untimed call.
template <typename F>
double median_seconds(int repeats, const F& run) {
  run();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = Clock::now();
    run();
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Random prompts of `length` tokens, the same on every rank.
std::vector<std::vector<int64_t>> prompts(int64_t batch, int64_t length, int64_t vocab) {
  const at::Tensor ids = at::randint(vocab, {batch, length}, at::kLong);
  std::vector<std::vector<int64_t>> rows(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const at::Tensor row = ids[b].contiguous();
    rows[b].assign(row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + length);
  }
  return rows;
}

// One more `run` (a forward, or a generation) with kernel timing on: rank 0 prints each kernel
// call's total (its own rank's), the run's wall time as `kind`, and every tp rank's seconds
// waiting in shared-memory barriers. The wall time less the kernels' is what runs between them.
void print_kernel_times(const char* kind, const std::function<void()>& run,
                        const distributed::ProcessMesh* mesh, int rank) {
  kernels::reset_kernel_times();
  if (mesh != nullptr) mesh->tp().reset_stats();
  kernels::set_kernel_timing(true);
  const auto start = Clock::now();
  run();
  const double seconds = seconds_since(start);
  kernels::set_kernel_timing(false);
  at::Tensor waits;  // [tp]
  if (mesh != nullptr) {
    waits = mesh->tp().all_gather(
        at::full({1}, mesh->tp().stats().shared_memory_wait_seconds, at::kDouble), 0);
  }
  if (rank != 0) return;
  for (const kernels::KernelTime& t : kernels::kernel_times()) {
    std::printf(
        "{\"kind\": \"kernel_time\", \"call\": \"%s\", \"calls\": %ld, \"seconds\": %.6f}\n",
        t.call.c_str(), t.calls, t.seconds);
  }
  for (int64_t r = 0; waits.defined() && r < waits.size(0); ++r) {
    std::printf("{\"kind\": \"tp_wait\", \"rank\": %ld, \"seconds\": %.6f}\n", r,
                waits[r].item<double>());
  }
  std::printf("{\"kind\": \"%s\", \"seconds\": %.5f}\n", kind, seconds);
}

// The outermost ATen operators of one call of `run` on this thread: calls and seconds per name.
struct OpCount {
  int64_t calls = 0;
  double seconds = 0;
};

struct OpCounter {
  int depth = 0;
  Clock::time_point start;
  std::map<std::string, OpCount> ops;
};

OpCounter* counter = nullptr;

template <typename F>
std::map<std::string, OpCount> count_ops(const F& run) {
  OpCounter c;
  counter = &c;
  const at::CallbackHandle handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
            if (counter->depth++ == 0) counter->start = Clock::now();
            return nullptr;
          },
          [](const at::RecordFunction& fn, at::ObserverContext*) {
            if (--counter->depth != 0) return;
            OpCount& op = counter->ops[fn.name()];
            ++op.calls;
            op.seconds += seconds_since(counter->start);
          })
          .needsInputs(false)
          .scopes({at::RecordScope::FUNCTION}));
  run();
  at::removeCallback(handle);
  counter = nullptr;
  return c.ops;
}

// A switch's effect on one shape, measured forward by forward against the machine's drift:
// `pairs` pairs, each a forward with `variable` set to 1 and one without (the code under test
// reads it at each call), taken in alternating order; prints the median of the pairs' ratios.
void print_alternation(const std::string& variable, int pairs, int rank, int64_t batch, int64_t seq,
                       const std::function<void()>& run) {
  std::vector<double> with, without, ratios;
  for (int i = 0; i < pairs; ++i) {
    double t[2];
    for (const int set : i % 2 == 0 ? std::array{1, 0} : std::array{0, 1}) {
      if (set == 1) {
        ::setenv(variable.c_str(), "1", 1);
      } else {
        ::unsetenv(variable.c_str());
      }
      const auto start = Clock::now();
      run();
      t[set] = seconds_since(start);
    }
    ::unsetenv(variable.c_str());
    with.push_back(t[1]);
    without.push_back(t[0]);
    ratios.push_back(t[1] / t[0]);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  if (rank == 0) {
    std::printf(
        "{\"kind\": \"alternate\", \"variable\": \"%s\", \"batch\": %ld, \"seq\": %ld, "
        "\"pairs\": %d, \"with_seconds\": %.5f, \"without_seconds\": %.5f, "
        "\"median_ratio\": %.4f}\n",
        variable.c_str(), batch, seq, pairs, median(with), median(without), median(ratios));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto process_start = Clock::now();
  po::options_description options("speed: the host's side of bench/bench_speed.py");
  std::string model, plugins, forward, decode, device = "cpu", dtype = "float32", alternate;
  int rank = 0, tp = 1, port = 29500, threads = 1, repeats = 3;
  int64_t prompt_length = 32;
  bool sequence_parallel = false, kernel_times = false, op_counts = false;
  options.add_options()("help", "this text")("model", po::value(&model)->required(),
                                             "checkpoint folder")(
      "plugins", po::value(&plugins)->required(), "plugin folder")(
      "forward", po::value(&forward)->default_value(""), "forward shapes, e.g. 4x128,4x512")(
      "decode", po::value(&decode)->default_value(""),
      "greedy decoding as batch x new tokens, e.g. 1x64,8x64")("prompt", po::value(&prompt_length),
                                                               "prompt tokens for decoding")(
      "repeats", po::value(&repeats), "timed runs per measurement (median)")(
      "threads", po::value(&threads), "intra-op threads of this rank")(
      "tp", po::value(&tp), "tensor-parallel ranks")("rank", po::value(&rank), "this rank")(
      "port", po::value(&port), "rendezvous port")(
      "sequence-parallel", po::bool_switch(&sequence_parallel),
      "forward passes with sequence parallelism (split_gather)")(
      "kernel-times", po::bool_switch(&kernel_times),
      "one more forward per shape, timed kernel by kernel")(
      "op-counts", po::bool_switch(&op_counts),
      "one more generation per decode shape, counting its ATen operators")(
      "alternate", po::value(&alternate),
      "an A/B of a temporary switch: --repeats pairs of forwards per shape, one with this "
      "environment variable set to 1 and one without, in alternating order")(
      "device", po::value(&device), "cpu or cuda")("dtype", po::value(&dtype),
                                                   "float32, bfloat16, float16");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, options), vm);
    if (vm.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "speed: " << e.what() << "\n";
    return 2;
  }
  try {
    const bool cuda = device == "cuda";
    if (!cuda && device != "cpu") throw std::invalid_argument("--device: cpu or cuda");
    if (cuda) runtime::load_cuda_support();  // before anything asks ATen about CUDA
    at::set_num_threads(threads);
    at::manual_seed(0);
    std::unique_ptr<distributed::ProcessMesh> mesh;
    if (tp > 1) {
      distributed::MeshOptions mesh_options;
      mesh_options.master_port = port;
      mesh = std::make_unique<distributed::ProcessMesh>(rank, distributed::MeshShape{.tp = tp},
                                                        mesh_options);
    }
    host::keep_large_blocks_out_of_the_heap();
    const host::PluginRegistry registry = host::PluginRegistry::discover({plugins});
    Session session(
        SessionOptions{.checkpoint = model,
                       .dtype = parse_model_dtype(dtype, "--dtype"),
                       .device = cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU),
                       .shard = {.enable_sequence_parallelism = sequence_parallel}},
        [&](const ModelArgs& args) { return registry.create_model(args); }, mesh.get());
    host::reuse_freed_blocks_for_activations();
    const double built = seconds_since(process_start);
    if (rank == 0) std::printf("{\"kind\": \"load\", \"seconds\": %.4f}\n", built);
    const int64_t vocab = session.model().shape().vocab_size;
    for (const auto& [batch, seq] : parse_shapes(forward)) {
      // As the host's forward job: only rank 0, which writes the logits out, receives them.
      const ForwardInputs inputs{.input_ids = at::randint(vocab, {batch, seq}, at::kLong),
                                 .logits_on_first_tp_rank = true};
      // Copying one logit back waits for the GPU's queue (and copies nothing else: tp logits
      // narrowed past their vocabulary padding are strided).
      const double s = median_seconds(repeats, [&] {
        const at::Tensor logits = session.forward(inputs);
        if (logits.defined()) logits.select(0, 0).select(0, 0)[0].cpu();
      });
      if (rank == 0) {
        std::printf("{\"kind\": \"forward\", \"batch\": %ld, \"seq\": %ld, \"seconds\": %.5f}\n",
                    batch, seq, s);
      }
      if (!alternate.empty()) {
        print_alternation(alternate, repeats, rank, batch, seq, [&] {
          const at::Tensor logits = session.forward(inputs);
          if (logits.defined()) logits.select(0, 0).select(0, 0)[0].cpu();
        });
      }
      if (kernel_times) {
        print_kernel_times(
            "profiled_forward", [&] { session.forward(inputs); }, mesh.get(), rank);
      }
    }
    for (const auto& [batch, new_tokens] : parse_shapes(decode)) {
      const auto rows = prompts(batch, prompt_length, vocab);
      GenerationConfig generation;
      generation.max_new_tokens = new_tokens;
      const double s = median_seconds(repeats, [&] { session.generate(rows, generation); });
      if (rank == 0) {
        std::printf(
            "{\"kind\": \"decode\", \"batch\": %ld, \"new_tokens\": %ld, \"prompt\": %ld, "
            "\"seconds\": %.5f}\n",
            batch, new_tokens, prompt_length, s);
      }
      if (kernel_times) {
        print_kernel_times(
            "profiled_decode", [&] { session.generate(rows, generation); }, mesh.get(), rank);
      }
      if (!op_counts) continue;
      const auto ops = count_ops([&] { session.generate(rows, generation); });  // every rank
      for (const auto& [name, op] : ops) {
        if (rank != 0) break;
        std::printf(
            "{\"kind\": \"op_count\", \"batch\": %ld, \"new_tokens\": %ld, \"op\": \"%s\", "
            "\"calls\": %ld, \"seconds\": %.6f}\n",
            batch, new_tokens, name.c_str(), op.calls, op.seconds);
      }
    }
    if (rank == 0 && !decode.empty()) {
      std::printf("{\"kind\": \"skinny_prefetch\", \"summary\": \"%s\"}\n",
                  kernels::skinny_prefetch_summary().c_str());
    }
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "speed rank %d: %s\n", rank, e.what());
    return 1;
  }
}
