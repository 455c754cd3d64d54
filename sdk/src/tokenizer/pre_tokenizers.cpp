// tokenizer.json's pre-tokenizers: ByteLevel, Split, Metaspace, Digits, Punctuation, Whitespace,
// WhitespaceSplit, CharDelimiterSplit, BertPreTokenizer and Sequence, each splitting pieces as
// HF tokenizers does.
#include "pipeline.h"
#include "unicode.h"

#include <unicode/uchar.h>

namespace shardformer::tokenizer::detail {
namespace {

// GPT-2's word split (HF's ByteLevel regex).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

MatchFinder regex_matches(std::shared_ptr<const Regex> regex) {
  return [regex = std::move(regex)](std::string_view text,
                                    const std::function<void(size_t, size_t)>& on_match) {
    regex->find_all(text, on_match);
  };
}

bool is_whitespace(char32_t c) { return is_split_space(c, Flavor::kTokenizers); }

// Optionally " " in front, the GPT-2 split, then every byte as its byte-level character.
class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& origin)
      : add_prefix_space_(add_prefix_space),
        words_(use_regex ? regex_matches(std::make_shared<Regex>(kGpt2Pattern, origin))
                         : MatchFinder()) {}
  void split(std::vector<Piece>& pieces) const override {
    if (add_prefix_space_) {
      for (Piece& p : pieces) {
        if (p.text.empty() || p.text.front() != ' ') p.text.insert(0, " ");
      }
    }
    if (words_) split_pieces(pieces, words_, SplitBehavior::kIsolated);
    for (Piece& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (const char c : p.text) mapped += byte_to_char(static_cast<uint8_t>(c));
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  MatchFinder words_;
};

class Split final : public PreTokenizer {
 public:
  Split(Regex pattern, SplitBehavior behavior, bool invert)
      : find_(regex_matches(std::make_shared<Regex>(std::move(pattern)))),
        behavior_(behavior),
        invert_(invert) {}
  void split(std::vector<Piece>& pieces) const override {
    split_pieces(pieces, find_, behavior_, invert_);
  }

 private:
  MatchFinder find_;
  SplitBehavior behavior_;
  bool invert_;
};

// A predicate split (Digits, Punctuation, WhitespaceSplit, CharDelimiterSplit).
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(std::function<bool(char32_t)> predicate, SplitBehavior behavior)
      : find_(char_matches(std::move(predicate))), behavior_(behavior) {}
  void split(std::vector<Piece>& pieces) const override { split_pieces(pieces, find_, behavior_); }

 private:
  MatchFinder find_;
  SplitBehavior behavior_;
};

// Spaces become the replacement character (SentencePiece's "▁"), which is put in front of a
// piece as the scheme says, and pieces are split before each one.
class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : scheme_(scheme), split_(split), replacement_char_(replacement) {
    append_utf8(replacement, replacement_);
  }
  void split(std::vector<Piece>& pieces) const override {
    for (Piece& p : pieces) {
      std::string out;
      for (const char c : p.text) {
        if (c == ' ') {
          out += replacement_;
        } else {
          out += c;
        }
      }
      const bool starts = out.starts_with(replacement_);
      if (!starts &&
          (scheme_ == PrependScheme::kAlways || (scheme_ == PrependScheme::kFirst && p.at_start))) {
        out.insert(0, replacement_);
      }
      p.text = std::move(out);
    }
    if (split_) {
      const char32_t r = replacement_char_;
      split_pieces(pieces, char_matches([r](char32_t c) { return c == r; }),
                   SplitBehavior::kMergedWithNext);
    }
  }

 private:
  PrependScheme scheme_;
  bool split_;
  char32_t replacement_char_;
  std::string replacement_;
};

class PreTokenizerSequence final : public PreTokenizer {
 public:
  explicit PreTokenizerSequence(std::vector<std::unique_ptr<PreTokenizer>> stages)
      : stages_(std::move(stages)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& stage : stages_) stage->split(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> stages_;
};

// Two stages of PreTokenizerSequence: one PreTokenizer running both.
std::unique_ptr<PreTokenizer> chain(std::unique_ptr<PreTokenizer> a,
                                    std::unique_ptr<PreTokenizer> b) {
  std::vector<std::unique_ptr<PreTokenizer>> stages;
  stages.push_back(std::move(a));
  stages.push_back(std::move(b));
  return std::make_unique<PreTokenizerSequence>(std::move(stages));
}

bool is_numeric(char32_t c) { return (U_GET_GC_MASK(c) & U_GC_N_MASK) != 0; }

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Node& node) {
  if (node.value.is_null()) return nullptr;
  node.object();
  const std::string type = node["type"].string();
  const std::string origin = str(node.file.string(), ": ", node.where);
  if (type == "ByteLevel") {
    node.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    // trim_offsets changes offsets only, never ids.
    if (node.has("trim_offsets")) node["trim_offsets"].boolean();
    return std::make_unique<ByteLevel>(
        node.has("add_prefix_space") && node["add_prefix_space"].boolean(),
        !node.has("use_regex") || node["use_regex"].boolean(), origin);
  }
  if (type == "Split") {
    node.only_keys({"type", "pattern", "behavior", "invert"});
    return std::make_unique<Split>(read_pattern(node["pattern"]),
                                   read_split_behavior(node["behavior"]),
                                   node.has("invert") && node["invert"].boolean());
  }
  if (type == "Metaspace") {
    return std::make_unique<Metaspace>(single_char(node["replacement"]), read_prepend_scheme(node),
                                       !node.has("split") || node["split"].boolean());
  }
  if (type == "Digits") {
    node.only_keys({"type", "individual_digits"});
    const bool individual = node.has("individual_digits") && node["individual_digits"].boolean();
    return std::make_unique<CharSplit>(
        is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Punctuation") {
    node.only_keys({"type", "behavior"});
    return std::make_unique<CharSplit>(
        [](char32_t c) { return is_punctuation(c, Flavor::kTokenizers); },
        node.has("behavior") ? read_split_behavior(node["behavior"]) : SplitBehavior::kIsolated);
  }
  if (type == "WhitespaceSplit") {
    node.only_keys({"type"});
    return std::make_unique<CharSplit>(is_whitespace, SplitBehavior::kRemoved);
  }
  if (type == "CharDelimiterSplit") {
    node.only_keys({"type", "delimiter"});
    const char32_t delimiter = single_char(node["delimiter"]);
    return std::make_unique<CharSplit>([delimiter](char32_t c) { return c == delimiter; },
                                       SplitBehavior::kRemoved);
  }
  if (type == "Whitespace") {
    node.only_keys({"type"});
    return std::make_unique<Split>(Regex(R"(\w+|[^\w\s]+)", origin), SplitBehavior::kRemoved, true);
  }
  if (type == "BertPreTokenizer") {
    node.only_keys({"type"});
    return chain(std::make_unique<CharSplit>(is_whitespace, SplitBehavior::kRemoved),
                 std::make_unique<CharSplit>(
                     [](char32_t c) { return is_punctuation(c, Flavor::kTokenizers); },
                     SplitBehavior::kIsolated));
  }
  if (type == "Sequence") {
    node.only_keys({"type", "pretokenizers"});
    const Node list = node["pretokenizers"];
    if (!list.value.is_array()) list.fail_type("an array");
    std::vector<std::unique_ptr<PreTokenizer>> stages;
    for (size_t i = 0; i < list.value.size(); ++i) {
      if (auto stage = make_pre_tokenizer(list.at(i))) stages.push_back(std::move(stage));
    }
    return std::make_unique<PreTokenizerSequence>(std::move(stages));
  }
  node["type"].fail(str("pre-tokenizer \"", type,
                        "\" is not supported (supported: ByteLevel, Split, Metaspace, Digits, "
                        "Punctuation, Whitespace, WhitespaceSplit, CharDelimiterSplit, "
                        "BertPreTokenizer, Sequence)"));
}

}  // namespace shardformer::tokenizer::detail
