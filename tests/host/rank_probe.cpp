// A stand-in rank for the launcher tests: reports the rank variables it was given, then
// succeeds, fails, dies by a signal or sleeps, as its arguments say. No LibTorch.
//   --print-env PREFIX     write NAME=value lines (and PID) to PREFIX.<rank>, then, before
//                          failing, wait until every rank has written its file
//   --fail-rank R          rank R exits with --exit-code (default 1)
//   --kill-rank R          rank R raises SIGKILL
//   --kill-after-ms MS     ... after ignoring SIGTERM for MS (a rank already dying, which its
//                          peers can see as gone before the launcher can wait for it)
//   --sleep-others-ms MS   the other ranks sleep MS before exiting 0
//   --ignore-sigterm       the other ranks ignore SIGTERM
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace {

struct Options {
  std::string print_env;
  int fail_rank = -1, exit_code = 1, kill_rank = -1, kill_after_ms = 0, sleep_others_ms = 0;
  bool ignore_sigterm = false;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--ignore-sigterm") {
      options.ignore_sigterm = true;
      continue;
    }
    ++i;
    if (arg == "--print-env")
      options.print_env = value;
    else if (arg == "--fail-rank")
      options.fail_rank = std::atoi(value);
    else if (arg == "--exit-code")
      options.exit_code = std::atoi(value);
    else if (arg == "--kill-rank")
      options.kill_rank = std::atoi(value);
    else if (arg == "--kill-after-ms")
      options.kill_after_ms = std::atoi(value);
    else if (arg == "--sleep-others-ms")
      options.sleep_others_ms = std::atoi(value);
    else {
      std::fprintf(stderr, "rank_probe: unknown argument '%s'\n", arg.c_str());
      std::exit(2);
    }
  }
  return options;
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "<unset>";
}

// Written under a temporary name and renamed, so a file that exists is complete.
void print_env(const std::string& prefix, int rank) {
  const std::string path = prefix + "." + std::to_string(rank);
  {
    std::ofstream out(path + ".tmp");
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                             "MASTER_PORT", "SHARDFORMER_LAUNCHED", "SHARDFORMER_LAUNCHER_STORE"}) {
      out << name << "=" << env(name) << "\n";
    }
    out << "PID=" << getpid() << "\n";
  }
  std::filesystem::rename(path + ".tmp", path);
}

// Waits (at most 10 s) until every rank has written its file: the others are then ready.
void wait_for_peers(const std::string& prefix, int world_size) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int r = 0; r < world_size && std::chrono::steady_clock::now() < deadline;) {
    if (std::filesystem::exists(prefix + "." + std::to_string(r))) {
      ++r;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const int rank = std::atoi(env("RANK").c_str());
  const bool failing = rank == options.fail_rank || rank == options.kill_rank;
  if (options.ignore_sigterm && !failing) std::signal(SIGTERM, SIG_IGN);
  // A rank already dying ignores SIGTERM before it reports ready: a peer that fails once every
  // rank is ready cannot have the launcher's SIGTERM end it first.
  if (rank == options.kill_rank && options.kill_after_ms > 0) std::signal(SIGTERM, SIG_IGN);
  if (!options.print_env.empty()) {
    print_env(options.print_env, rank);
    if (failing) wait_for_peers(options.print_env, std::atoi(env("WORLD_SIZE").c_str()));
  }
  if (rank == options.kill_rank) {
    if (options.kill_after_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(options.kill_after_ms));
    }
    raise(SIGKILL);
  }
  if (rank == options.fail_rank) return options.exit_code;
  std::this_thread::sleep_for(std::chrono::milliseconds(options.sleep_others_ms));
  return 0;
}
