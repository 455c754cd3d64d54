// The watchdog thread: waits for the step to finish or the deadline to pass.
#include "watchdog.h"

#include "launcher.h"

#include "shardformer/log.h"
#include "shardformer/strings.h"

#include <cstdio>
#include <cstdlib>

namespace shardformer::host {

Watchdog::Watchdog(std::chrono::milliseconds limit, std::string what) {
  thread_ = std::thread([this, limit, what = std::move(what)] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (done_.wait_for(lock, limit, [this] { return finished_; })) return;
    const std::string message =
        str(what, " did not finish within ", static_cast<double>(limit.count()) / 1000.0, " s");
    record_rank_error(message, 1);
    log::error(message);
    std::fflush(nullptr);
    std::_Exit(1);
  });
}

Watchdog::~Watchdog() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
  }
  done_.notify_all();
  thread_.join();
}

}  // namespace shardformer::host
