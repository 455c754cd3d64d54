// Multi-rank jobs on one machine: detects the ranks an outside launcher (torchrun, Slurm,
// Open MPI) started, and starts and supervises the ranks of a local job itself.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace shardformer::host {

// Where this process sits in a multi-rank job, and who started it.
struct RankEnv {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string launcher;  // "torchrun", "slurm", "openmpi", "shardformer"
  // The launcher serves the rendezvous store and no rank does: torchrun's agent
  // (TORCHELASTIC_USE_AGENT_STORE=True) or launch_local_ranks (SHARDFORMER_LAUNCHER_STORE=1).
  bool launcher_store = false;
};

// Looks up one environment variable; nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The ranks started by an outside launcher, or nullopt when none (a plain single process).
// torchrun variables (RANK, WORLD_SIZE, ...) win over Slurm's (SLURM_PROCID, ...), which win
// over Open MPI's (OMPI_COMM_WORLD_RANK, ...); with SHARDFORMER_LAUNCHED=1 the torchrun
// variables come from launch_local_ranks. Throws ConfigError naming the variable and its
// value when one is missing, not an integer or inconsistent with the others.
std::optional<RankEnv> rank_env_from_environment(const EnvLookup& lookup);
// The same, reading the process environment.
std::optional<RankEnv> rank_env_from_environment();

struct LaunchOptions {
  int world_size = 1;
  std::chrono::milliseconds grace{3000};  // SIGTERM -> SIGKILL delay when stopping the others
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: the launcher serves the rendezvous store on a port the kernel picks
};

struct LaunchResult {
  int exit_code = 0;     // 0 when every rank succeeded, else the first failure's (128 + signal)
  int failed_rank = -1;  // first rank that failed; -1 when none did or the launcher was stopped
  std::string message;   // "rank 1 exited with code 3", "rank 1 was killed by signal 9 (Killed)"
};

// Starts world_size copies of argv[0] (a path; no PATH search) with arguments argv[1..], each
// with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// SHARDFORMER_LAUNCHED=1 set, and waits for them. Without options.master_port the launcher
// serves the rendezvous store itself (SHARDFORMER_LAUNCHER_STORE=1 tells the ranks), bound
// before any rank starts, so no other process can take its port in between. When a rank exits
// non-zero or dies by a signal, the others get SIGTERM, then SIGKILL after options.grace. SIGINT
// and SIGTERM sent to the launcher while it waits are forwarded to the ranks (the previous handlers
// are restored afterwards). Ranks die with the launcher (PR_SET_PDEATHSIG), so call this from the
// thread that lives longest, usually the main thread. Throws ConfigError on a bad argv or
// world_size.
LaunchResult launch_local_ranks(const std::vector<std::string>& argv, const LaunchOptions& options);

// A private temporary folder where launched ranks record the error that ended them (its path
// is exported in SHARDFORMER_ERROR_DIR, which the ranks inherit); removed on destruction.
class RankErrorFolder {
 public:
  RankErrorFolder();
  ~RankErrorFolder();
  RankErrorFolder(const RankErrorFolder&) = delete;
  RankErrorFolder& operator=(const RankErrorFolder&) = delete;
  // The error recorded first — the cause; peers whose collectives then failed record theirs
  // later. Empty text when none was recorded.
  struct RecordedError {
    std::string text;   // "rank N: message"
    int exit_code = 1;  // the exit status that rank reports for it
  };
  RecordedError first_error() const;
  // What ranks 0..world_size-1 were doing, from their activity records (runtime/activity.h):
  // one line per rank, "rank 1: all_reduce #4 on group 'tp' ..., for 3.02 s (phase: ...)",
  // `first` (a rank known to have stopped first, e.g. killed; -1: none) first, then by how long
  // their records have not changed (the first to stop making progress, e.g. a hung rank, before
  // its peers, which wait for it), at most `limit` lines.
  std::vector<std::string> rank_activities(int world_size, int first = -1, size_t limit = 16) const;

 private:
  std::string path_;
};

// Publishes this rank's activity record (runtime/activity.h) where the launching host reads it
// when the job fails (no-op outside a local launch).
void publish_rank_activity(int rank);

// Records this rank's fatal error for the launching host (no-op outside a local launch). Call
// it before unwinding closes the rank's connections, so the cause is recorded first.
void record_rank_error(const std::string& message, int exit_code);

}  // namespace shardformer::host
