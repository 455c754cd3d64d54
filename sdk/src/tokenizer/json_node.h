// Internal helpers for reading the tokenizer's JSON files: Node, a JSON value with its file and
// key path so every error names both, and the steps tokenizer.json and vocab.txt loading share.
#pragma once

#include "../json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "tokenizer_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace shardformer::tokenizer::detail {

inline constexpr std::string_view kTokenizerConfig = "tokenizer_config.json";

// A JSON value being read, with the file and the key path for messages.
struct Node {
  using json = nlohmann::json;

  const json& value;
  const std::filesystem::path& file;
  std::string where;

  [[noreturn]] void fail(const std::string& what) const {
    throw ConfigError(str(file.string(), ": ", where.empty() ? "top level" : where, ": ", what));
  }
  [[noreturn]] void fail_type(std::string_view expected) const {
    fail(str("expected ", expected, ", got ", shardformer::detail::describe_json(value)));
  }
  std::string child_path(std::string_view key) const {
    return where.empty() ? std::string(key) : str(where, ".", key);
  }
  bool has(std::string_view key) const {
    auto it = value.find(key);
    return it != value.end() && !it->is_null();
  }
  Node operator[](std::string_view key) const {
    static const json kNull;
    auto it = value.find(key);
    return {it == value.end() ? kNull : *it, file, child_path(key)};
  }
  Node at(size_t index) const { return {value[index], file, str(where, "[", index, "]")}; }

  const Node& object() const {
    if (!value.is_object()) fail_type("an object");
    return *this;
  }
  // Refuses any key not in `known`.
  const Node& only_keys(std::initializer_list<std::string_view> known) const {
    object();
    for (const auto& [key, unused] : value.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        fail(str("unknown key \"", key, "\" (known: ", join(known, ", "), ")"));
      }
    }
    return *this;
  }
  bool boolean() const {
    if (!value.is_boolean()) fail_type("a boolean");
    return value.get<bool>();
  }
  std::optional<bool> optional_boolean() const {
    if (value.is_null()) return std::nullopt;
    if (!value.is_boolean()) fail_type("a boolean or null");
    return value.get<bool>();
  }
  std::string string() const {
    if (!value.is_string()) fail_type("a string");
    return value.get<std::string>();
  }
  int64_t integer() const {
    if (!value.is_number_integer()) fail_type("an integer");
    if (value.is_number_unsigned() &&
        value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail_type("an integer that fits in int64");
    }
    return value.get<int64_t>();
  }
  size_t size() const {
    int64_t v = integer();
    if (v < 0) fail_type("a non-negative integer");
    return static_cast<size_t>(v);
  }
  std::string one_of(std::initializer_list<std::string_view> choices) const {
    std::string s = string();
    if (std::find(choices.begin(), choices.end(), s) == choices.end()) {
      fail(str("\"", s, "\" is not supported (supported: ", join(choices, ", "), ")"));
    }
    return s;
  }
};

// Decodes a string of the file as UTF-8, failing with the node's file and key.
std::u32string to_u32(const std::string& text, const Node& node);
// The node's string, which must be one character (a Metaspace replacement, a Strip content).
char32_t single_char(const Node& node);
// Adds a vocabulary entry (token -> id).
void add_vocab_entry(TokenizerData& data, const std::string& token, int64_t id);
// Registers an added token; its id must agree with the vocabulary when the content is there.
void add_token(TokenizerData& data, AddedToken token, const Node& node);
// "right"/"left" (or "Right"/"Left", as the spellings given).
Side read_side(const Node& node, std::string_view right, std::string_view left);
// tokenizer_config.json's model_max_length; nullopt for transformers' "no limit" (1e30).
std::optional<size_t> read_model_max_length(const Node& node);
// A token written as a string or as a serialized AddedToken ({"content": ...}).
std::string read_token_spec(const Node& node);

}  // namespace shardformer::tokenizer::detail
