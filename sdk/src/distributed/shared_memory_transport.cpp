// Collectives through a POSIX shared-memory segment: each rank writes its block into its slot,
// a barrier, every rank reads what it needs. Rounds alternate between two banks of slots, so one
// barrier per round suffices. The barrier is a counter and a generation, waited on with a futex.
#include "shared_memory_transport.h"

#include "shardformer/distributed/process_mesh.h"
#include "shardformer/error.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

namespace shardformer::distributed {
namespace {

constexpr const char* kNamePrefix = "shardformer-";

// "/shardformer-tp-0_1-4242-1f3a9c": unique per creation (pid, counter and random bits).
std::string segment_name(const std::string& label) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t salt = std::random_device{}() ^ (++counter << 32);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(salt));
  return str("/", kNamePrefix, label, "-", ::getpid(), "-", hex);
}

std::byte* map_segment(int fd, size_t length) {
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : static_cast<std::byte*>(base);
}

// Rank 0's segment, its space reserved (a tmpfs that is too small fails here, not with SIGBUS
// on first touch); null with `why` set when shared memory is not available.
std::byte* create_segment(const std::string& name, size_t length, std::string& why) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    why = str("shm_open(", name, "): ", std::strerror(errno));
    return nullptr;
  }
  std::byte* base = nullptr;
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(length)); err != 0) {
    why = str("reserving ", length >> 20, " MiB in /dev/shm: ", std::strerror(err));
  } else if (base = map_segment(fd, length); base == nullptr) {
    why = str("mmap of ", name, ": ", std::strerror(errno));
  }
  ::close(fd);
  if (base == nullptr) ::shm_unlink(name.c_str());
  return base;
}

at::Tensor view_of(std::byte* base, at::IntArrayRef sizes, const at::TensorOptions& options) {
  return at::from_blob(base, sizes, options);
}

// The first pages of the segment: the barrier's state, each rank's process id, and the words of
// the output arena and the pool.
constexpr size_t kControlBytes = 16384;
constexpr int kMaxRanks = 512;
// The pool of shared outputs: at most this many buffers (a mask's bits), made at most this many
// at a time (the outputs of one call).
constexpr size_t kMaxPoolBuffers = 32;
constexpr int kMaxPoolOutputs = 4;
// How long a waiting rank yields its core before it sleeps, where each rank can have a core.
constexpr std::chrono::microseconds kYieldWindow{2000};

// Whether `ranks` processes can each run on a core of their own: this process's CPUs.
bool cores_for(int ranks) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  return ranks <= CPU_COUNT(&set);
}

// Whether process `pid` has exited (gone, or a zombie not yet reaped).
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!stat || !std::getline(stat, text)) return true;
  const size_t close = text.rfind(')');  // the name may hold spaces and parentheses
  return close == std::string::npos || close + 2 >= text.size() || text[close + 2] == 'Z' ||
         text[close + 2] == 'X';
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

struct SharedMemoryTransport::Control {
  std::atomic<uint32_t> arrived;                 // ranks in the current barrier
  alignas(64) std::atomic<uint32_t> generation;  // completed barriers; the futex word
  alignas(64) std::atomic<int32_t> pids[kMaxRanks];
  // Rank 0's word on the next gather to it (written before a barrier, read after it): 0 the
  // slots, 1 the arena, 2 a new arena named below; then each rank's 1 (mapped) or 2 (failed).
  uint32_t arena_plan;
  uint64_t arena_length;
  char arena_name[128];
  uint8_t arena_mapped[kMaxRanks];
  // Each rank's free pool buffers (bits by index) before a call's first barrier, per bank of
  // that round; rank 0's count of new buffers and their names; each rank's 1 (mapped) or 2.
  uint32_t pool_masks[2][kMaxRanks];
  uint32_t pool_plan;
  char pool_names[kMaxPoolOutputs][128];
  uint8_t pool_mapped[kMaxRanks];
  // produce_shared's split-phase rounds, per bank: ranks that have written their slot, ranks
  // done with the round's rows (both futex words), and rows claimed for finishing. All three
  // only grow (modulo 2^32 for the first two); each rank keeps the values a round ends at.
  struct alignas(64) RoundWords {
    std::atomic<uint32_t> written;
    std::atomic<uint32_t> done;
    std::atomic<int64_t> claimed;
  } rounds[2];
};

// A mapping of a shared-memory object: unmapped when the last holder (the transport, a tensor
// living in it) lets go.
struct SharedMemoryTransport::Arena {
  std::byte* base = nullptr;
  size_t length = 0;
  ~Arena() {
    if (base != nullptr) ::munmap(base, length);
  }
};
static_assert(sizeof(std::atomic<uint32_t>) == 4 && std::atomic<uint32_t>::is_always_lock_free);

SharedMemoryTransport::SharedMemoryTransport(int rank, int size, int64_t chunk_bytes,
                                             std::chrono::milliseconds timeout, std::byte* base,
                                             size_t length)
    : rank_(rank),
      size_(size),
      chunk_bytes_(chunk_bytes),
      timeout_(timeout),
      base_(base),
      length_(length),
      yield_before_sleep_(cores_for(size)) {}

SharedMemoryTransport::~SharedMemoryTransport() { ::munmap(base_, length_); }

SharedMemoryTransport::Control& SharedMemoryTransport::control() const {
  static_assert(sizeof(Control) <= kControlBytes);
  return *reinterpret_cast<Control*>(base_);
}

std::byte* SharedMemoryTransport::slot(int r) const { return slot_of(bank_, r); }

std::byte* SharedMemoryTransport::slot_of(int bank, int r) const {
  const size_t index = static_cast<size_t>(bank * size_ + r);
  return base_ + kControlBytes + index * static_cast<size_t>(chunk_bytes_);
}

// Ends a round (every rank has written its slot in it and read what it needed). A rank writes
// this bank again two rounds later, after the next round's barrier, which every rank reaches
// only once it has read this round's slots: so a round needs no barrier of its own at its end.
void SharedMemoryTransport::next_round() {
  bank_ ^= 1;
  settled_ = false;  // this round's slots may still be read by a rank behind
}

std::unique_ptr<SharedMemoryTransport> SharedMemoryTransport::connect(
    int rank, int size, int64_t chunk_bytes, std::chrono::milliseconds timeout,
    const std::string& label, const std::function<void(const std::string&)>& publish,
    const std::function<std::string()>& lookup, const Barrier& barrier) {
  chunk_bytes = (chunk_bytes + 63) / 64 * 64;  // slots aligned for any dtype and cache lines
  const size_t length =
      kControlBytes + static_cast<size_t>(2 * size) * static_cast<size_t>(chunk_bytes);
  std::string name;
  std::byte* base = nullptr;
  if (rank == 0) {
    name = segment_name(label);
    std::string why;
    base = size <= kMaxRanks ? create_segment(name, length, why) : nullptr;
    publish(base == nullptr ? std::string() : name);  // empty: every rank keeps Gloo
    if (base == nullptr) return nullptr;
  } else {
    name = lookup();
    if (name.empty()) return nullptr;
    const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
      throw Error(str("rank ", rank, " of group '", label, "': opening shared memory ", name,
                      " made by its rank 0: ", std::strerror(errno)));
    }
    base = map_segment(fd, length);
    const int map_errno = errno;
    ::close(fd);
    if (base == nullptr) {
      throw Error(str("rank ", rank, " of group '", label, "': mapping shared memory ", name, ": ",
                      std::strerror(map_errno)));
    }
  }
  std::unique_ptr<SharedMemoryTransport> transport(
      new SharedMemoryTransport(rank, size, chunk_bytes, timeout, base, length));
  transport->label_ = label;
  // The segment starts zeroed: no rank arrived, generation 0.
  transport->control().pids[rank].store(static_cast<int32_t>(::getpid()));
  try {
    barrier();  // every rank has mapped it and written its pid
  } catch (...) {
    if (rank == 0) ::shm_unlink(name.c_str());
    throw;
  }
  if (rank == 0) ::shm_unlink(name.c_str());
  return transport;
}

void SharedMemoryTransport::check_peers() const {
  for (int r = 0; r < size_; ++r) {
    const pid_t pid = control().pids[r].load(std::memory_order_relaxed);
    if (r != rank_ && process_gone(pid)) {
      throw std::runtime_error(str("group rank ", r, " (pid ", pid, ") has exited"));
    }
  }
}

void SharedMemoryTransport::barrier() const {
  Control& c = control();
  const uint32_t generation = c.generation.load(std::memory_order_acquire);
  if (c.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(size_)) {
    c.arrived.store(0, std::memory_order_relaxed);
    c.generation.store(generation + 1, std::memory_order_release);
    futex(&c.generation, FUTEX_WAKE, INT_MAX, nullptr);
  } else {
    wait_for_count(c.generation, generation + 1);
  }
  settled_ = true;  // every rank has left whatever it did before
}

void SharedMemoryTransport::wait_for_count(std::atomic<uint32_t>& word, uint32_t target) const {
  uint32_t seen = word.load(std::memory_order_acquire);
  const auto reached = [&] { return static_cast<int32_t>(seen - target) >= 0; };
  if (reached()) return;
  const auto arrived = std::chrono::steady_clock::now();
  const auto count_wait = [&] {
    waited_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - arrived)
                      .count();
  };
  // A short spin (the ranks usually arrive together). Then, where every rank can have a core of
  // its own, yielding for up to kYieldWindow: a rank asleep in the futex wakes tens of
  // microseconds after its peer arrives (a halted virtual CPU more), and a rank ahead by a
  // whole layer's share of weights waits 100-1000 us in tp decoding, so sleeping there made
  // the ranks take turns being late (docs/architecture.md). Then futex waits of at most 10 ms,
  // after each of which the peers' processes and the deadline are checked.
  for (int spin = 0; spin < 2000; ++spin) {
    cpu_relax();
    seen = word.load(std::memory_order_acquire);
    if (reached()) return count_wait();
  }
  if (yield_before_sleep_) {
    const auto until = arrived + kYieldWindow;
    while (std::chrono::steady_clock::now() < until) {
      ::sched_yield();
      seen = word.load(std::memory_order_acquire);
      if (reached()) return count_wait();
    }
  }
  const auto deadline = arrived + timeout_;
  for (;;) {
    const timespec wait{0, 10'000'000};
    futex(&word, FUTEX_WAIT, seen, &wait);
    seen = word.load(std::memory_order_acquire);
    if (reached()) return count_wait();
    check_peers();
    if (std::chrono::steady_clock::now() > deadline) {
      // Worded as Gloo's timeout, which the same job over sockets would give.
      throw std::runtime_error(
          str("Timed out waiting ", timeout_.count(), "ms for the group's other ranks"));
    }
  }
}

void SharedMemoryTransport::all_gather_into(const at::Tensor& input, at::Tensor& output,
                                            int64_t dim, bool own_in_place, bool to_first) {
  if (input.numel() == 0) return;
  const at::NoGradGuard no_grad;
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= input.size(d);
  const int64_t inner = input.numel() / outer;  // elements of one rank's block in an output row
  const int64_t chunk = chunk_bytes_ / static_cast<int64_t>(input.element_size());
  const at::Tensor in = input.reshape({outer, inner});  // a view, strided when own_in_place
  const bool writes = !to_first || rank_ != 0, reads = !to_first || rank_ == 0;
  const at::Tensor out =
      reads ? output.view({outer, size_, inner}) : at::Tensor();  // [outer, rank, inner]
  const at::TensorOptions options = input.options();
  // Exchanges the block [o0, o0 + rows) x [c0, c0 + cols) of every rank's [outer, inner].
  const auto exchange = [&](int64_t o0, int64_t rows, int64_t c0, int64_t cols) {
    if (writes) {
      view_of(slot(rank_), {rows, cols}, options).copy_(in.narrow(0, o0, rows).narrow(1, c0, cols));
    }
    barrier();
    for (int r = 0; reads && r < size_; ++r) {
      if (r == rank_ && own_in_place) continue;
      out.select(1, r)
          .narrow(0, o0, rows)
          .narrow(1, c0, cols)
          .copy_(view_of(slot(r), {rows, cols}, options));
    }
    next_round();
  };
  if (inner <= chunk) {
    const int64_t rows = chunk / inner;
    for (int64_t o0 = 0; o0 < outer; o0 += rows) {
      exchange(o0, std::min(rows, outer - o0), 0, inner);
    }
  } else {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c0 = 0; c0 < inner; c0 += chunk) exchange(o, 1, c0, std::min(chunk, inner - c0));
    }
  }
}

void SharedMemoryTransport::all_reduce_sum_(at::Tensor& tensor) {
  const at::NoGradGuard no_grad;
  const at::Tensor flat = tensor.view({-1});
  const int64_t n = flat.numel(), chunk = chunk_bytes_ / 4;
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    at::Tensor out = flat.narrow(0, start, len);
    view_of(slot(rank_), {len}, tensor.options()).copy_(out);
    barrier();
    // Every rank adds the slots in rank order: every rank holds the same bits.
    kernels::sum_terms(slot_views({len}, tensor.options()), {}, out);
    next_round();
  }
}

void SharedMemoryTransport::all_to_all_into(const at::Tensor& input, at::Tensor& output) {
  if (input.numel() == 0) return;
  const at::NoGradGuard no_grad;
  const at::Tensor in = input.view({size_, -1});  // [rank it goes to, block]
  at::Tensor out = output.view({size_, -1});      // [rank it came from, block]
  const int64_t block = in.size(1);
  // Each round carries columns [c0, c0 + cols) of every block: [size, cols] in each slot.
  const int64_t cols = std::max<int64_t>(
      1, std::min(block, chunk_bytes_ / static_cast<int64_t>(input.element_size()) / size_));
  for (int64_t c0 = 0; c0 < block; c0 += cols) {
    const int64_t n = std::min(cols, block - c0);
    view_of(slot(rank_), {size_, n}, input.options()).copy_(in.narrow(1, c0, n));
    barrier();
    for (int r = 0; r < size_; ++r) {
      out[r].narrow(0, c0, n).copy_(view_of(slot(r), {size_, n}, input.options())[rank_]);
    }
    next_round();
  }
}

void SharedMemoryTransport::produce_in_rounds(int64_t rows, int64_t cols,
                                              const at::TensorOptions& options,
                                              const Producer& produce, const TermsReader& read,
                                              int64_t align) {
  const at::NoGradGuard no_grad;
  const int64_t fit = chunk_bytes_ / 4 / cols;  // rows a slot holds
  if (fit < 1) throw std::invalid_argument("sum_produced: a row is larger than a slot");
  const int64_t block = fit >= align ? fit / align * align : fit;  // rows per round
  for (int64_t first = 0; first < rows; first += block) {
    const int64_t n = std::min(block, rows - first);
    at::Tensor mine = view_of(slot(rank_), {n, cols}, options);
    produce(first, mine);
    barrier();
    read(first, slot_views({n, cols}, options));
    next_round();
  }
}

namespace {

// Calls run(row, count, outer, at) for each run of rows in [first, first + n) of an [outer,
// length] matrix of rows (flattened) that falls in rank `rank`'s slice [rank * local, (rank + 1)
// * local) of dim 1: `count` rows from `row`, which are rows [at, at + count) of the slice of
// batch entry `outer`.
template <typename Run>
void rows_of_rank(int64_t first, int64_t n, int64_t length, int64_t local, int rank,
                  const Run& run) {
  const int64_t end = first + n;
  for (int64_t o = first / length; o * length < end; ++o) {
    const int64_t begin = o * length + rank * local;
    const int64_t lo = std::max(first, begin), hi = std::min(end, begin + local);
    if (lo < hi) run(lo, hi - lo, o, lo - begin);
  }
}

}  // namespace

void SharedMemoryTransport::produce_scattered(int64_t outer, int64_t local, int64_t cols,
                                              const Producer& produce, const SliceReader& read) {
  const int64_t length = local * size_;
  const auto read_slice = [&](int64_t first, const std::vector<at::Tensor>& terms) {
    const auto run = [&](int64_t row, int64_t count, int64_t o, int64_t at) {
      std::vector<at::Tensor> parts;
      for (const at::Tensor& t : terms) parts.push_back(t.narrow(0, row - first, count));
      read(o, at, parts);
    };
    rows_of_rank(first, terms.front().size(0), length, local, rank_, run);
  };
  produce_in_rounds(outer * length, cols, at::kFloat, produce, read_slice, length);
}

void SharedMemoryTransport::all_gather_consumed(const at::Tensor& input, const Consumer& consume) {
  const at::NoGradGuard no_grad;
  const int64_t local = input.size(1), cols = input.size(2);
  const int64_t length = local * size_, rows = input.size(0) * length;
  // A round's block of gathered rows spans the bank's slots, one after the other.
  const int64_t block = size_ * chunk_bytes_ / static_cast<int64_t>(input.element_size()) / cols;
  if (block < 1) throw std::invalid_argument("all_gather: a row is larger than a bank of slots");
  for (int64_t first = 0; first < rows; first += block) {
    const int64_t n = std::min(block, rows - first);
    const at::Tensor gathered = view_of(slot(0), {n, cols}, input.options());
    rows_of_rank(
        first, n, length, local, rank_, [&](int64_t row, int64_t count, int64_t o, int64_t at) {
          gathered.narrow(0, row - first, count).copy_(input.select(0, o).narrow(0, at, count));
        });
    barrier();
    consume(first, gathered);
    next_round();
  }
}

std::vector<at::Tensor> SharedMemoryTransport::slot_views(at::IntArrayRef sizes,
                                                          const at::TensorOptions& options,
                                                          int bank) const {
  std::vector<at::Tensor> views;
  for (int r = 0; r < size_; ++r) views.push_back(view_of(slot_of(bank, r), sizes, options));
  return views;
}

std::vector<at::Tensor> SharedMemoryTransport::slot_views(at::IntArrayRef sizes,
                                                          const at::TensorOptions& options) const {
  return slot_views(sizes, options, bank_);
}

bool SharedMemoryTransport::arena_ready(size_t bytes) {
  Control& c = control();
  if (rank_ == 0) {
    const bool free = arena_ == nullptr || arena_.use_count() == 1;  // no output lives in it
    uint32_t plan = free && arena_ != nullptr && arena_->length >= bytes ? 1 : 0;
    if (plan == 0 && free && (arena_failed_ == 0 || bytes < arena_failed_)) {
      arena_.reset();
      const std::string name = segment_name(label_ + "-out");
      std::string why;
      auto arena = std::make_shared<Arena>();
      arena->base = create_segment(name, bytes, why);
      if (arena->base != nullptr && name.size() < sizeof c.arena_name) {
        arena->length = bytes;
        arena_ = std::move(arena);
        std::snprintf(c.arena_name, sizeof c.arena_name, "%s", name.c_str());
        c.arena_length = bytes;
        plan = 2;
      } else {
        if (arena->base != nullptr) ::shm_unlink(name.c_str());
        arena_failed_ = bytes;  // /dev/shm too small: the slots serve outputs this large
        log::warn(str("outputs of ", bytes >> 20, " MiB and more gathered to rank 0 of group '",
                      label_, "' go through the slots: ", why.empty() ? "name too long" : why));
      }
    }
    c.arena_plan = plan;
  }
  barrier();
  const uint32_t plan = c.arena_plan;
  if (plan != 2) return plan == 1;
  // A new arena: every other rank maps it in place of its old one, and says whether it could.
  if (rank_ != 0) {
    arena_.reset();
    auto arena = std::make_shared<Arena>();
    const int fd = ::shm_open(c.arena_name, O_RDWR, 0);
    if (fd >= 0) {
      arena->base = map_segment(fd, c.arena_length);
      ::close(fd);
    }
    if (arena->base != nullptr) {
      arena->length = c.arena_length;
      arena_ = std::move(arena);
    }
    c.arena_mapped[rank_] = arena_ != nullptr ? 1 : 2;
  }
  barrier();
  if (rank_ == 0) ::shm_unlink(c.arena_name);  // every rank that could has mapped it
  bool mapped = true;
  for (int r = 1; r < size_; ++r) mapped = mapped && c.arena_mapped[r] == 1;
  if (!mapped && rank_ == 0) arena_failed_ = c.arena_length;
  if (!mapped) arena_.reset();
  return mapped;
}

at::Tensor SharedMemoryTransport::gather_produced_to_first(int64_t rows, int64_t cols,
                                                           const at::TensorOptions& options,
                                                           const BlockProducer& produce) {
  const at::NoGradGuard no_grad;
  const int64_t width = size_ * cols;
  const size_t bytes = static_cast<size_t>(rows * width) * options.dtype().itemsize();
  if (bytes > 0 && arena_ready(bytes)) {
    const std::shared_ptr<Arena> arena = arena_;
    at::Tensor whole =  // [rows, size * cols], kept mapped while it lives
        rank_ == 0 ? at::from_blob(
                         arena->base, {rows, width}, [arena](void*) {}, options)
                   : at::from_blob(arena->base, {rows, width}, options);
    at::Tensor mine = whole.narrow(1, rank_ * cols, cols);  // [rows, cols]
    produce(mine);
    barrier();  // every block is written
    return rank_ == 0 ? whole : at::Tensor();
  }
  at::Tensor whole = rank_ == 0 ? at::empty({rows, width}, options) : at::Tensor();
  at::Tensor mine = rank_ == 0 ? whole.narrow(1, 0, cols) : at::empty({rows, cols}, options);
  produce(mine);
  all_gather_into(mine, whole, 1, /*own_in_place=*/true, /*to_first=*/true);
  return whole;
}

uint32_t SharedMemoryTransport::pool_free(size_t bytes) const {
  uint32_t mask = 0;
  for (size_t i = 0; i < pool_.size(); ++i) {
    if (pool_[i].use_count() == 1 && pool_[i]->length >= bytes) mask |= 1u << i;
  }
  return mask;
}

bool SharedMemoryTransport::pool_grow(size_t bytes, int count) {
  Control& c = control();
  const size_t before = pool_.size();
  if (rank_ == 0) {
    uint32_t made = 0;
    for (int k = 0; k < count; ++k) {
      const std::string name = segment_name(label_ + "-pool");
      std::string why = name.size() < sizeof c.pool_names[k] ? "" : "name too long";
      auto buffer = std::make_shared<Arena>();
      if (why.empty()) buffer->base = create_segment(name, bytes, why);
      if (buffer->base == nullptr) {
        log::warn(str("group '", label_, "' shares no more outputs between its ranks (each rank ",
                      "computes them all): ", why));
        break;
      }
      buffer->length = bytes;
      pool_.push_back(std::move(buffer));
      std::snprintf(c.pool_names[k], sizeof c.pool_names[k], "%s", name.c_str());
      ++made;
    }
    c.pool_plan = made;
  }
  barrier();
  const uint32_t made = c.pool_plan;
  if (rank_ != 0) {
    bool mapped = true;
    for (uint32_t k = 0; k < made && mapped; ++k) {
      auto buffer = std::make_shared<Arena>();
      const int fd = ::shm_open(c.pool_names[k], O_RDWR, 0);
      if (fd >= 0) {
        buffer->base = map_segment(fd, bytes);
        ::close(fd);
      }
      mapped = buffer->base != nullptr;
      if (mapped) {
        buffer->length = bytes;
        pool_.push_back(std::move(buffer));
      }
    }
    c.pool_mapped[rank_] = mapped ? 1 : 2;
  }
  barrier();
  if (rank_ == 0) {
    for (uint32_t k = 0; k < made; ++k) ::shm_unlink(c.pool_names[k]);
  }
  bool ok = made == static_cast<uint32_t>(count);
  for (int r = 1; r < size_; ++r) ok = ok && c.pool_mapped[r] == 1;
  if (!ok) {  // every rank reads the same words: all drop what they added, and stop growing
    pool_.resize(before);
    pool_failed_ = true;
  }
  return ok;
}

std::vector<int> SharedMemoryTransport::pool_take(size_t bytes, int outputs, int bank) {
  const Control& c = control();
  uint32_t free_everywhere = ~0u;
  for (int r = 0; r < size_; ++r) free_everywhere &= c.pool_masks[bank][r];
  std::vector<int> picks;
  for (size_t i = 0; i < pool_.size() && static_cast<int>(picks.size()) < outputs; ++i) {
    if ((free_everywhere >> i) & 1u) picks.push_back(static_cast<int>(i));
  }
  const int missing = outputs - static_cast<int>(picks.size());
  if (missing == 0) return picks;
  const size_t first_new = pool_.size();
  if (pool_failed_ || first_new + static_cast<size_t>(missing) > kMaxPoolBuffers ||
      !pool_grow(bytes, missing)) {
    return {};
  }
  for (int k = 0; k < missing; ++k) picks.push_back(static_cast<int>(first_new) + k);
  return picks;
}

namespace {

// Takes the next block of at most `most` rows below `end` from a shared counter of rows: the
// block's first row in `at`, its row count returned (0 once none are left).
int64_t claim_rows(std::atomic<int64_t>& counter, int64_t end, int64_t most, int64_t& at) {
  int64_t next = counter.load(std::memory_order_relaxed);
  while (next < end) {
    const int64_t take = std::min(most, end - next);
    if (counter.compare_exchange_weak(next, next + take, std::memory_order_acq_rel)) {
      at = next;
      return take;
    }
  }
  return 0;
}

void publish(std::atomic<uint32_t>& word) {
  word.fetch_add(1, std::memory_order_acq_rel);
  futex(&word, FUTEX_WAKE, INT_MAX, nullptr);
}

// Blocks a round's rows are claimed in: enough for a rank ahead to take most of them, few
// enough that the bookkeeping stays small beside the finishing.
constexpr int64_t kClaimsPerRound = 8;
constexpr int64_t kMinClaimRows = 16;

}  // namespace

std::vector<at::Tensor> SharedMemoryTransport::produce_shared(int64_t rows, int64_t cols,
                                                              int outputs, const Producer& produce,
                                                              const ShareFinisher& finish) {
  if (outputs < 1 || outputs > kMaxPoolOutputs) {
    throw std::invalid_argument(str("produce_shared: 1 to ", kMaxPoolOutputs, " outputs"));
  }
  const at::NoGradGuard no_grad;
  const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat);
  std::vector<at::Tensor> outs;
  if (rows == 0) {
    for (int o = 0; o < outputs; ++o) outs.push_back(at::empty({0, cols}, options));
    return outs;
  }
  const int64_t block = chunk_bytes_ / 4 / cols;  // rows a slot holds
  if (block < 1) throw std::invalid_argument("sum_produced: a row is larger than a slot");
  const size_t bytes = static_cast<size_t>(rows * cols) * sizeof(float);
  // The rounds alternate between the banks; the words each waits for are the values its bank's
  // counts reach once every rank has written it, and once every rank is done with it.
  struct Round {
    int64_t first, n;
    int bank;
    uint32_t written, done;
  };
  std::vector<Round> plan;
  for (int64_t first = 0; first < rows; first += block) {
    const int bank = bank_ ^ static_cast<int>(plan.size() & 1);
    written_total_[bank] += static_cast<uint32_t>(size_);
    done_total_[bank] += static_cast<uint32_t>(size_);
    plan.push_back(
        {first, std::min(block, rows - first), bank, written_total_[bank], done_total_[bank]});
  }
  Control& c = control();
  // The masks go with the first round's bank: written before this rank says it wrote the
  // round, read once every rank has.
  c.pool_masks[plan[0].bank][rank_] = pool_free(bytes);
  // The bank other than the first round's is free once every rank has left the collective
  // before this one: known where a barrier ended it, else once every rank wrote round 0.
  const bool settled = settled_;
  bool shared = false;
  const auto produce_round = [&](size_t k) {
    const Round& r = plan[k];
    if (k >= 2) {
      wait_for_count(c.rounds[r.bank].done, plan[k - 2].done);  // its bank read by every rank
    } else if (k == 1 && !settled) {
      wait_for_count(c.rounds[plan[0].bank].written, plan[0].written);
    }
    at::Tensor mine = view_of(slot_of(r.bank, rank_), {r.n, cols}, options);
    produce(r.first, mine);
    publish(c.rounds[r.bank].written);
  };
  const auto finish_round = [&](size_t k) {
    const Round& r = plan[k];
    wait_for_count(c.rounds[r.bank].written, r.written);
    if (k == 0) {
      for (const int i : pool_take(bytes, outputs, r.bank)) {
        const std::shared_ptr<Arena> buffer = pool_[static_cast<size_t>(i)];
        outs.push_back(at::from_blob(
            buffer->base, {rows, cols}, [buffer](void*) {}, options));
      }
      shared = !outs.empty();
      for (int o = 0; !shared && o < outputs; ++o) outs.push_back(at::empty({rows, cols}, options));
    }
    const std::vector<at::Tensor> terms = slot_views({r.n, cols}, options, r.bank);
    const auto finish_rows = [&](int64_t lo, int64_t n) {  // rows [lo, lo + n) of the round
      std::vector<at::Tensor> parts, rows_of;
      for (const at::Tensor& t : terms) parts.push_back(t.narrow(0, lo, n));
      for (const at::Tensor& o : outs) rows_of.push_back(o.narrow(0, r.first + lo, n));
      finish(r.first + lo, parts, rows_of);
    };
    if (shared) {
      // Blocks of rows go to whichever rank asks first; every rank's base and end are alike.
      int64_t& base = claim_base_[r.bank];
      const int64_t end = base + r.n;
      const int64_t most = std::max(kMinClaimRows, r.n / kClaimsPerRound);
      int64_t at = 0;
      while (const int64_t n = claim_rows(c.rounds[r.bank].claimed, end, most, at)) {
        finish_rows(at - base, n);
      }
      base = end;
    } else {
      finish_rows(0, r.n);
    }
    publish(c.rounds[r.bank].done);
  };
  // Each round is produced before the previous one is finished: a rank waits for the others
  // only when it has nothing left to produce or claim.
  produce_round(0);
  for (size_t k = 1; k < plan.size(); ++k) {
    produce_round(k);
    finish_round(k - 1);
  }
  finish_round(plan.size() - 1);
  // Every rank's rows are in the outputs, every rank has read this call's masks (the next call
  // writes them again) and all slots.
  barrier();
  bank_ ^= static_cast<int>(plan.size() & 1);
  return outs;
}

int remove_shared_memory_left_by(int pid) {
  // The pid is the second field from the end: "shardformer-<label>-<pid>-<hex>".
  const std::string tail = str("-", pid, "-");
  int removed = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    const std::string name = entry.path().filename().string();
    const size_t last = name.rfind('-');
    if (name.rfind(kNamePrefix, 0) != 0 || last == std::string::npos || last < tail.size() ||
        name.compare(last - tail.size() + 1, tail.size(), tail) != 0) {
      continue;
    }
    if (::shm_unlink(str("/", name).c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace shardformer::distributed
