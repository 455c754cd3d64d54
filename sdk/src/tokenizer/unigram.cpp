// The Unigram model of tokenizer.json (SentencePiece's, as T5 and ALBERT use it): the best-scoring
// split of a piece into vocabulary pieces (Viterbi over a byte trie), unknown characters fused
// into one unknown token or spelled as byte-fallback tokens, as HF tokenizers' Unigram does.
#include "pipeline.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace shardformer::tokenizer::detail {
namespace {

// Score of an unknown character: the lowest piece score less this (HF's K_UNK_PENALTY).
constexpr double kUnkPenalty = 10.0;

// The vocabulary's pieces as a byte trie: nodes with their children's labels sorted.
class ByteTrie {
 public:
  void build(const std::vector<std::pair<std::string, int64_t>>& entries) {
    std::vector<std::map<uint8_t, int32_t>> children(1);
    std::vector<int64_t> ids(1, -1);
    for (const auto& [key, id] : entries) {
      int32_t node = 0;
      for (const char c : key) {
        auto [it, added] = children[node].try_emplace(static_cast<uint8_t>(c), 0);
        if (added) {
          it->second = static_cast<int32_t>(children.size());
          children.emplace_back();
          ids.push_back(-1);
        }
        node = it->second;
      }
      ids[node] = id;  // a repeated piece: the last id, as HF's token map keeps
    }
    nodes_.resize(children.size());
    for (size_t n = 0; n < children.size(); ++n) {
      nodes_[n] = {ids[n], static_cast<uint32_t>(edges_.size()),
                   static_cast<uint32_t>(children[n].size())};
      for (const auto& [label, child] : children[n]) edges_.push_back({label, child});
    }
  }
  // Calls found(length, id) for each vocabulary piece that `text` starts with, shortest first.
  template <typename Found>
  void prefixes(std::string_view text, Found&& found) const {
    int32_t node = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const TrieNode& n = nodes_[node];
      const auto first = edges_.begin() + n.edge_begin;
      const auto last = first + n.edge_count;
      const auto label = static_cast<uint8_t>(text[i]);
      const auto it = std::lower_bound(first, last, label,
                                       [](const Edge& e, uint8_t l) { return e.label < l; });
      if (it == last || it->label != label) return;
      node = it->child;
      if (nodes_[node].id >= 0) found(i + 1, nodes_[node].id);
    }
  }

 private:
  struct TrieNode {
    int64_t id;  // -1: no piece ends here
    uint32_t edge_begin;
    uint32_t edge_count;
  };
  struct Edge {
    uint8_t label;
    int32_t child;
  };
  std::vector<TrieNode> nodes_;
  std::vector<Edge> edges_;
};

class Unigram final : public TokenModel {
 public:
  explicit Unigram(const Node& node);

  void tokenize(std::string_view piece, std::vector<int64_t>& ids) const override;
  std::optional<int64_t> token_to_id(std::string_view token) const override {
    auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* id_to_token(int64_t id) const override {
    if (id < 0 || id >= static_cast<int64_t>(pieces_.size())) return nullptr;
    return &pieces_[id];
  }
  size_t vocab_size() const override { return pieces_.size(); }

 private:
  std::vector<std::string_view> best_path(std::string_view text) const;
  void to_ids(const std::vector<std::string_view>& pieces, std::vector<int64_t>& ids) const;

  std::filesystem::path source_;
  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  TokenMap vocab_;
  ByteTrie trie_;
  double min_score_ = 0;
  std::optional<int64_t> unk_id_;
  bool byte_fallback_ = false;
  std::array<std::optional<int64_t>, 256> byte_ids_;  // "<0xXX>" tokens for byte_fallback

  // Pieces seen before (HF caches those under 256 bytes).
  static constexpr size_t kCacheMaxEntries = 1 << 16;
  static constexpr size_t kCacheMaxBytes = 256;
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>, StringHash, std::equal_to<>> cache_;
};

Unigram::Unigram(const Node& node) : source_(node.file) {
  node.only_keys({"type", "unk_id", "vocab", "byte_fallback"});
  byte_fallback_ = node.has("byte_fallback") && node["byte_fallback"].boolean();
  // vocab: [[piece, score], ...]; a piece's id is its index.
  const Node vocab = node["vocab"];
  if (!vocab.value.is_array()) vocab.fail_type("an array of [piece, score]");
  std::vector<std::pair<std::string, int64_t>> entries;
  min_score_ = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < vocab.value.size(); ++i) {
    const Node entry = vocab.at(i);
    if (!entry.value.is_array() || entry.value.size() != 2)
      entry.fail_type("a [piece, score] pair");
    const auto id = static_cast<int64_t>(i);
    pieces_.push_back(entry.at(0).string());
    const Node score = entry.at(1);
    if (!score.value.is_number()) score.fail_type("a number");
    scores_.push_back(score.value.get<double>());
    min_score_ = std::min(min_score_, scores_.back());
    vocab_.insert_or_assign(pieces_.back(), id);  // a repeated piece: the last id, as HF
    entries.emplace_back(pieces_.back(), id);
  }
  for (auto& [piece, id] : entries) id = vocab_.at(piece);
  trie_.build(entries);
  if (node.has("unk_id")) {
    const Node unk = node["unk_id"];
    if (pieces_.empty()) unk.fail("the vocabulary is empty but an unk_id is given");
    const auto id = static_cast<int64_t>(unk.size());
    if (id >= static_cast<int64_t>(pieces_.size())) {
      unk.fail(str("unk_id ", id, " is past the vocabulary (", pieces_.size(), " pieces)"));
    }
    unk_id_ = id;
  }
  for (int b = 0; b < 256; ++b) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    byte_ids_[b] = token_to_id(str("<0x", kHex[b >> 4], kHex[b & 15], ">"));
  }
}

void Unigram::tokenize(std::string_view piece, std::vector<int64_t>& ids) const {
  if (piece.empty()) return;
  const bool cacheable = piece.size() < kCacheMaxBytes;
  if (cacheable) {
    const std::shared_lock lock(cache_mutex_);
    if (auto it = cache_.find(piece); it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> word;
  to_ids(best_path(piece), word);
  ids.insert(ids.end(), word.begin(), word.end());
  if (cacheable) {
    const std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheMaxEntries) cache_.emplace(std::string(piece), std::move(word));
  }
}

// HF's encode_optimized: for each byte offset, the best-scoring path ending there. A later
// candidate replaces an earlier one only when it scores strictly higher, candidates coming by
// start offset, then shortest first, then the unknown token. Runs of unknown characters come
// back as one piece.
std::vector<std::string_view> Unigram::best_path(std::string_view text) const {
  struct Best {
    double score = 0;
    int64_t id = 0;
    int64_t start = -1;  // -1: no path ends here yet
  };
  std::vector<Best> best(text.size() + 1);
  const double unk_score = min_score_ - kUnkPenalty;
  size_t start = 0;
  while (start < text.size()) {
    const double here = best[start].score;
    size_t char_end = start;
    next_char(text, char_end);
    const size_t char_len = char_end - start;
    bool has_single = false;
    const auto offer = [&](size_t end, double score, int64_t id) {
      Best& target = best[end];
      if (target.start < 0 || score + here > target.score) {
        target = {score + here, id, static_cast<int64_t>(start)};
      }
    };
    trie_.prefixes(text.substr(start), [&](size_t length, int64_t id) {
      offer(start + length, scores_[id], id);
      has_single = has_single || length == char_len;
    });
    if (!has_single) {
      Best& target = best[char_end];
      if (target.start < 0 || unk_score + here > target.score) {
        if (!unk_id_) {
          throw Error(str("Unigram: \"", text.substr(start, char_len), "\" is not in the ",
                          "vocabulary and the model has no unk_id (", source_.string(), ")"));
        }
        offer(char_end, unk_score, *unk_id_);
      }
    }
    start = char_end;
  }
  std::vector<std::string_view> pieces;
  size_t end = text.size();
  size_t unk_end = 0;  // end of the run of unknown pieces being fused, when unk_start is set
  std::optional<size_t> unk_start;
  while (end > 0) {
    const Best& node = best[end];
    const auto begin = static_cast<size_t>(node.start);
    if (unk_id_ && node.id == *unk_id_) {
      if (!unk_start) unk_end = end;
      unk_start = begin;
    } else {
      if (unk_start) pieces.push_back(text.substr(*unk_start, unk_end - *unk_start));
      unk_start.reset();
      pieces.push_back(text.substr(begin, end - begin));
    }
    end = begin;
  }
  if (unk_start) pieces.push_back(text.substr(*unk_start, unk_end - *unk_start));
  std::reverse(pieces.begin(), pieces.end());
  return pieces;
}

// HF's Unigram::tokenize: each piece's id; a piece not in the vocabulary (fused unknowns) as
// its bytes' "<0xXX>" tokens when byte_fallback has them all, else the unknown token.
void Unigram::to_ids(const std::vector<std::string_view>& pieces, std::vector<int64_t>& ids) const {
  for (const std::string_view piece : pieces) {
    if (auto id = token_to_id(piece)) {
      ids.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : piece) all = all && byte_ids_[static_cast<uint8_t>(c)].has_value();
      if (all) {
        for (const char c : piece) ids.push_back(*byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (!unk_id_) {
      throw Error(str("Unigram: \"", piece, "\" is not in the vocabulary and the model has no ",
                      "unk_id (", source_.string(), ")"));
    }
    ids.push_back(*unk_id_);
  }
}

}  // namespace

std::unique_ptr<TokenModel> make_unigram_model(const Node& node) {
  return std::make_unique<Unigram>(node);
}

}  // namespace shardformer::tokenizer::detail
