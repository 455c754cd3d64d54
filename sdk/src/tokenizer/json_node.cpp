// Shared steps of reading the tokenizer's files (json_node.h) and TokenizerData's id tables.
#include "json_node.h"

namespace shardformer::tokenizer::detail {
namespace {

// model_max_length at or above this is transformers' "no limit" (int(1e30)).
constexpr double kNoModelMaxLength = 1e18;

}  // namespace

std::u32string to_u32(const std::string& text, const Node& node) {
  try {
    return decode_utf8(text, "the string");
  } catch (const Error& e) {
    node.fail(e.what());
  }
}

char32_t single_char(const Node& node) {
  const std::u32string chars = to_u32(node.string(), node);
  if (chars.size() != 1) node.fail("expected a single character");
  return chars[0];
}

void add_vocab_entry(TokenizerData& data, const std::string& token, int64_t id) {
  data.vocab[token] = id;
  data.assign_id(token, id);
  data.max_token_bytes = std::max(data.max_token_bytes, token.size());
}

void add_token(TokenizerData& data, AddedToken token, const Node& node) {
  if (auto it = data.vocab.find(token.content); it != data.vocab.end() && it->second != token.id) {
    node.fail(str("added token \"", token.content, "\" has id ", token.id,
                  " but the vocabulary gives it id ", it->second));
  }
  if (token.id < static_cast<int64_t>(data.id_to_token.size()) && data.id_assigned[token.id] &&
      data.id_to_token[token.id] != token.content) {
    node.fail(str("added token \"", token.content, "\" has id ", token.id, ", which is \"",
                  data.id_to_token[token.id], "\" already"));
  }
  data.assign_id(token.content, token.id);
  data.added_ids[token.content] = token.id;
  if (token.special) data.special_ids.insert(token.id);
  auto existing = std::find_if(data.added_tokens.begin(), data.added_tokens.end(),
                               [&](const AddedToken& t) { return t.content == token.content; });
  if (existing == data.added_tokens.end())
    data.added_tokens.push_back(std::move(token));
  else
    *existing = std::move(token);
}

Side read_side(const Node& node, std::string_view right, std::string_view left) {
  return node.one_of({right, left}) == right ? Side::kRight : Side::kLeft;
}

std::optional<size_t> read_model_max_length(const Node& node) {
  if (node.value.is_number_float()) {
    double v = node.value.get<double>();
    if (v >= kNoModelMaxLength) return std::nullopt;
    if (v < 0 || v != static_cast<double>(static_cast<size_t>(v))) {
      node.fail_type("a non-negative integer");
    }
    return static_cast<size_t>(v);
  }
  size_t v = node.size();
  if (static_cast<double>(v) >= kNoModelMaxLength) return std::nullopt;
  return v;
}

std::string read_token_spec(const Node& node) {
  if (node.value.is_string()) return node.string();
  node.only_keys({"__type", "content", "lstrip", "rstrip", "single_word", "normalized", "special"});
  if (node.has("single_word") && node["single_word"].boolean()) {
    node["single_word"].fail("single_word tokens are not supported");
  }
  return node["content"].string();
}

void TokenizerData::assign_id(const std::string& token, int64_t id) {
  auto index = static_cast<size_t>(id);
  if (index >= id_to_token.size()) {
    id_to_token.resize(index + 1);
    id_assigned.resize(index + 1, false);
  }
  id_to_token[index] = token;
  if (!id_assigned[index]) ++num_ids;
  id_assigned[index] = true;
}

int64_t TokenizerData::token_to_id_or(std::string_view token, int64_t fallback) const {
  if (auto it = added_ids.find(token); it != added_ids.end()) return it->second;
  if (auto it = vocab.find(token); it != vocab.end()) return it->second;
  return fallback;
}

}  // namespace shardformer::tokenizer::detail
