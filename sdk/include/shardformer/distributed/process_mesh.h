// ProcessMesh: the ranks of a job laid out as dp x pp x sp x tp (tp innermost, as Megatron; sp
// splits the sequence for Ulysses and ring attention), with one ProcessGroup per axis plus the
// world, rendezvoused through a c10d TCPStore.
#pragma once

#include "shardformer/distributed/process_group.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardformer::distributed {

struct MeshShape {
  int64_t dp = 1, pp = 1, sp = 1, tp = 1;
  int64_t world_size() const { return dp * pp * sp * tp; }
};

struct MeshOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Limit for rendezvous and for every collective: a peer that is gone fails the job.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // CUDA ranks: tp, sp and dp over NCCL (needs a build with NCCL and a GPU per rank); pp and
  // world over Gloo with each CUDA tensor staged through host memory (pipeline sends pair by
  // tag, which NCCL does not honour; world carries bookkeeping on CPU tensors).
  bool cuda = false;
  // Every group over Gloo, CUDA tensors staged through host memory: ranks that share a GPU,
  // where NCCL refuses two ranks on one device. kEveryTensor stages CPU tensors the same way
  // (copied out and back): the CPU stand-in that tests that path without a GPU.
  enum class HostStaging { kOff, kCudaTensors, kEveryTensor };
  HostStaging host_staging = HostStaging::kOff;
  // The launcher already serves the store at master_addr:master_port (torchrun sets
  // TORCHELASTIC_USE_AGENT_STORE=True): every rank connects to it, none serves one.
  bool launcher_store = false;
  // The all-gathers, all-to-alls and sum all-reduces (fp32, bf16, fp16) of tp and sp groups
  // whose CPU ranks share a host go through a shared-memory segment (/dev/shm) instead of Gloo's
  // sockets when the tensor has at least this many bytes (negative: never); the segment holds
  // two banks of group-size slots of chunk_bytes (docs/architecture.md).
  int64_t shared_memory_min_bytes = 0;
  int64_t shared_memory_chunk_bytes = 4 << 20;
};

struct MeshCoordinate {
  int64_t dp = 0, pp = 0, sp = 0, tp = 0;
};

class ProcessMesh {
 public:
  // Connects rank `rank` of shape.world_size() ranks. Throws Error naming the rank and the
  // master address when the rendezvous fails or times out.
  ProcessMesh(int rank, MeshShape shape, const MeshOptions& options);
  // Layers and autograd nodes keep pointers to the groups: a mesh never moves.
  ProcessMesh(const ProcessMesh&) = delete;
  ProcessMesh& operator=(const ProcessMesh&) = delete;

  int rank() const { return rank_; }
  const MeshShape& shape() const { return shape_; }
  const MeshCoordinate& coordinate() const { return coordinate_; }

  const ProcessGroup& world() const { return world_; }
  const ProcessGroup& tp() const { return tp_; }
  const ProcessGroup& pp() const { return pp_; }
  const ProcessGroup& dp() const { return dp_; }
  const ProcessGroup& sp() const { return sp_; }

  // Every rank's `value` for `key`, in rank order, exchanged through the rendezvous store (for
  // small texts: a check that the ranks agree). Every rank makes the same calls in the same order.
  std::vector<std::string> exchange(const std::string& key, const std::string& value) const;

  static int64_t rank_of(const MeshShape& shape, const MeshCoordinate& c) {
    return ((c.dp * shape.pp + c.pp) * shape.sp + c.sp) * shape.tp + c.tp;
  }
  static MeshCoordinate coordinate_of(const MeshShape& shape, int64_t rank) {
    return {rank / (shape.pp * shape.sp * shape.tp), (rank / (shape.sp * shape.tp)) % shape.pp,
            (rank / shape.tp) % shape.sp, rank % shape.tp};
  }

 private:
  int rank_;
  MeshShape shape_;
  MeshCoordinate coordinate_;
  ProcessGroup world_, tp_, pp_, dp_, sp_;
  struct Store;
  std::shared_ptr<Store> store_;  // null for one rank
  mutable int64_t exchanges_ = 0;
};

// Removes the shared-memory names (/dev/shm/shardformer-*) that the process `pid` created and
// did not remove: a rank that dies in the few milliseconds between creating its group's
// segment and the group's set-up barrier leaves one. The launcher calls it for each rank that
// ends. Returns how many it removed.
int remove_shared_memory_left_by(int pid);

}  // namespace shardformer::distributed
