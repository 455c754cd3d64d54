// Collectives through a POSIX shared-memory segment: each rank copies its block into its slot,
// a barrier, every rank reads what it needs, a barrier before the slots are written again. The
// barrier is a counter and a generation in the segment, waited on with a futex.
#include "shared_memory_transport.h"

#include "shardformer/distributed/process_mesh.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <fcntl.h>
#include <linux/futex.h>
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

// The first page of the segment: the barrier's state and each rank's process id.
constexpr size_t kControlBytes = 4096;
constexpr int kMaxRanks = 512;

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
      length_(length) {}

SharedMemoryTransport::~SharedMemoryTransport() { ::munmap(base_, length_); }

SharedMemoryTransport::Control& SharedMemoryTransport::control() const {
  static_assert(sizeof(Control) <= kControlBytes);
  return *reinterpret_cast<Control*>(base_);
}

std::byte* SharedMemoryTransport::slot(int r) const {
  return base_ + kControlBytes + static_cast<size_t>(r) * static_cast<size_t>(chunk_bytes_);
}

std::unique_ptr<SharedMemoryTransport> SharedMemoryTransport::connect(
    int rank, int size, int64_t chunk_bytes, std::chrono::milliseconds timeout,
    const std::string& label, const std::function<void(const std::string&)>& publish,
    const std::function<std::string()>& lookup, const Barrier& barrier) {
  chunk_bytes = (chunk_bytes + 63) / 64 * 64;  // slots aligned for any dtype and cache lines
  const size_t length =
      kControlBytes + static_cast<size_t>(size + 1) * static_cast<size_t>(chunk_bytes);
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
    return;
  }
  // A short spin (the ranks usually arrive together), then futex waits of at most 10 ms, after
  // each of which the peers' processes and the deadline are checked.
  for (int spin = 0; spin < 2000; ++spin) {
    if (c.generation.load(std::memory_order_acquire) != generation) return;
    cpu_relax();
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (c.generation.load(std::memory_order_acquire) == generation) {
    const timespec wait{0, 10'000'000};
    futex(&c.generation, FUTEX_WAIT, generation, &wait);
    if (c.generation.load(std::memory_order_acquire) != generation) return;
    check_peers();
    if (std::chrono::steady_clock::now() > deadline) {
      // Worded as Gloo's timeout, which the same job over sockets would give.
      throw std::runtime_error(
          str("Timed out waiting ", timeout_.count(), "ms for the group's other ranks"));
    }
  }
}

void SharedMemoryTransport::all_gather_into(const at::Tensor& input, at::Tensor& output,
                                            int64_t dim, bool own_in_place) {
  if (input.numel() == 0) return;
  const at::NoGradGuard no_grad;
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= input.size(d);
  const int64_t inner = input.numel() / outer;  // elements of one rank's block in an output row
  const int64_t chunk = chunk_bytes_ / static_cast<int64_t>(input.element_size());
  const at::Tensor in = input.reshape({outer, inner});        // a view, strided when own_in_place
  const at::Tensor out = output.view({outer, size_, inner});  // [outer, rank, inner]
  const at::TensorOptions options = input.options();
  // Exchanges the block [o0, o0 + rows) x [c0, c0 + cols) of every rank's [outer, inner].
  const auto exchange = [&](int64_t o0, int64_t rows, int64_t c0, int64_t cols) {
    view_of(slot(rank_), {rows, cols}, options).copy_(in.narrow(0, o0, rows).narrow(1, c0, cols));
    barrier();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ && own_in_place) continue;
      out.select(1, r)
          .narrow(0, o0, rows)
          .narrow(1, c0, cols)
          .copy_(view_of(slot(r), {rows, cols}, options));
    }
    barrier();  // nobody writes a slot again before every rank has read it
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
  const at::TensorOptions options = tensor.options();
  const auto part = [&](std::byte* base, int64_t offset, int64_t count) {
    return view_of(base + offset * 4, {count}, options);
  };
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    part(slot(rank_), 0, len).copy_(flat.narrow(0, start, len));
    barrier();
    // This rank sums its share of the chunk over the slots, in rank order, into the result.
    const int64_t p0 = len * rank_ / size_, p1 = len * (rank_ + 1) / size_;
    if (p1 > p0) {
      at::Tensor sum = part(result(), p0, p1 - p0);
      at::add_out(sum, part(slot(0), p0, p1 - p0), part(slot(1), p0, p1 - p0));
      for (int r = 2; r < size_; ++r) sum.add_(part(slot(r), p0, p1 - p0));
    }
    barrier();  // the result is whole; the slots are read (the next chunk may write them)
    flat.narrow(0, start, len).copy_(part(result(), 0, len));
  }
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
