// The tests' main: every test process gets a temporary folder of its own (TEST_TMPDIR, which
// ::testing::TempDir() returns), so the tests CTest runs side by side never share a file.
// A process started with TEST_TMPDIR set (by the user, or by a test that runs itself) keeps it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  fs::path own;
  if (std::getenv("TEST_TMPDIR") == nullptr) {
    std::error_code error;
    const fs::path base = fs::temp_directory_path(error);
    own = (error ? fs::path("/tmp") : base) / ("shardformer_test_" + std::to_string(::getpid()));
    fs::remove_all(own, error);
    fs::create_directories(own);
    ::setenv("TEST_TMPDIR", own.c_str(), 1);
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  if (!own.empty()) {
    std::error_code error;
    fs::remove_all(own, error);
  }
  return status;
}
