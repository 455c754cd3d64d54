// LibTorch's CUDA support, loaded only when a job asks for a GPU: the SDK links libtorch_cpu
// alone, so a CPU rank never maps libtorch_cuda and the CUDA libraries behind it (about 0.3 s
// of start-up and 365 MB of RSS a rank on the CUDA wheel). docs/plugin_guide.md explains it.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <chrono>
#include <filesystem>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace shardformer::runtime {

// What the CUDA module (libshardformer_cuda.so, next to the SDK) provides; loading it loads
// libtorch_cuda, which registers the CUDA device type with LibTorch.
struct CudaModule {
  // c10d's NCCL backend for one group, or nullptr where the torch wheel has no NCCL.
  c10::intrusive_ptr<c10d::Backend> (*nccl_backend)(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int group_rank, int group_size,
                                                    std::chrono::milliseconds timeout);
};

// The file load_cuda_support() loads.
std::filesystem::path cuda_module_path();

// Loads the CUDA module once (later calls return the same); throws shardformer::Error naming
// the file and the loader's reason when it is missing or cannot load. Call it before anything
// asks ATen about CUDA (torch::cuda::is_available(), a CUDA device or tensor): ATen keeps its
// first answer, and a load after it is refused with an error saying so.
const CudaModule& load_cuda_support();

// Whether libtorch_cuda is mapped into this process (by load_cuda_support or by anyone else).
bool cuda_support_loaded();

}  // namespace shardformer::runtime
