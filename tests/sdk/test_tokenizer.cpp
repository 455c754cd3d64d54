// Tests of the Tokenizer (tokenizer.json pipelines) against HF tokenizers
// (tools/gen_bpe_tokenizer_reference.py): for each BPE and Unigram pipeline real models use, and
// the real SmolLM2 tokenizer, 2,200 strings encoded and decoded token for token, random ids
// decoded, streamed decoding; then the refusals of what the pipeline does not support.
#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/tokenizer.h"
#include "test_util.h"
#include "tokenizer/unicode.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace shardformer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::expect_all;
using tokenizer::DecodeStream;
using tokenizer::Tokenizer;

fs::path bpe_reference_dir() {
  return testing::env_or("SHARDFORMER_BPE_TOKENIZER_REFERENCE",
                         (testing::test_data_dir() / "bpe_tokenizers").c_str());
}

using testing::show;

// Escapes control and non-ASCII bytes so that a failure shows exactly what differs.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    if (c < 0x20 || c == '"' || c == '\\' || c >= 0x7F) {
      out += str("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

class BpeReference : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const fs::path folder = bpe_reference_dir() / GetParam();
    std::ifstream in(folder / "reference.json");
    ASSERT_TRUE(in) << (folder / "reference.json")
                    << " is missing: run tools/gen_bpe_tokenizer_reference.py";
    reference_ = json::parse(in);
    fs::path source = folder;
    if (std::ifstream model_dir(folder / "model_dir"); model_dir) {
      std::string line;
      std::getline(model_dir, line);
      source = line;
    }
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_file(source));
  }
  json reference_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(BpeReference, EncodesEveryStringAsHF) {
  const json& cases = reference_.at("cases");
  ASSERT_GE(cases.size(), 2000u);
  for (const auto& run : {std::pair{"ids", true}, std::pair{"ids_plain", false}}) {
    const char* key = run.first;  // named, not bound: Clang 14 cannot capture bindings
    const bool special = run.second;
    expect_all(str(GetParam(), " ", key), cases.size(), [&](size_t i) -> std::string {
      const std::string text = cases[i].at("text").get<std::string>();
      const auto expected = cases[i].at(key).get<std::vector<int64_t>>();
      const std::vector<int64_t> got = tokenizer_->encode(text, special);
      if (got == expected) return "";
      return str(quoted(text), ": ", show(got), " != HF ", show(expected));
    });
  }
}

TEST_P(BpeReference, DecodesAsHF) {
  for (const char* list : {"cases", "random_ids"}) {
    const json& cases = reference_.at(list);
    for (const auto& run : {std::pair{"decoded", true}, std::pair{"decoded_special", false}}) {
      const char* key = run.first;
      const bool skip = run.second;
      expect_all(str(GetParam(), " ", list, " ", key), cases.size(), [&](size_t i) -> std::string {
        const auto ids = cases[i].at("ids").get<std::vector<int64_t>>();
        const std::string expected = cases[i].at(key).get<std::string>();
        const std::string got = tokenizer_->decode(ids, skip);
        if (got == expected) return "";
        return str(show(ids), ": ", quoted(got), " != HF ", quoted(expected));
      });
    }
  }
}

TEST_P(BpeReference, StreamsAsHFDecodeStream) {
  const json& streams = reference_.at("streams");
  expect_all(str(GetParam(), " streams"), streams.size(), [&](size_t i) -> std::string {
    DecodeStream stream(*tokenizer_);
    std::string got;
    std::string expected;
    for (size_t k = 0; k < streams[i].at("ids").size(); ++k) {
      const std::string piece = stream.step(streams[i].at("ids")[k].get<int64_t>());
      const std::string hf = streams[i].at("pieces")[k].get<std::string>();
      if (piece != hf) return str("step ", k, ": ", quoted(piece), " != HF ", quoted(hf));
    }
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, BpeReference,
                         ::testing::Values("gpt2", "roberta", "llama3", "qwen2", "bloom", "falcon",
                                           "llama2", "mistral", "misc", "t5", "albert", "unigram",
                                           "smollm2"));

// A folder holding one tokenizer.json written from `json_text`.
class TokenizerFile : public testing::TempDirTest<> {
 protected:
  fs::path write(const json& tokenizer) {
    testing::write_text(dir_ / "tokenizer.json", tokenizer.dump());
    return dir_ / "tokenizer.json";
  }
  // A BPE whose tokens are the 256 byte values (ASCII as itself, the others as "<0xXX>" byte
  // fallback) and no merges, with `changes` merged in.
  static json byte_level(json changes = json::object()) {
    json vocab = json::object();
    for (int b = 0; b < 256; ++b) {
      vocab[b < 128 ? std::string(1, static_cast<char>(b))
                    : str("<0x", std::hex, std::uppercase, b, ">")] = b;
    }
    json j = {
        {"version", "1.0"},
        {"added_tokens", json::array()},
        {"normalizer", nullptr},
        {"pre_tokenizer", nullptr},
        {"post_processor", nullptr},
        {"decoder", nullptr},
        {"model",
         {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}, {"byte_fallback", true}}}};
    j.merge_patch(changes);
    return j;
  }
  void expect_refused(const json& tokenizer, const std::string& needle) {
    const fs::path path = write(tokenizer);
    try {
      Tokenizer::from_file(path);
      ADD_FAILURE() << "accepted; expected an error naming " << needle;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
};

// Every code point through each normalization form, against HF tokenizers' own output.
TEST_F(TokenizerFile, UnicodeFormsEqualHFOnEveryCodePoint) {
  std::ifstream in(bpe_reference_dir() / "unicode_forms.json");
  ASSERT_TRUE(in) << "run tools/gen_bpe_tokenizer_reference.py";
  const json forms = json::parse(in);
  for (const char* form : {"NFC", "NFD", "NFKC", "NFKD"}) {
    const Tokenizer tokenizer =
        Tokenizer::from_file(write(byte_level({{"normalizer", {{"type", form}}}})));
    const json& changed = forms.at(form);
    size_t mismatched = 0;
    std::string first;
    for (char32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      std::string text;
      tokenizer::detail::append_utf8(cp, text);
      auto it = changed.find(std::to_string(cp));
      const std::string expected = it == changed.end() ? text : it->get<std::string>();
      const std::string got = tokenizer.normalize(text);
      if (got != expected && mismatched++ == 0) {
        first = str("U+", std::hex, static_cast<uint32_t>(cp), ": ", quoted(got), " != HF ",
                    quoted(expected));
      }
    }
    EXPECT_EQ(mismatched, 0u) << form << ": " << first;
  }
}

// The Precompiled normalizers of t5 and albert on every code point alone and after a character
// they map (graphemes under 6 bytes replaced whole), against HF tokenizers' own output.
TEST_F(TokenizerFile, PrecompiledEqualsHFOnEveryCodePoint) {
  for (const char* kind : {"t5", "albert"}) {
    std::ifstream in(bpe_reference_dir() / kind / "precompiled_sweep.json");
    ASSERT_TRUE(in) << "run tools/gen_bpe_tokenizer_reference.py";
    const json sweep = json::parse(in);
    const Tokenizer tokenizer = Tokenizer::from_file(write(
        byte_level({{"normalizer",
                     {{"type", "Precompiled"}, {"precompiled_charsmap", sweep.at("charsmap")}}}})));
    const json& alone = sweep.at("alone");
    const json& after = sweep.at("after_base");
    const std::string base = sweep.at("base").get<std::string>();
    const std::string base_out = tokenizer.normalize(base);
    size_t mismatched = 0;
    std::string first;
    for (char32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      std::string text;
      tokenizer::detail::append_utf8(cp, text);
      const std::string key = std::to_string(cp);
      auto it = alone.find(key);
      const std::string single = it == alone.end() ? text : it->get<std::string>();
      auto pair_it = after.find(key);
      const std::string pair =
          pair_it == after.end() ? base_out + single : pair_it->get<std::string>();
      for (const auto& [input, expected] :
           {std::pair{text, single}, std::pair{base + text, pair}}) {
        const std::string got = tokenizer.normalize(input);
        if (got != expected && mismatched++ == 0) {
          first = str(quoted(input), ": ", quoted(got), " != HF ", quoted(expected));
        }
      }
    }
    EXPECT_EQ(mismatched, 0u) << kind << ": " << first;
  }
}

TEST_F(TokenizerFile, InvalidUtf8IsAnErrorNamingTheOffset) {
  const Tokenizer tokenizer = Tokenizer::from_file(write(byte_level()));
  try {
    tokenizer.encode("ok \xC3\x28 bad");
    ADD_FAILURE() << "invalid UTF-8 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 3"), std::string::npos) << e.what();
  }
}

TEST_F(TokenizerFile, UnsupportedStagesAreRefusedByName) {
  expect_refused(byte_level({{"normalizer", {{"type", "Nmt"}}}}), "Nmt");
  expect_refused(byte_level({{"pre_tokenizer", {{"type", "UnicodeScripts"}}}}), "UnicodeScripts");
  expect_refused(byte_level({{"decoder", {{"type", "CTC"}}}}), "CTC");
  expect_refused(byte_level({{"post_processor", {{"type", "Nope"}}}}), "Nope");
  expect_refused(byte_level({{"model", {{"type", "WordLevel"}}}}), "WordLevel");
  expect_refused(byte_level({{"model", {{"dropout", 0.1}}}}), "dropout");
  expect_refused(byte_level({{"model", {{"surprise", 1}}}}), "surprise");
  expect_refused(byte_level({{"surprise", 1}}), "surprise");
  expect_refused(
      byte_level(
          {{"pre_tokenizer",
            {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}}}}),
      "(unclosed");
  expect_refused(
      byte_level({{"added_tokens", {{{"id", 5}, {"content", "x"}, {"single_word", true}}}}}),
      "single_word");
}

// A charsmap that is not one, and Unigram vocabularies that cannot be, refused by name.
TEST_F(TokenizerFile, BadUnigramAndPrecompiledAreRefusedByName) {
  const auto precompiled = [](json charsmap) {
    return json{{"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", charsmap}}}};
  };
  expect_refused(byte_level(precompiled("not base64!")), "precompiled_charsmap");
  expect_refused(byte_level(precompiled("AAAAAA==")), "the trie is empty");
  expect_refused(byte_level(precompiled("EAAAAA==")), "the trie needs 16 bytes");
  const auto unigram = [](json model) {
    json j = byte_level();
    j["model"] = std::move(model);
    return j;
  };
  const json vocab = json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0})});
  expect_refused(unigram({{"type", "Unigram"}, {"unk_id", 2}, {"vocab", vocab}}), "unk_id 2");
  expect_refused(unigram({{"type", "Unigram"}, {"vocab", json::array({json::array({"a", "x"})})}}),
                 "vocab[0][1]");
  expect_refused(unigram({{"type", "Unigram"}, {"vocab", vocab}, {"alpha", 0.1}}), "alpha");
}

// Viterbi by hand: the best total score wins, unknown characters fuse into one <unk>.
TEST_F(TokenizerFile, UnigramTakesTheBestPathAndFusesUnknowns) {
  json j = byte_level();
  json vocab = json::array();
  for (const auto& [piece, score] : std::vector<std::pair<std::string, double>>{
           {"<unk>", 0.0}, {"a", -1.0}, {"b", -1.0}, {"c", -1.0}, {"ab", -3.0}, {"bc", -1.5}}) {
    vocab.push_back(json::array({piece, score}));
  }
  j["model"] = {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}};
  const Tokenizer tokenizer = Tokenizer::from_file(write(j));
  EXPECT_EQ(tokenizer.encode("abc"), (std::vector<int64_t>{1, 5}));  // a + bc: -2.5
  EXPECT_EQ(tokenizer.encode("xyabzc"), (std::vector<int64_t>{0, 1, 2, 0, 3}));
  EXPECT_EQ(tokenizer.vocab_size(), 6u);
  EXPECT_EQ(tokenizer.id_to_token(5), "bc");
}

TEST_F(TokenizerFile, TokenizerConfigAddsBosAndRefusesUnknownKeys) {
  json tokenizer =
      byte_level({{"added_tokens", {{{"id", 256}, {"content", "<s>"}, {"special", true}}}}});
  write(tokenizer);
  testing::write_text(dir_ / "tokenizer_config.json",
                      R"({"bos_token": "<s>", "add_bos_token": true})");
  const Tokenizer with_bos = Tokenizer::from_file(dir_);
  EXPECT_EQ(with_bos.encode("a"), (std::vector<int64_t>{256, 'a'}));
  EXPECT_EQ(with_bos.decode(with_bos.encode("a")), "a");
  // No decoder: HF joins the tokens with spaces.
  EXPECT_EQ(with_bos.decode(with_bos.encode("a"), false), "<s> a");
  testing::write_text(dir_ / "tokenizer_config.json", R"({"bos_tokn": "<s>"})");
  try {
    Tokenizer::from_file(dir_);
    ADD_FAILURE() << "an unknown tokenizer_config.json key was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bos_tokn"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardformer
