// Tests of the local launcher (ranks get their variables; the first failure stops the rest
// quickly and leaves no process behind) and of rank detection from launcher environments.
#include "launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "shardformer/error.h"
#include "test_env.h"

namespace shardformer::host {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using EnvFile = std::map<std::string, std::string>;

// The stand-in rank (tests/host/rank_probe.cpp), built beside this test.
fs::path rank_probe() { return testing::binary_dir() / "tests/host/rank_probe"; }

constexpr auto kQuickly = std::chrono::seconds(10);
// Longer than kQuickly: a job that ends quickly was stopped by SIGTERM, not by the SIGKILL.
constexpr auto kLongGrace = std::chrono::milliseconds(20000);

// A fresh folder per test for the probes' files.
class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized: "Name/0"
    dir_ = fs::temp_directory_path() / ("launcher_" + std::to_string(getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string prefix() const { return (dir_ / "rank").string(); }

  // Runs the probe at world_size with --print-env and the given arguments; times the launch.
  LaunchResult launch(int world_size, std::vector<std::string> args,
                      std::chrono::milliseconds grace = std::chrono::milliseconds(3000),
                      int master_port = 0) {
    std::vector<std::string> argv{rank_probe().string(), "--print-env", prefix()};
    argv.insert(argv.end(), args.begin(), args.end());
    LaunchOptions options;
    options.world_size = world_size;
    options.grace = grace;
    options.master_port = master_port;
    const auto start = Clock::now();
    LaunchResult result = launch_local_ranks(argv, options);
    elapsed_ = Clock::now() - start;
    return result;
  }

  EnvFile env_file(int rank) const {
    EnvFile values;
    std::ifstream in(prefix() + "." + std::to_string(rank));
    EXPECT_TRUE(in) << "rank " << rank << " wrote no file";
    for (std::string line; std::getline(in, line);) {
      const size_t equals = line.find('=');
      values[line.substr(0, equals)] = line.substr(equals + 1);
    }
    return values;
  }

  // Every probe that wrote its pid is gone (reaped, not a zombie, not orphaned), and the
  // launcher left no child unreaped. A rank stopped before it wrote its file is skipped: on a
  // loaded machine the others may be stopped before they start.
  void expect_no_rank_alive(int world_size) const {
    for (int rank = 0; rank < world_size; ++rank) {
      const std::string path = prefix() + "." + std::to_string(rank);
      if (!fs::exists(path)) continue;
      const pid_t pid = std::stoi(env_file(rank).at("PID"));
      EXPECT_EQ(kill(pid, 0), -1) << "rank " << rank << " (pid " << pid << ") is still there";
      EXPECT_EQ(errno, ESRCH);
    }
    EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1) << "a rank was left unreaped";
    EXPECT_EQ(errno, ECHILD);
  }

  // Blocks until every rank below world_size has written its file.
  void wait_for_ranks(int world_size) const {
    for (int rank = 0; rank < world_size; ++rank) {
      while (!fs::exists(prefix() + "." + std::to_string(rank))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }

  fs::path dir_;
  Clock::duration elapsed_{};
};

class LauncherAllSucceed : public LauncherTest, public ::testing::WithParamInterface<int> {};

TEST_P(LauncherAllSucceed, EveryRankSeesItsVariables) {
  const int world_size = GetParam();
  const LaunchResult result = launch(world_size, {});
  EXPECT_EQ(result.exit_code, 0) << result.message;
  EXPECT_EQ(result.failed_rank, -1);
  const std::string port = env_file(0)["MASTER_PORT"];
  EXPECT_GT(std::stoi(port), 0);
  for (int rank = 0; rank < world_size; ++rank) {
    EnvFile env = env_file(rank);
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["WORLD_SIZE"], std::to_string(world_size));
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], std::to_string(world_size));
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], port);
    EXPECT_EQ(env["SHARDFORMER_LAUNCHED"], "1");
    EXPECT_EQ(env["SHARDFORMER_LAUNCHER_STORE"], "1");  // served on MASTER_PORT, bound already
  }
  expect_no_rank_alive(world_size);
}

INSTANTIATE_TEST_SUITE_P(LauncherWorldSizes, LauncherAllSucceed, ::testing::Values(1, 2, 4));

TEST_F(LauncherTest, GivenPortIsPassedAndRankZeroServesTheStore) {
  const LaunchResult result = launch(2, {}, std::chrono::milliseconds(3000), 29517);
  EXPECT_EQ(result.exit_code, 0) << result.message;
  for (int rank = 0; rank < 2; ++rank) {
    EnvFile env = env_file(rank);
    EXPECT_EQ(env["MASTER_PORT"], "29517");
    EXPECT_EQ(env["SHARDFORMER_LAUNCHER_STORE"], "<unset>");
  }
}

TEST_F(LauncherTest, FailingRankStopsTheOthersQuickly) {
  const LaunchResult result =
      launch(4, {"--fail-rank", "1", "--exit-code", "3", "--sleep-others-ms", "60000"}, kLongGrace);
  EXPECT_LT(elapsed_, kQuickly);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_NE(result.message.find("rank 1"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("code 3"), std::string::npos) << result.message;
  expect_no_rank_alive(4);
}

TEST_F(LauncherTest, KilledRankNamesTheSignal) {
  const LaunchResult result =
      launch(3, {"--kill-rank", "1", "--sleep-others-ms", "60000"}, kLongGrace);
  EXPECT_LT(elapsed_, kQuickly);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.message, "rank 1 was killed by signal 9 (Killed)");
  expect_no_rank_alive(3);
}

// A rank killed by a signal the launcher did not send is the cause of a peer's failure seen
// before it (the peer saw it gone while the launcher could not yet wait for it): rank 0 exits
// with 1 first, rank 1 dies by SIGKILL 200 ms later, and the job's result is rank 1's.
TEST_F(LauncherTest, RankKilledAfterAPeerFailedIsTheCause) {
  const LaunchResult result = launch(3,
                                     {"--fail-rank", "0", "--kill-rank", "1", "--kill-after-ms",
                                      "200", "--sleep-others-ms", "60000"},
                                     kLongGrace);
  EXPECT_LT(elapsed_, kQuickly);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.message, "rank 1 was killed by signal 9 (Killed)");
  expect_no_rank_alive(3);
}

TEST_F(LauncherTest, RankIgnoringSigtermIsKilledAfterGrace) {
  const auto grace = std::chrono::milliseconds(300);
  const LaunchResult result =
      launch(2, {"--fail-rank", "1", "--sleep-others-ms", "60000", "--ignore-sigterm"}, grace);
  EXPECT_GE(elapsed_, grace);
  EXPECT_LT(elapsed_, kQuickly);
  EXPECT_EQ(result.failed_rank, 1);
  EXPECT_EQ(result.exit_code, 1);
  expect_no_rank_alive(2);
}

TEST_F(LauncherTest, MissingBinaryFailsWithCode127) {
  LaunchOptions options;
  options.world_size = 2;
  const LaunchResult result = launch_local_ranks({(dir_ / "no_such_binary").string()}, options);
  EXPECT_EQ(result.exit_code, 127);
  ASSERT_TRUE(result.failed_rank == 0 || result.failed_rank == 1) << result.failed_rank;
  EXPECT_EQ(result.message, "rank " + std::to_string(result.failed_rank) + " exited with code 127");
}

TEST_F(LauncherTest, LauncherSigtermIsForwardedAndHandlerRestored) {
  struct sigaction before {};
  sigaction(SIGTERM, nullptr, &before);
  // Once every rank is up, the launcher itself is asked to stop.
  std::thread stopper([this] {
    wait_for_ranks(2);
    kill(getpid(), SIGTERM);
  });
  const LaunchResult result = launch(2, {"--sleep-others-ms", "60000"}, kLongGrace);
  stopper.join();
  EXPECT_LT(elapsed_, kQuickly);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.failed_rank, -1);
  EXPECT_NE(result.message.find("signal 15"), std::string::npos) << result.message;
  expect_no_rank_alive(2);
  struct sigaction after {};
  sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST_F(LauncherTest, RejectsEmptyArgvAndBadWorldSize) {
  LaunchOptions options;
  EXPECT_THROW(launch_local_ranks({}, options), ConfigError);
  options.world_size = 0;
  EXPECT_THROW(launch_local_ranks({rank_probe().string()}, options), ConfigError);
}

// ---------------------------------------------------------------- rank detection

std::optional<RankEnv> detect(const std::map<std::string, std::string>& vars) {
  return rank_env_from_environment([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

// The ConfigError message of detecting vars, or "" (and a test failure) when none is thrown.
std::string detect_error(const std::map<std::string, std::string>& vars) {
  try {
    detect(vars);
  } catch (const ConfigError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no ConfigError";
  return "";
}

const std::map<std::string, std::string> kTorchrun{{"RANK", "5"},
                                                   {"WORLD_SIZE", "8"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"LOCAL_WORLD_SIZE", "4"},
                                                   {"MASTER_ADDR", "10.0.0.2"},
                                                   {"MASTER_PORT", "29500"}};

const std::map<std::string, std::string> kSlurm{{"SLURM_PROCID", "6"},
                                                {"SLURM_NTASKS", "8"},
                                                {"SLURM_LOCALID", "2"},
                                                {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                                                {"SLURM_LAUNCH_NODE_IPADDR", "10.0.0.7"},
                                                {"MASTER_PORT", "29501"}};

std::map<std::string, std::string> with(std::map<std::string, std::string> vars,
                                        const std::string& name, const std::string& value) {
  vars[name] = value;
  return vars;
}

std::map<std::string, std::string> without(std::map<std::string, std::string> vars,
                                           const std::string& name) {
  vars.erase(name);
  return vars;
}

TEST(LauncherRankEnv, NoLauncherIsNullopt) {
  EXPECT_FALSE(detect({}).has_value());
  EXPECT_FALSE(detect({{"PATH", "/usr/bin"}, {"MASTER_PORT", "1234"}}).has_value());
}

TEST(LauncherRankEnv, Torchrun) {
  const auto env = detect(kTorchrun);
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "10.0.0.2");
  EXPECT_EQ(env->master_port, 29500);
}

TEST(LauncherRankEnv, ShardformerLaunchedIsNamed) {
  EXPECT_EQ(detect(with(kTorchrun, "SHARDFORMER_LAUNCHED", "1"))->launcher, "shardformer");
}

TEST(LauncherRankEnv, StoreServedByTheLauncher) {
  const auto ours = with(kTorchrun, "SHARDFORMER_LAUNCHED", "1");
  EXPECT_FALSE(detect(ours)->launcher_store);  // rank 0 serves it
  EXPECT_TRUE(detect(with(ours, "SHARDFORMER_LAUNCHER_STORE", "1"))->launcher_store);
  // Only our launcher's own variable counts for our launcher, torchrun's for torchrun.
  EXPECT_FALSE(detect(with(kTorchrun, "SHARDFORMER_LAUNCHER_STORE", "1"))->launcher_store);
  EXPECT_TRUE(detect(with(kTorchrun, "TORCHELASTIC_USE_AGENT_STORE", "True"))->launcher_store);
}

TEST(LauncherRankEnv, SlurmWithTaskListAndLaunchNodeAddress) {
  const auto env = detect(kSlurm);
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->launcher, "slurm");
  EXPECT_EQ(env->rank, 6);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "10.0.0.7");
  EXPECT_EQ(env->master_port, 29501);
  EXPECT_EQ(detect(with(kSlurm, "MASTER_ADDR", "10.0.0.9"))->master_addr, "10.0.0.9");
}

TEST(LauncherRankEnv, SlurmUnevenTaskListPicksThisNode) {
  auto vars = with(with(kSlurm, "SLURM_NTASKS_PER_NODE", "3,2(x2),1"), "SLURM_NODEID", "2");
  vars["SLURM_LOCALID"] = "1";
  EXPECT_EQ(detect(vars)->local_world_size, 2);
  vars["SLURM_LOCALID"] = "0";
  EXPECT_EQ(detect(with(vars, "SLURM_NODEID", "3"))->local_world_size, 1);
  EXPECT_NE(detect_error(with(vars, "SLURM_NODEID", "4")).find("no tasks for node 4"),
            std::string::npos);
}

TEST(LauncherRankEnv, OpenMpi) {
  const auto env = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                           {"OMPI_COMM_WORLD_SIZE", "4"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                           {"MASTER_PORT", "29502"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->launcher, "openmpi");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_port, 29502);
}

TEST(LauncherRankEnv, TorchrunWinsOverSlurm) {
  std::map<std::string, std::string> vars = kSlurm;
  vars.insert(kTorchrun.begin(), kTorchrun.end());
  EXPECT_EQ(detect(vars)->launcher, "torchrun");
}

TEST(LauncherRankEnv, SingleRankNeedsNoPort) {
  const auto env = detect({{"SLURM_PROCID", "0"},
                           {"SLURM_NTASKS", "1"},
                           {"SLURM_LOCALID", "0"},
                           {"SLURM_NTASKS_PER_NODE", "1"}});
  ASSERT_TRUE(env.has_value());
  EXPECT_EQ(env->master_port, 0);
}

TEST(LauncherRankEnv, MalformedValuesNameTheVariable) {
  EXPECT_NE(detect_error(with(kTorchrun, "RANK", "five")).find("RANK='five' is not an integer"),
            std::string::npos);
  EXPECT_NE(detect_error(with(kTorchrun, "WORLD_SIZE", "8x")).find("WORLD_SIZE='8x'"),
            std::string::npos);
  EXPECT_NE(detect_error(with(kTorchrun, "RANK", "8")).find("RANK='8' is out of range"),
            std::string::npos);
  EXPECT_NE(detect_error(with(kTorchrun, "LOCAL_RANK", "4")).find("LOCAL_RANK='4'"),
            std::string::npos);
  EXPECT_NE(detect_error(with(kTorchrun, "MASTER_PORT", "70000")).find("MASTER_PORT='70000'"),
            std::string::npos);
  EXPECT_NE(
      detect_error(with(kSlurm, "SLURM_NTASKS_PER_NODE", "4(x")).find("SLURM_NTASKS_PER_NODE"),
      std::string::npos);
}

TEST(LauncherRankEnv, MissingVariablesAreNamed) {
  EXPECT_NE(detect_error(without(kSlurm, "MASTER_PORT")).find("MASTER_PORT is not set"),
            std::string::npos);
  EXPECT_NE(detect_error(without(kTorchrun, "WORLD_SIZE")).find("WORLD_SIZE is not set"),
            std::string::npos);
  EXPECT_NE(detect_error(without(kTorchrun, "LOCAL_RANK")).find("LOCAL_RANK is not set"),
            std::string::npos);
}

}  // namespace
}  // namespace shardformer::host
