// ProcessGroup: the collectives of one mesh axis (tp, pp, dp or world) over a c10d backend
// (Gloo on CPU, NCCL on CUDA), with c10d kept out of this header. Counts what it sends.
#pragma once

#include <ATen/Tensor.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shardformer::distributed {

// Collectives issued by a group since the last reset (a group of one rank issues none).
struct CommStats {
  int64_t all_reduces = 0, all_reduce_elements = 0;
  int64_t all_gathers = 0, all_gather_elements = 0;          // elements of the local input
  int64_t reduce_scatters = 0, reduce_scatter_elements = 0;  // elements of the local input
  int64_t all_to_alls = 0, all_to_all_elements = 0;          // elements of the local input
  int64_t broadcasts = 0, barriers = 0;
  int64_t sends = 0, send_elements = 0, recvs = 0;
  // Seconds spent in shared-memory barriers waiting for the group's other ranks (ranks on one
  // host): the cost of their drifting apart between collectives.
  double shared_memory_wait_seconds = 0;
};

enum class ReduceOp { kSum, kMax };

// An operation in flight (a send, an all-reduce): wait() returns once it is done (its tensor is
// kept alive until then) and throws Error naming the group when it failed. Destroying a
// handle does not wait.
class PendingWork {
 public:
  struct State;
  explicit PendingWork(std::shared_ptr<State> state) : state_(std::move(state)) {}
  void wait();

 private:
  std::shared_ptr<State> state_;
};

class ProcessGroup {
 public:
  struct Impl;
  explicit ProcessGroup(std::shared_ptr<Impl> impl);

  const std::string& name() const;  // "tp", "pp", "dp", "world"
  int rank() const;                 // rank within the group
  int size() const;
  // Whether its large CPU all-gathers and all-reduces go through shared memory (its ranks share
  // a host; MeshOptions::shared_memory_min_bytes).
  bool shared_memory() const;

  // Reduces `tensor` over the group (sum by default), in place.
  void all_reduce_(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) const;
  // The same without waiting: `tensor` (contiguous) holds the sum once the handle's wait()
  // returned.
  PendingWork all_reduce_async(const at::Tensor& tensor) const;
  // The sum over the group of a [rows, cols] fp32 CPU matrix that each rank computes into
  // blocks of rows it is handed: produce(first, block) writes rows [first, first +
  // block.size(0)) of this rank's term into `block` [n, cols]. Through shared memory the blocks
  // are the group's slots, summed from there (no copy in); otherwise the term is produced whole
  // and all-reduced. `bias` [cols] (may be undefined) is added after the sum.
  at::Tensor sum_produced(int64_t rows, int64_t cols, const at::TensorOptions& options,
                          const std::function<void(int64_t first, at::Tensor& block)>& produce,
                          const at::Tensor& bias) const;
  // sum_produced whose sum the caller computes, e.g. with the residual add and the next norm in
  // the same pass (kernels::sum_add_norm): finish(first, terms) receives rows [first,
  // first + n) of every rank's term ([n, cols] each, in rank order). Through shared memory these
  // are the slots, a block of rows per round; otherwise one term, the all-reduced sum of the
  // whole matrix (first 0). Every rank must add the terms in the order given.
  void sum_produced_finished_by(
      int64_t rows, int64_t cols, const at::TensorOptions& options,
      const std::function<void(int64_t first, at::Tensor& block)>& produce,
      const std::function<void(int64_t first, const std::vector<at::Tensor>& terms)>& finish) const;
  // sum_produced_finished_by whose results the ranks share: `finish` writes the results for
  // rows [first, first + n) of the sum into `outs` ([n, cols] views of `outputs` result
  // matrices, which this returns). Through shared memory the results live in memory every rank
  // maps and each rank finishes only its share of the rows (half the work at tp = 2, and half
  // the memory written), every rank reading all of them once this returns; otherwise each rank
  // finishes all rows into its own (terms then: the one all-reduced sum).
  std::vector<at::Tensor> sum_produced_shared(
      int64_t rows, int64_t cols, const at::TensorOptions& options, int outputs,
      const std::function<void(int64_t first, at::Tensor& block)>& produce,
      const std::function<void(int64_t first, const std::vector<at::Tensor>& terms,
                               const std::vector<at::Tensor>& outs)>& finish) const;
  // The reduce-scatter of sum_produced (sequence parallelism): the ranks' terms are [outer,
  // length, cols] matrices (rows flattened, produced in blocks as above) and this rank returns
  // its slice of the sum along dim 1, [outer, length / size, cols], + bias. Through shared
  // memory each rank sums only its own rows from the slots.
  at::Tensor reduce_scatter_produced(
      int64_t outer, int64_t length, int64_t cols, const at::TensorOptions& options,
      const std::function<void(int64_t first, at::Tensor& block)>& produce,
      const at::Tensor& bias) const;
  // reduce_scatter_produced whose sum the caller computes (with the residual add and the next
  // norm, say): finish(o, at, terms) receives rows [at, at + n) of batch entry o of this rank's
  // slice, [n, cols] from every rank's term in rank order through shared memory (add them in that
  // order), or the reduce-scattered sum alone otherwise.
  void reduce_scatter_produced_finished_by(
      int64_t outer, int64_t length, int64_t cols, const at::TensorOptions& options,
      const std::function<void(int64_t first, at::Tensor& block)>& produce,
      const std::function<void(int64_t outer, int64_t at, const std::vector<at::Tensor>& terms)>&
          finish) const;
  // The all-gather along dim 1 of the ranks' `input`s [outer, n, cols] (rank order), handed to
  // consume(first, block): rows [first, first + block.size(0)) of the gathered [outer, size * n,
  // cols] with its rows flattened. Through shared memory each block is read where the ranks
  // wrote it (no copy out, several blocks when it is large); otherwise it is all-gathered and
  // consumed whole. `consume` must not use this group.
  void all_gather_consumed(
      const at::Tensor& input,
      const std::function<void(int64_t first, const at::Tensor& block)>& consume) const;
  // The group's tensors concatenated along `dim`, in rank order: [.., size * n, ..].
  at::Tensor all_gather(const at::Tensor& tensor, int64_t dim) const;
  // The same into `output` [.., size * n, ..] (contiguous) whose block of this rank along `dim`
  // already holds its tensor (written there by the caller, e.g. a product into a column slice):
  // the other ranks' blocks are filled in, and this rank's is not copied again.
  void all_gather_in_place(at::Tensor& output, int64_t dim) const;
  // Gathers a [rows, size * cols] matrix to rank 0 of the group only, each rank's block [rows,
  // cols] (in rank order along the columns) written by produce(block). Rank 0 returns it, the
  // others an undefined tensor. Through shared memory the ranks write their blocks straight
  // into rank 0's output (docs/architecture.md); otherwise the blocks are all-gathered.
  at::Tensor gather_produced_to_first(int64_t rows, int64_t cols, const at::TensorOptions& options,
                                      const std::function<void(at::Tensor& block)>& produce) const;
  // Starts an all-gather into `output` ([size * n, ..]: the ranks' `input`s [n, ..] stacked
  // along dim 0, in rank order); both contiguous and alive until the handle's wait() returned.
  PendingWork all_gather_into_async(const at::Tensor& input, at::Tensor& output) const;
  // The sum over the group of `tensor`, this rank's slice of it along `dim` ([.., size * n, ..]
  // -> [.., n, ..]).
  at::Tensor reduce_scatter(const at::Tensor& tensor, int64_t dim) const;
  // Starts reduce_scatter along dim 0 of a contiguous `input` into `output` [n, ..].
  PendingWork reduce_scatter_async(const at::Tensor& input, at::Tensor& output) const;
  // All-to-all along dim 0: `tensor` [size * n, ..] sends its i-th block of n to rank i; the
  // result holds rank i's block for this rank at block i.
  at::Tensor all_to_all(const at::Tensor& tensor) const;
  void broadcast_(at::Tensor& tensor, int root) const;
  // Point-to-point (pipeline stages): `dst` / `src` are ranks within the group; `tensor` must
  // be contiguous, and recv_ fills a tensor of the sender's shape and dtype.
  void send(const at::Tensor& tensor, int dst, int tag = 0) const;
  // send() without waiting: the pipeline posts its sends and blocks on receives only.
  PendingWork isend(const at::Tensor& tensor, int dst, int tag = 0) const;
  void recv_(at::Tensor& tensor, int src, int tag = 0) const;
  void barrier() const;

  CommStats stats() const;
  void reset_stats() const;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace shardformer::distributed
