// One rank of the sequence-parallelism benchmark (bench/bench_sequence_parallel.py starts the
// ranks): builds a GPT-2 base model at a tp / sp layout, runs a short warm-up step (so that the
// gradients exist), then one forward + backward of batch x seq random tokens, and prints the
// step's peak activation memory (peak RSS above the RSS before it) and time as one JSON line.
// The embeddings are frozen: the layers' activations are what is measured.
#include "plugin_registry.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/runtime/session.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <malloc.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

using namespace shardformer;
namespace po = boost::program_options;

namespace {

// VmRSS and VmHWM of this process, in MiB.
std::pair<double, double> rss_and_peak_mib() {
  std::ifstream status("/proc/self/status");
  double now = 0, peak = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) now = std::stod(line.substr(6)) / 1024.0;
    if (line.rfind("VmHWM:", 0) == 0) peak = std::stod(line.substr(6)) / 1024.0;
  }
  return {now, peak};
}

// Linux: writing 5 to clear_refs resets VmHWM to the current RSS.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// Forward and backward of the base model with a loss every rank computes alike.
void step(Session& session, int64_t batch, int64_t seq, int64_t vocab) {
  const at::Tensor ids = at::randint(vocab, {batch, seq}, at::kLong);  // same seed everywhere
  const at::Tensor hidden = session.model().forward(ForwardInputs{.input_ids = ids});
  hidden.pow(2).mean().backward();
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description options("sequence_memory: one rank of bench_sequence_parallel.py");
  std::string model, plugins, mode;
  int rank = 0, tp = 1, sp = 1, port = 29500, threads = 1;
  int64_t seq = 2048, batch = 1;
  int64_t shared_memory_min_bytes = distributed::MeshOptions{}.shared_memory_min_bytes;
  options.add_options()("help", "this text")("model", po::value(&model)->required(),
                                             "GPT-2 checkpoint folder")(
      "plugins", po::value(&plugins)->required(), "folder holding the gpt2 plugin")(
      "mode", po::value(&mode)->default_value("none"),
      "none (tensor parallelism only), split_gather, overlap, all_to_all, ring_attn")(
      "tp", po::value(&tp), "tensor-parallel ranks")("sp", po::value(&sp),
                                                     "sequence-parallel ranks (sp axis)")(
      "rank", po::value(&rank), "this rank")("port", po::value(&port), "rendezvous port")(
      "seq", po::value(&seq), "tokens per sequence")("batch", po::value(&batch), "sequences")(
      "threads", po::value(&threads), "intra-op threads of this rank")(
      "shared-memory-min-bytes", po::value(&shared_memory_min_bytes),
      "MeshOptions::shared_memory_min_bytes (-1: Gloo alone)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, options), vm);
    if (vm.count("help")) {
      std::cout << options << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const std::exception& e) {
    std::cerr << "sequence_memory: " << e.what() << "\n";
    return 2;
  }
  try {
    at::set_num_threads(threads);
    at::manual_seed(0);
    mallopt(M_MMAP_THRESHOLD, 1 << 20);  // freed activations leave the RSS at once
    distributed::MeshOptions mesh_options;
    mesh_options.master_port = port;
    mesh_options.timeout = std::chrono::seconds(1800);
    mesh_options.shared_memory_min_bytes = shared_memory_min_bytes;
    distributed::ProcessMesh mesh(rank, {.sp = sp, .tp = tp}, mesh_options);
    const host::PluginRegistry registry = host::PluginRegistry::discover({plugins});
    SessionOptions session_options{.checkpoint = model, .architecture = "GPT2Model"};
    if (mode != "none") {
      session_options.shard.enable_sequence_parallelism = true;
      session_options.shard.sequence_parallelism_mode =
          parse_sequence_mode(mode == "overlap" ? "split_gather" : mode);
      session_options.shard.enable_sequence_overlap = mode == "overlap";
    }
    Session session(
        session_options, [&](const ModelArgs& args) { return registry.create_model(args); }, &mesh);
    session.model().train();
    // The embeddings' dense gradients would dwarf the layers' activations: frozen.
    for (auto& item : session.model().named_parameters()) {
      if (item.key().find("wte.") != std::string::npos ||
          item.key().find("wpe.") != std::string::npos) {
        item.value().set_requires_grad(false);
      }
    }
    const int64_t vocab = session.model().shape().vocab_size;
    step(session, 1, 64, vocab);  // allocates the gradients
    for (auto& p : session.model().parameters()) {
      if (p.requires_grad()) p.mutable_grad().zero_();
    }
    // The shared-memory transport's buffers are a fixed cost of the mesh (as NCCL's are), not
    // activations: one chunk-sized all-reduce per group maps all of their pages before measuring.
    for (const distributed::ProcessGroup* group : {&mesh.tp(), &mesh.sp()}) {
      at::Tensor chunk = at::zeros({mesh_options.shared_memory_chunk_bytes / 4});
      group->all_reduce_(chunk);
    }
    // Loading leaves about 130 MiB of free heap resident; glibc would serve the step's blocks
    // from it without raising the RSS, by an amount that varies from run to run (30-70 MiB).
    malloc_trim(0);
    mesh.world().barrier();
    reset_peak_rss();
    const double before = rss_and_peak_mib().first;
    const auto start = std::chrono::steady_clock::now();
    step(session, batch, seq, vocab);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double peak = rss_and_peak_mib().second;
    std::printf(
        "{\"rank\": %d, \"rss_before_mib\": %.1f, \"peak_mib\": %.1f, \"activation_mib\": %.1f, "
        "\"step_s\": %.3f}\n",
        rank, before, peak, peak - before, seconds);
    mesh.world().barrier();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 1;
  }
}
