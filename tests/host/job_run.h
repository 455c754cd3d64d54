// Runs the host on a job config written into a test's own folder and collects what it printed
// and the JSON lines it wrote: the text-in/text-out tests' harness (generate, transcribe).
#pragma once

#include "test_env.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace shardformer::testing {

struct JobRun {
  int status = -1;
  std::string console;                // stdout and stderr together
  std::vector<nlohmann::json> lines;  // the output file's JSON lines
};

// A folder of its own for the running test, emptied; removed by the fixture's TearDown.
inline std::filesystem::path fresh_test_dir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      (prefix + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `toml` to dir/job.toml and runs it; `output` is the JSON lines file the job writes.
inline JobRun run_job(const std::filesystem::path& dir, const std::string& toml,
                      const std::filesystem::path& output) {
  const std::filesystem::path config = dir / "job.toml";
  std::ofstream(config) << toml;
  const std::filesystem::path log = dir / "log.txt";
  std::filesystem::remove(output);
  const std::string command =
      host_binary().string() + " run " + config.string() + " > " + log.string() + " 2>&1";
  JobRun run;
  const int raw = std::system(command.c_str());
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream log_in(log);
  std::stringstream text;
  text << log_in.rdbuf();
  run.console = text.str();
  std::ifstream in(output);
  for (std::string line; std::getline(in, line);) run.lines.push_back(nlohmann::json::parse(line));
  return run;
}

inline std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace shardformer::testing
