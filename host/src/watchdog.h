// A deadline for a step that may block without a timeout of its own (c10d's TCPStore client
// waits for ever on a server that accepts but never answers): past it, the rank records the
// error and exits, instead of hanging the job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace shardformer::host {

class Watchdog {
 public:
  // Past `limit`, logs and records "<what> did not finish within N s" and exits the process
  // with status 1, unless the watchdog was destroyed first.
  Watchdog(std::chrono::milliseconds limit, std::string what);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};

}  // namespace shardformer::host
