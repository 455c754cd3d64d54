// Internal: the all-gathers and all-reduces of CPU ranks on one host, through a shared mapping
// instead of Gloo's loopback sockets (no kernel buffers; at most one copy in and one out, none
// where the product is written into the mapping), ordered by a barrier in the mapping that
// notices a peer process that is gone.
#pragma once

#include <ATen/Tensor.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shardformer::distributed {

class SharedMemoryTransport {
 public:
  using Barrier = std::function<void()>;  // the group's Gloo barrier, for the set-up

  // Every rank of the group calls this together. Rank 0 creates the segment (a control block
  // and two banks of `size` slots of `chunk_bytes`) and publishes its name; the others look
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
  // of `output` already (a view of it), which is then not copied back. to_first: only rank 0
  // receives (its output is filled; the others' is not used) and only the others send.
  void all_gather_into(const at::Tensor& input, at::Tensor& output, int64_t dim,
                       bool own_in_place = false, bool to_first = false);
  // The sum over the ranks of a contiguous fp32 tensor, in place; every rank sums the slots in
  // rank order, so every rank holds the same bits.
  void all_reduce_sum_(at::Tensor& tensor);
  // c10d's all_to_all_single with equal blocks: input and output contiguous, of one shape
  // [size * m, ..]; block r of this rank's output is block `rank` of rank r's input.
  void all_to_all_into(const at::Tensor& input, at::Tensor& output);
  // Writes rows [first, first + block.size(0)) of this rank's term into `block`.
  using Producer = std::function<void(int64_t first, at::Tensor& block)>;
  // Reads rows [first, first + n) of every rank's term, in its slot ([n, cols] each).
  using TermsReader = std::function<void(int64_t first, const std::vector<at::Tensor>& terms)>;
  // The rounds of the producing sums: each rank produces a block of its [rows, cols] fp32 term
  // into its slot (cols * 4 <= chunk_bytes), then every rank reads the block's slots. Where a
  // slot holds `align` rows or more, a block is a multiple of `align` rows.
  void produce_in_rounds(int64_t rows, int64_t cols, const at::TensorOptions& options,
                         const Producer& produce, const TermsReader& read, int64_t align = 1);
  // Reads rows [at, at + n) of batch entry `outer` of this rank's slice of every rank's term,
  // in its slot ([n, cols] each).
  using SliceReader =
      std::function<void(int64_t outer, int64_t at, const std::vector<at::Tensor>& terms)>;
  // The reduce-scatter of produce_in_rounds: each rank's term is [outer, size * local, cols]
  // fp32 (its rows flattened, produced in blocks as above), and each rank reads only the rows of
  // its slice along dim 1, [outer, local, cols]. Blocks hold whole batch entries where a slot
  // can, so that every rank sums as many rows in each round as the others (no rank waits at
  // the next barrier for another's larger share).
  void produce_scattered(int64_t outer, int64_t local, int64_t cols, const Producer& produce,
                         const SliceReader& read);
  // Finishes rows [first, first + n) from every rank's terms for them ([n, cols] each, in rank
  // order) into `outs` ([n, cols] views of the outputs' same rows).
  using ShareFinisher = std::function<void(int64_t first, const std::vector<at::Tensor>& terms,
                                           const std::vector<at::Tensor>& outs)>;
  // Rounds as produce_in_rounds' whose results the ranks share instead of each computing them
  // all: `outputs` fp32 matrices [rows, cols] in shared memory that every rank maps (a pool of
  // buffers, one reused once no rank holds a tensor living in it), and a last barrier after
  // which every rank reads all rows. The rounds are split-phase: a rank produces the next round
  // as soon as it has written one, then finishes the earlier round's rows once every rank has
  // written it, claiming blocks of them from a counter the ranks share. So a rank that arrives
  // early does not wait for a late one: it produces ahead and finishes more of the rows (each
  // row once, by whichever rank; the bits do not depend on which). Where the pool cannot serve
  // (/dev/shm full, kMaxPoolBuffers held) the outputs are this rank's own and it finishes every
  // row. Every rank of the group calls it with the same sizes.
  std::vector<at::Tensor> produce_shared(int64_t rows, int64_t cols, int outputs,
                                         const Producer& produce, const ShareFinisher& finish);
  // Reads rows [first, first + block.size(0)) of a gathered matrix from `block`.
  using Consumer = std::function<void(int64_t first, const at::Tensor& block)>;
  // The all-gather along dim 1 of every rank's `input` [outer, local, cols] (contiguous, one
  // shape and dtype on every rank), handed to `consume` a block of the gathered [outer, size *
  // local, cols] rows (flattened) at a time where the ranks wrote them: the bank's slots, read
  // in place (one copy in, none out). `consume` must not issue collectives on this group.
  void all_gather_consumed(const at::Tensor& input, const Consumer& consume);
  int64_t chunk_bytes() const { return chunk_bytes_; }
  // Writes this rank's block [rows, cols] of a gathered output into `block`.
  using BlockProducer = std::function<void(at::Tensor& block)>;
  // Rank 0 returns [rows, size * cols]: every rank's block in rank order along the columns,
  // which each rank writes straight into it (no copies) where the output can live in a shared
  // mapping rank 0 keeps for the purpose (an output arena) and the previous output held there is
  // gone; otherwise the blocks go through the slots. Other ranks return an undefined tensor.
  at::Tensor gather_produced_to_first(int64_t rows, int64_t cols, const at::TensorOptions& options,
                                      const BlockProducer& produce);
  // Seconds this rank spent in barriers waiting for the others to arrive, since the last reset:
  // what the ranks' drift (unequal speed between collectives) costs it.
  double waited_seconds() const { return static_cast<double>(waited_ns_) * 1e-9; }
  void reset_waited() { waited_ns_ = 0; }

 private:
  struct Control;
  struct Arena;  // a shared mapping for outputs gathered to rank 0
  // Whether this gather's output fits an arena every rank has mapped; rank 0 makes a new one
  // when the old is too small and no output holds it. Collective: every rank gets one answer.
  bool arena_ready(size_t bytes);
  // This rank's pool buffers of `bytes` or more that no tensor here holds, as bits by index.
  uint32_t pool_free(size_t bytes) const;
  // `outputs` pool buffers of `bytes` or more that no rank holds (indices), chosen alike by
  // every rank from the masks all wrote into bank `bank` before the barrier just passed, and
  // made where too few are free; empty where the pool cannot serve. Collective.
  std::vector<int> pool_take(size_t bytes, int outputs, int bank);
  // Appends `count` new buffers of `bytes` to every rank's pool. Collective; false where rank 0
  // could not make them or a rank could not map them (the pool then stops growing).
  bool pool_grow(size_t bytes, int count);
  SharedMemoryTransport(int rank, int size, int64_t chunk_bytes, std::chrono::milliseconds timeout,
                        std::byte* base, size_t length);
  Control& control() const;
  std::byte* slot(int r) const;  // rank r's slot in this round's bank
  std::byte* slot_of(int bank, int r) const;
  std::vector<at::Tensor> slot_views(at::IntArrayRef sizes, const at::TensorOptions& options,
                                     int bank) const;
  std::vector<at::Tensor> slot_views(at::IntArrayRef sizes, const at::TensorOptions& options) const;
  void next_round();
  // Returns once every rank has arrived; throws std::runtime_error when a peer's process is
  // gone (checked every 10 ms while waiting) or after the timeout.
  void barrier() const;
  // Returns once `word` (a count the ranks add to) has reached `target` (modulo 2^32), with the
  // barrier's checks; the time waited counts in waited_seconds.
  void wait_for_count(std::atomic<uint32_t>& word, uint32_t target) const;
  void check_peers() const;

  int rank_, size_;
  int64_t chunk_bytes_;
  std::chrono::milliseconds timeout_;
  std::byte* base_;
  size_t length_;
  bool yield_before_sleep_;        // every rank can have a core: yield a while before sleeping
  int bank_ = 0;                   // the bank of slots this round uses (next_round)
  std::string label_;              // the group's label (the arena's name and messages)
  std::shared_ptr<Arena> arena_;   // held also by rank 0's outputs that live in it
  size_t arena_failed_ = 0;        // rank 0: the smallest arena size that could not be made
  mutable int64_t waited_ns_ = 0;  // in barriers, behind the last rank to arrive
  std::vector<std::shared_ptr<Arena>> pool_;  // also held by the tensors living in them
  bool pool_failed_ = false;                  // a buffer could not be made or mapped
  // Whether every rank has read all slots of the collectives so far (a barrier has passed
  // since the last round whose slots are read after its barrier): then both banks are free.
  mutable bool settled_ = true;
  // produce_shared's counts per bank, alike on every rank: the shared words' values once every
  // rank has written (and finished with) a round in the bank, and the rows claimed before it.
  uint32_t written_total_[2] = {0, 0};
  uint32_t done_total_[2] = {0, 0};
  int64_t claim_base_[2] = {0, 0};
};

}  // namespace shardformer::distributed
