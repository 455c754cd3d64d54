// The activity record of this rank (a fixed-size struct, in a shared file mapping once
// published) and the test hook that fails a rank at its N-th operation of a kind.
#include "shardformer/runtime/activity.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>

namespace shardformer::runtime {
namespace {

constexpr uint32_t kRecordMagic = 0x53464143;  // "SFAC"
constexpr size_t kTextSize = 248;

// One rank's record. `version` is odd while the writer changes the rest, so a reader in another
// process retries until it copied a consistent record.
struct Fields {
  uint32_t magic = kRecordMagic;
  int32_t pid = 0;
  int64_t phase_since_ns = 0, operation_since_ns = 0, last_change_ns = 0;
  char phase[kTextSize] = {};
  char operation[kTextSize] = {};
};
struct Record {
  std::atomic<uint64_t> version{0};
  Fields fields;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::is_trivially_copyable_v<Fields>);

Record g_local;
std::atomic<Record*> g_record{&g_local};
std::mutex g_write_mutex;
std::filesystem::path g_published;

void copy_text(char (&to)[kTextSize], std::string_view text) {
  const size_t length = std::min(text.size(), kTextSize - 1);
  std::memcpy(to, text.data(), length);
  to[length] = '\0';
}

// What the record would hold had the scopes that an exception ended restored it: the record
// keeps the failed scope's text (where the error happened), and the next scope to begin, once
// the error was handled, takes this as the state to restore. Guarded by g_write_mutex.
struct Unwound {
  bool set = false;
  std::string text;
  int64_t since_ns = 0;
};
Unwound g_unwound_phase, g_unwound_operation;

// Changes the record under the seqlock: `change` writes the fields.
template <typename Change>
void write_record(Change change) {
  const std::lock_guard<std::mutex> lock(g_write_mutex);
  Record& record = *g_record.load(std::memory_order_acquire);
  record.version.fetch_add(1, std::memory_order_acq_rel);
  std::atomic_thread_fence(std::memory_order_release);
  change(record.fields);
  record.fields.last_change_ns = steady_now_ns();
  record.version.fetch_add(1, std::memory_order_release);
}

// One of the record's two slots (phase or operation) and the state its unwound scopes left.
struct Slot {
  char (Fields::*text)[kTextSize];
  int64_t Fields::*since_ns;
  Unwound* unwound;
};
const Slot kPhaseSlot{&Fields::phase, &Fields::phase_since_ns, &g_unwound_phase};
const Slot kOperationSlot{&Fields::operation, &Fields::operation_since_ns, &g_unwound_operation};

// A scope begins: `text` goes into the slot, and the scope remembers what to restore at its
// end (the record's, or what scopes ended by an exception would have restored).
void begin_scope(const Slot& slot, std::string_view text, std::string& previous,
                 int64_t& previous_since_ns) {
  write_record([&](Fields& r) {
    if (slot.unwound->set) {
      previous = std::move(slot.unwound->text);
      previous_since_ns = slot.unwound->since_ns;
      *slot.unwound = {};
    } else {
      previous = std::string(r.*slot.text, strnlen(r.*slot.text, kTextSize));
      previous_since_ns = r.*slot.since_ns;
    }
    copy_text(r.*slot.text, text);
    r.*slot.since_ns = steady_now_ns();
  });
}

// A scope ends: normally, the slot gets back what it held before; by an exception, the slot
// keeps where the error happened and the state to restore waits for the next scope.
void end_scope(const Slot& slot, bool unwinding, const std::string& previous,
               int64_t previous_since_ns) {
  write_record([&](Fields& r) {
    if (unwinding) {
      *slot.unwound = {true, previous, previous_since_ns};
      return;
    }
    *slot.unwound = {};
    copy_text(r.*slot.text, previous);
    r.*slot.since_ns = previous_since_ns;
  });
}

ActivitySnapshot snapshot_of(const Fields& r) {
  ActivitySnapshot s;
  s.phase = std::string(r.phase, strnlen(r.phase, kTextSize));
  s.operation = std::string(r.operation, strnlen(r.operation, kTextSize));
  s.phase_since_ns = r.phase_since_ns;
  s.operation_since_ns = r.operation_since_ns;
  s.last_change_ns = r.last_change_ns;
  s.pid = r.pid;
  return s;
}

// A consistent copy of a record another thread or process may be writing; after many torn
// reads (a writer killed mid-change) the last copy.
Fields consistent_copy(const Record& shared) {
  Fields copy;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t before = shared.version.load(std::memory_order_acquire);
    std::memcpy(&copy, &shared.fields, sizeof(Fields));
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && shared.version.load(std::memory_order_acquire) == before) break;
  }
  return copy;
}

// The test hook's settings, read once.
struct TestFault {
  bool armed = false;  // this rank fails at an operation
  bool this_rank = false;
  std::string kind;
  int64_t count = 0;
  std::map<std::string, int64_t, std::less<>> seen;
};

int this_rank() {
  const char* rank = std::getenv("RANK");
  return rank != nullptr ? std::atoi(rank) : 0;
}

TestFault& test_fault() {
  static TestFault fault = [] {
    TestFault f;
    const char* rank = std::getenv("SHARDFORMER_TEST_FAIL_RANK");
    f.this_rank = rank != nullptr && std::atoi(rank) == this_rank();
    const char* at = std::getenv("SHARDFORMER_TEST_FAIL_AT");
    if (!f.this_rank || at == nullptr) return f;
    const std::string text(at);
    const size_t colon = text.rfind(':');
    f.kind = text.substr(0, colon);
    f.count = colon == std::string::npos ? 1 : std::atoll(text.c_str() + colon + 1);
    f.armed = !f.kind.empty() && f.count > 0;
    return f;
  }();
  return fault;
}

// Whether this operation is the one the test hook fails.
bool is_fault_point(std::string_view kind) {
  TestFault& fault = test_fault();
  if (!fault.armed || kind != fault.kind) return false;
  auto it = fault.seen.find(kind);
  if (it == fault.seen.end()) it = fault.seen.emplace(std::string(kind), 0).first;
  return ++it->second == fault.count;
}

std::string test_fault_mode() {
  const char* mode = std::getenv("SHARDFORMER_TEST_FAIL_MODE");
  return mode != nullptr ? mode : "throw";
}

bool fails_by_hanging() {
  const std::string mode = test_fault_mode();
  return mode == "hang" || mode == "stop";
}

}  // namespace

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

PhaseScope::PhaseScope(std::string_view phase) : exceptions_(std::uncaught_exceptions()) {
  begin_scope(kPhaseSlot, phase, previous_, previous_since_ns_);
}

PhaseScope::~PhaseScope() {
  end_scope(kPhaseSlot, std::uncaught_exceptions() > exceptions_, previous_, previous_since_ns_);
}

OperationScope::OperationScope(std::string_view kind, std::string_view text)
    : exceptions_(std::uncaught_exceptions()) {
  const bool fault = is_fault_point(kind);
  // A rank that hangs (or freezes) at the test hook does so before the operation, as one stuck
  // in a computation: its record shows what it did last.
  if (fault && fails_by_hanging()) fail_now(str("in ", text));
  begin_scope(kOperationSlot, text, previous_, previous_since_ns_);
  if (!fault) return;
  try {
    fail_now(str("in ", text));
  } catch (...) {
    end_scope(kOperationSlot, false, previous_, previous_since_ns_);
    throw;
  }
}

OperationScope::~OperationScope() {
  end_scope(kOperationSlot, std::uncaught_exceptions() > exceptions_, previous_,
            previous_since_ns_);
}

void publish_activity(const std::filesystem::path& path) {
  const std::lock_guard<std::mutex> lock(g_write_mutex);
  if (path == g_published) return;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(
        str("cannot create the activity record ", path.string(), ": ", std::strerror(errno)));
  void* mapping = MAP_FAILED;
  if (::ftruncate(fd, sizeof(Record)) == 0) {
    mapping = ::mmap(nullptr, sizeof(Record), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) {
    throw Error(str("cannot map the activity record ", path.string(), ": ", std::strerror(error)));
  }
  // The mapping lives as long as the process: readers may look at it after this one died.
  Record* shared = new (mapping) Record;
  shared->fields = consistent_copy(*g_record.load());
  shared->fields.pid = static_cast<int32_t>(::getpid());
  g_record.store(shared, std::memory_order_release);
  g_published = path;
}

std::optional<ActivitySnapshot> read_activity(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  void* mapping = ::mmap(nullptr, sizeof(Record), PROT_READ, MAP_SHARED, fd, 0);
  struct stat info {};
  const bool whole = ::fstat(fd, &info) == 0 && info.st_size >= static_cast<off_t>(sizeof(Record));
  ::close(fd);
  if (mapping == MAP_FAILED) return std::nullopt;
  std::optional<ActivitySnapshot> result;
  if (whole) {
    const Fields copy = consistent_copy(*static_cast<const Record*>(mapping));
    if (copy.magic == kRecordMagic) result = snapshot_of(copy);
  }
  ::munmap(mapping, sizeof(Record));
  return result;
}

ActivitySnapshot current_activity() { return snapshot_of(consistent_copy(*g_record.load())); }

std::string describe_activity(const ActivitySnapshot& activity, int64_t now_ns) {
  const auto age = [&](int64_t since) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f s", static_cast<double>(now_ns - since) * 1e-9);
    return std::string(text);
  };
  const std::string phase = activity.phase.empty() ? std::string("no phase")
                                                   : str("phase: ", activity.phase, ", for ",
                                                         age(activity.phase_since_ns));
  if (activity.last_change_ns == 0) return "had not begun its job";
  if (activity.operation.empty()) {
    return str("between operations for ", age(activity.last_change_ns), " (", phase, ")");
  }
  return str(activity.operation, ", for ", age(activity.operation_since_ns), " (", phase, ")");
}

bool is_test_fault_rank() { return test_fault().this_rank; }

void fail_now(const std::string& where) {
  const int rank = this_rank();
  std::fprintf(stderr, "injecting a failure on rank %d %s at steady-clock ns %lld\n", rank,
               where.c_str(), static_cast<long long>(steady_now_ns()));
  std::fflush(stderr);
  const std::string mode = test_fault_mode();
  if (mode == "kill") std::raise(SIGKILL);
  if (mode == "stop") std::raise(SIGSTOP);
  if (mode == "hang" || mode == "stop") {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  throw Error(str("injected failure on rank ", rank, " ", where, " (SHARDFORMER_TEST_FAIL_RANK)"));
}

}  // namespace shardformer::runtime
