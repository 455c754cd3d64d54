// Tests of Checkpoint: single-file and sharded folders, the errors for missing or
// inconsistent files and for files changed after opening, the near-name suggestions for an
// unknown tensor, and views (another layout's names, fused tensors split) and their undoing.
#include "shardformer/checkpoint_io/checkpoint.h"
#include "test_util.h"

#include <ATen/ATen.h>

#include <chrono>
#include <iterator>

namespace shardformer {
namespace {

namespace fs = std::filesystem;
using testing::expect_checkpoint_error;
using testing::expect_error;

const std::string kConfig = R"({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})";

class CheckpointTest : public testing::TempDirTest<> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    testing::write_text(dir_ / "config.json", kConfig);
  }

  // Writes model.safetensors.index.json mapping each tensor name to a shard file name.
  void write_index(const std::map<std::string, std::string>& weight_map) {
    std::string entries;
    for (const auto& [name, shard] : weight_map) {
      entries += (entries.empty() ? "" : ", ") + ("\"" + name + "\": \"" + shard + "\"");
    }
    testing::write_text(dir_ / "model.safetensors.index.json",
                        R"({"metadata": {}, "weight_map": {)" + entries + "}}");
  }
};

TEST_F(CheckpointTest, OpensSingleFile) {
  at::Tensor weight = at::arange(6, at::kFloat).reshape({2, 3});  // [2, 3]
  save_safetensors(dir_ / "model.safetensors", {{"w", weight}, {"b", at::ones({3}, at::kHalf)}});
  Checkpoint checkpoint(dir_);
  EXPECT_EQ(checkpoint.config().model_type(), "gpt2");
  EXPECT_EQ(checkpoint.files().size(), 1u);
  EXPECT_EQ(checkpoint.tensor_names(), (std::vector<std::string>{"b", "w"}));
  EXPECT_TRUE(checkpoint.contains("w"));
  EXPECT_FALSE(checkpoint.contains("x"));
  EXPECT_TRUE(at::equal(checkpoint.read("w"), weight));
  EXPECT_TRUE(at::equal(checkpoint.read_slice("w", 1, 1, 2), weight.narrow(1, 1, 2)));
  EXPECT_EQ(checkpoint.total_numel(), 9);
  EXPECT_EQ(checkpoint.total_bytes(), 6u * 4 + 3 * 2);
}

TEST_F(CheckpointTest, MissingFolder) {
  fs::path missing = dir_ / "absent";
  expect_checkpoint_error([&] { Checkpoint checkpoint(missing); },
                          {missing.string(), "does not exist"});
}

TEST_F(CheckpointTest, MissingConfig) {
  fs::remove(dir_ / "config.json");
  save_safetensors(dir_ / "model.safetensors", {{"w", at::ones({1})}});
  expect_checkpoint_error([&] { Checkpoint checkpoint(dir_); },
                          {(dir_ / "config.json").string(), "file not found"});
}

TEST_F(CheckpointTest, MissingWeightsListsWhatWasLookedFor) {
  expect_checkpoint_error([&] { Checkpoint checkpoint(dir_); },
                          {dir_.string(), "model.safetensors and model.safetensors.index.json"});
}

TEST_F(CheckpointTest, IndexNamingMissingShard) {
  save_safetensors(dir_ / "shard1.safetensors", {{"a", at::ones({1})}});
  write_index({{"a", "shard1.safetensors"}, {"b", "shard2.safetensors"}});
  expect_checkpoint_error([&] { Checkpoint checkpoint(dir_); },
                          {"model.safetensors.index.json", "shard2.safetensors", "does not exist"});
}

TEST_F(CheckpointTest, IndexWithoutWeightMap) {
  testing::write_text(dir_ / "model.safetensors.index.json", R"({"metadata": {}})");
  expect_checkpoint_error([&] { Checkpoint checkpoint(dir_); },
                          {"model.safetensors.index.json", "'weight_map'"});
}

// Found by fuzzing (tests/fuzz): a NUL in a shard name cut the path short, so the index opened a
// file other than the one it named.
TEST_F(CheckpointTest, IndexShardNameWithNul) {
  save_safetensors(dir_ / "shard1.safetensors", {{"a", at::ones({1})}});
  testing::write_text(dir_ / "model.safetensors.index.json",
                      R"({"weight_map": {"a": "shard1.safetensors\u0000.bak"}})");
  expect_checkpoint_error([&] { Checkpoint checkpoint(dir_); },
                          {"model.safetensors.index.json", "'weight_map' entry 'a'",
                           "must be a file name in the folder"});
}

// Found by fuzz_checkpoint_index: a shard name longer than the file system allows made
// std::filesystem throw its filesystem_error instead of a CheckpointError.
TEST_F(CheckpointTest, IndexShardNameTooLong) {
  write_index({{"a", std::string(300, 'x') + ".safetensors"}});
  expect_checkpoint_error(
      [&] { Checkpoint checkpoint(dir_); },
      {"model.safetensors.index.json", "(holding 'a') cannot be opened", "File name too long"});
}

TEST_F(CheckpointTest, FolderNameTooLong) {
  const fs::path folder = dir_ / std::string(300, 'x');
  expect_checkpoint_error([&] { Checkpoint checkpoint(folder); },
                          {folder.string(), "cannot look up the path: File name too long"});
}

TEST_F(CheckpointTest, IndexWithNumberOverflow) {
  save_safetensors(dir_ / "shard1.safetensors", {{"a", at::ones({1})}});
  testing::write_text(dir_ / "model.safetensors.index.json",
                      R"({"metadata": {"total_size": 1e400}, "weight_map": {}})");
  expect_checkpoint_error([&] { Checkpoint checkpoint(dir_); },
                          {"model.safetensors.index.json", "number overflow parsing '1e400'"});
}

TEST_F(CheckpointTest, TensorMissingFromItsShard) {
  save_safetensors(dir_ / "shard1.safetensors", {{"a", at::ones({1})}});
  save_safetensors(dir_ / "shard2.safetensors", {{"b", at::ones({1})}});
  write_index(
      {{"a", "shard1.safetensors"}, {"b", "shard2.safetensors"}, {"c", "shard2.safetensors"}});
  expect_checkpoint_error(
      [&] { Checkpoint checkpoint(dir_); },
      {"model.safetensors.index.json", "tensor 'c'", "shard2.safetensors", "does not contain it"});
}

// A shard's tensor that the index does not list is refused, not loaded behind its back.
TEST_F(CheckpointTest, IndexOmitsATensorOfItsShard) {
  save_safetensors(dir_ / "shard1.safetensors", {{"a", at::ones({1})}, {"b", at::ones({1})}});
  write_index({{"a", "shard1.safetensors"}});
  expect_checkpoint_error([&] { Checkpoint checkpoint(dir_); },
                          {"model.safetensors.index.json", "shard1.safetensors holds tensor 'b'",
                           "the index's 'weight_map' does not list"});
}

// A shard rewritten in place between opening the checkpoint (index and headers) and reading a
// tensor: truncated, it would have killed the process with SIGBUS; rewritten at the same size,
// handed out torn data.
TEST_F(CheckpointTest, ShardTruncatedBetweenIndexAndRead) {
  save_safetensors(dir_ / "shard1.safetensors", {{"a", at::ones({64})}, {"b", at::ones({64})}});
  write_index({{"a", "shard1.safetensors"}, {"b", "shard1.safetensors"}});
  Checkpoint checkpoint(dir_);
  const fs::path shard = dir_ / "shard1.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 200);
  expect_checkpoint_error([&] { checkpoint.read("b"); },
                          {shard.string(), "tensor 'b'", "the file changed after it was opened",
                           "bytes then", "was it rewritten while the job read it?"});
  expect_checkpoint_error([&] { checkpoint.read_slice("a", 0, 0, 8); },
                          {shard.string(), "tensor 'a'", "the file changed after it was opened"});
}

TEST_F(CheckpointTest, ShardRewrittenInPlaceBetweenIndexAndRead) {
  const fs::path shard = dir_ / "model.safetensors";
  save_safetensors(shard, {{"a", at::ones({64})}});
  Checkpoint checkpoint(dir_);
  const std::string bytes = [&] {
    std::ifstream in(shard, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto opened_at = fs::last_write_time(shard);
  testing::write_text(shard, bytes);  // the same inode, size and bytes
  fs::last_write_time(shard, opened_at + std::chrono::seconds(1));
  expect_checkpoint_error([&] { checkpoint.read("a"); },
                          {shard.string(), "tensor 'a'", "modified since, same size"});
}

// A shard replaced by a rename leaves the opened file mapped: the first read is of the file the
// checkpoint opened; a later one, which reads the file again, refuses the new one.
TEST_F(CheckpointTest, ShardReplacedAfterOpeningKeepsTheOpenedFile) {
  const fs::path shard = dir_ / "model.safetensors";
  save_safetensors(shard, {{"a", at::ones({64})}});
  Checkpoint checkpoint(dir_);
  save_safetensors(shard, {{"a", at::zeros({64})}});
  EXPECT_TRUE(at::equal(checkpoint.read("a"), at::ones({64})));
  expect_checkpoint_error(
      [&] { checkpoint.read("a"); },
      {shard.string(), "tensor 'a'", "the file was replaced after it was opened"});
}

TEST_F(CheckpointTest, TensorInTwoShards) {
  save_safetensors(dir_ / "shard1.safetensors", {{"a", at::ones({1})}, {"b", at::ones({1})}});
  save_safetensors(dir_ / "shard2.safetensors", {{"b", at::ones({1})}});
  write_index({{"a", "shard1.safetensors"}, {"b", "shard2.safetensors"}});
  expect_checkpoint_error(
      [&] { Checkpoint checkpoint(dir_); },
      {dir_.string(), "tensor 'b'", "shard1.safetensors", "shard2.safetensors"});
}

TEST_F(CheckpointTest, UnknownNameSuggestsNearNames) {
  std::map<std::string, at::Tensor> tensors;
  for (const char* name :
       {"h.0.attn.weight", "h.0.mlp.weight", "h.1.attn.weight", "ln_f.weight", "wte.weight"}) {
    tensors[name] = at::ones({1});
  }
  save_safetensors(dir_ / "model.safetensors", tensors);
  Checkpoint checkpoint(dir_);
  expect_checkpoint_error([&] { checkpoint.info("h.0.attn.wieght"); },
                          {dir_.string(), "no tensor named 'h.0.attn.wieght'",
                           "did you mean 'h.0.attn.weight', 'h.0.mlp.weight', 'h.1.attn.weight'?"});
  expect_checkpoint_error([&] { checkpoint.read("zzz"); }, {"no tensor named 'zzz'"});
}

// A fused [q (4 rows); k (2); v (2)] tensor of 3 columns and a renamed norm, as a family whose
// checkpoints store another layout's names sees them.
class CheckpointViewsTest : public CheckpointTest {
 protected:
  void SetUp() override {
    CheckpointTest::SetUp();
    save_safetensors(dir_ / "model.safetensors",
                     {{"qkv", fused_}, {"ln", at::full({3}, 2.0)}, {"other", at::ones({2})}});
  }
  static std::vector<TensorView> views() {
    return {{"q", "qkv", 0, 4},
            {"k", "qkv", 4, 2},
            {"v", "qkv", 6, 2},
            {.name = "norm", .source = "ln"}};
  }
  at::Tensor fused_ = at::arange(24, at::kFloat).reshape({8, 3});  // [8, 3]
};

TEST_F(CheckpointViewsTest, ServeTheRowsOfTheirSourceUnderTheirNames) {
  Checkpoint checkpoint(dir_);
  checkpoint.add_views(views());
  EXPECT_EQ(checkpoint.tensor_names(), (std::vector<std::string>{"k", "norm", "other", "q", "v"}));
  EXPECT_FALSE(checkpoint.contains("qkv"));
  EXPECT_EQ(checkpoint.info("k").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(at::equal(checkpoint.read("q"), fused_.narrow(0, 0, 4)));
  EXPECT_TRUE(at::equal(checkpoint.read("v"), fused_.narrow(0, 6, 2)));
  EXPECT_TRUE(at::equal(checkpoint.read("v"), fused_.narrow(0, 6, 2)));  // a copy the second time
  EXPECT_TRUE(at::equal(checkpoint.read_rows("k", 1, 1), fused_.narrow(0, 5, 1)));
  EXPECT_TRUE(
      at::equal(checkpoint.read_slice("q", 1, 1, 2), fused_.narrow(0, 0, 4).narrow(1, 1, 2)));
  EXPECT_TRUE(at::equal(checkpoint.read("norm"), at::full({3}, 2.0)));
  EXPECT_EQ(checkpoint.describe("k"), "'k' (rows 4..6 of 'qkv')");
  EXPECT_EQ(checkpoint.total_bytes(), (24 + 3 + 2) * 4u);
  ASSERT_EQ(checkpoint.views().size(), 4u);
  EXPECT_EQ(checkpoint.views()[3].rows, 3);  // resolved: the whole of 'ln'
}

TEST_F(CheckpointViewsTest, JoiningThemGivesBackTheStoredTensors) {
  Checkpoint checkpoint(dir_);
  checkpoint.add_views(views());
  std::map<std::string, at::Tensor> model;
  for (const std::string& name : checkpoint.tensor_names()) model[name] = checkpoint.read(name);
  const auto saved = join_views(model, checkpoint.views());
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_TRUE(at::equal(saved.at("qkv"), fused_));
  EXPECT_TRUE(at::equal(saved.at("ln"), at::full({3}, 2.0)));
  EXPECT_TRUE(saved.count("other"));
  model.erase("k");  // a rank holding part of a fused tensor cannot write it
  expect_error<ModelError>([&] { join_views(model, checkpoint.views()); },
                           {"saving 'qkv': this rank holds 2 of its 3 parts"});
  EXPECT_EQ(join_views({{"other", at::ones({2})}}, checkpoint.views()).size(), 1u);
}

TEST_F(CheckpointViewsTest, RenameAScalar) {
  save_safetensors(dir_ / "model.safetensors", {{"scale", at::scalar_tensor(3.0)}});
  Checkpoint checkpoint(dir_);
  checkpoint.add_views({{.name = "s", .source = "scale"}});
  EXPECT_EQ(checkpoint.read("s").dim(), 0);
  EXPECT_EQ(checkpoint.read("s").item<double>(), 3.0);
  EXPECT_EQ(join_views({{"s", checkpoint.read("s")}}, checkpoint.views()).count("scale"), 1u);
}

TEST_F(CheckpointViewsTest, MustCoverEachSourceExactlyOnce) {
  const auto refused = [&](std::vector<TensorView> views, std::vector<std::string> parts) {
    Checkpoint checkpoint(dir_);
    expect_checkpoint_error([&] { checkpoint.add_views(views); }, parts);
    EXPECT_TRUE(checkpoint.contains("qkv"));  // nothing changed
  };
  refused({{"q", "qkv", 0, 4}, {"v", "qkv", 6, 2}},
          {dir_.string(), "the parts of 'qkv' (rows 0..4, 6..8) do not cover its 8 rows"});
  refused({{"q", "qkv", 0, 4}, {"k", "qkv", 2, 6}}, {"(rows 0..4, 2..8)"});
  refused({{"q", "qkv", 0, 8}, {"k", "qkv", 0, 8}}, {"(rows 0..8, 0..8)"});
  refused({{"q", "qkv", 4, 6}}, {"rows [4, 10) asked for 'q' lie outside the 8 rows of 'qkv'"});
  refused({{"q", "nope", 0, 1}}, {"no tensor named 'nope' (read as 'q')"});
  refused({{.name = "other", .source = "ln"}},
          {"'ln' cannot be read as 'other': the name is taken"});
  refused({{.name = "x", .source = "ln"}, {.name = "x", .source = "other"}}, {"the name is taken"});
}

class CheckpointPythonFixtures : public testing::PythonFixturesTest {};

TEST_F(CheckpointPythonFixtures, OpensShardedCheckpoint) {
  Checkpoint checkpoint(dir_ / "sharded");
  EXPECT_EQ(checkpoint.config().architectures(), std::vector<std::string>{"GPT2LMHeadModel"});
  EXPECT_EQ(checkpoint.config().get_int("n_embd"), 4);
  EXPECT_EQ(checkpoint.files().size(), 2u);
  EXPECT_EQ(checkpoint.tensor_names().size(), 5u);
  EXPECT_EQ(checkpoint.file_of("transformer.ln_f.weight").path().filename(),
            "model-00002-of-00002.safetensors");
  EXPECT_EQ(checkpoint.total_numel(), 8 * 4 + 4 * 12 + 12 + 4 * 16 + 4);
  EXPECT_EQ(checkpoint.total_bytes(), 4u * checkpoint.total_numel());

  at::Tensor attn = at::arange(48, at::kFloat).reshape({4, 12}) + 100;  // [4, 12]
  EXPECT_TRUE(at::equal(checkpoint.read("transformer.h.0.attn.c_attn.weight"), attn));
  EXPECT_TRUE(at::equal(checkpoint.read_slice("transformer.h.0.attn.c_attn.weight", 1, 4, 4),
                        attn.narrow(1, 4, 4)));
  EXPECT_EQ(checkpoint.info("transformer.h.1.mlp.c_fc.weight").shape,
            (std::vector<int64_t>{4, 16}));
}

}  // namespace
}  // namespace shardformer
