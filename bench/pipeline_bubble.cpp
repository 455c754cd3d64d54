// Measures each pipeline schedule's bubble (idle fraction per stage) and live activations with
// the real runner and Gloo between forked ranks, on sleep-timed stages (so 2 cores do not
// distort it), next to the theory and the ideal-machine simulation.
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/model.h"
#include "shardformer/pipeline/pipeline_runner.h"
#include "shardformer/pipeline/schedule.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/autograd.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <thread>
#include <vector>

using namespace shardformer;
using namespace shardformer::pipeline;
namespace po = boost::program_options;

namespace {

constexpr int64_t kHidden = 16, kSeq = 8;

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Identity whose forward and backward take a fixed time.
class Sleep : public torch::autograd::Function<Sleep> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            double forward_s, double backward_s) {
    ctx->saved_data["backward_s"] = backward_s;
    sleep_seconds(forward_s);
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    sleep_seconds(ctx->saved_data["backward_s"].toDouble());
    return {grads[0], at::Tensor(), at::Tensor()};
  }
};

// A stage of chunks that each cost forward_s / backward_s.
class SleepStage : public Model {
 public:
  SleepStage(const ParallelContext& parallel, double forward_s, double backward_s)
      : forward_s_(forward_s), backward_s_(backward_s) {
    bind(std::make_shared<ShardingPlan>(), &parallel);
    weight_ = register_parameter("weight", at::ones({kHidden}));
  }
  at::Tensor forward(const ForwardInputs& inputs) override {
    const at::Tensor x =
        starts_model(inputs.chunk)
            ? inputs.input_ids.to(at::kFloat).unsqueeze(-1).expand({-1, -1, kHidden})
            : inputs.hidden_states;  // [batch, seq, hidden]
    return Sleep::apply(x * weight_, forward_s_, backward_s_);
  }
  at::Tensor loss(const ForwardInputs& inputs, const at::Tensor&) override {
    return forward(inputs).mean();
  }
  ModelShape shape() const override { return {.hidden_size = kHidden}; }
  std::string output_name() const override { return "logits"; }

 private:
  double forward_s_, backward_s_;
  at::Tensor weight_;
};

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

struct Case {
  ScheduleKind schedule;
  ScheduleShape shape;
};

// What a rank measured: its mean idle fraction and the most (micro-batch, chunk) activations
// it kept alive.
struct RankReport {
  double idle = -1;
  int64_t max_live = -1;
};

// One rank: a warm-up step, then `steps` measured ones; writes its RankReport to fd.
void run_rank(int rank, int port, const Case& c, double forward_s, int steps, int fd) {
  at::set_num_threads(1);
  distributed::MeshOptions options;
  options.master_port = port;
  distributed::ProcessMesh mesh(rank, {.pp = c.shape.num_stages}, options);
  const int64_t pieces = c.shape.num_stages * c.shape.num_chunks;
  PipelineStageManager stages(c.shape.num_stages, rank, pieces, c.shape.num_chunks);
  ParallelContext parallel;
  parallel.pipeline = &stages;
  // A chunk holds 1 / chunks of the stage's layers: its time shrinks with it.
  const double chunk_forward = forward_s / static_cast<double>(c.shape.num_chunks);
  SleepStage model(parallel, chunk_forward, 2 * chunk_forward);
  PipelineRunner runner(model, mesh.pp(),
                        {.schedule = c.schedule, .num_microbatches = c.shape.num_microbatches});
  const at::Tensor ids = at::ones({c.shape.num_microbatches, kSeq}, at::kLong);  // [m, seq]
  const ForwardInputs batch{.input_ids = ids};
  double idle = 0;
  for (int step = 0; step <= steps; ++step) {
    runner.train_step(batch, ids);
    if (step > 0) idle += runner.stats().idle_fraction();
  }
  const RankReport report{idle / steps, runner.stats().max_live_microbatches};
  if (write(fd, &report, sizeof(report)) != sizeof(report)) _exit(2);
}

// Forks the case's ranks and returns each one's report.
std::vector<RankReport> measure(const Case& c, double forward_s, int steps) {
  const int port = free_port();
  const auto p = static_cast<int>(c.shape.num_stages);
  std::vector<int> read_fds;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < p; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      int code = 0;
      try {
        run_rank(rank, port, c, forward_s, steps, fds[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 1;
      }
      _exit(code);
    }
    close(fds[1]);
    read_fds.push_back(fds[0]);
    pids.push_back(pid);
  }
  std::vector<RankReport> reports(p);
  for (int rank = 0; rank < p; ++rank) {
    if (read(read_fds[rank], &reports[rank], sizeof(RankReport)) != sizeof(RankReport)) {
      reports[rank] = RankReport{};
    }
    close(read_fds[rank]);
    waitpid(pids[rank], nullptr, 0);
  }
  return reports;
}

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> values;
  size_t start = 0;
  while (start < text.size()) {
    const size_t comma = text.find(',', start);
    values.push_back(std::stoll(text.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description desc(
      "pipeline_bubble: idle fraction per stage of each pipeline schedule (forked local ranks, "
      "Gloo)");
  std::string stages_list, microbatch_list;
  double forward_ms = 0;
  int64_t chunks = 2;
  int steps = 2;
  desc.add_options()("help", "this text")("stages", po::value(&stages_list)->default_value("2,4"),
                                          "pipeline sizes")(
      "microbatches", po::value(&microbatch_list)->default_value("1,2,4,8,16"),
      "micro-batch counts")("forward-ms", po::value(&forward_ms)->default_value(20.0),
                            "forward time of one stage per micro-batch (backward: twice)")(
      "chunks", po::value(&chunks)->default_value(2), "model chunks of the interleaved schedule")(
      "steps", po::value(&steps)->default_value(2), "measured steps (after one warm-up)");
  po::variables_map vars;
  po::store(po::parse_command_line(argc, argv, desc), vars);
  po::notify(vars);
  if (vars.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  std::printf(
      "| schedule | p | m | v | idle, mean of stages | idle, worst stage | theory | "
      "ideal simulation | live activations, stage 0 |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t p : parse_list(stages_list)) {
    for (int64_t m : parse_list(microbatch_list)) {
      for (ScheduleKind kind :
           {ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleaved}) {
        const int64_t v = kind == ScheduleKind::kInterleaved ? chunks : 1;
        const Case c{kind, {p, m, v}};
        if (kind == ScheduleKind::kInterleaved && m % p != 0) continue;
        const std::vector<RankReport> reports = measure(c, forward_ms / 1e3, steps);
        double mean = 0, worst = 0;
        for (const RankReport& r : reports) {
          mean += r.idle / static_cast<double>(p);
          worst = std::max(worst, r.idle);
        }
        const auto sim = simulate_schedule(kind, c.shape, 1.0 / v, 2.0 / v);
        const double sim_mean =
            std::accumulate(sim.idle_fraction.begin(), sim.idle_fraction.end(), 0.0) / p;
        std::printf("| %s | %ld | %ld | %ld | %.3f | %.3f | %.3f | %.3f | %ld |\n",
                    schedule_name(kind), static_cast<long>(p), static_cast<long>(m),
                    static_cast<long>(v), mean, worst, theoretical_bubble(c.shape), sim_mean,
                    static_cast<long>(reports.front().max_live));
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
