// Tests of the WordPiece tokenizer against HF (tools/gen_tokenizer_reference.py): every sentence
// of tools/data/tokenizer_sentences.txt and a code point sweep, loaded from tokenizer.json and
// from vocab.txt, token for token; then batches, accessors and the refusals of bad files.
#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/wordpiece.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

namespace shardformer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::expect_all;
using testing::expect_error;
using tokenizer::BatchEncoding;
using tokenizer::BatchOptions;
using tokenizer::Side;
using tokenizer::WordPieceTokenizer;

// The reference JSON: SHARDFORMER_TOKENIZER_REFERENCE, else the build tree's.
fs::path reference_path() {
  return testing::env_or("SHARDFORMER_TOKENIZER_REFERENCE",
                         (testing::test_data_dir() / "tokenizer" / "reference.json").c_str());
}

// The all-MiniLM-L6-v2 folder: SHARDFORMER_MINILM_DIR, else the models/ link made at configure
// time.
fs::path minilm_dir() {
  return testing::env_or("SHARDFORMER_MINILM_DIR",
                         (testing::models_dir() / "all-MiniLM-L6-v2").c_str());
}

const json& wordpiece_reference() {
  static const json loaded = [] {
    fs::path path = reference_path();
    std::ifstream in(path);
    if (!in) {
      throw std::runtime_error(path.string() +
                               " is missing: run tools/gen_tokenizer_reference.py " +
                               path.string() + " or set SHARDFORMER_TOKENIZER_REFERENCE");
    }
    return json::parse(in);
  }();
  return loaded;
}

using testing::show;

class WordPieceReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    try {
      wordpiece_reference();
    } catch (const std::exception& e) {
      FAIL() << e.what();
    }
    ASSERT_FALSE(minilm_dir().empty()) << "set SHARDFORMER_MINILM_DIR";
    format_ = GetParam();
    expected_ = &wordpiece_reference().at(format_);
    fs::path file = minilm_dir() / (format_ == "tokenizer_json" ? "tokenizer.json" : "vocab.txt");
    tokenizer_ = std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_file(file));
  }

  const json& sentences() const { return wordpiece_reference().at("sentences"); }
  std::string sentence(size_t i) const { return sentences()[i].get<std::string>(); }

  std::string format_;
  const json* expected_ = nullptr;
  std::unique_ptr<WordPieceTokenizer> tokenizer_;
};

TEST_P(WordPieceReference, EncodeMatchesHf) {
  const size_t count = sentences().size();
  const auto max_length = wordpiece_reference().at("max_length").get<size_t>();
  auto compare = [&](const std::string& key,
                     const std::function<std::vector<int64_t>(size_t)>& ours) {
    expect_all(str(format_, " ", key), count, [&](size_t i) -> std::string {
      auto want = (*expected_)[key][i].get<std::vector<int64_t>>();
      auto got = ours(i);
      return got == want ? ""
                         : str(json(sentence(i)).dump(), " want ", show(want), " got ", show(got));
    });
  };
  compare("ids", [&](size_t i) { return tokenizer_->encode(sentence(i)); });
  compare("ids_truncated",
          [&](size_t i) { return tokenizer_->encode(sentence(i), true, max_length); });
  compare("ids_no_special", [&](size_t i) { return tokenizer_->encode(sentence(i), false); });
  compare("type_ids",
          [&](size_t i) { return tokenizer_->encode_with_type_ids(sentence(i)).type_ids; });
}

TEST_P(WordPieceReference, TokenizeAndDecodeMatchHf) {
  const size_t count = sentences().size();
  expect_all(format_ + " tokens", count, [&](size_t i) -> std::string {
    auto want = (*expected_)["tokens"][i].get<std::vector<std::string>>();
    auto got = tokenizer_->tokenize(sentence(i));
    return got == want ? ""
                       : str(json(sentence(i)).dump(), " want ", json(want).dump(), " got ",
                             json(got).dump());
  });
  expect_all(format_ + " decoded", count, [&](size_t i) -> std::string {
    auto want = (*expected_)["decoded"][i].get<std::string>();
    auto got = tokenizer_->decode((*expected_)["ids"][i].get<std::vector<int64_t>>());
    return got == want ? "" : str("want ", json(want).dump(), " got ", json(got).dump());
  });
}

TEST_P(WordPieceReference, BatchesMatchHf) {
  const auto max_length = wordpiece_reference().at("max_length").get<size_t>();
  const json& modes = wordpiece_reference().at("batches").at(format_);
  std::vector<std::string> all = sentences().get<std::vector<std::string>>();
  for (const auto& item : modes.items()) {
    const std::string& mode = item.key();
    const json& batches = item.value();
    BatchOptions options;
    if (mode == "max_length") {
      options.max_length = max_length;
      options.pad_to_max_length = true;
    } else if (mode == "multiple_of_8") {
      options.max_length = max_length + 8;
      options.pad_to_multiple_of = 8;
    }
    expect_all(str(format_, " batches ", mode), batches.size(), [&](size_t b) -> std::string {
      const json& want = batches[b];
      auto start = want.at("start").get<size_t>();
      size_t end = std::min(all.size(), start + 32);
      BatchEncoding got =
          tokenizer_->encode_batch({all.begin() + start, all.begin() + end}, options);
      if (got.input_ids != want.at("input_ids").get<std::vector<std::vector<int64_t>>>())
        return "input_ids";
      if (got.attention_mask !=
          want.at("attention_mask").get<std::vector<std::vector<int64_t>>>()) {
        return "attention_mask";
      }
      if (got.token_type_ids !=
          want.at("token_type_ids").get<std::vector<std::vector<int64_t>>>()) {
        return "token_type_ids";
      }
      return "";
    });
  }
}

// Normalization code point by code point: the sweep tokenizers' vocabulary holds every
// character HF's normalizers output, so each id is one normalized character.
TEST_P(WordPieceReference, CodePointSweepMatchesHf) {
  const json& sweep = wordpiece_reference().at("sweep");
  fs::path file = reference_path().parent_path() / (format_ == "tokenizer_json"
                                                        ? "sweep_tokenizer_json/tokenizer.json"
                                                        : "sweep_vocab_txt/vocab.txt");
  WordPieceTokenizer swept = WordPieceTokenizer::from_file(file);
  const json& sentences = sweep.at("sentences");
  expect_all(format_ + " code point sweep", sentences.size(), [&](size_t i) -> std::string {
    auto want = sweep.at(format_)[i].get<std::vector<int64_t>>();
    auto got = swept.encode(sentences[i].get<std::string>());
    if (got == want) return "";
    size_t at = 0;
    while (at < want.size() && at < got.size() && want[at] == got[at]) ++at;
    auto token = [&](const std::vector<int64_t>& ids) {
      return at < ids.size() ? json(swept.id_to_token(ids[at])).dump() : std::string("(end)");
    };
    return str(json(sentences[i]).dump(), " first differs at ", at, ": want ", token(want), " got ",
               token(got));
  });
}

INSTANTIATE_TEST_SUITE_P(HfFormats, WordPieceReference,
                         ::testing::Values("tokenizer_json", "vocab_txt"));

// Added tokens matched in the raw and in the normalized text, with BertProcessing.
TEST(WordPieceTokenizer, AddedTokensMatchHf) {
  const json& variant = wordpiece_reference().at("added_tokens");
  WordPieceTokenizer t = WordPieceTokenizer::from_file(
      reference_path().parent_path() / "added_tokens_tokenizer_json" / "tokenizer.json");
  EXPECT_EQ(t.vocab_size(), 30524u);
  const json& sentences = variant.at("sentences");
  expect_all("added tokens", sentences.size(), [&](size_t i) -> std::string {
    auto want = variant.at("ids")[i].get<std::vector<int64_t>>();
    auto got = t.encode(sentences[i].get<std::string>());
    return got == want ? "" : str(sentences[i].dump(), " want ", show(want), " got ", show(got));
  });
}

TEST(WordPieceTokenizer, ReadsTheMiniLmSettings) {
  ASSERT_FALSE(minilm_dir().empty()) << "set SHARDFORMER_MINILM_DIR";
  WordPieceTokenizer fast = WordPieceTokenizer::from_file(minilm_dir());
  WordPieceTokenizer slow = WordPieceTokenizer::from_file(minilm_dir() / "vocab.txt");
  EXPECT_EQ(fast.format(), tokenizer::Format::kTokenizerJson);
  EXPECT_EQ(slow.format(), tokenizer::Format::kVocabTxt);
  for (const WordPieceTokenizer* t : {&fast, &slow}) {
    EXPECT_EQ(t->vocab_size(), 30522u);
    EXPECT_EQ(t->pad_id(), 0);
    EXPECT_EQ(t->unk_id(), 100);
    EXPECT_EQ(t->cls_id(), 101);
    EXPECT_EQ(t->sep_id(), 102);
    EXPECT_EQ(t->num_special_tokens(), 2u);
    EXPECT_EQ(t->model_max_length(), 512u);
    EXPECT_EQ(t->max_input_chars_per_word(), 100u);
    EXPECT_TRUE(t->normalizer_options().lowercase);
    EXPECT_TRUE(t->normalizer_options().strip_accents);
    EXPECT_EQ(t->token_to_id("hello"), 7592);
    EXPECT_EQ(t->token_to_id("no-such-token"), std::nullopt);
    EXPECT_EQ(t->id_to_token(7592), "hello");
    EXPECT_EQ(t->encode(""), (std::vector<int64_t>{101, 102}));
    EXPECT_EQ(t->encode("", false), std::vector<int64_t>{});
  }
  ASSERT_TRUE(fast.truncation().has_value());
  EXPECT_EQ(fast.truncation()->max_length, 128u);
  ASSERT_TRUE(fast.padding().has_value());
  EXPECT_EQ(fast.padding()->fixed_length, 128u);
  EXPECT_FALSE(slow.truncation().has_value());
  EXPECT_EQ(fast.added_tokens().size(), 5u);
}

// Copies of the MiniLM files, edited, in a fresh folder per test.
class WordPieceFiles : public testing::TempDirTest<> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    ASSERT_FALSE(minilm_dir().empty()) << "set SHARDFORMER_MINILM_DIR";
    std::ifstream in(minilm_dir() / "tokenizer.json");
    spec_ = json::parse(in);
  }

  fs::path write_spec() {
    fs::path path = dir_ / "tokenizer.json";
    testing::write_text(path, spec_.dump());
    return path;
  }

  fs::path write_vocab(const std::vector<std::string>& drop) {
    std::ifstream in(minilm_dir() / "vocab.txt");
    std::ostringstream out;
    for (std::string line; std::getline(in, line);) {
      out << (std::find(drop.begin(), drop.end(), line) == drop.end() ? line : "unused-" + line)
          << "\n";
    }
    fs::path path = dir_ / "vocab.txt";
    testing::write_text(path, out.str());
    return path;
  }

  json spec_;
};

TEST_F(WordPieceFiles, MissingFileIsNamed) {
  fs::path path = dir_ / "absent" / "tokenizer.json";
  expect_error<Error>([&] { WordPieceTokenizer::from_file(path); }, {path.string(), "not found"});
  expect_error<Error>([&] { WordPieceTokenizer::from_file(dir_); },
                      {dir_.string(), "neither tokenizer.json nor vocab.txt"});
  expect_error<Error>([&] { WordPieceTokenizer::from_vocab_file(dir_ / "vocab.txt"); },
                      {(dir_ / "vocab.txt").string(), "not found"});
}

TEST_F(WordPieceFiles, RefusesAModelThatIsNotWordPiece) {
  spec_["model"]["type"] = "BPE";
  fs::path path = write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "model.type", "\"BPE\"", "only WordPiece"});
}

TEST_F(WordPieceFiles, RefusesUnknownNormalizerOptionsAndTypes) {
  spec_["normalizer"]["fancy_option"] = true;
  fs::path path = write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "normalizer", "unknown key \"fancy_option\""});
  spec_["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "normalizer.type", "\"Sequence\"", "BertNormalizer"});
  spec_["normalizer"] = {{"type", "BertNormalizer"}, {"lowercase", "yes"}};
  write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "normalizer.lowercase", "expected a boolean"});
}

TEST_F(WordPieceFiles, RefusesOtherPreTokenizersProcessorsAndDecoders) {
  spec_["pre_tokenizer"] = {{"type", "Whitespace"}};
  fs::path path = write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "pre_tokenizer.type", "\"Whitespace\""});
  ASSERT_NO_THROW(spec_ = json::parse(std::ifstream(minilm_dir() / "tokenizer.json")));
  spec_["post_processor"] = {{"type", "RobertaProcessing"}};
  write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "post_processor.type", "\"RobertaProcessing\""});
  spec_["post_processor"] = nullptr;
  write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "post_processor", "[CLS]"});
  ASSERT_NO_THROW(spec_ = json::parse(std::ifstream(minilm_dir() / "tokenizer.json")));
  spec_["decoder"] = {{"type", "ByteLevel"}};
  write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "decoder.type", "\"ByteLevel\""});
  ASSERT_NO_THROW(spec_ = json::parse(std::ifstream(minilm_dir() / "tokenizer.json")));
  spec_["added_tokens"][1]["single_word"] = true;
  write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "added_tokens[1].single_word"});
  ASSERT_NO_THROW(spec_ = json::parse(std::ifstream(minilm_dir() / "tokenizer.json")));
  spec_["extra_section"] = 1;
  write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "unknown key \"extra_section\""});
}

TEST_F(WordPieceFiles, RefusesATokenizerConfigContradictingTokenizerJson) {
  fs::path path = write_spec();
  testing::write_text(dir_ / "tokenizer_config.json", R"({"do_lower_case": false})");
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {(dir_ / "tokenizer_config.json").string(), "do_lower_case is false",
                             path.string(), "normalizer.lowercase true"});
}

TEST_F(WordPieceFiles, RefusesAVocabularyWithoutTheUnknownToken) {
  spec_["model"]["vocab"].erase("[UNK]");
  fs::path path = write_spec();
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                            {path.string(), "model.vocab", "\"[UNK]\""});
}

TEST_F(WordPieceFiles, ReportsJsonSyntaxErrorsWithTheirLine) {
  fs::path path = dir_ / "tokenizer.json";
  testing::write_text(path, "{\n  \"model\": {,\n}");
  expect_error<CheckpointError>([&] { WordPieceTokenizer::from_file(path); },
                                {path.string(), "line 2"});
}

TEST_F(WordPieceFiles, RefusesAVocabTxtMissingASpecialToken) {
  for (const std::string token : {"[UNK]", "[CLS]", "[SEP]", "[PAD]"}) {
    fs::path path = write_vocab({token});
    expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(path); },
                              {path.string(), "\"" + token + "\"", "not in the vocabulary"});
  }
}

TEST_F(WordPieceFiles, ChecksTokenizerConfigKeys) {
  fs::path vocab = write_vocab({});
  testing::write_text(dir_ / "tokenizer_config.json",
                      R"({"do_lower_case": true, "lowercase_everything": 1})");
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(vocab); },
                            {"tokenizer_config.json", "unknown key \"lowercase_everything\""});
  testing::write_text(dir_ / "tokenizer_config.json", R"({"tokenizer_class": "RobertaTokenizer"})");
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(vocab); },
                            {"tokenizer_config.json", "tokenizer_class", "\"RobertaTokenizer\""});
  testing::write_text(dir_ / "tokenizer_config.json", R"({"strip_accents": "sometimes"})");
  expect_error<ConfigError>([&] { WordPieceTokenizer::from_file(vocab); },
                            {"tokenizer_config.json", "strip_accents", "a boolean or null"});
}

TEST_F(WordPieceFiles, FollowsTokenizerConfigSettings) {
  fs::path vocab = write_vocab({});
  testing::write_text(
      dir_ / "tokenizer_config.json",
      R"({"do_lower_case": false, "truncation_side": "left", "padding_side": "left"})");
  WordPieceTokenizer cased = WordPieceTokenizer::from_file(vocab);
  EXPECT_FALSE(cased.normalizer_options().lowercase);
  EXPECT_FALSE(cased.normalizer_options().strip_accents);
  EXPECT_EQ(cased.tokenize("Hello"), (std::vector<std::string>{"[UNK]"}));
  EXPECT_EQ(cased.tokenize("hello world"), (std::vector<std::string>{"hello", "world"}));
  EXPECT_EQ(cased.truncation_side(), Side::kLeft);
  EXPECT_EQ(cased.encode("a b c d e", true, 4), (std::vector<int64_t>{101, 1040, 1041, 102}));
  BatchEncoding batch = cased.encode_batch({"a b", "a"});
  EXPECT_EQ(batch.input_ids,
            (std::vector<std::vector<int64_t>>{{101, 1037, 1038, 102}, {0, 101, 1037, 102}}));
  EXPECT_EQ(batch.attention_mask, (std::vector<std::vector<int64_t>>{{1, 1, 1, 1}, {0, 1, 1, 1}}));
}

TEST_F(WordPieceFiles, RefusesBadInputAndIds) {
  WordPieceTokenizer t = WordPieceTokenizer::from_file(minilm_dir() / "tokenizer.json");
  expect_error<Error>([&] { t.encode("ok \xC3\x28 bad"); }, {"invalid UTF-8 at byte 3"});
  expect_error<Error>([&] { t.encode("\xED\xA0\x80"); }, {"invalid UTF-8 at byte 0"});
  expect_error<Error>([&] { t.encode("hello", true, 1); }, {"max_length 1", "2 special tokens"});
  expect_error<Error>([&] { t.decode({101, 40000}); }, {"token id 40000", "30522"});
  BatchOptions unbounded;
  unbounded.pad_to_max_length = true;
  expect_error<Error>([&] { t.encode_batch({"a"}, unbounded); }, {"max_length"});
  EXPECT_EQ(t.encode("hello", false, 0), std::vector<int64_t>{});
}

}  // namespace
}  // namespace shardformer
