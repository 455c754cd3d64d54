// The activity record: scopes set and restore the phase and operation, an exception keeps where
// it happened, another process reads a published record (also after the writer died), and a
// file that is not a record is refused.
#include "shardformer/runtime/activity.h"

#include "shardformer/error.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace {

namespace fs = std::filesystem;
using namespace shardformer;

TEST(Activity, ScopesSetAndRestoreThePhaseAndOperation) {
  {
    const runtime::PhaseScope phase("loading");
    EXPECT_EQ(runtime::current_activity().phase, "loading");
    {
      const runtime::OperationScope op("read_tensor", "reading tensor 'a'");
      EXPECT_EQ(runtime::current_activity().operation, "reading tensor 'a'");
      const runtime::PhaseScope inner("building");
      EXPECT_EQ(runtime::current_activity().phase, "building");
    }
    EXPECT_EQ(runtime::current_activity().phase, "loading");
    EXPECT_EQ(runtime::current_activity().operation, "");
  }
  const runtime::ActivitySnapshot now = runtime::current_activity();
  EXPECT_EQ(now.phase, "");
  EXPECT_EQ(now.operation, "");
  EXPECT_EQ(runtime::describe_activity(now, now.last_change_ns + 1'500'000'000),
            "between operations for 1.50 s (no phase)");
}

TEST(Activity, ARecordNeverWrittenSaysSoRatherThanAnAge) {
  EXPECT_EQ(runtime::describe_activity(runtime::ActivitySnapshot{}, 5'626'150'000'000),
            "had not begun its job");
}

TEST(Activity, AnExceptionKeepsWhereItHappened) {
  try {
    const runtime::PhaseScope phase("generate");
    const runtime::OperationScope op("all_reduce", "all_reduce #3 on group 'tp'");
    throw Error("peer gone");
  } catch (const Error&) {
  }
  const runtime::ActivitySnapshot after = runtime::current_activity();
  EXPECT_EQ(after.phase, "generate");
  EXPECT_EQ(after.operation, "all_reduce #3 on group 'tp'");
  EXPECT_EQ(runtime::describe_activity(after, after.operation_since_ns + 250'000'000).substr(0, 41),
            "all_reduce #3 on group 'tp', for 0.25 s (");
  // Once the error is handled, the next scope to end restores what the failed scopes would
  // have: nothing, here (not the failed scope's text).
  {
    const runtime::PhaseScope phase("next");
    const runtime::OperationScope op("read_tensor", "reading tensor 'b'");
    EXPECT_EQ(runtime::current_activity().phase, "next");
  }
  EXPECT_EQ(runtime::current_activity().phase, "");
  EXPECT_EQ(runtime::current_activity().operation, "");
}

TEST(Activity, AnErrorHandledInsideAScopeLeavesThatScopeToRestore) {
  {
    const runtime::PhaseScope phase("loading");
    try {
      const runtime::OperationScope op("read_tensor", "reading tensor 'a'");
      throw Error("not in this file");
    } catch (const Error&) {
    }
    EXPECT_EQ(runtime::current_activity().operation, "reading tensor 'a'");
    { const runtime::OperationScope op("read_tensor", "reading tensor 'a' of the next file"); }
    EXPECT_EQ(runtime::current_activity().operation, "");
    EXPECT_EQ(runtime::current_activity().phase, "loading");
  }
  EXPECT_EQ(runtime::current_activity().phase, "");
}

TEST(Activity, AnotherProcessReadsThePublishedRecordAfterTheWriterDied) {
  const fs::path path = fs::temp_directory_path() / ("activity-" + std::to_string(getpid()));
  const pid_t child = fork();
  if (child == 0) {
    runtime::publish_activity(path);
    const runtime::PhaseScope phase("saving step-2");
    const runtime::OperationScope op("write_file", "writing optimizer.safetensors");
    _exit(0);  // dies inside the scopes, as a killed rank would
  }
  int status = 0;
  waitpid(child, &status, 0);
  const auto record = runtime::read_activity(path);
  fs::remove(path);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->phase, "saving step-2");
  EXPECT_EQ(record->operation, "writing optimizer.safetensors");
  EXPECT_EQ(record->pid, child);
  EXPECT_LE(record->operation_since_ns, runtime::steady_now_ns());
}

TEST(Activity, ReadingSomethingElseGivesNothing) {
  const fs::path path = fs::temp_directory_path() / ("not-activity-" + std::to_string(getpid()));
  EXPECT_FALSE(runtime::read_activity(path).has_value());  // missing
  std::ofstream(path) << "short";
  EXPECT_FALSE(runtime::read_activity(path).has_value());  // too short
  std::ofstream(path) << std::string(4096, 'x');
  EXPECT_FALSE(runtime::read_activity(path).has_value());  // no magic
  fs::remove(path);
}

}  // namespace
