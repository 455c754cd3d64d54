// A failing rank ends a multi-rank job within a second, as the README claims: the failing rank
// prints the (system-wide) steady clock as it fails, and the test reads the clock when the host
// has exited. Both a rank that throws and one killed by SIGKILL are timed.
#include "test_env.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>

namespace {

struct HostRun {
  int status = -1;
  std::string output;
  std::chrono::steady_clock::time_point exited;
};

// Runs `shardformer-host run CONFIG` with extra environment variables, capturing its output.
HostRun run_host(const std::string& config, const std::vector<std::string>& env) {
  int pipe_fds[2];
  EXPECT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    close(pipe_fds[0]);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    const std::string host = shardformer::testing::host_binary().string();
    execl(host.c_str(), host.c_str(), "run", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  HostRun run;
  char buffer[4096];
  for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;)
    run.output.append(buffer, n);
  close(pipe_fds[0]);
  waitpid(pid, &run.status, 0);
  run.exited = std::chrono::steady_clock::now();
  return run;
}

class JobFailure : public ::testing::TestWithParam<std::string> {};

TEST_P(JobFailure, EndsTheWholeJobWithinOneSecondOfTheRankFailing) {
  const std::string config =
      (shardformer::testing::tools_dir().parent_path() / "configs" / "gpt2_tiny_tp2_generate.toml")
          .string();
  const HostRun run = run_host(
      config, {"SHARDFORMER_TEST_FAIL_RANK=1", "SHARDFORMER_TEST_FAIL_MODE=" + GetParam()});
  std::smatch match;
  ASSERT_TRUE(std::regex_search(run.output, match, std::regex("steady-clock ns ([0-9]+)")))
      << run.output;
  const std::chrono::steady_clock::time_point failed{
      std::chrono::nanoseconds(std::stoll(match[1].str()))};
  const double seconds = std::chrono::duration<double>(run.exited - failed).count();
  EXPECT_LT(seconds, 1.0) << run.output;
  std::printf("rank 1 (%s) failed; the job had ended %.3f s later\n", GetParam().c_str(), seconds);
  const int expected = GetParam() == "kill" ? 128 + 9 : 1;
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == expected) << run.output;
  EXPECT_NE(run.output.find("job failed: "), std::string::npos) << run.output;
}

INSTANTIATE_TEST_SUITE_P(Modes, JobFailure, ::testing::Values("throw", "kill"));

}  // namespace
