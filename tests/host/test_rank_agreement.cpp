// The comparison of the ranks' identities at the start of a job: which parts differ, between
// which ranks, with paths that may differ between machines.
#include "rank_agreement.h"

#include <gtest/gtest.h>

namespace {

using shardformer::host::disagreement;
using shardformer::host::RankIdentity;

RankIdentity identity(const std::string& config, const std::string& torch) {
  return {{"job config", "fnv1a64 " + config}, {"LibTorch", torch}};
}

TEST(RankAgreement, TheSameJobAtDifferentPathsAgrees) {
  EXPECT_EQ(disagreement({identity("00aa of /a/job.toml", "2.9.0"),
                          identity("00aa of /b/job.toml", "2.9.0")}),
            std::nullopt);
  EXPECT_EQ(disagreement({}), std::nullopt);
}

TEST(RankAgreement, NamesEachPartThatDiffersAndTheRanksOnEachSide) {
  const auto message =
      disagreement({identity("00bb of b.toml", "2.9.0"), identity("00aa of a.toml", "2.9.0"),
                    identity("00bb of b.toml", "2.8.0")});
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(*message,
            "job config differs between ranks: ranks 0, 2: fnv1a64 00bb of b.toml; rank 1: "
            "fnv1a64 00aa of a.toml\n"
            "LibTorch differs between ranks: ranks 0, 1: 2.9.0; rank 2: 2.8.0");
}

TEST(RankAgreement, APartMissingOnARankDiffers) {
  const auto message = disagreement({identity("00aa", "2.9.0"), {{"job config", "fnv1a64 00aa"}}});
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(*message, "LibTorch differs between ranks: rank 0: 2.9.0; rank 1: (not reported)");
}

}  // namespace
