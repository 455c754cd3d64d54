// The BPE model of tokenizer.json: characters (or their byte-fallback tokens, or the unknown
// token) merged by rank, lowest first and leftmost among equals, as HF tokenizers' Word does;
// whole pieces cached.
#include "pipeline.h"

#include <mutex>
#include <queue>
#include <shared_mutex>
#include <unordered_map>

namespace shardformer::tokenizer::detail {
namespace {

struct PairHash {
  size_t operator()(std::pair<int64_t, int64_t> p) const {
    return std::hash<uint64_t>{}(static_cast<uint64_t>(p.first) * 0x9E3779B97F4A7C15ull ^
                                 static_cast<uint64_t>(p.second));
  }
};

struct Merge {
  int64_t rank = 0;
  int64_t new_id = 0;
};

class Bpe final : public TokenModel {
 public:
  explicit Bpe(const Node& node);

  void tokenize(std::string_view piece, std::vector<int64_t>& ids) const override;
  std::optional<int64_t> token_to_id(std::string_view token) const override {
    auto it = vocab_.find(token);
    if (it == vocab_.end()) return std::nullopt;
    return it->second;
  }
  const std::string* id_to_token(int64_t id) const override {
    if (id < 0 || id >= static_cast<int64_t>(tokens_.size()) || !assigned_[id]) return nullptr;
    return &tokens_[id];
  }
  size_t vocab_size() const override { return vocab_.size(); }

 private:
  std::vector<int64_t> merge_word(std::string_view word) const;
  void read_merges(const Node& merges);

  TokenMap vocab_;
  std::vector<std::string> tokens_;
  std::vector<bool> assigned_;
  std::unordered_map<std::pair<int64_t, int64_t>, Merge, PairHash> merges_;
  std::optional<int64_t> unk_id_;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<std::optional<int64_t>, 256> byte_ids_;  // "<0xXX>" tokens for byte_fallback

  // Pieces seen before (HF caches words up to 256 bytes too).
  static constexpr size_t kCacheMaxEntries = 1 << 16;
  static constexpr size_t kCacheMaxBytes = 256;
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>, StringHash, std::equal_to<>> cache_;
};

Bpe::Bpe(const Node& node) {
  node.only_keys({"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                  "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (node.has("dropout") &&
      (!node["dropout"].value.is_number() || node["dropout"].value.get<double>() != 0.0)) {
    node["dropout"].fail("BPE dropout samples merges at random and is not supported");
  }
  if (node.has("continuing_subword_prefix")) prefix_ = node["continuing_subword_prefix"].string();
  if (node.has("end_of_word_suffix")) suffix_ = node["end_of_word_suffix"].string();
  fuse_unk_ = node.has("fuse_unk") && node["fuse_unk"].boolean();
  byte_fallback_ = node.has("byte_fallback") && node["byte_fallback"].boolean();
  ignore_merges_ = node.has("ignore_merges") && node["ignore_merges"].boolean();
  const Node vocab = node["vocab"];
  vocab.object();
  for (const auto& [token, id_value] : vocab.value.items()) {
    const Node id_node{id_value, node.file, vocab.child_path(token)};
    const auto id = static_cast<int64_t>(id_node.size());
    if (id >= static_cast<int64_t>(tokens_.size())) {
      tokens_.resize(id + 1);
      assigned_.resize(id + 1);
    }
    if (assigned_[id]) {
      id_node.fail(str("id ", id, " is given to both \"", tokens_[id], "\" and \"", token, "\""));
    }
    tokens_[id] = token;
    assigned_[id] = true;
    vocab_.emplace(token, id);
  }
  if (node.has("unk_token")) {
    const std::string unk = node["unk_token"].string();
    unk_id_ = token_to_id(unk);
    if (!unk_id_) node["unk_token"].fail(str("\"", unk, "\" is not in the vocabulary"));
  }
  for (int b = 0; b < 256; ++b) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    byte_ids_[b] = token_to_id(str("<0x", kHex[b >> 4], kHex[b & 15], ">"));
  }
  read_merges(node["merges"]);
}

void Bpe::read_merges(const Node& merges) {
  if (!merges.value.is_array()) merges.fail_type("an array");
  for (size_t rank = 0; rank < merges.value.size(); ++rank) {
    const Node entry = merges.at(rank);
    std::string left;
    std::string right;
    if (entry.value.is_array() && entry.value.size() == 2) {
      left = entry.at(0).string();
      right = entry.at(1).string();
    } else if (entry.value.is_string()) {
      // The older form: "left right".
      const std::string s = entry.string();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        entry.fail("a merge written as a string must be two tokens separated by one space");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else {
      entry.fail_type("a pair of tokens");
    }
    const auto a = token_to_id(left);
    const auto b = token_to_id(right);
    if (!a || !b) {
      entry.fail(str("merge token \"", a ? right : left, "\" is not in the vocabulary"));
    }
    const std::string merged = left + right.substr(std::min(prefix_.size(), right.size()));
    const auto merged_id = token_to_id(merged);
    if (!merged_id) entry.fail(str("merged token \"", merged, "\" is not in the vocabulary"));
    // The last rank of a repeated pair wins, as in HF (its map keeps the last insert).
    merges_.insert_or_assign({*a, *b}, Merge{static_cast<int64_t>(rank), *merged_id});
  }
}

void Bpe::tokenize(std::string_view piece, std::vector<int64_t>& ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(piece)) {
      ids.push_back(*id);
      return;
    }
  }
  const bool cacheable = piece.size() <= kCacheMaxBytes;
  if (cacheable) {
    const std::shared_lock lock(cache_mutex_);
    if (auto it = cache_.find(piece); it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> word = merge_word(piece);
  ids.insert(ids.end(), word.begin(), word.end());
  if (cacheable) {
    const std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheMaxEntries) cache_.emplace(std::string(piece), std::move(word));
  }
}

std::vector<int64_t> Bpe::merge_word(std::string_view word) const {
  // Symbols: one per character, as a doubly linked list over a vector; id -1 marks removed.
  struct Symbol {
    int64_t id;
    int64_t prev;
    int64_t next;
  };
  std::vector<Symbol> symbols;
  const auto add = [&](int64_t id) {
    const auto index = static_cast<int64_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1});
  };
  std::optional<int64_t> pending_unk;  // HF adds an unknown only when a known symbol follows
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t begin = pos;
    next_char(word, pos);
    std::string s(word.substr(begin, pos - begin));
    if (begin > 0 && !prefix_.empty()) s.insert(0, prefix_);
    if (pos == word.size() && !suffix_.empty()) s += suffix_;
    if (auto id = token_to_id(s)) {
      if (pending_unk) add(*std::exchange(pending_unk, std::nullopt));
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char c : s) all = all && byte_ids_[static_cast<uint8_t>(c)].has_value();
      if (all) {
        for (const char c : s) add(*byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk && !fuse_unk_) add(*pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk) add(*pending_unk);
  if (symbols.empty()) return {};
  symbols.back().next = -1;

  struct Candidate {
    int64_t rank;
    int64_t pos;
    int64_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push_pair = [&](int64_t left) {
    const int64_t right = symbols[left].next;
    if (right < 0) return;
    auto it = merges_.find({symbols[left].id, symbols[right].id});
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(symbols.size()); ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    const int64_t right_index = left.next;
    Symbol& right = symbols[right_index];
    auto it = merges_.find({left.id, right.id});
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;  // stale entry
    left.id = top.new_id;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    right.id = -1;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  std::vector<int64_t> ids;
  for (const Symbol& s : symbols) {
    if (s.id >= 0) ids.push_back(s.id);
  }
  return ids;
}

}  // namespace

std::unique_ptr<TokenModel> make_model(const Node& node) {
  node.object();
  const std::string type = node["type"].string();
  if (type == "BPE") return std::make_unique<Bpe>(node);
  if (type == "Unigram") return make_unigram_model(node);
  node["type"].fail(str("model \"", type,
                        "\" is not supported here (supported: BPE, Unigram; WordPiece with "
                        "BERT's normalizer and pre-tokenizer)"));
}

}  // namespace shardformer::tokenizer::detail
