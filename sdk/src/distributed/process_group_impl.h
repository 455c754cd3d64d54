// Internal: what a ProcessGroup holds — its c10d backend (none for a group of one rank),
// its place in the mesh and its communication counters.
#pragma once

#include "shardformer/distributed/process_group.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace shardformer::distributed {

struct ProcessGroup::Impl {
  std::string name;
  int rank = 0;
  int size = 1;
  c10::intrusive_ptr<c10d::Backend> backend;  // null when size == 1
  CommStats stats;
};

struct PendingWork::State {
  std::shared_ptr<ProcessGroup::Impl> group;
  c10::intrusive_ptr<c10d::Work> work;
  at::Tensor tensor;  // alive until the operation completes
  at::Tensor keep;    // a second one (a collective's output)
  const char* op = "send";
  bool done = false;
};

}  // namespace shardformer::distributed
