// What this rank is doing: the job's phase (loading the checkpoint, generate step 3) and the
// operation inside it (an all_reduce on group 'tp', reading a tensor, writing a file), kept in a
// small record that the launching process reads when the rank fails, dies or hangs. Also the
// test hook that fails a rank at a chosen operation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace shardformer::runtime {

// What one rank was doing, as read from its record.
struct ActivitySnapshot {
  std::string phase;                                   // empty outside any phase
  std::string operation;                               // empty between operations
  int64_t phase_since_ns = 0, operation_since_ns = 0;  // steady clock (machine-wide)
  int64_t last_change_ns = 0;  // when the phase or operation last began or ended
  int pid = 0;
};

// Sets this rank's phase for the scope's lifetime; the previous phase returns at the end,
// unless an exception ends the scope: the record then keeps where the error happened.
class PhaseScope {
 public:
  explicit PhaseScope(std::string_view phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  int exceptions_;
  std::string previous_;
  int64_t previous_since_ns_ = 0;
};

// Sets this rank's operation for the scope's lifetime. `kind` names the operation for the test
// hook ("all_reduce", "send", "recv", "read_tensor", "write_file", "rendezvous"); `text`
// describes it ("all_reduce #12 on group 'tp' (rank 0 of 2)"). An exception leaving the scope
// keeps the operation in the record, as for a phase.
class OperationScope {
 public:
  OperationScope(std::string_view kind, std::string_view text);
  ~OperationScope();
  OperationScope(const OperationScope&) = delete;
  OperationScope& operator=(const OperationScope&) = delete;

 private:
  int exceptions_;
  std::string previous_;
  int64_t previous_since_ns_ = 0;
};

// From now on, keeps this process's record in `path` (created; a shared mapping), where another
// process can read it while this one runs, after it hung, and after it died.
void publish_activity(const std::filesystem::path& path);

// The record a process published in `path`; nullopt when the file is missing or not a record.
std::optional<ActivitySnapshot> read_activity(const std::filesystem::path& path);

// This process's record.
ActivitySnapshot current_activity();

// "all_reduce #3 on group 'tp', for 0.52 s (phase: generate step 2, for 0.60 s)", with ages
// measured at `now_ns` (steady clock).
std::string describe_activity(const ActivitySnapshot& activity, int64_t now_ns);

// The steady clock in nanoseconds, the clock of the records.
int64_t steady_now_ns();

// Test hook. With SHARDFORMER_TEST_FAIL_RANK equal to this process's RANK (0 when unset) and
// SHARDFORMER_TEST_FAIL_AT = "KIND:N", the N-th operation of that kind fails as it begins, as
// SHARDFORMER_TEST_FAIL_MODE says: "throw" (an Error, the default), "kill" (SIGKILL), "hang"
// (the thread sleeps for ever) or "stop" (SIGSTOP: the whole process freezes).
// fail_now performs that failure at once ("injected failure on rank 1 <where>"), printing the
// steady clock first so that a test can time how fast the job ends after it.
[[noreturn]] void fail_now(const std::string& where);
// Whether SHARDFORMER_TEST_FAIL_RANK names this process.
bool is_test_fault_rank();

}  // namespace shardformer::runtime
