// What the training tests share: the reference run of tools/train_reference.py (20 AdamW steps
// of the tiny GPT-2 on a Markov-chain token file) and sessions and trainers set up as it ran.
#pragma once

#include "model_fixture.h"
#include "multiprocess.h"
#include "shardformer/pipeline/schedule.h"
#include "shardformer/training/trainer.h"

#include <ATen/Parallel.h>

#include <string>

namespace shardformer::testing {

struct TrainLayout {
  int64_t dp = 1, pp = 1, tp = 1;
  int zero_stage = 0;
  std::string name = "";
  layers::RecomputePolicy recompute = {};  // activation checkpointing
  int64_t sp = 1;                          // the sp axis (all_to_all, ring_attn)
  std::string sequence_mode = "";          // sequence parallelism ("": none)
  bool sequence_overlap = false;
  pipeline::ScheduleKind schedule = pipeline::ScheduleKind::kOneFOneB;  // with pp > 1
  int64_t world() const { return dp * pp * sp * tp; }
};

inline void PrintTo(const TrainLayout& layout, std::ostream* os) { *os << layout.name; }

inline std::filesystem::path training_dir() { return test_data_dir() / "training"; }

inline SafetensorsFile training_reference() {
  return SafetensorsFile(training_dir() / "reference.safetensors");
}

inline training::DataOptions reference_data_options() {
  return {.path = training_dir() / "train.bin", .dtype = "uint16", .seq_len = 32, .seed = 1234};
}

// The reference's optimisation: global batch 8 in micro-batches of 2, AdamW(1e-3, (0.9, 0.95),
// 1e-8, wd 0.1), cosine schedule with 5 warm-up steps, clipping at 1.
inline training::TrainOptions reference_train_options(int64_t steps, int zero_stage = 0) {
  training::TrainOptions options;
  options.steps = steps;
  options.global_batch_size = 8;
  options.micro_batch_size = 2;
  options.adam = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  options.schedule = {.kind = training::LRSchedule::Kind::kCosine, .warmup_steps = 5};
  options.max_grad_norm = 1.0;
  options.zero_stage = zero_stage;
  return options;
}

// A GPT2LMHeadModel session of `checkpoint` at the mesh's layout (with the layout's sequence
// parallelism); pipelines split a rank's share of the batch into micro-batches of 2 as the
// reference does.
inline std::unique_ptr<Session> training_session(const ModelFixture& f,
                                                 const distributed::ProcessMesh* mesh,
                                                 const std::filesystem::path& checkpoint,
                                                 const TrainLayout& layout = {}) {
  SessionOptions options{.checkpoint = checkpoint, .architecture = "GPT2LMHeadModel"};
  if (!layout.sequence_mode.empty()) {
    options.shard.enable_sequence_parallelism = true;
    options.shard.sequence_parallelism_mode = parse_sequence_mode(layout.sequence_mode);
    options.shard.enable_sequence_overlap = layout.sequence_overlap;
  }
  if (mesh != nullptr && mesh->shape().pp > 1) {
    options.pipeline.num_microbatches = static_cast<int>(8 / mesh->shape().dp / 2);
    options.pipeline.schedule = layout.schedule;
  }
  return f.session(options, mesh);
}

// Runs body(fixture, mesh or null, rank) on the ranks of `layout`, one thread each.
template <typename Body>
void on_training_ranks(const TrainLayout& layout, Body body) {
  expect_all_ranks_passed(run_ranks(static_cast<int>(layout.world()), [&](int rank, int port) {
    at::set_num_threads(1);
    const ModelFixture f("tiny-gpt2-train",
                         ModelFixture::ReferenceFile{training_dir() / "reference.safetensors"});
    std::unique_ptr<distributed::ProcessMesh> mesh;
    if (layout.world() > 1) {
      mesh = std::make_unique<distributed::ProcessMesh>(
          rank,
          distributed::MeshShape{
              .dp = layout.dp, .pp = layout.pp, .sp = layout.sp, .tp = layout.tp},
          local_mesh_options(port));
    }
    body(f, mesh.get(), rank);
  }));
}

}  // namespace shardformer::testing
