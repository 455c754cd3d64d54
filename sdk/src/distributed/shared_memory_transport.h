// Internal: the large all-gathers and all-reduces of CPU ranks on one host, through a shared
// mapping instead of Gloo's loopback sockets (one copy in, one copy out, no kernel buffers).
// The group's own barrier orders the copies, so a peer that dies still fails the collective.
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace shardformer::distributed {

class SharedMemoryTransport {
 public:
  using Barrier = std::function<void()>;  // the group's barrier; throws when a peer is gone

  // Every rank of the group calls this together. Rank 0 creates the segment (`size` slots of
  // `chunk_bytes` and one result area) and publishes its name; the others look it up and map
  // it; after `barrier` the name is removed, so nothing outlives the ranks that mapped it.
  static std::unique_ptr<SharedMemoryTransport> connect(
      int rank, int size, int64_t chunk_bytes, const std::string& label,
      const std::function<void(const std::string&)>& publish,
      const std::function<std::string()>& lookup, const Barrier& barrier);
  ~SharedMemoryTransport();
  SharedMemoryTransport(const SharedMemoryTransport&) = delete;
  SharedMemoryTransport& operator=(const SharedMemoryTransport&) = delete;

  // output [.., size * n, ..] (contiguous): the ranks' contiguous `input`s [.., n, ..] in rank
  // order along `dim`, every rank's input of one shape and dtype.
  void all_gather_into(const at::Tensor& input, at::Tensor& output, int64_t dim,
                       const Barrier& barrier);
  // The sum over the ranks of a contiguous fp32 tensor, in place; each element is summed in
  // rank order by one rank, so every rank holds the same bits.
  void all_reduce_sum_(at::Tensor& tensor, const Barrier& barrier);

 private:
  SharedMemoryTransport(int rank, int size, int64_t chunk_bytes, std::byte* base, size_t length);
  std::byte* slot(int r) const { return base_ + static_cast<size_t>(r) * chunk_bytes_; }
  std::byte* result() const { return slot(size_); }

  int rank_, size_;
  int64_t chunk_bytes_;
  std::byte* base_;
  size_t length_;
};

}  // namespace shardformer::distributed
