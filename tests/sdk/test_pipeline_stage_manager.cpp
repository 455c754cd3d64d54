// PipelineStageManager: even splits with the remainder on middle stages, explicit lists,
// interleaved chunks, neighbours, and clear errors for impossible layouts.
#include "shardformer/error.h"
#include "shardformer/parallel/pipeline_stage_manager.h"

#include <gtest/gtest.h>

using shardformer::ConfigError;
using shardformer::LayerRange;
using shardformer::PipelineStageManager;

TEST(PipelineStageManager, EvenSplitPutsTheRemainderOnMiddleStages) {
  EXPECT_EQ(PipelineStageManager::distribute_layers(5, 2), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(PipelineStageManager::distribute_layers(12, 4), (std::vector<int64_t>{3, 3, 3, 3}));
  EXPECT_EQ(PipelineStageManager::distribute_layers(14, 4), (std::vector<int64_t>{3, 4, 4, 3}));
  EXPECT_EQ(PipelineStageManager::distribute_layers(3, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(PipelineStageManager::distribute_layers(7, 4), (std::vector<int64_t>{1, 2, 2, 2}));
}

TEST(PipelineStageManager, StagesCoverEveryLayerOnceInOrder) {
  for (int64_t stages : {1, 2, 3, 4}) {
    int64_t next = 0;
    for (int64_t s = 0; s < stages; ++s) {
      const PipelineStageManager manager(stages, s, 11);
      EXPECT_EQ(manager.layers().begin, next);
      EXPECT_GE(manager.layers().size(), 11 / stages);
      next = manager.layers().end;
      EXPECT_EQ(manager.is_first_stage(), s == 0);
      EXPECT_EQ(manager.is_last_stage(), s == stages - 1);
    }
    EXPECT_EQ(next, 11);
  }
}

TEST(PipelineStageManager, ExplicitLayersPerStage) {
  const PipelineStageManager manager(2, 1, 5, 1, std::vector<int64_t>{4, 1});
  EXPECT_EQ(manager.layers(), (LayerRange{4, 5}));
  EXPECT_EQ(manager.layers_of(0), (LayerRange{0, 4}));
}

TEST(PipelineStageManager, InterleavedChunksAlternateStages) {
  // 8 layers, 2 stages x 2 chunks: pieces of 2 in model order 0:s0c0 1:s1c0 2:s0c1 3:s1c1.
  const PipelineStageManager stage0(2, 0, 8, 2), stage1(2, 1, 8, 2);
  EXPECT_EQ(stage0.layers(0), (LayerRange{0, 2}));
  EXPECT_EQ(stage1.layers(0), (LayerRange{2, 4}));
  EXPECT_EQ(stage0.layers(1), (LayerRange{4, 6}));
  EXPECT_EQ(stage1.layers(1), (LayerRange{6, 8}));
  EXPECT_TRUE(stage0.holds_first_piece(0));
  EXPECT_FALSE(stage0.holds_first_piece(1));
  EXPECT_TRUE(stage1.holds_last_piece(1));
  EXPECT_FALSE(stage1.holds_last_piece(0));
  EXPECT_EQ(stage1.next_stage(), 0);
  EXPECT_EQ(stage0.prev_stage(), 1);
}

TEST(PipelineStageManager, ImpossibleLayoutsAreClearErrors) {
  const auto message = [](auto make) {
    try {
      make();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { PipelineStageManager(4, 0, 3); }).find("cannot split 3 layers into 4"),
            std::string::npos);
  EXPECT_NE(message([] {
              PipelineStageManager(2, 0, 5, 1, std::vector<int64_t>{2, 2});
            }).find("sums to 4 but the model has 5 layers"),
            std::string::npos);
  EXPECT_NE(message([] {
              PipelineStageManager(2, 0, 5, 1, std::vector<int64_t>{5});
            }).find("lists 1 entries ([5]) but the pipeline has 2 pieces"),
            std::string::npos);
  EXPECT_NE(message([] {
              PipelineStageManager(2, 0, 5, 1, std::vector<int64_t>{5, 0});
            }).find("leaves a piece without layers"),
            std::string::npos);
  EXPECT_NE(message([] { PipelineStageManager(2, 2, 5); }).find("not a valid position"),
            std::string::npos);
}
