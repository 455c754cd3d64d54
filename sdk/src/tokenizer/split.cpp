// What the pipeline's stages share: splitting pieces at matches with HF's delimiter behaviours,
// GPT-2's byte-to-character map, and reading UTF-8 one character at a time.
#include "pipeline.h"

#include <array>

namespace shardformer::tokenizer::detail {

SplitBehavior read_split_behavior(const Node& node) {
  const std::string name =
      node.one_of({"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"});
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  return SplitBehavior::kContiguous;
}

PrependScheme read_prepend_scheme(const Node& metaspace) {
  metaspace.only_keys(
      {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
  if (metaspace.has("str_rep") &&
      metaspace["str_rep"].string() != metaspace["replacement"].string()) {
    metaspace["str_rep"].fail("must equal \"replacement\"");
  }
  PrependScheme scheme = PrependScheme::kAlways;
  if (metaspace.has("prepend_scheme")) {
    const std::string s = metaspace["prepend_scheme"].one_of({"always", "first", "never"});
    scheme = s == "always"  ? PrependScheme::kAlways
             : s == "first" ? PrependScheme::kFirst
                            : PrependScheme::kNever;
  }
  if (metaspace.has("add_prefix_space") && !metaspace["add_prefix_space"].boolean()) {
    if (metaspace.has("prepend_scheme") && scheme != PrependScheme::kNever) {
      metaspace["add_prefix_space"].fail("false contradicts prepend_scheme");
    }
    scheme = PrependScheme::kNever;  // the format before prepend_scheme
  }
  return scheme;
}

namespace {

struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool is_match = false;
};

// The text cut into alternating stretches: matches and what lies between them.
std::vector<Span> spans_of(std::string_view text, const MatchFinder& find, bool invert) {
  std::vector<Span> spans;
  size_t previous = 0;
  find(text, [&](size_t begin, size_t end) {
    if (begin > previous) spans.push_back({previous, begin, invert});
    spans.push_back({begin, end, !invert});
    previous = end;
  });
  if (previous < text.size()) spans.push_back({previous, text.size(), invert});
  return spans;
}

// Applies the behaviour: which stretches become pieces, merged how (HF's fold, step by step).
std::vector<Span> apply_behavior(std::vector<Span> spans, SplitBehavior behavior) {
  std::vector<Span> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated: return spans;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.is_match) out.push_back(s);
      }
      return out;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.is_match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.is_match && !previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back(s);
        }
        previous_match = s.is_match;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
  }
  return spans;
}

}  // namespace

void split_pieces(std::vector<Piece>& pieces, const MatchFinder& find, SplitBehavior behavior,
                  bool invert) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece& piece : pieces) {
    for (const Span& s : apply_behavior(spans_of(piece.text, find, invert), behavior)) {
      if (s.end == s.begin) continue;
      out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_start && s.begin == 0});
    }
  }
  pieces = std::move(out);
}

MatchFinder char_matches(std::function<bool(char32_t)> predicate) {
  return [predicate = std::move(predicate)](std::string_view text,
                                            const std::function<void(size_t, size_t)>& on_match) {
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t begin = pos;
      if (predicate(next_char(text, pos))) on_match(begin, pos);
    }
  };
}

namespace {

struct ByteMap {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 324> to_byte{};  // indexed by code point; -1 where no byte maps there
  ByteMap() {
    to_byte.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      std::string& s = to_char[b];
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

const std::string& byte_to_char(uint8_t byte) { return byte_map().to_char[byte]; }

std::optional<uint8_t> char_to_byte(char32_t cp) {
  if (cp >= byte_map().to_byte.size() || byte_map().to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(byte_map().to_byte[cp]);
}

char32_t next_char(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  const int extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
  char32_t cp = lead & (0x3F >> extra);
  for (int i = 1; i <= extra; ++i) cp = (cp << 6) | (byte(pos + i) & 0x3F);
  pos += extra + 1;
  return cp;
}

}  // namespace shardformer::tokenizer::detail
