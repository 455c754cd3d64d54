// Internal: what a ProcessGroup holds — its c10d backend (none for a group of one rank),
// its place in the mesh, its communication counters and, for ranks on one host, the shared
// memory its large CPU collectives use.
#pragma once

#include "shardformer/distributed/process_group.h"
#include "shardformer/distributed/process_mesh.h"
#include "shared_memory_transport.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <functional>

namespace shardformer::distributed {

struct ProcessGroup::Impl {
  std::string name;
  int rank = 0;
  int size = 1;
  c10::intrusive_ptr<c10d::Backend> backend;  // null when size == 1
  CommStats stats;
  int64_t operations = 0;  // issued so far: the number of the next one, less one
  // Ranks on one host: large CPU all-gathers and all-reduces go through shared memory.
  std::unique_ptr<SharedMemoryTransport> shared_memory;
  int64_t shared_memory_min_bytes = -1;
  // Which tensors the Gloo backend receives as host copies (MeshOptions::host_staging): CUDA
  // tensors, or every tensor (the CPU stand-in); kOff: the tensors themselves.
  MeshOptions::HostStaging host_staging = MeshOptions::HostStaging::kOff;
};

struct PendingWork::State {
  std::shared_ptr<ProcessGroup::Impl> group;
  std::pair<c10::intrusive_ptr<c10d::Work>, int64_t> work;  // and its number on the group
  at::Tensor tensor;                                        // alive until the operation completes
  at::Tensor keep;                                          // a second one (a collective's output)
  const char* op = "send";
  std::string detail;  // "to rank 1, tag 0"
  bool done = false;
  std::function<void()> finish;  // after the work completed: host-staged results copied back
};

}  // namespace shardformer::distributed
