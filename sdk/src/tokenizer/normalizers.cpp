// tokenizer.json's normalizers: NFC/NFD/NFKC/NFKD (ICU), Lowercase, Strip, StripAccents,
// Replace, Prepend, ByteLevel, BertNormalizer, Precompiled (SentencePiece's charsmap, in
// precompiled.cpp) and Sequence. Nmt is refused by name.
#include "pipeline.h"
#include "regex.h"
#include "tokenizer_data.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>

namespace shardformer::tokenizer::detail {
namespace {

// ICU's normalization forms, limited to the code points of Unicode 11.0: HF tokenizers'
// tables (unicode-normalization-alignments) stop there, and with this filter every code point
// normalizes as HF's does in all four forms (tests/sdk/test_tokenizer.cpp sweeps them).
class UnicodeForm final : public Normalizer {
 public:
  UnicodeForm(const std::string& name, const Node& node) : name_(name) {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* form = nullptr;
    if (name == "NFC") form = icu::Normalizer2::getNFCInstance(status);
    if (name == "NFD") form = icu::Normalizer2::getNFDInstance(status);
    if (name == "NFKC") form = icu::Normalizer2::getNFKCInstance(status);
    if (name == "NFKD") form = icu::Normalizer2::getNFKDInstance(status);
    static const icu::UnicodeSet* const kUnicode11 = [] {
      UErrorCode s = U_ZERO_ERROR;
      auto* set = new icu::UnicodeSet(icu::UnicodeString("[:age=11.0:]"), s);
      set->freeze();
      return U_SUCCESS(s) ? set : nullptr;
    }();
    if (U_FAILURE(status) || form == nullptr || kUnicode11 == nullptr) {
      node.fail(str("ICU has no ", name, " normalizer: ", u_errorName(status)));
    }
    form_ = std::make_unique<icu::FilteredNormalizer2>(*form, *kUnicode11);
  }
  void normalize(std::string& text) const override {
    std::string out;
    icu::StringByteSink<std::string> sink(&out);
    UErrorCode status = U_ZERO_ERROR;
    form_->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                         nullptr, status);
    if (U_FAILURE(status)) throw Error(str(name_, " normalization failed: ", u_errorName(status)));
    text = std::move(out);
  }

 private:
  std::string name_;
  std::unique_ptr<icu::FilteredNormalizer2> form_;
};

// Rust's char::to_lowercase, code point by code point (no final-sigma rule).
class Lowercase final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    text = encode_utf8(lowercase(decode_utf8(text, "text"), Flavor::kTokenizers));
  }
};

// Whitespace (Rust's char::is_whitespace) off either end.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    const std::u32string chars = decode_utf8(text, "text");
    size_t begin = 0;
    size_t end = chars.size();
    const auto space = [](char32_t c) { return is_split_space(c, Flavor::kTokenizers); };
    if (left_) {
      while (begin < end && space(chars[begin])) ++begin;
    }
    if (right_) {
      while (end > begin && space(chars[end - 1])) --end;
    }
    text = encode_utf8(std::u32string_view(chars).substr(begin, end - begin));
  }

 private:
  bool left_;
  bool right_;
};

// Drops every combining mark (general category M*).
class StripAccents final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t begin = pos;
      const char32_t c = next_char(text, pos);
      if ((U_GET_GC_MASK(c) & U_GC_M_MASK) == 0) out.append(text, begin, pos - begin);
    }
    text = std::move(out);
  }
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override { text = pattern_.replace_all(text, content_); }

 private:
  Regex pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

// Every byte as GPT-2's byte-level character.
class ByteLevelNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    for (const char c : text) out += byte_to_char(static_cast<uint8_t>(c));
    text = std::move(out);
  }
};

class Bert final : public Normalizer {
 public:
  explicit Bert(NormalizerOptions options) : options_(options) {}
  void normalize(std::string& text) const override {
    text = encode_utf8(bert_normalize(options_, decode_utf8(text, "text")));
  }

 private:
  NormalizerOptions options_;
};

class NormalizerSequence final : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> stages)
      : stages_(std::move(stages)) {}
  void normalize(std::string& text) const override {
    for (const auto& stage : stages_) stage->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> stages_;
};

}  // namespace

Regex read_pattern(const Node& node) {
  node.object();
  if (node.has("String") == node.has("Regex") || node.value.size() != 1) {
    node.fail("expected exactly one of \"String\" and \"Regex\"");
  }
  const std::string origin = str(node.file.string(), ": ", node.where);
  if (node.has("String")) return Regex::literal(node["String"].string(), origin);
  return Regex(node["Regex"].string(), origin);
}

std::unique_ptr<Normalizer> make_normalizer(const Node& node) {
  if (node.value.is_null()) return nullptr;
  node.object();
  const std::string type = node["type"].string();
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    node.only_keys({"type"});
    return std::make_unique<UnicodeForm>(type, node);
  }
  if (type == "Lowercase" || type == "StripAccents" || type == "ByteLevel") {
    node.only_keys({"type"});
    if (type == "Lowercase") return std::make_unique<Lowercase>();
    if (type == "StripAccents") return std::make_unique<StripAccents>();
    return std::make_unique<ByteLevelNormalizer>();
  }
  if (type == "Strip") {
    node.only_keys({"type", "strip_left", "strip_right"});
    return std::make_unique<StripNormalizer>(node["strip_left"].boolean(),
                                             node["strip_right"].boolean());
  }
  if (type == "Replace") {
    node.only_keys({"type", "pattern", "content"});
    return std::make_unique<ReplaceNormalizer>(read_pattern(node["pattern"]),
                                               node["content"].string());
  }
  if (type == "Prepend") {
    node.only_keys({"type", "prepend"});
    return std::make_unique<Prepend>(node["prepend"].string());
  }
  if (type == "BertNormalizer") {
    node.only_keys({"type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"});
    NormalizerOptions options;
    if (node.has("clean_text")) options.clean_text = node["clean_text"].boolean();
    if (node.has("handle_chinese_chars")) {
      options.handle_chinese_chars = node["handle_chinese_chars"].boolean();
    }
    if (node.has("lowercase")) options.lowercase = node["lowercase"].boolean();
    options.strip_accents = node["strip_accents"].optional_boolean().value_or(options.lowercase);
    return std::make_unique<Bert>(options);
  }
  if (type == "Precompiled") return make_precompiled_normalizer(node);
  if (type == "Sequence") {
    node.only_keys({"type", "normalizers"});
    const Node list = node["normalizers"];
    if (!list.value.is_array()) list.fail_type("an array");
    std::vector<std::unique_ptr<Normalizer>> stages;
    for (size_t i = 0; i < list.value.size(); ++i) {
      if (auto stage = make_normalizer(list.at(i))) stages.push_back(std::move(stage));
    }
    return std::make_unique<NormalizerSequence>(std::move(stages));
  }
  node["type"].fail(str("normalizer \"", type,
                        "\" is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
                        "StripAccents, Replace, Prepend, ByteLevel, BertNormalizer, Precompiled, "
                        "Sequence)"));
}

}  // namespace shardformer::tokenizer::detail
