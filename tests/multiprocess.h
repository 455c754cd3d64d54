// Runs a test body on several ranks in forked processes (c10d Gloo over loopback). The parent
// only forks and waits, so it never forks after LibTorch started its thread pools.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace shardformer::testing {

inline bool port_is_bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

// A TCP port for a test's rendezvous that no other test on this machine can pick: ports come
// from [20000, 32000), below Linux's ephemeral range (so no outgoing connection takes one),
// and each is claimed by an flock on /tmp/shardformer-test-ports/<port>, held (fd kept open,
// inherited by the ranks) until the test process and its ranks exit. Parallel ctest runs
// therefore never race for a port.
inline int free_port() {
  const std::string dir = "/tmp/shardformer-test-ports";
  mkdir(dir.c_str(), 0777);
  std::mt19937 random(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  for (int attempt = 0; attempt < 10000; ++attempt) {
    const int port = 20000 + static_cast<int>(random() % 12000);
    const std::string lock = dir + "/" + std::to_string(port);
    const int fd = open(lock.c_str(), O_CREAT | O_RDWR, 0666);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && port_is_bindable(port)) return port;
    close(fd);
  }
  ADD_FAILURE() << "no free test port in [20000, 32000)";
  return 0;
}

// Runs body(rank, port) on `world` processes and returns each one's wait status. A rank whose
// body throws or records a GoogleTest failure exits 1; ranks still running at `timeout` are
// killed (status: signalled by SIGKILL). The default is three times as long under the sanitizers:
// the 100-step mixed-precision curves took past 120 s there on an Intel Xeon's 2 cores.
#if defined(SHARDFORMER_SANITIZE)
inline constexpr std::chrono::seconds kRunRanksTimeout{360};
#else
inline constexpr std::chrono::seconds kRunRanksTimeout{120};
#endif
inline std::vector<int> run_ranks(int world, const std::function<void(int rank, int port)>& body,
                                  std::chrono::seconds timeout = kRunRanksTimeout) {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      int code = 0;
      try {
        body(rank, port);
        code = ::testing::Test::HasFailure() ? 1 : 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        code = 1;
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses(world, -1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int done = 0; done < world;) {
    for (int rank = 0; rank < world; ++rank) {
      if (statuses[rank] != -1) continue;
      int status = 0;
      if (waitpid(pids[rank], &status, WNOHANG) == pids[rank]) {
        statuses[rank] = status;
        ++done;
      } else if (std::chrono::steady_clock::now() > deadline) {
        kill(pids[rank], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return statuses;
}

// Expects every rank to have exited 0.
inline void expect_all_ranks_passed(const std::vector<int>& statuses) {
  for (size_t rank = 0; rank < statuses.size(); ++rank) {
    const int s = statuses[rank];
    EXPECT_TRUE(WIFEXITED(s) && WEXITSTATUS(s) == 0)
        << "rank " << rank << (WIFSIGNALED(s) ? " killed by signal " : " exited with ")
        << (WIFSIGNALED(s) ? WTERMSIG(s) : WEXITSTATUS(s));
  }
}

}  // namespace shardformer::testing
