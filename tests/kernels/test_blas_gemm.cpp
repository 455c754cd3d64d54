// The products through OpenBLAS (kernels/cpu/blas_gemm.h) against fp64 ATen, on every CPU
// whatever GEMM it picks: operands as they are, transposed and in strides OpenBLAS cannot read,
// with and without bias and accumulation, into a column slice, empty sums, one and two threads.
#include "blas_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace shardformer;

namespace {

enum class Stored { kRows, kColumns, kStrided };  // rows contiguous, columns contiguous, neither

// A [rows, cols] matrix of random values stored as `how`.
at::Tensor matrix(int64_t rows, int64_t cols, Stored how) {
  switch (how) {
    case Stored::kRows: return at::randn({rows, cols});
    case Stored::kColumns: return at::randn({cols, rows}).t();
    case Stored::kStrided:
      return at::randn({2 * rows + 1, 2 * cols + 1})
          .slice(0, 0, 2 * rows, 2)
          .slice(1, 0, 2 * cols, 2);
  }
  return {};
}

std::string name(Stored how) {
  return how == Stored::kRows ? "rows" : how == Stored::kColumns ? "columns" : "strided";
}

TEST(BlasGemm, EqualsFp64ForEveryLayoutBiasAndAccumulation) {
  at::manual_seed(0);
  const int previous = at::get_num_threads();
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {1, 40, 70}, {70, 40, 1}, {300, 130, 70}, {40, 300, 257}, {33, 0, 5}}) {
    for (const Stored sa : {Stored::kRows, Stored::kColumns, Stored::kStrided}) {
      for (const Stored sb : {Stored::kRows, Stored::kColumns, Stored::kStrided}) {
        for (const bool with_bias : {false, true}) {
          for (const bool accumulate : {false, true}) {
            for (const int threads : {1, 2}) {
              at::set_num_threads(threads);
              const at::Tensor a = matrix(m, k, sa), b = matrix(k, n, sb);
              const at::Tensor bias = with_bias ? at::randn({n}) : at::Tensor();
              const at::Tensor wide = at::randn({m, n + 9});  // out: columns 4 .. n + 4
              const at::Tensor before = wide.clone();
              kernels::blas_gemm(a, b, bias, accumulate, wide.narrow(1, 4, n), threads);

              at::Tensor want = at::mm(a.to(at::kDouble), b.to(at::kDouble));  // [m, n]
              if (with_bias) want += bias.to(at::kDouble);
              if (accumulate) want += before.narrow(1, 4, n).to(at::kDouble);
              const std::string what =
                  std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) + " a " +
                  name(sa) + ", b " + name(sb) + (with_bias ? ", bias" : "") +
                  (accumulate ? ", accumulate" : "") + ", " + std::to_string(threads) + " threads";
              const double scale = want.abs().max().item<double>() + 1.0;
              EXPECT_LT((wide.narrow(1, 4, n).to(at::kDouble) - want).abs().max().item<double>(),
                        1e-5 * scale)
                  << what;
              EXPECT_TRUE(at::equal(wide.narrow(1, 0, 4), before.narrow(1, 0, 4))) << what;
              EXPECT_TRUE(at::equal(wide.narrow(1, n + 4, 5), before.narrow(1, n + 4, 5))) << what;
            }
          }
        }
      }
    }
  }
  at::set_num_threads(previous);
}

TEST(BlasGemm, NamesTheLibraryAndTheKernelsItPicked) {
  const std::string got = kernels::blas_name();
  EXPECT_EQ(got.rfind("OpenBLAS 0.", 0), 0u) << got;
  EXPECT_NE(got.find(" kernels)"), std::string::npos) << got;
}

}  // namespace

// OpenBLAS was opened with no threads of its own (linked, it spun one per further core for 0.1 s
// in every process), and the environment variable that told it so is as the process began.
TEST(BlasGemm, OpenBlasRunsNoThreadsOfItsOwnAndLeavesTheEnvironmentAsItWas) {
  EXPECT_EQ(kernels::blas_threads(), 1);
  std::ifstream environ_file("/proc/self/environ", std::ios::binary);
  const std::string start((std::istreambuf_iterator<char>(environ_file)),
                          std::istreambuf_iterator<char>());
  std::optional<std::string> at_start;
  for (size_t from = 0; from < start.size();) {
    const size_t end = std::min(start.find('\0', from), start.size());
    const std::string entry = start.substr(from, end - from);
    if (entry.rfind("OPENBLAS_NUM_THREADS=", 0) == 0) at_start = entry.substr(21);
    from = end + 1;
  }
  const char* now = std::getenv("OPENBLAS_NUM_THREADS");
  EXPECT_EQ(now != nullptr ? std::optional<std::string>(now) : std::nullopt, at_start);
}
