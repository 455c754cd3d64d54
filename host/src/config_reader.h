// Reading TOML job configs: typed access to a [section]'s keys, where every unknown key, wrong
// type and out-of-range value is a ConfigError "FILE:LINE:COLUMN: message".
#pragma once

#include <toml++/toml.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace shardformer::host::config {

using TokenLists = std::vector<std::vector<int64_t>>;
using Names = std::initializer_list<std::string_view>;

inline constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

// Where a config came from: its name in messages and the folder relative paths start from.
struct Source {
  std::string name;
  std::filesystem::path base_dir;
};

// Throws "NAME:LINE:COLUMN: what"; an unknown position (line 0) reads as 1:1.
[[noreturn]] void fail(const Source& source, const toml::source_position& at,
                       const std::string& what);

// "; did you mean 'x'?" for the closest of `known` within two edits, else the known names.
std::string suggestion(std::string_view name, const std::vector<std::string_view>& known);

toml::table parse_toml(const Source& source, const std::string& text);

// One [section]: checked for unknown keys on construction, then read key by key. A missing
// section reads as an empty one. Each getter returns nullopt for an absent key.
class SectionReader {
 public:
  SectionReader(const Source& source, const toml::table& root, std::string_view name, Names keys);
  // Reads `table` itself (an element of an array of tables), called `name` in messages.
  static SectionReader for_table(const Source& source, const toml::table& table, std::string name,
                                 Names keys);

  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max) const;
  // A float or an integer in [min, max].
  std::optional<double> number(std::string_view key, double min, double max) const;
  std::optional<std::string> choice(std::string_view key, Names allowed) const;
  // A non-empty path; relative paths are taken from the config's folder.
  std::optional<std::filesystem::path> path(std::string_view key) const;
  std::optional<std::vector<std::filesystem::path>> paths(std::string_view key) const;
  std::optional<std::vector<int64_t>> integers(std::string_view key, int64_t min,
                                               int64_t max) const;
  // `count` numbers in [min, max].
  std::optional<std::vector<double>> numbers(std::string_view key, size_t count, double min,
                                             double max) const;
  // A non-empty array of [x, y] pairs of numbers in [min, max] (SAM's points).
  std::optional<std::vector<std::array<double, 2>>> number_pairs(std::string_view key, double min,
                                                                 double max) const;
  std::optional<std::vector<std::string>> strings(std::string_view key) const;  // non-empty
  std::optional<TokenLists> token_lists(std::string_view key) const;            // of ids >= 0
  // An array of tables ([[section.key]] entries), each read with `keys`.
  std::vector<SectionReader> tables(std::string_view key, Names keys) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  // Whether the key holds an array whose first element is a string.
  bool holds_strings(std::string_view key) const;

  // Throws "what" at the key's value (the section's header when the key is absent).
  [[noreturn]] void fail_at(std::string_view key, const std::string& what) const;
  // Throws at the section (1:1 when it is missing) unless `key` is present.
  void require(std::string_view key, std::string_view why = {}) const;

 private:
  SectionReader(const Source& source, std::string name) : source_(source), name_(std::move(name)) {}
  void check_keys(Names keys) const;
  const toml::node* find(std::string_view key) const { return table_ ? table_->get(key) : nullptr; }
  std::string label(std::string_view key) const { return name_ + "." + std::string(key); }

  // The value `check` makes of the key's node, or nullopt when the key is absent.
  template <typename Check>
  auto read(std::string_view key, Check check) const
      -> std::optional<std::invoke_result_t<Check, const toml::node&, const std::string&>> {
    const toml::node* node = find(key);
    if (node == nullptr) return std::nullopt;
    return check(*node, label(key));
  }

  const Source& source_;
  std::string name_;
  const toml::table* table_ = nullptr;
};

}  // namespace shardformer::host::config
