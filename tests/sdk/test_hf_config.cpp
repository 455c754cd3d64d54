// Tests of HFConfig: typed getters, missing keys, wrong types and JSON syntax errors
// reported with line and column.
#include "shardformer/checkpoint_io/hf_config.h"
#include "test_util.h"

namespace shardformer {
namespace {

using testing::expect_checkpoint_error;

const std::string kSource = "/models/gpt2/config.json";

HFConfig sample() {
  return HFConfig::parse(R"({
    "architectures": ["GPT2LMHeadModel"],
    "model_type": "gpt2",
    "n_embd": 768,
    "layer_norm_epsilon": 1e-05,
    "scale": 2,
    "scale_attn_weights": true,
    "activation_function": "gelu_new",
    "n_inner": null,
    "huge": 9223372036854775808
  })",
                         kSource);
}

TEST(HFConfig, TypedGetters) {
  HFConfig config = sample();
  EXPECT_EQ(config.path(), kSource);
  EXPECT_EQ(config.architectures(), std::vector<std::string>{"GPT2LMHeadModel"});
  EXPECT_EQ(config.model_type(), "gpt2");
  EXPECT_TRUE(config.has("n_embd"));
  EXPECT_TRUE(config.has("n_inner"));
  EXPECT_FALSE(config.has("n_layer"));
  EXPECT_EQ(config.get_int("n_embd"), 768);
  EXPECT_EQ(config.get_int("n_layer", 12), 12);
  EXPECT_DOUBLE_EQ(config.get_double("layer_norm_epsilon"), 1e-5);
  EXPECT_DOUBLE_EQ(config.get_double("scale"), 2.0);
  EXPECT_DOUBLE_EQ(config.get_double("absent", 0.5), 0.5);
  EXPECT_TRUE(config.get_bool("scale_attn_weights", false));
  EXPECT_FALSE(config.get_bool("absent", false));
  EXPECT_EQ(config.get_string("activation_function"), "gelu_new");
  EXPECT_EQ(config.get_string("absent", "relu"), "relu");
  EXPECT_EQ(config.get_optional_int("n_inner"), std::nullopt);
  EXPECT_EQ(config.get_optional_int("absent"), std::nullopt);
  EXPECT_EQ(config.get_optional_int("n_embd"), 768);
}

TEST(HFConfig, AbsentArchitecturesAndModelType) {
  HFConfig config = HFConfig::parse("{}", kSource);
  EXPECT_TRUE(config.architectures().empty());
  EXPECT_EQ(config.model_type(), "");
}

TEST(HFConfig, MissingKeyNamesFileAndKey) {
  HFConfig config = sample();
  expect_checkpoint_error([&] { config.get_int("n_layer"); }, {kSource, "missing key 'n_layer'"});
  expect_checkpoint_error([&] { config.get_double("eps"); }, {kSource, "missing key 'eps'"});
  expect_checkpoint_error([&] { config.get_string("name"); }, {kSource, "missing key 'name'"});
}

TEST(HFConfig, WrongTypeNamesFileKeyAndValue) {
  HFConfig config = sample();
  expect_checkpoint_error(
      [&] { config.get_int("layer_norm_epsilon"); },
      {kSource, "key 'layer_norm_epsilon' must be an integer, found a floating-point number"});
  expect_checkpoint_error([&] { config.get_int("activation_function", 0); },
                          {kSource, "'activation_function' must be an integer, found a string"});
  expect_checkpoint_error([&] { config.get_int("scale_attn_weights"); },
                          {kSource, "must be an integer, found a boolean true"});
  expect_checkpoint_error([&] { config.get_int("huge"); }, {kSource, "'huge' must be an integer"});
  expect_checkpoint_error([&] { config.get_optional_int("layer_norm_epsilon"); },
                          {kSource, "must be an integer"});
  expect_checkpoint_error([&] { config.get_double("activation_function"); },
                          {kSource, "must be a number"});
  expect_checkpoint_error([&] { config.get_bool("n_embd", false); },
                          {kSource, "'n_embd' must be a boolean, found an integer 768"});
  expect_checkpoint_error([&] { config.get_string("n_embd"); }, {kSource, "must be a string"});
}

// Integer lists (Swin's depths and heads per stage), and the layers a pipeline splits: a
// hierarchical model's blocks of every stage, not its stage count (num_layers).
TEST(HFConfig, IntegerListsAndAHierarchicalModelsPipelineLayers) {
  const HFConfig swin = HFConfig::parse(
      R"({"depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24], "num_layers": 4, "bad": [1, "x"],
          "none": null})",
      kSource);
  EXPECT_EQ(swin.get_int_list("num_heads"), (std::vector<int64_t>{3, 6, 12, 24}));
  EXPECT_EQ(swin.get_int_list("none"), std::nullopt);
  EXPECT_EQ(swin.get_int_list("absent"), std::nullopt);
  EXPECT_EQ(swin.pipeline_layers(), 12);
  EXPECT_EQ(swin.num_hidden_layers(), 4);
  expect_checkpoint_error([&] { swin.get_int_list("bad"); }, {kSource, "'bad' must be an integer"});
  expect_checkpoint_error([&] { swin.get_int_list("num_layers"); },
                          {kSource, "'num_layers' must be an array of integers"});
}

TEST(HFConfig, ArchitecturesMustBeStrings) {
  expect_checkpoint_error([] { HFConfig::parse(R"({"architectures": ["A", 1]})", kSource); },
                          {kSource, "'architectures' must be an array of strings"});
  expect_checkpoint_error([] { HFConfig::parse(R"({"architectures": "A"})", kSource); },
                          {kSource, "'architectures' must be an array of strings"});
}

TEST(HFConfig, InvalidJsonReportsLineAndColumn) {
  expect_checkpoint_error([] { HFConfig::parse("{\n  \"a\": 1,\n  \"b\": ,\n}", kSource); },
                          {kSource, "invalid JSON at line 3, column 8"});
}

// Found by fuzz_hf_config: nlohmann throws out_of_range (not parse_error) for a float that
// overflows a double, which escaped as an error naming no file.
TEST(HFConfig, NumberOverflowNamesFile) {
  expect_checkpoint_error([] { HFConfig::parse(R"({"rope_theta": 2e308})", kSource); },
                          {kSource, "invalid JSON", "number overflow parsing '2e308'"});
  expect_checkpoint_error([] { HFConfig::parse(R"({"a": [-1e999]})", kSource); },
                          {kSource, "number overflow parsing '-1e999'"});
}

// Found by fuzz_hf_config: copying or printing (for an error message) a deeply nested value
// recursed once per level and overflowed the stack.
TEST(HFConfig, NestingDeeperThanTheLimitIsRefusedWithItsPosition) {
  const std::string deep =
      "{\n  \"architectures\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
  expect_checkpoint_error(
      [&] { HFConfig::parse(deep, kSource); },
      {kSource, "invalid JSON at line 2, column 147", "nested deeper than 128"});
  // Brackets inside strings do not count, and 128 levels are fine.
  HFConfig config = HFConfig::parse(
      R"({"s": "[[[[{{{{", "a": )" + std::string(127, '[') + std::string(127, ']') + "}", kSource);
  EXPECT_EQ(config.get_string("s"), "[[[[{{{{");
}

TEST(HFConfig, TopLevelMustBeObject) {
  expect_checkpoint_error([] { HFConfig::parse("[1, 2]", kSource); },
                          {kSource, "top level must be a JSON object, found an array"});
}

class HFConfigFile : public testing::TempDirTest<> {};

TEST_F(HFConfigFile, LoadsFromDisk) {
  auto path = dir_ / "config.json";
  testing::write_text(path, R"({"n_layer": 2})");
  HFConfig config = HFConfig::load(path);
  EXPECT_EQ(config.path(), path);
  EXPECT_EQ(config.get_int("n_layer"), 2);
}

TEST_F(HFConfigFile, MissingFile) {
  auto path = dir_ / "config.json";
  expect_checkpoint_error([&] { HFConfig::load(path); }, {path.string(), "file not found"});
}

TEST_F(HFConfigFile, PathTooLong) {
  auto path = dir_ / std::string(300, 'x') / "config.json";
  expect_checkpoint_error([&] { HFConfig::load(path); },
                          {path.string(), "cannot read the file: File name too long"});
}

}  // namespace
}  // namespace shardformer
