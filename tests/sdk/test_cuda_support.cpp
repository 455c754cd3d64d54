// LibTorch's CUDA support is loaded on demand: a CPU process never maps libtorch_cuda, and
// load_cuda_support() loads the CUDA module beside the SDK, which registers CUDA with ATen.
// Every check that asks ATen about CUDA runs in a fresh child process (ATen keeps its first
// answer, and the tests before these in the same process may have asked: oneDNN's linear does).
#include "shardformer/error.h"
#include "shardformer/runtime/cuda_support.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace shardformer::runtime {
namespace {

// Death tests re-run this executable for the one test ("threadsafe"), instead of forking a
// process that already ran other tests; gtest restores the flag after each test.
void fresh_child_processes() { GTEST_FLAG_SET(death_test_style, "threadsafe"); }

void skip_without_module() {
  if (!std::filesystem::exists(cuda_module_path())) {
    GTEST_SKIP() << "no CUDA module in this build (a torch wheel without libtorch_cuda)";
  }
}

TEST(CudaSupport, ACpuProcessDoesNotMapLibtorchCuda) {
  fresh_child_processes();
  EXPECT_FALSE(cuda_support_loaded());
  EXPECT_EXIT(std::exit(!torch::cuda::is_available() && !cuda_support_loaded() ? 0 : 1),
              ::testing::ExitedWithCode(0), "");
}

TEST(CudaSupport, LoadingTheModuleRegistersCudaWithATen) {
  fresh_child_processes();
  skip_without_module();
  if (::testing::Test::IsSkipped()) return;
  EXPECT_EXIT(
      {
        ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
        const CudaModule& module = load_cuda_support();
        const bool registered = cuda_support_loaded() && &module == &load_cuda_support() &&
                                at::detail::getCUDAHooks().versionCUDART() > 0 &&
                                !torch::cuda::is_available();
        std::exit(registered ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CudaSupport, ALoadAfterATenAnsweredIsRefused) {
  fresh_child_processes();
  skip_without_module();
  if (::testing::Test::IsSkipped()) return;
  EXPECT_EXIT(
      {
        (void)torch::cuda::is_available();
        try {
          load_cuda_support();
        } catch (const Error& e) {
          const bool named = std::string(e.what()).find("already answered") != std::string::npos;
          std::exit(named ? 0 : 2);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace shardformer::runtime
