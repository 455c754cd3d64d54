// OpenBLAS behind kernels::gemm (blas_gemm.h): each thread multiplies its own block of rows or
// columns with a single-threaded sgemm, so that ATen's OpenMP pool is the only one that runs.
// The library is opened while the process starts, told to start no threads of its own.
#include "blas_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace shardformer::kernels {
namespace {

// How sgemm reads a row-major matrix [rows, cols] at strides (rs, cs): as it is (rows
// contiguous), transposed (columns contiguous), or not at all.
struct Layout {
  bool readable = false;
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 1;
};

Layout layout_of(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if (cols <= 1 || cs == 1) {
    const int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
    if (ld >= std::max<int64_t>(cols, 1)) return {true, CblasNoTrans, ld};
  }
  if (rows <= 1 || rs == 1) {
    const int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
    if (ld >= std::max<int64_t>(rows, 1)) return {true, CblasTrans, ld};
  }
  return {};
}

at::Tensor readable(const at::Tensor& t) {
  return layout_of(t.size(0), t.size(1), t.stride(0), t.stride(1)).readable ? t : t.contiguous();
}

// OpenBLAS opened with OPENBLAS_NUM_THREADS = 1 in the environment, which it reads once as it
// loads. Linked instead, it loaded before main() with a helper thread per further core, which
// spun for about 0.1 s of CPU in every process (0.11 s of user time in an otherwise idle program)
// on the cores the job's own threads were starting on; setting its thread count later leaves
// that thread spinning. Opened here, while the process starts and runs one thread (setenv is not
// thread-safe), and the environment put back as it was: the variable is for this load only.
struct OpenBlas {
  decltype(&scipy_cblas_sgemm) sgemm = nullptr;
  decltype(&scipy_openblas_get_corename) corename = nullptr;
  decltype(&scipy_openblas_get_num_threads) num_threads = nullptr;
  std::string error;  // why it could not be opened ("" when it was)
};

OpenBlas open_openblas() {
  constexpr const char* kVariable = "OPENBLAS_NUM_THREADS";
  const char* set = std::getenv(kVariable);
  const std::string before = set != nullptr ? set : "";
  ::setenv(kVariable, "1", 1);
  void* handle = ::dlopen(SHARDFORMER_OPENBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  const char* failure = handle == nullptr ? ::dlerror() : nullptr;
  if (set != nullptr) {
    ::setenv(kVariable, before.c_str(), 1);
  } else {
    ::unsetenv(kVariable);
  }
  OpenBlas lib;
  const std::string where = std::string("OpenBLAS (") + SHARDFORMER_OPENBLAS_LIBRARY + ")";
  if (handle == nullptr) {
    lib.error = where + " could not be opened: " + (failure != nullptr ? failure : "") +
                "; run tools/setup.sh, or choose another GEMM with SHARDFORMER_CPU_GEMM";
    return lib;
  }
  lib.sgemm = reinterpret_cast<decltype(lib.sgemm)>(::dlsym(handle, "scipy_cblas_sgemm"));
  lib.corename =
      reinterpret_cast<decltype(lib.corename)>(::dlsym(handle, "scipy_openblas_get_corename"));
  lib.num_threads = reinterpret_cast<decltype(lib.num_threads)>(
      ::dlsym(handle, "scipy_openblas_get_num_threads"));
  if (lib.sgemm == nullptr || lib.corename == nullptr || lib.num_threads == nullptr) {
    lib.error = where +
                " lacks scipy_cblas_sgemm, scipy_openblas_get_corename or "
                "scipy_openblas_get_num_threads: not the scipy-openblas32 build";
  }
  return lib;
}

const OpenBlas& openblas() {
  static const OpenBlas lib = open_openblas();
  TORCH_CHECK(lib.error.empty(), lib.error);
  return lib;
}

// Opens it while the shared library that holds these kernels is initialized.
[[maybe_unused]] const bool opened_at_start = [] {
  try {
    (void)openblas();
  } catch (const c10::Error&) {  // reported again by the first call that needs it
  }
  return true;
}();
}  // namespace

void blas_gemm(const at::Tensor& a_in, const at::Tensor& b_in, const at::Tensor& bias,
               bool accumulate, const at::Tensor& out, int64_t threads) {
  const OpenBlas& lib = openblas();
  const at::Tensor a = readable(a_in), b = readable(b_in);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (k == 0) {  // an empty sum: out keeps its values or becomes the bias
    if (!accumulate) out.zero_();
    if (bias.defined()) out.add_(bias);
    return;
  }
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  TORCH_CHECK(m <= kMax && n <= kMax && k <= kMax && out.stride(0) <= kMax && a.stride(0) <= kMax &&
                  a.stride(1) <= kMax && b.stride(0) <= kMax && b.stride(1) <= kMax,
              "gemm: OpenBLAS takes 32-bit sizes and strides, not a ", a.sizes(), " . b ",
              b.sizes());
  const Layout la = layout_of(m, k, a.stride(0), a.stride(1));
  const Layout lb = layout_of(k, n, b.stride(0), b.stride(1));
  const float* ap = a.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  const float* biasp = bias.defined() ? bias.data_ptr<float>() : nullptr;
  float* cp = out.data_ptr<float>();
  const int64_t ldc = m <= 1 ? std::max<int64_t>(n, 1) : out.stride(0);
  // The longer side of the output is split, in blocks of 16, with about 2^20 multiply-adds or
  // more per part; each part's sgemm packs all of the other operand, a 1/16 share of its work
  // at most.
  const bool along_m = m >= n;
  const int64_t extent = along_m ? m : n;
  const int64_t by_work = std::max<int64_t>(1, m * n * std::max<int64_t>(k, 1) >> 20);
  const int64_t parts = std::clamp<int64_t>(std::min(by_work, (extent + 15) / 16), 1, threads);
  const int64_t step = ((extent + parts - 1) / parts + 15) / 16 * 16;
  at::parallel_for(0, (extent + step - 1) / step, 1, [&](int64_t begin, int64_t end) {
    for (int64_t part = begin; part < end; ++part) {
      const int64_t lo = part * step, len = std::min(step, extent - lo);
      const int64_t rows = along_m ? len : m, cols = along_m ? n : len;
      const int64_t row0 = along_m ? lo : 0, col0 = along_m ? 0 : lo;
      float* c = cp + row0 * ldc + col0;
      if (biasp != nullptr) {  // C starts as (C +) bias; sgemm then adds the product
        for (int64_t i = 0; i < rows; ++i) {
          float* ci = c + i * ldc;
          for (int64_t j = 0; j < cols; ++j) ci[j] = (accumulate ? ci[j] : 0.f) + biasp[col0 + j];
        }
      }
      const float beta = accumulate || biasp != nullptr ? 1.f : 0.f;
      lib.sgemm(CblasRowMajor, la.trans, lb.trans, static_cast<int>(rows), static_cast<int>(cols),
                static_cast<int>(k), 1.f, ap + row0 * a.stride(0), static_cast<int>(la.ld),
                bp + col0 * b.stride(1), static_cast<int>(lb.ld), beta, c, static_cast<int>(ldc));
    }
  });
}

std::string blas_name() {
  std::string version = OPENBLAS_VERSION;  // " OpenBLAS 0.3.34.481.3 "
  version.erase(0, version.find_first_not_of(' '));
  version.erase(version.find_last_not_of(' ') + 1);
  return version + " (" + openblas().corename() + " kernels)";
}

int blas_threads() { return openblas().num_threads(); }

}  // namespace shardformer::kernels
