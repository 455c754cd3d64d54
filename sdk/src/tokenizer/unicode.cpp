// Unicode support of the WordPiece tokenizer: UTF-8 conversion, table look-ups (binary search in
// unicode_tables.inc), NFD/NFC with canonical ordering, and both flavours of lowercasing.
#include "unicode.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <unordered_map>

namespace shardformer::tokenizer::detail {
namespace {

struct FlagRange {
  char32_t first;
  char32_t last;
  uint16_t flags;
};

struct CombiningClassRange {
  char32_t first;
  char32_t last;
  uint8_t combining_class;
};

struct CaseMapping {
  char32_t from;
  char32_t to;
};

// Single-step canonical decomposition: `first` then `second` (0 for a singleton). `composes`:
// NFC recomposes the pair (false for composition exclusions).
struct Decomposition {
  char32_t code_point;
  char32_t first;
  char32_t second;
  bool composes;
};

#include "unicode_tables.inc"

// Bits of FlagRange::flags, as tools/gen_unicode_tables.py writes them.
enum Flag : uint16_t {
  kPyControl = 1 << 0,
  kPyCleanSpace = 1 << 1,
  kPySplitSpace = 1 << 2,
  kPyPunct = 1 << 3,
  kPyMn = 1 << 4,
  kPyCased = 1 << 5,
  kPyCaseIgnorable = 1 << 6,
  kRsControl = 1 << 7,
  kRsSpace = 1 << 8,
  kRsPunct = 1 << 9,
  kRsMn = 1 << 10,
  kPyCjk = 1 << 11,
  kRsCjk = 1 << 12,
};

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kCapitalSigma = 0x3A3;
constexpr char32_t kSmallSigma = 0x3C3;
constexpr char32_t kFinalSigma = 0x3C2;
constexpr char32_t kDottedCapitalI = 0x130;

constexpr char32_t kHangulS = 0xAC00, kHangulL = 0x1100, kHangulV = 0x1161, kHangulT = 0x11A7;
constexpr char32_t kHangulLCount = 19, kHangulVCount = 21, kHangulTCount = 28;
constexpr char32_t kHangulNCount = kHangulVCount * kHangulTCount;
constexpr char32_t kHangulSCount = kHangulLCount * kHangulNCount;

// The flags of `cp`, with an ASCII table built once so plain text skips the binary search.
uint16_t flags_of(char32_t cp) {
  auto search = [](char32_t c) -> uint16_t {
    auto it = std::upper_bound(std::begin(kFlagRanges), std::end(kFlagRanges), c,
                               [](char32_t v, const FlagRange& r) { return v < r.first; });
    if (it == std::begin(kFlagRanges)) return 0;
    --it;
    return c <= it->last ? it->flags : 0;
  };
  static const auto ascii = [&search] {
    std::array<uint16_t, 128> table{};
    for (char32_t c = 0; c < 128; ++c) table[c] = search(c);
    return table;
  }();
  return cp < 128 ? ascii[cp] : search(cp);
}

bool has(char32_t cp, Flavor flavor, uint16_t python_flag, uint16_t rust_flag) {
  return (flags_of(cp) & (flavor == Flavor::kPython ? python_flag : rust_flag)) != 0;
}

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::upper_bound(std::begin(kCombiningClassRanges), std::end(kCombiningClassRanges), cp,
                             [](char32_t v, const CombiningClassRange& r) { return v < r.first; });
  if (it == std::begin(kCombiningClassRanges)) return 0;
  --it;
  return cp <= it->last ? it->combining_class : 0;
}

const Decomposition* find_decomposition(char32_t cp, Flavor flavor) {
  if (cp < 0xC0) return nullptr;
  if (flavor == Flavor::kTokenizers &&
      std::binary_search(std::begin(kRustNoDecomposition), std::end(kRustNoDecomposition), cp)) {
    return nullptr;
  }
  auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                             [](const Decomposition& d, char32_t v) { return d.code_point < v; });
  return it != std::end(kDecompositions) && it->code_point == cp ? &*it : nullptr;
}

const CaseMapping* find_case_mapping(const CaseMapping* begin, const CaseMapping* end,
                                     char32_t cp) {
  auto it =
      std::lower_bound(begin, end, cp, [](const CaseMapping& m, char32_t v) { return m.from < v; });
  return it != end && it->from == cp ? it : nullptr;
}

void append_decomposed(char32_t cp, Flavor flavor, std::u32string& out) {
  if (cp >= kHangulS && cp < kHangulS + kHangulSCount) {
    char32_t index = cp - kHangulS;
    out.push_back(kHangulL + index / kHangulNCount);
    out.push_back(kHangulV + (index % kHangulNCount) / kHangulTCount);
    if (index % kHangulTCount != 0) out.push_back(kHangulT + index % kHangulTCount);
    return;
  }
  const Decomposition* d = find_decomposition(cp, flavor);
  if (d == nullptr) {
    out.push_back(cp);
    return;
  }
  append_decomposed(d->first, flavor, out);
  if (d->second != 0) append_decomposed(d->second, flavor, out);
}

// Canonical ordering: a stable sort of each run of non-starters by combining class.
void reorder_marks(std::u32string& text) {
  for (size_t i = 1; i < text.size(); ++i) {
    uint8_t current = combining_class(text[i]);
    if (current == 0) continue;
    for (size_t j = i; j > 0; --j) {
      uint8_t previous = combining_class(text[j - 1]);
      if (previous == 0 || previous <= current) break;
      std::swap(text[j - 1], text[j]);
    }
  }
}

// The NFC primary composite of `starter` + `next`, or 0.
char32_t compose(char32_t starter, char32_t next) {
  if (starter >= kHangulL && starter < kHangulL + kHangulLCount && next >= kHangulV &&
      next < kHangulV + kHangulVCount) {
    return kHangulS + ((starter - kHangulL) * kHangulVCount + (next - kHangulV)) * kHangulTCount;
  }
  if (starter >= kHangulS && starter < kHangulS + kHangulSCount &&
      (starter - kHangulS) % kHangulTCount == 0 && next > kHangulT &&
      next < kHangulT + kHangulTCount) {
    return starter + (next - kHangulT);
  }
  static const auto pairs = [] {
    std::unordered_map<uint64_t, char32_t> table;
    for (const Decomposition& d : kDecompositions) {
      if (d.composes) table.emplace((uint64_t{d.first} << 32) | d.second, d.code_point);
    }
    return table;
  }();
  auto it = pairs.find((uint64_t{starter} << 32) | next);
  return it == pairs.end() ? 0 : it->second;
}

// Python's Final_Sigma test for the U+03A3 at `index`: a cased letter before it (skipping
// case-ignorable characters) and none after it.
bool is_final_sigma(std::u32string_view text, size_t index) {
  size_t j = index;
  uint16_t before = 0;
  while (j > 0) {
    before = flags_of(text[--j]);
    if ((before & kPyCaseIgnorable) == 0) break;
    before = 0;
  }
  if ((before & kPyCased) == 0) return false;
  for (size_t k = index + 1; k < text.size(); ++k) {
    uint16_t after = flags_of(text[k]);
    if ((after & kPyCaseIgnorable) == 0) return (after & kPyCased) == 0;
  }
  return true;
}

}  // namespace

std::u32string decode_utf8(std::string_view text, std::string_view what) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      out.push_back(byte);
      ++i;
      continue;
    }
    size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 0;
    char32_t cp = length == 4 ? byte & 0x07 : length == 3 ? byte & 0x0F : byte & 0x1F;
    bool valid = length != 0 && byte < 0xF8 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xC0) == 0x80;
      cp = (cp << 6) | (next & 0x3F);
    }
    constexpr char32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
    if (!valid || cp < kMinimum[length] || cp > kMaxCodePoint || (cp >= 0xD800 && cp < 0xE000)) {
      throw Error(str(what, ": invalid UTF-8 at byte ", i));
    }
    out.push_back(cp);
    i += length;
  }
  return out;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(cp, out);
  return out;
}

bool is_control(char32_t cp, Flavor flavor) { return has(cp, flavor, kPyControl, kRsControl); }
bool is_clean_space(char32_t cp, Flavor flavor) { return has(cp, flavor, kPyCleanSpace, kRsSpace); }
bool is_split_space(char32_t cp, Flavor flavor) { return has(cp, flavor, kPySplitSpace, kRsSpace); }
bool is_punctuation(char32_t cp, Flavor flavor) { return has(cp, flavor, kPyPunct, kRsPunct); }
bool is_chinese_char(char32_t cp, Flavor flavor) { return has(cp, flavor, kPyCjk, kRsCjk); }
bool is_nonspacing_mark(char32_t cp, Flavor flavor) { return has(cp, flavor, kPyMn, kRsMn); }

std::u32string nfd(std::u32string_view text, Flavor flavor) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_decomposed(cp, flavor, out);
  reorder_marks(out);
  return out;
}

std::u32string nfc(std::u32string_view text) {
  std::u32string decomposed = nfd(text, Flavor::kPython);
  std::u32string out;
  out.reserve(decomposed.size());
  size_t starter = std::u32string::npos;
  uint8_t last_class = 0;
  for (char32_t cp : decomposed) {
    uint8_t cp_class = combining_class(cp);
    bool reachable = starter != std::u32string::npos &&
                     (last_class < cp_class || (last_class == 0 && starter + 1 == out.size()));
    if (reachable) {
      if (char32_t composite = compose(out[starter], cp); composite != 0) {
        out[starter] = composite;
        continue;
      }
    }
    if (cp_class == 0) starter = out.size();
    last_class = cp_class;
    out.push_back(cp);
  }
  return out;
}

std::u32string lowercase(std::u32string_view text, Flavor flavor) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char32_t cp = text[i];
    if (cp < 0x80) {
      out.push_back(cp >= U'A' && cp <= U'Z' ? cp + (U'a' - U'A') : cp);
    } else if (cp == kDottedCapitalI) {
      out.append(U"i\u0307");
    } else if (cp == kCapitalSigma) {
      bool final = flavor == Flavor::kPython && is_final_sigma(text, i);
      out.push_back(final ? kFinalSigma : kSmallSigma);
    } else if (const CaseMapping* m =
                   find_case_mapping(std::begin(kLowercase), std::end(kLowercase), cp)) {
      out.push_back(m->to);
    } else if (flavor == Flavor::kTokenizers &&
               (m = find_case_mapping(std::begin(kLowercaseRustOnly), std::end(kLowercaseRustOnly),
                                      cp))) {
      out.push_back(m->to);
    } else {
      out.push_back(cp);
    }
  }
  return out;
}

}  // namespace shardformer::tokenizer::detail
