// Helpers shared by the SDK tests: a fresh temporary folder per test, file writing, the
// Python-written fixture folder, checks on CheckpointError messages. No LibTorch here: the
// tokenizer tests build without it (tensor_util.h has the tensor helpers).
#pragma once

#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "test_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

namespace shardformer::testing {

// Gives each test an empty folder named after it, removed afterwards.
template <typename Base = ::testing::Test>
class TempDirTest : public Base {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(test->test_suite_name()) + "." + test->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    dir_ = std::filesystem::path(::testing::TempDir()) / ("shardformer_" + name);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// Runs `action`, expecting an exception of type E whose message holds every part.
template <typename E>
void expect_error(const std::function<void()>& action, const std::vector<std::string>& parts) {
  try {
    action();
  } catch (const E& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "message lacks \"" << part << "\": " << message;
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return;
  }
  ADD_FAILURE() << "nothing was thrown";
}

// Runs `action` and checks that it throws CheckpointError whose message holds every part.
inline void expect_checkpoint_error(const std::function<void()>& action,
                                    const std::vector<std::string>& parts) {
  expect_error<CheckpointError>(action, parts);
}

// Tests reading <test data>/safetensors, written by tools/make_safetensors_fixtures.py. They
// fail (not skip) when the folder is missing.
class PythonFixturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_data_dir() / "safetensors";
    ASSERT_TRUE(std::filesystem::is_directory(dir_))
        << dir_ << " does not exist: run tools/make_safetensors_fixtures.py " << dir_;
  }

  std::filesystem::path dir_;
};

// Runs `check(i)` for every index, expecting it to return "" (a match) or a description of
// the mismatch; reports the first few mismatches and the totals.
inline void expect_all(const std::string& what, size_t count,
                       const std::function<std::string(size_t)>& check) {
  size_t matched = 0;
  std::vector<std::string> failures;
  for (size_t i = 0; i < count; ++i) {
    std::string failure = check(i);
    if (failure.empty()) {
      ++matched;
    } else if (failures.size() < 5) {
      failures.push_back(str("  #", i, ": ", failure));
    }
  }
  std::cout << "[ " << what << " ] " << matched << "/" << count << " match\n";
  EXPECT_EQ(matched, count) << what << ":\n" << join(failures, "\n");
}

// Token ids as "[1, 2, 3]" for failure messages.
inline std::string show(const std::vector<int64_t>& ids) { return str("[", join(ids, ", "), "]"); }

}  // namespace shardformer::testing
