// Training data readers: a flat .bin file and JSON lines give the samples the reference cut
// (tools/train_reference.py), source / target pairs of ids or of text (tokenized), and bad
// files are refused naming the file and the place.
#include "shardformer/error.h"
#include "shardformer/tokenizer/tokenizer.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

namespace shardformer::testing {
namespace {

namespace fs = std::filesystem;
using training::DataOptions;
using training::TokenDataset;

fs::path write_file(const std::string& name, const std::string& bytes) {
  const fs::path path = fs::temp_directory_path() / (std::to_string(getpid()) + "-" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The ConfigError message of reading `options`, or "" when it reads.
std::string read_error(const DataOptions& options, int64_t vocab = 1013) {
  try {
    TokenDataset data(options, vocab);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenDataset, BinAndJsonLinesGiveTheSameSamples) {
  const TokenDataset bin(reference_data_options(), 1013);
  DataOptions jsonl_options = reference_data_options();
  jsonl_options.path = training_dir() / "train.jsonl";
  const TokenDataset jsonl(jsonl_options, 1013);
  EXPECT_EQ(bin.num_train(), 512);
  EXPECT_EQ(jsonl.num_train(), 64);
  const std::vector<int64_t> samples{0, 5, 63, 17};
  const training::Batch a = bin.train_batch(samples), b = jsonl.train_batch(samples);
  EXPECT_TRUE(at::equal(a.input_ids, b.input_ids));
  EXPECT_TRUE(at::equal(a.labels, a.input_ids));
  EXPECT_TRUE(at::equal(a.attention_mask, at::ones_like(a.input_ids)));

  // The tokens of the reference's first sample, read independently of the reader.
  std::ifstream in(training_dir() / "train.bin", std::ios::binary);
  std::vector<uint16_t> first(32);
  in.read(reinterpret_cast<char*>(first.data()), 64);
  for (int64_t t = 0; t < 32; ++t) EXPECT_EQ(a.input_ids[0][t].item<int64_t>(), first[t]);
}

TEST(TokenDataset, HoldsOutTheLastSamples) {
  DataOptions options = reference_data_options();
  options.eval_fraction = 0.25;
  const TokenDataset data(options, 1013);
  const TokenDataset all(reference_data_options(), 1013);
  EXPECT_EQ(data.num_train(), 384);
  EXPECT_EQ(data.num_eval(), 128);
  EXPECT_TRUE(
      at::equal(data.eval_batch({0, 127}).input_ids, all.train_batch({384, 511}).input_ids));
  EXPECT_THROW(data.train_batch({384}), Error);
  EXPECT_THROW(data.eval_batch({128}), Error);
}

TEST(TokenDataset, PadsShortJsonLinesAndIgnoresTheirPadding) {
  DataOptions options = reference_data_options();
  options.seq_len = 4;
  options.path =
      write_file("short.jsonl", "{\"input_ids\": [5, 6, 7, 8]}\n\n{\"input_ids\": [9]}\n");
  const TokenDataset data(options, 1013);
  ASSERT_EQ(data.num_train(), 2);
  const training::Batch b = data.train_batch({1, 0});
  EXPECT_TRUE(
      at::equal(b.attention_mask, at::tensor({1, 0, 0, 0, 1, 1, 1, 1}, at::kLong).view({2, 4})));
  EXPECT_TRUE(
      at::equal(b.labels, at::tensor({9, -100, -100, -100, 5, 6, 7, 8}, at::kLong).view({2, 4})));
  fs::remove(options.path);
}

// Classification lines carry a label each; masked-LM data masks 15 % of the positions (80 %
// [MASK], 10 % random, 10 % kept) and labels only those, the same on every read.
TEST(TokenDataset, ReadsClassLabelsAndMasksTokens) {
  DataOptions options = reference_data_options();
  options.path = write_file("cls.jsonl",
                            "{\"input_ids\": [5, 6], \"label\": 1}\n"
                            "{\"input_ids\": [7], \"label\": 0}\n");
  const TokenDataset labelled(options, 1013);
  EXPECT_TRUE(labelled.has_class_labels());
  EXPECT_TRUE(at::equal(labelled.train_batch({1, 0}).labels, at::tensor({0, 1}, at::kLong)));
  fs::remove(options.path);

  options = reference_data_options();
  options.mlm_probability = 0.15;
  options.mask_token_id = 4;
  const TokenDataset masked(options, 1013), plain(reference_data_options(), 1013);
  std::vector<int64_t> all(static_cast<size_t>(masked.num_train()));
  std::iota(all.begin(), all.end(), 0);
  const training::Batch m = masked.train_batch(all), p = plain.train_batch(all);
  const at::Tensor picked = m.labels != -100;
  const double rate = picked.to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(rate, 0.15, 0.01) << "512 x 32 positions";
  EXPECT_TRUE(at::equal(m.labels.masked_select(picked), p.input_ids.masked_select(picked)));
  EXPECT_TRUE(at::equal(m.input_ids.masked_select(~picked), p.input_ids.masked_select(~picked)));
  const double to_mask =
      (m.input_ids == 4).logical_and(picked).to(at::kDouble).sum().item<double>() /
      picked.sum().item<double>();
  EXPECT_NEAR(to_mask, 0.8, 0.03);
  EXPECT_TRUE(at::equal(masked.train_batch({3}).input_ids, m.input_ids.narrow(0, 3, 1)));
}

TEST(TokenDataset, ReadsSourceTargetPairsOfIds) {
  DataOptions options = reference_data_options();
  options.path = write_file("pairs.jsonl",
                            "{\"input_ids\": [5, 6, 7], \"labels\": [8]}\n"
                            "{\"input_ids\": [9], \"labels\": [10, 11, 12]}\n");
  options.seq_len = 4;
  const TokenDataset data(options, 1013);
  EXPECT_TRUE(data.has_targets());
  EXPECT_FALSE(data.has_class_labels());
  const training::Batch b = data.train_batch({1, 0});
  EXPECT_TRUE(at::equal(b.input_ids, at::tensor({9, 0, 0, 0, 5, 6, 7, 0}, at::kLong).view({2, 4})));
  EXPECT_TRUE(
      at::equal(b.attention_mask, at::tensor({1, 0, 0, 0, 1, 1, 1, 0}, at::kLong).view({2, 4})));
  // The targets padded with -100 to the file's longest.
  EXPECT_TRUE(at::equal(b.labels, at::tensor({10, 11, 12, 8, -100, -100}, at::kLong).view({2, 3})));
  fs::remove(options.path);
}

TEST(TokenDataset, TokenizesSourceAndTargetText) {
  const fs::path folder = test_data_dir() / "bpe_tokenizers" / "t5";  // T5-style Unigram
  const auto tok = tokenizer::Tokenizer::from_file(folder);
  DataOptions options = reference_data_options();
  options.path = write_file("text.jsonl",
                            "{\"source\": \"translate English to German: The house is small.\", "
                            "\"target\": \"Das Haus ist klein.\"}\n");
  options.seq_len = 64;
  const TokenDataset data(options, 1 << 20, &tok);
  const training::Batch b = data.train_batch({0});
  const std::vector<int64_t> source =
      tok.encode("translate English to German: The house is small.");
  const std::vector<int64_t> target = tok.encode("Das Haus ist klein.");
  ASSERT_GT(source.size(), 3u);
  for (size_t t = 0; t < source.size(); ++t) {
    EXPECT_EQ(b.input_ids[0][static_cast<int64_t>(t)].item<int64_t>(), source[t]);
  }
  ASSERT_EQ(b.labels.size(1), static_cast<int64_t>(target.size()));
  for (size_t t = 0; t < target.size(); ++t) {
    EXPECT_EQ(b.labels[0][static_cast<int64_t>(t)].item<int64_t>(), target[t]);
  }
  // Without a tokenizer, text is refused naming the line.
  EXPECT_NE(read_error(options, 1 << 20)
                .find("line 1: \"source\" is text, and the model folder "
                      "has no tokenizer.json"),
            std::string::npos);
  fs::remove(options.path);
}

TEST(TokenDataset, ReadsUint32Files) {
  DataOptions options = reference_data_options();
  options.dtype = "uint32";
  options.seq_len = 2;
  const uint32_t ids[] = {70000, 1, 2, 3, 4};
  options.path =
      write_file("ids.bin", std::string(reinterpret_cast<const char*>(ids), sizeof(ids)));
  const TokenDataset data(options, 80000);
  EXPECT_EQ(data.num_train(), 2);  // the fifth id makes no whole sample
  EXPECT_EQ(data.train_batch({0}).input_ids[0][0].item<int64_t>(), 70000);
  EXPECT_NE(read_error(options, 50000).find("token id 70000 at token 0"), std::string::npos);
  fs::remove(options.path);
}

TEST(TokenDataset, RefusesBadFilesNamingThePlace) {
  DataOptions options = reference_data_options();
  options.path = "/nonexistent/train.bin";
  EXPECT_NE(read_error(options).find("/nonexistent/train.bin: cannot open"), std::string::npos);

  options.path = write_file("odd.bin", "abc");
  EXPECT_NE(read_error(options).find("odd.bin: size 3 bytes"), std::string::npos);
  options.dtype = "int8";
  EXPECT_NE(read_error(options).find("dtype 'int8'"), std::string::npos);
  fs::remove(options.path);

  options = reference_data_options();
  options.path = write_file("bad.jsonl", "{\"input_ids\": [1, 2]}\n[3]\n");
  EXPECT_NE(read_error(options).find("line 2: expected one of {\"input_ids\""), std::string::npos);
  options.path = write_file("long.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  options.seq_len = 2;
  EXPECT_NE(read_error(options).find("line 1 holds 3 ids, more than seq_len = 2"),
            std::string::npos);
  options.path = write_file("big.jsonl", "{\"input_ids\": [1, 2000]}\n");
  EXPECT_NE(read_error(options).find("token id 2000 at line 1"), std::string::npos);
  options.path = write_file("broken.jsonl", "{\"input_ids\": [1,\n");
  EXPECT_NE(read_error(options).find("broken.jsonl:1"), std::string::npos);

  options.path = write_file("labels.jsonl",
                            "{\"input_ids\": [1], \"label\": 1}\n"
                            "{\"input_ids\": [2]}\n");
  EXPECT_NE(read_error(options).find("line 2 holds {\"input_ids\": [...]} where the lines before "
                                     "hold {\"input_ids\": [...], \"label\": k}"),
            std::string::npos);
  options.path = write_file("extra.jsonl", "{\"input_ids\": [1], \"attention_mask\": [1]}\n");
  EXPECT_NE(read_error(options).find("line 1: unknown key \"attention_mask\""), std::string::npos);
  options.path = write_file("mixed.jsonl",
                            "{\"input_ids\": [1], \"labels\": [2]}\n"
                            "{\"source\": \"a\", \"target\": \"b\"}\n");
  EXPECT_NE(read_error(options).find("line 2 holds {\"source\""), std::string::npos);
  options.path = write_file("empty_target.jsonl", "{\"input_ids\": [1], \"labels\": []}\n");
  EXPECT_NE(read_error(options).find("line 1: \"labels\" holds no token"), std::string::npos);
  options.path = write_file("negative.jsonl", "{\"input_ids\": [1], \"label\": -1}\n");
  EXPECT_NE(read_error(options).find("line 1: \"label\" must be a class index"), std::string::npos);
  options = reference_data_options();
  options.mlm_probability = 0.15;  // without a mask id
  EXPECT_NE(read_error(options).find("data.mask_token_id = -1 is not an id"), std::string::npos);

  options = reference_data_options();
  options.seq_len = 100000;
  EXPECT_NE(read_error(options).find("holds no sample of 100000 tokens"), std::string::npos);
  for (const char* name : {"bad.jsonl", "long.jsonl", "big.jsonl", "broken.jsonl", "labels.jsonl",
                           "negative.jsonl", "extra.jsonl", "mixed.jsonl", "empty_target.jsonl"}) {
    fs::remove(fs::temp_directory_path() / (std::to_string(getpid()) + "-" + name));
  }
}

}  // namespace
}  // namespace shardformer::testing
