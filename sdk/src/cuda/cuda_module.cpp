// libshardformer_cuda.so: the SDK's CUDA-only parts, linked against libtorch_cuda and NCCL and
// loaded by runtime::load_cuda_support() when a job runs on a GPU (never by a CPU job).
#include "shardformer/runtime/cuda_support.h"

#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace {

c10::intrusive_ptr<c10d::Backend> nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                               int group_rank, int group_size,
                                               std::chrono::milliseconds timeout) {
#ifdef USE_C10D_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, group_rank, group_size, options);
#else
  (void)store, (void)group_rank, (void)group_size, (void)timeout;
  return {};
#endif
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const shardformer::runtime::CudaModule*
shardformer_cuda_module() {
  static const shardformer::runtime::CudaModule module{&nccl_backend};
  return &module;
}
