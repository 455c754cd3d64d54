// Internal: the all-gathers and all-reduces of CPU ranks on one host, through a shared mapping
// instead of Gloo's loopback sockets (one copy in, one copy out, no kernel buffers), ordered by
// a barrier in the mapping that notices a peer process that is gone.
#pragma once

#include <ATen/Tensor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace shardformer::distributed {

class SharedMemoryTransport {
 public:
  using Barrier = std::function<void()>;  // the group's Gloo barrier, for the set-up

  // Every rank of the group calls this together. Rank 0 creates the segment (a control block,
  // `size` slots of `chunk_bytes` and one result area) and publishes its name; the others look
  // it up and map it; after `barrier` the name is removed, so nothing outlives the ranks that
  // mapped it. Null (on every rank) when rank 0 cannot make one. A collective waiting longer
  // than `timeout` for a peer fails.
  static std::unique_ptr<SharedMemoryTransport> connect(
      int rank, int size, int64_t chunk_bytes, std::chrono::milliseconds timeout,
      const std::string& label, const std::function<void(const std::string&)>& publish,
      const std::function<std::string()>& lookup, const Barrier& barrier);
  ~SharedMemoryTransport();
  SharedMemoryTransport(const SharedMemoryTransport&) = delete;
  SharedMemoryTransport& operator=(const SharedMemoryTransport&) = delete;

  // output [.., size * n, ..] (contiguous): the ranks' `input`s [.., n, ..] in rank order along
  // `dim`, every rank's input of one shape and dtype. own_in_place: `input` is this rank's block
  // of `output` already (a view of it), which is then not copied back.
  void all_gather_into(const at::Tensor& input, at::Tensor& output, int64_t dim,
                       bool own_in_place = false);
  // The sum over the ranks of a contiguous fp32 tensor, in place; each element is summed in
  // rank order by one rank, so every rank holds the same bits.
  void all_reduce_sum_(at::Tensor& tensor);

 private:
  struct Control;
  SharedMemoryTransport(int rank, int size, int64_t chunk_bytes, std::chrono::milliseconds timeout,
                        std::byte* base, size_t length);
  Control& control() const;
  std::byte* slot(int r) const;
  std::byte* result() const { return slot(size_); }
  // Returns once every rank has arrived; throws std::runtime_error when a peer's process is
  // gone (checked every 10 ms while waiting) or after the timeout.
  void barrier() const;
  void check_peers() const;

  int rank_, size_;
  int64_t chunk_bytes_;
  std::chrono::milliseconds timeout_;
  std::byte* base_;
  size_t length_;
};

}  // namespace shardformer::distributed
