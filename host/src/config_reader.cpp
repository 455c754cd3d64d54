// TOML job-config reading: typed keys with positions in every error (config_reader.h).
#include "config_reader.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>

namespace shardformer::host::config {
namespace {

constexpr size_t kMaxSuggestionEdits = 2;

std::string_view type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "nothing";
  }
}

template <typename T>
constexpr toml::node_type node_type_of() {
  if constexpr (std::is_same_v<T, toml::table>) return toml::node_type::table;
  if constexpr (std::is_same_v<T, toml::array>) return toml::node_type::array;
  if constexpr (std::is_same_v<T, std::string>) return toml::node_type::string;
  if constexpr (std::is_same_v<T, int64_t>) return toml::node_type::integer;
  if constexpr (std::is_same_v<T, bool>) return toml::node_type::boolean;
  if constexpr (std::is_same_v<T, double>) return toml::node_type::floating_point;
  return toml::node_type::none;
}

std::string with_article(std::string_view noun) {
  return str(std::string_view("aeiou").find(noun.front()) == std::string_view::npos ? "a " : "an ",
             noun);
}

// The node as a T (toml::table, toml::array or toml::value<T>), or a ConfigError at the node
// saying which type `label` must have. Every key and array element is fetched through here.
template <typename T>
const auto& typed(const Source& source, const toml::node& node, const std::string& label) {
  const auto* value = node.as<T>();
  if (value == nullptr) {
    fail(source, node.source().begin,
         str(label, " must be ", with_article(type_name(node_type_of<T>())), ", got ",
             type_name(node.type())));
  }
  return *value;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

template <typename Range>
bool contains(const Range& names, std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

std::string range_text(int64_t min, int64_t max) {
  return max == kNoMax ? str(">= ", min) : str("in [", min, ", ", max, "]");
}

int64_t checked_integer(const Source& source, const toml::node& node, const std::string& label,
                        int64_t min, int64_t max) {
  const int64_t value = typed<int64_t>(source, node, label).get();
  if (value < min || value > max) {
    fail(source, node.source().begin,
         str(label, " must be ", range_text(min, max), ", got ", value));
  }
  return value;
}

// A float, or an integer read as one, in [min, max].
double checked_number(const Source& source, const toml::node& node, const std::string& label,
                      double min, double max) {
  double value = 0;
  if (const auto* integer = node.as_integer()) {
    value = static_cast<double>(integer->get());
  } else {
    value = typed<double>(source, node, label).get();
  }
  if (!(value >= min && value <= max)) {
    fail(source, node.source().begin,
         str(label, " must be in [", min, ", ", max, "], got ", value));
  }
  return value;
}

std::string checked_choice(const Source& source, const toml::node& node, const std::string& label,
                           Names allowed) {
  const std::string& value = typed<std::string>(source, node, label).get();
  if (!contains(allowed, value)) {
    fail(source, node.source().begin,
         str(label, " must be one of \"", join(allowed, "\", \""), "\", got \"", value, "\""));
  }
  return value;
}

// A non-empty path string; relative paths are taken from the config's folder.
std::filesystem::path checked_path(const Source& source, const toml::node& node,
                                   const std::string& label) {
  const std::filesystem::path path = typed<std::string>(source, node, label).get();
  if (path.empty()) fail(source, node.source().begin, str(label, " must not be empty"));
  return (path.is_absolute() ? path : source.base_dir / path).lexically_normal();
}

std::vector<std::filesystem::path> checked_paths(const Source& source, const toml::node& node,
                                                 const std::string& label) {
  const auto& items = typed<toml::array>(source, node, label);
  std::vector<std::filesystem::path> paths;
  for (size_t i = 0; i < items.size(); ++i) {
    paths.push_back(checked_path(source, items[i], str(label, "[", i, "]")));
  }
  return paths;
}

// Non-empty array of non-empty arrays of token ids (integers >= 0).
TokenLists checked_token_lists(const Source& source, const toml::node& node,
                               const std::string& label) {
  const auto& rows = typed<toml::array>(source, node, label);
  if (rows.empty()) {
    fail(source, node.source().begin, str(label, " must hold at least one sequence"));
  }
  TokenLists lists;
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string row_label = str(label, "[", i, "]");
    const auto& row = typed<toml::array>(source, rows[i], row_label);
    if (row.empty()) fail(source, rows[i].source().begin, str(row_label, " must not be empty"));
    auto& ids = lists.emplace_back();
    for (size_t j = 0; j < row.size(); ++j) {
      ids.push_back(checked_integer(source, row[j], str(row_label, "[", j, "]"), 0, kNoMax));
    }
  }
  return lists;
}

// Non-empty array of integers in [min, max].
std::vector<int64_t> checked_integers(const Source& source, const toml::node& node,
                                      const std::string& label, int64_t min, int64_t max) {
  const auto& items = typed<toml::array>(source, node, label);
  if (items.empty()) fail(source, node.source().begin, str(label, " must not be empty"));
  std::vector<int64_t> values;
  for (size_t i = 0; i < items.size(); ++i) {
    values.push_back(checked_integer(source, items[i], str(label, "[", i, "]"), min, max));
  }
  return values;
}

}  // namespace

void fail(const Source& source, const toml::source_position& at, const std::string& what) {
  const bool known = at.line > 0;
  throw ConfigError(
      str(source.name, ":", known ? at.line : 1, ":", known ? at.column : 1, ": ", what));
}

std::string suggestion(std::string_view name, const std::vector<std::string_view>& known) {
  std::string_view best;
  size_t best_distance = kMaxSuggestionEdits + 1;
  for (std::string_view candidate : known) {
    const size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best.empty() ? str(" (known: ", join(known, ", "), ")")
                      : str("; did you mean '", best, "'?");
}

toml::table parse_toml(const Source& source, const std::string& text) {
  try {
    return toml::parse(text, source.name);
  } catch (const toml::parse_error& error) {
    fail(source, error.source().begin, str("TOML syntax error: ", error.description()));
  }
}

SectionReader::SectionReader(const Source& source, const toml::table& root, std::string_view name,
                             Names keys)
    : source_(source), name_(name) {
  if (const toml::node* node = root.get(name)) table_ = &typed<toml::table>(source, *node, name_);
  check_keys(keys);
}

SectionReader SectionReader::for_table(const Source& source, const toml::table& table,
                                       std::string name, Names keys) {
  SectionReader reader(source, std::move(name));
  reader.table_ = &table;
  reader.check_keys(keys);
  return reader;
}

void SectionReader::check_keys(Names keys) const {
  if (table_ == nullptr) return;
  for (auto&& [key, node] : *table_) {
    if (!contains(keys, key.str())) {
      fail(source_, key.source().begin,
           str("unknown key '", key.str(), "' in [", name_, "]", suggestion(key.str(), keys)));
    }
  }
}

std::optional<bool> SectionReader::boolean(std::string_view key) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return typed<bool>(source_, node, label).get();
  });
}

std::optional<std::string> SectionReader::string(std::string_view key) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return typed<std::string>(source_, node, label).get();
  });
}

std::optional<int64_t> SectionReader::integer(std::string_view key, int64_t min,
                                              int64_t max) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return checked_integer(source_, node, label, min, max);
  });
}

std::optional<double> SectionReader::number(std::string_view key, double min, double max) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return checked_number(source_, node, label, min, max);
  });
}

std::optional<std::string> SectionReader::choice(std::string_view key, Names allowed) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return checked_choice(source_, node, label, allowed);
  });
}

std::optional<std::filesystem::path> SectionReader::path(std::string_view key) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return checked_path(source_, node, label);
  });
}

std::optional<std::vector<std::filesystem::path>> SectionReader::paths(std::string_view key) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return checked_paths(source_, node, label);
  });
}

std::optional<std::vector<int64_t>> SectionReader::integers(std::string_view key, int64_t min,
                                                            int64_t max) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return checked_integers(source_, node, label, min, max);
  });
}

std::optional<std::vector<double>> SectionReader::numbers(std::string_view key, size_t count,
                                                          double min, double max) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    const auto& items = typed<toml::array>(source_, node, label);
    if (items.size() != count) {
      fail(source_, node.source().begin,
           str(label, " must hold ", count, " numbers, got ", items.size()));
    }
    std::vector<double> values;
    for (size_t i = 0; i < items.size(); ++i) {
      values.push_back(checked_number(source_, items[i], str(label, "[", i, "]"), min, max));
    }
    return values;
  });
}

std::optional<std::vector<std::array<double, 2>>> SectionReader::number_pairs(std::string_view key,
                                                                              double min,
                                                                              double max) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    const auto& items = typed<toml::array>(source_, node, label);
    if (items.empty()) fail(source_, node.source().begin, str(label, " must not be empty"));
    std::vector<std::array<double, 2>> pairs;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string item = str(label, "[", i, "]");
      const auto& pair = typed<toml::array>(source_, items[i], item);
      if (pair.size() != 2) {
        fail(source_, items[i].source().begin, str(item, " must be [x, y], two numbers"));
      }
      pairs.push_back({checked_number(source_, pair[0], item + "[0]", min, max),
                       checked_number(source_, pair[1], item + "[1]", min, max)});
    }
    return pairs;
  });
}

std::optional<std::vector<std::string>> SectionReader::strings(std::string_view key) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    const auto& items = typed<toml::array>(source_, node, label);
    if (items.empty()) fail(source_, node.source().begin, str(label, " must not be empty"));
    std::vector<std::string> values;
    for (size_t i = 0; i < items.size(); ++i) {
      values.push_back(typed<std::string>(source_, items[i], str(label, "[", i, "]")).get());
    }
    return values;
  });
}

bool SectionReader::holds_strings(std::string_view key) const {
  const toml::node* node = find(key);
  const toml::array* array = node != nullptr ? node->as_array() : nullptr;
  return array != nullptr && !array->empty() && (*array)[0].is_string();
}

std::optional<TokenLists> SectionReader::token_lists(std::string_view key) const {
  return read(key, [&](const toml::node& node, const std::string& label) {
    return checked_token_lists(source_, node, label);
  });
}

std::vector<SectionReader> SectionReader::tables(std::string_view key, Names keys) const {
  std::vector<SectionReader> readers;
  read(key, [&](const toml::node& node, const std::string& label) {
    const auto& array = typed<toml::array>(source_, node, label);
    for (size_t i = 0; i < array.size(); ++i) {
      const std::string item = str(label, "[", i, "]");
      readers.push_back(
          for_table(source_, typed<toml::table>(source_, array[i], item), item, keys));
    }
    return 0;
  });
  return readers;
}

void SectionReader::fail_at(std::string_view key, const std::string& what) const {
  const toml::node* node = find(key);
  const toml::source_position at = node     ? node->source().begin
                                   : table_ ? table_->source().begin
                                            : toml::source_position{};
  fail(source_, at, str(label(key), ": ", what));
}

void SectionReader::require(std::string_view key, std::string_view why) const {
  if (find(key) != nullptr) return;
  const toml::source_position at = table_ ? table_->source().begin : toml::source_position{};
  fail(source_, at, str("missing required key ", label(key), why.empty() ? "" : " ", why));
}

}  // namespace shardformer::host::config
