// Rank detection from the environment of torchrun, Slurm and Open MPI, and the local launcher:
// one fork + execve per rank, supervised until all exit or the first failure stops the rest.
#include "launcher.h"

#include "shardformer/distributed/process_mesh.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/runtime/activity.h"
#include "shardformer/strings.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <thread>

extern char** environ;

namespace shardformer::host {
namespace {

// ---------------------------------------------------------------- rank detection

// The variables through which one launcher tells a process its place. The first variable set
// in a list wins. Slurm writes its tasks per node as a list ("4(x2)", "2,1").
struct LauncherVars {
  const char* name;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  std::vector<const char*> local_world_size;
  std::vector<const char*> master_addr;
  bool local_size_is_task_list = false;
};

// Set by launch_local_ranks when the launcher serves the rendezvous store (no rank does).
constexpr const char* kLauncherStoreVariable = "SHARDFORMER_LAUNCHER_STORE";

const std::array<LauncherVars, 3> kLaunchers{{
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", {"LOCAL_WORLD_SIZE"}, {"MASTER_ADDR"}},
    {"slurm",
     "SLURM_PROCID",
     "SLURM_NTASKS",
     "SLURM_LOCALID",
     {"SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"},
     {"MASTER_ADDR", "SLURM_LAUNCH_NODE_IPADDR"},
     true},
    {"openmpi",
     "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK",
     {"OMPI_COMM_WORLD_LOCAL_SIZE"},
     {"MASTER_ADDR"}},
}};

std::string quoted(const std::string& name, std::string_view value) {
  return str("environment variable ", name, "='", value, "'");
}

std::optional<int> to_int(std::string_view text) {
  int result = 0;
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, result);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return result;
}

int parse_int(const std::string& name, std::string_view value) {
  if (auto result = to_int(value)) return *result;
  throw ConfigError(str(quoted(name, value), " is not an integer"));
}

// One launcher's variables, read through the lookup; errors name the launcher.
class LauncherEnv {
 public:
  LauncherEnv(const EnvLookup& lookup, const LauncherVars& vars) : lookup_(lookup), vars_(vars) {}

  bool present() const { return lookup_(vars_.rank) || lookup_(vars_.world_size); }

  int required_int(const std::string& name) const { return parse_int(name, required(name)); }

  std::string required(const std::string& name) const {
    auto value = lookup_(name);
    if (!value) {
      throw ConfigError(str("environment variable ", name, " is not set, but ", vars_.rank, " or ",
                            vars_.world_size, " says ", vars_.name, " started this process"));
    }
    return *value;
  }

  // The first of names that is set, as (name, value); the last name when none is.
  std::pair<std::string, std::optional<std::string>> first_of(
      const std::vector<const char*>& names) const {
    for (const char* name : names) {
      if (auto value = lookup_(name)) return {name, value};
    }
    return {names.back(), std::nullopt};
  }

  std::optional<std::string> get(const std::string& name) const { return lookup_(name); }

 private:
  const EnvLookup& lookup_;
  const LauncherVars& vars_;
};

// The tasks on node `node` from a Slurm list such as "4", "4(x2)" or "2,1(x3)".
int tasks_on_node(const std::string& name, const std::string& list, int node) {
  std::string_view rest = list;
  int first_node = 0;
  while (!rest.empty()) {
    std::string_view item = rest.substr(0, rest.find(','));
    rest.remove_prefix(std::min(rest.size(), item.size() + 1));
    std::optional<int> repeat = 1;
    if (size_t open = item.find("(x"); open != std::string_view::npos && item.back() == ')') {
      repeat = to_int(item.substr(open + 2, item.size() - open - 3));
      item = item.substr(0, open);
    }
    const std::optional<int> tasks = to_int(item);
    if (!tasks || !repeat) {
      throw ConfigError(str(quoted(name, list), " is not a task list like '4', '4(x2)' or '2,1'"));
    }
    if (node < first_node + *repeat) return *tasks;
    first_node += *repeat;
  }
  throw ConfigError(str(quoted(name, list), " lists no tasks for node ", node));
}

void check_positive(const std::string& name, int value) {
  if (value < 1) throw ConfigError(str(quoted(name, std::to_string(value)), " must be >= 1"));
}

void check_below(const std::string& name, int value, const std::string& limit_name, int limit) {
  if (value < 0 || value >= limit) {
    throw ConfigError(
        str(quoted(name, std::to_string(value)), " is out of range for ", limit_name, "=", limit));
  }
}

// The local world size and the variable it came from.
std::pair<std::string, int> local_world_size(const LauncherEnv& env, const LauncherVars& vars) {
  auto [name, value] = env.first_of(vars.local_world_size);
  if (!value) return {name, env.required_int(name)};
  if (!vars.local_size_is_task_list) return {name, parse_int(name, *value)};
  auto node = env.get("SLURM_NODEID");
  return {name, tasks_on_node(name, *value, node ? parse_int("SLURM_NODEID", *node) : 0)};
}

// MASTER_PORT must be set when there is more than one rank to meet; 0 when it need not be.
int master_port(const LauncherEnv& env, const LauncherVars& vars, int world_size) {
  auto port = env.get("MASTER_PORT");
  if (!port) {
    if (world_size == 1) return 0;
    throw ConfigError(str("environment variable MASTER_PORT is not set, but ", vars.world_size, "=",
                          world_size, " ranks need it to meet"));
  }
  const int value = parse_int("MASTER_PORT", *port);
  if (value < 1 || value > 65535) {
    throw ConfigError(str(quoted("MASTER_PORT", *port), " is not a port (1..65535)"));
  }
  return value;
}

RankEnv read_rank_env(const LauncherEnv& env, const LauncherVars& vars) {
  RankEnv result;
  result.launcher = vars.name;
  result.world_size = env.required_int(vars.world_size);
  check_positive(vars.world_size, result.world_size);
  result.rank = env.required_int(vars.rank);
  check_below(vars.rank, result.rank, vars.world_size, result.world_size);
  const auto [local_name, local_size] = local_world_size(env, vars);
  result.local_world_size = local_size;
  check_positive(local_name, local_size);
  if (local_size > result.world_size) {
    throw ConfigError(str(quoted(local_name, std::to_string(local_size)), " exceeds ",
                          vars.world_size, "=", result.world_size));
  }
  result.local_rank = env.required_int(vars.local_rank);
  check_below(vars.local_rank, result.local_rank, local_name, local_size);
  if (auto addr = env.first_of(vars.master_addr).second) result.master_addr = *addr;
  result.master_port = master_port(env, vars, result.world_size);
  if (result.launcher == "torchrun" && env.get("SHARDFORMER_LAUNCHED") == "1") {
    result.launcher = "shardformer";
  }
  result.launcher_store =
      (result.launcher == "torchrun" && env.get("TORCHELASTIC_USE_AGENT_STORE") == "True") ||
      (result.launcher == "shardformer" && env.get(kLauncherStoreVariable) == "1");
  return result;
}

// ---------------------------------------------------------------- launcher signals

constexpr int kExecFailed = 127;
constexpr auto kPollInterval = std::chrono::milliseconds(10);
constexpr std::array<int, 2> kForwardedSignals{SIGINT, SIGTERM};

volatile std::sig_atomic_t g_received_signal = 0;

void record_signal(int signal) { g_received_signal = signal; }

// Catches SIGINT and SIGTERM for the duration of a launch; restores the previous handlers.
class ScopedSignalCatcher {
 public:
  ScopedSignalCatcher() {
    g_received_signal = 0;
    struct sigaction action {};
    action.sa_handler = record_signal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kForwardedSignals.size(); ++i) {
      sigaction(kForwardedSignals[i], &action, &previous_[i]);
    }
  }
  ~ScopedSignalCatcher() {
    for (size_t i = 0; i < kForwardedSignals.size(); ++i) {
      sigaction(kForwardedSignals[i], &previous_[i], nullptr);
    }
  }
  ScopedSignalCatcher(const ScopedSignalCatcher&) = delete;
  ScopedSignalCatcher& operator=(const ScopedSignalCatcher&) = delete;

  // The signal received since the last call, or 0.
  static int take() {
    const int signal = g_received_signal;
    g_received_signal = 0;
    return signal;
  }

 private:
  std::array<struct sigaction, kForwardedSignals.size()> previous_{};
};

std::string signal_name(int signal) {
  const char* name = strsignal(signal);
  return str(signal, " (", name != nullptr ? name : "unknown", ")");
}

// "rank 1 exited with code 3" / "rank 1 was killed by signal 9 (Killed)", and the exit code
// a shell would report for it.
std::pair<int, std::string> describe_status(int rank, int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    return {128 + signal, str("rank ", rank, " was killed by signal ", signal_name(signal))};
  }
  const int code = WEXITSTATUS(status);
  return {code, str("rank ", rank, " exited with code ", code)};
}

// ---------------------------------------------------------------- starting ranks

// The rendezvous store of a local job whose port the launcher picks, served by the launcher
// on a port the kernel chose when the store bound it. Closing a probe socket and letting rank 0
// bind its port later left a window in which another process (a peer job's connection) could
// take the port, and the job failed with EADDRINUSE.
c10::intrusive_ptr<c10d::TCPStore> serve_store(const LaunchOptions& options) {
  c10d::TCPStoreOptions store_options;
  store_options.port = 0;
  store_options.isServer = true;
  store_options.numWorkers = std::nullopt;  // the ranks' own barrier waits for them all
  store_options.waitWorkers = false;
  try {
    return c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error(str("cannot serve the rendezvous store on ", options.master_addr, ": ",
                    what.substr(0, what.find('\n'))));
  }
}

// The launcher's environment with the rank variables replaced.
std::vector<std::string> rank_environment(int rank, const LaunchOptions& options, int port,
                                          bool launcher_store) {
  std::map<std::string, std::string> rank_vars{
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(options.world_size)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(options.world_size)},
      {"MASTER_ADDR", options.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"SHARDFORMER_LAUNCHED", "1"},
  };
  if (launcher_store) rank_vars[kLauncherStoreVariable] = "1";
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view variable = *entry;
    if (rank_vars.count(std::string(variable.substr(0, variable.find('=')))) == 0) {
      env.emplace_back(variable);
    }
  }
  for (const auto& [name, value] : rank_vars) env.push_back(name + "=" + value);
  return env;
}

// execve-style array over strings, which must outlive it.
std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> result;
  for (std::string& s : strings) result.push_back(s.data());
  result.push_back(nullptr);
  return result;
}

// Writes "prefix reason\n" in one write, so that ranks failing together do not interleave.
// Async-signal-safe: no allocation.
void write_exec_error(const char* prefix, const char* reason) {
  std::array<char, 1024> line{};
  size_t used = 0;
  for (const char* part : {prefix, reason, "\n"}) {
    const size_t length = std::min(std::strlen(part), line.size() - used);
    std::memcpy(line.data() + used, part, length);
    used += length;
  }
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, line.data(), used);
}

// In the forked child: only async-signal-safe calls until execve.
[[noreturn]] void exec_rank(char* const* argv, char* const* envp, pid_t launcher,
                            const char* error_prefix) {
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signal : kForwardedSignals) sigaction(signal, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // The launcher may have died before prctl took effect: then nobody would stop this rank.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(kExecFailed);
  execve(argv[0], argv, envp);
  const int error = errno;
  write_exec_error(error_prefix, std::strerror(error));
  _exit(kExecFailed);
}

// ---------------------------------------------------------------- supervising ranks

// The running ranks of one launch. Stops them all at the first failure or launcher signal:
// SIGTERM (or the launcher's signal) first, SIGKILL after the grace period. Never returns or
// unwinds with a child left unreaped.
class RankGroup {
 public:
  explicit RankGroup(std::chrono::milliseconds grace) : grace_(grace) {}
  ~RankGroup() {
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      kill(r.pid, SIGKILL);
      waitpid(r.pid, nullptr, 0);
    }
  }
  RankGroup(const RankGroup&) = delete;
  RankGroup& operator=(const RankGroup&) = delete;

  void started(int rank, pid_t pid) { ranks_.push_back({rank, pid, true}); }

  // Records the first failure, which names the result, and stops the other ranks.
  void fail(int rank, int exit_code, const std::string& message) {
    if (stopping_) return;
    result_ = {exit_code, rank, message};
    log::error(str(message, "; stopping the other ranks"));
    stop(SIGTERM);
  }

  // Supervises until every rank has exited.
  LaunchResult wait() {
    while (running()) {
      if (const int signal = ScopedSignalCatcher::take()) on_launcher_signal(signal);
      reap_exited();
      if (stopping_ && !killed_ && Clock::now() >= kill_deadline_) kill_survivors();
      if (running()) std::this_thread::sleep_for(kPollInterval);
    }
    return result_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Rank {
    int rank;
    pid_t pid;
    bool running;
  };

  bool running() const {
    for (const Rank& r : ranks_) {
      if (r.running) return true;
    }
    return false;
  }

  void send_running(int signal) {
    for (const Rank& r : ranks_) {
      if (r.running) kill(r.pid, signal);
    }
  }

  void stop(int signal) {
    if (!stopping_) kill_deadline_ = Clock::now() + grace_;
    stopping_ = true;
    if (sent_signal_ == 0) sent_signal_ = signal;
    send_running(signal);
    send_running(SIGCONT);  // a stopped rank acts on the signal only once continued
  }

  void on_launcher_signal(int signal) {
    log::warn(str("launcher received signal ", signal_name(signal), "; stopping the ranks"));
    if (!stopping_) {
      result_ = {128 + signal, -1, str("stopped by signal ", signal_name(signal))};
    }
    stop(signal);
  }

  void kill_survivors() {
    log::warn(str("ranks still running ", grace_.count(), " ms after being asked to stop; ",
                  "sending SIGKILL"));
    send_running(SIGKILL);
    killed_ = true;
  }

  // Ranks seen to have ended in the same poll are judged together, a rank killed by a signal
  // first: its peers' errors (a connection reset) follow from its death, even where they
  // exited before the poll looked at it.
  void reap_exited() {
    std::vector<std::pair<int, int>> exited;  // rank, wait status
    for (Rank& r : ranks_) {
      if (!r.running) continue;
      int status = 0;
      const pid_t pid = waitpid(r.pid, &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) continue;
      r.running = false;
      if (pid < 0) {
        fail(r.rank, 1, str("rank ", r.rank, " cannot be waited for: ", std::strerror(errno)));
      } else {
        exited.emplace_back(r.rank, status);
        // A rank that died while setting up a group may leave its shared-memory name behind.
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          if (const int n = distributed::remove_shared_memory_left_by(r.pid); n > 0) {
            log::info(str("removed ", n, " shared-memory name(s) left by rank ", r.rank));
          }
        }
      }
    }
    std::stable_partition(exited.begin(), exited.end(),
                          [](const auto& e) { return WIFSIGNALED(e.second); });
    for (const auto& [rank, status] : exited) on_exit(rank, status);
  }

  void on_exit(int rank, int status) {
    auto [code, message] = describe_status(rank, status);
    if (stopping_ && result_.failed_rank >= 0 && !rank_signaled_ && WIFSIGNALED(status) &&
        WTERMSIG(status) != sent_signal_ && !killed_) {
      // Killed by a signal the launcher did not send, after another rank failed: that failure
      // followed from this death. A peer can see a killed process as gone (its main thread
      // ended) before the launcher can wait for it (its other threads still ending).
      log::error(str(message, "; the failure of rank ", result_.failed_rank, " followed from it"));
      result_ = {code, rank, message};
      rank_signaled_ = true;
      return;
    }
    if (code == 0 || stopping_) {
      log::info(message);
      return;
    }
    rank_signaled_ = WIFSIGNALED(status);
    fail(rank, code, message);
  }

  std::chrono::milliseconds grace_;
  std::vector<Rank> ranks_;
  LaunchResult result_;
  bool stopping_ = false, killed_ = false;
  bool rank_signaled_ = false;  // result_ is a rank killed by a signal the launcher did not send
  int sent_signal_ = 0;         // the first signal the launcher sent to stop the ranks
  Clock::time_point kill_deadline_;
};

void check_launch(const std::vector<std::string>& argv, const LaunchOptions& options) {
  if (argv.empty() || argv.front().empty()) {
    throw ConfigError("launch_local_ranks: no program to start (argv is empty)");
  }
  if (options.world_size < 1) {
    throw ConfigError(
        str("launch_local_ranks: world_size = ", options.world_size, " (must be >= 1)"));
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    throw ConfigError(str("launch_local_ranks: master_port = ", options.master_port,
                          " is not a port (0 picks a free one)"));
  }
}

}  // namespace

std::optional<RankEnv> rank_env_from_environment(const EnvLookup& lookup) {
  for (const LauncherVars& vars : kLaunchers) {
    LauncherEnv env(lookup, vars);
    if (env.present()) return read_rank_env(env, vars);
  }
  return std::nullopt;
}

std::optional<RankEnv> rank_env_from_environment() {
  return rank_env_from_environment([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

LaunchResult launch_local_ranks(const std::vector<std::string>& argv,
                                const LaunchOptions& options) {
  check_launch(argv, options);
  // Kept until every rank has exited.
  const c10::intrusive_ptr<c10d::TCPStore> store =
      options.master_port == 0 ? serve_store(options) : nullptr;
  const int port = store ? store->getPort() : options.master_port;
  log::info(str("launching ", options.world_size, " ranks of ", argv.front(),
                " (MASTER_ADDR=", options.master_addr, ", MASTER_PORT=", port, ")"));
  std::vector<std::string> args = argv;
  const std::vector<char*> c_args = c_array(args);
  const pid_t launcher = getpid();
  ScopedSignalCatcher signals;  // before the first fork, so no signal is missed
  RankGroup group(options.grace);
  for (int rank = 0; rank < options.world_size; ++rank) {
    std::vector<std::string> env = rank_environment(rank, options, port, store != nullptr);
    const std::vector<char*> c_env = c_array(env);
    const std::string error_prefix =
        str("shardformer launcher: rank ", rank, ": cannot execute '", argv.front(), "': ");
    const pid_t pid = fork();
    if (pid == 0) exec_rank(c_args.data(), c_env.data(), launcher, error_prefix.c_str());
    if (pid < 0) {
      group.fail(rank, 1, str("cannot start rank ", rank, ": fork: ", std::strerror(errno)));
      break;
    }
    group.started(rank, pid);
  }
  LaunchResult result = group.wait();
  if (result.exit_code == 0) log::info(str("all ", options.world_size, " ranks finished"));
  return result;
}

namespace {
constexpr const char* kErrorDirVariable = "SHARDFORMER_ERROR_DIR";
}  // namespace

RankErrorFolder::RankErrorFolder() {
  std::string pattern = (std::filesystem::temp_directory_path() / "shardformer-errors-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error(str("cannot create a temporary folder for rank errors: ", std::strerror(errno)));
  }
  path_ = pattern;
  ::setenv(kErrorDirVariable, path_.c_str(), 1);
}

RankErrorFolder::~RankErrorFolder() {
  ::unsetenv(kErrorDirVariable);
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

// Each record is "<steady-clock ns> <message>": the machine-wide monotonic clock orders
// records made milliseconds apart, which file modification times (kernel ticks) cannot.
RankErrorFolder::RecordedError RankErrorFolder::first_error() const {
  RecordedError first;
  int64_t first_ns = std::numeric_limits<int64_t>::max();
  for (const auto& entry : std::filesystem::directory_iterator(path_)) {
    if (entry.path().has_extension()) continue;  // an activity record
    std::ifstream in(entry.path());
    int64_t ns = 0;
    int code = 1;
    std::string message;
    if (!(in >> ns >> code) || !std::getline(in >> std::ws, message) || ns >= first_ns) continue;
    first_ns = ns;
    first = {"rank " + entry.path().filename().string() + ": " + message, code};
  }
  return first;
}

namespace {
std::filesystem::path activity_file(const std::filesystem::path& dir, int rank) {
  return dir / str(rank, ".activity");
}
}  // namespace

std::vector<std::string> RankErrorFolder::rank_activities(int world_size, int first,
                                                          size_t limit) const {
  std::vector<std::pair<int, runtime::ActivitySnapshot>> records;
  for (int rank = 0; rank < world_size; ++rank) {
    if (auto record = runtime::read_activity(activity_file(path_, rank))) {
      records.emplace_back(rank, std::move(*record));
    }
  }
  std::stable_sort(records.begin(), records.end(), [first](const auto& a, const auto& b) {
    if ((a.first == first) != (b.first == first)) return a.first == first;
    return a.second.last_change_ns < b.second.last_change_ns;
  });
  const int64_t now = runtime::steady_now_ns();
  std::vector<std::string> lines;
  for (const auto& [rank, record] : records) {
    if (lines.size() == limit) {
      lines.push_back(str("(", records.size() - limit, " more ranks)"));
      break;
    }
    lines.push_back(str("rank ", rank, ": ", runtime::describe_activity(record, now)));
  }
  return lines;
}

void publish_rank_activity(int rank) {
  if (const char* dir = std::getenv(kErrorDirVariable)) {
    runtime::publish_activity(activity_file(dir, rank));
  }
}

void record_rank_error(const std::string& message, int exit_code) {
  const char* dir = std::getenv(kErrorDirVariable);
  const char* rank = std::getenv("RANK");
  if (dir == nullptr || rank == nullptr) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count();
  std::ofstream(std::filesystem::path(dir) / rank)
      << ns << " " << exit_code << " "
      << (message.empty() ? "(an error without a message)" : message.substr(0, message.find('\n')))
      << "\n";
}

}  // namespace shardformer::host
