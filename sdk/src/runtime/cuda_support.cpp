// Finds and loads the CUDA module beside the SDK's own file (dladdr), once per process.
#include "shardformer/runtime/cuda_support.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <fstream>
#include <mutex>
#include <string>

namespace shardformer::runtime {

namespace {

constexpr const char* kModuleFile = "libshardformer_cuda.so";
constexpr const char* kEntryPoint = "shardformer_cuda_module";

}  // namespace

std::filesystem::path cuda_module_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&cuda_module_path), &info) == 0 ||
      info.dli_fname == nullptr) {
    throw Error("cannot find the SDK's own file to look for the CUDA module beside it");
  }
  return std::filesystem::path(info.dli_fname).parent_path() / kModuleFile;
}

const CudaModule& load_cuda_support() {
  static std::mutex mutex;
  static const CudaModule* module = nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (module) return *module;
  const std::filesystem::path path = cuda_module_path();
  // RTLD_GLOBAL: the CUDA libraries' symbols serve later loads (a plugin's CUDA kernels).
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (handle == nullptr) {
    const char* reason = ::dlerror();
    throw Error(str("cannot load LibTorch's CUDA support from ", path.string(), ": ",
                    reason ? reason : "unknown reason",
                    " (this build has no CUDA module where the torch wheel has no libtorch_cuda)"));
  }
  using Entry = const CudaModule* (*)();
  const auto entry = reinterpret_cast<Entry>(::dlsym(handle, kEntryPoint));
  if (entry == nullptr) {
    throw Error(str(path.string(), ": not a shardformer CUDA module (no ", kEntryPoint, ")"));
  }
  // ATen looks its CUDA hooks up once: if it did so before this load, it keeps the stub
  // that says CUDA is absent, and CUDA would silently stay off.
  try {
    (void)at::detail::getCUDAHooks().versionCUDART();
  } catch (const c10::Error&) {
    throw Error(str("LibTorch's CUDA support was loaded from ", path.string(),
                    " after ATen had already answered that CUDA is absent; load it first"));
  }
  module = entry();
  return *module;
}

bool cuda_support_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libtorch_cuda.so") != std::string::npos) return true;
  }
  return false;
}

}  // namespace shardformer::runtime
