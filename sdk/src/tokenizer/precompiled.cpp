// The Precompiled normalizer of tokenizer.json: SentencePiece's normalization rules (the
// "precompiled_charsmap" of T5, ALBERT, XLM-R...) read and applied as HF tokenizers does with the
// spm_precompiled crate, grapheme by grapheme.
#include "pipeline.h"

#include <algorithm>

#include <unicode/brkiter.h>
#include <unicode/uchar.h>
#include <unicode/utext.h>

namespace shardformer::tokenizer::detail {
namespace {

// Standard base64 with canonical padding (the base64 crate's STANDARD engine); nullopt if not.
std::optional<std::string> decode_base64(std::string_view text) {
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t pad = last ? (text[i + 3] == '=') + (text[i + 2] == '=') : 0;
    if (pad == 1 && text[i + 2] == '=') return std::nullopt;  // "x=y=" is not padding
    uint32_t bits = 0;
    for (size_t k = 0; k < 4 - pad; ++k) {
      const int v = value(text[i + k]);
      if (v < 0) return std::nullopt;
      bits |= static_cast<uint32_t>(v) << (18 - 6 * k);
    }
    if ((pad == 1 && (bits & 0xFF) != 0) || (pad == 2 && (bits & 0xFFFF) != 0)) {
      return std::nullopt;  // trailing bits set: not canonical
    }
    out += static_cast<char>(bits >> 16);
    if (pad < 2) out += static_cast<char>((bits >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(bits & 0xFF);
  }
  return out;
}

// The charsmap: a little-endian u32 byte size of the trie, the trie (Darts-clone's double array
// of u32 units), then the normalized strings, each ending with a NUL byte. A trie leaf's value
// is the byte offset of its replacement in that blob.
class Precompiled final : public Normalizer {
 public:
  explicit Precompiled(const Node& node) {
    node.only_keys({"type", "precompiled_charsmap"});
    const Node charsmap = node["precompiled_charsmap"];
    const auto bytes = decode_base64(charsmap.string());
    if (!bytes) charsmap.fail("not valid base64 (standard alphabet, canonical padding)");
    const auto u32_at = [&](size_t pos) {
      uint32_t v = 0;
      for (int k = 3; k >= 0; --k) v = v << 8 | static_cast<uint8_t>((*bytes)[pos + k]);
      return v;
    };
    if (bytes->size() < 4) charsmap.fail("shorter than its 4-byte trie size");
    const size_t units = u32_at(0) / 4;
    if (bytes->size() < 4 + units * 4) {
      charsmap.fail(
          str("the trie needs ", units * 4, " bytes, the charsmap has ", bytes->size() - 4));
    }
    if (units == 0) charsmap.fail("the trie is empty");
    for (size_t i = 0; i < units; ++i) trie_.push_back(u32_at(4 + i * 4));
    normalized_ = bytes->substr(4 + units * 4);
    try {
      decode_utf8(normalized_, "normalized strings");
    } catch (const Error& e) {
      charsmap.fail(str("its normalized strings are not UTF-8: ", e.what()));
    }
    source_ = node.file.string();
  }

  void normalize(std::string& text) const override {
    thread_local const std::unique_ptr<icu::BreakIterator> graphemes = [] {
      UErrorCode status = U_ZERO_ERROR;
      std::unique_ptr<icu::BreakIterator> it(
          icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), status));
      if (U_FAILURE(status)) {
        throw Error(str("ICU has no grapheme break iterator: ", u_errorName(status)));
      }
      return it;
    }();
    UErrorCode status = U_ZERO_ERROR;
    UText utext = UTEXT_INITIALIZER;
    utext_openUTF8(&utext, text.data(), static_cast<int64_t>(text.size()), &status);
    graphemes->setText(&utext, status);
    if (U_FAILURE(status)) throw Error(str("ICU grapheme breaking failed: ", u_errorName(status)));
    std::string out;
    out.reserve(text.size());
    const std::string_view view = text;
    int32_t begin = graphemes->first();
    int32_t end = graphemes->next();
    while (end != icu::BreakIterator::DONE) {
      int32_t next = graphemes->next();
      // A cluster opening with a newer mark joins the one before (not after a control).
      while (next != icu::BreakIterator::DONE && joins_previous(view, begin, end)) {
        end = next;
        next = graphemes->next();
      }
      append_grapheme(view.substr(begin, end - begin), out);
      begin = end;
      end = next;
    }
    utext_close(&utext);
    text = std::move(out);
  }

 private:
  // Whether the character at `end` extends the cluster [begin, end) in Unicode 17 (HF's
  // unicode-segmentation 1.13) where ICU's older Unicode has it unassigned, so a break before it:
  // the Extend and SpacingMark characters of Unicode 16 and 17 (found by sweeping every code
  // point after a character the charsmap maps, against HF).
  static bool joins_previous(std::string_view text, int32_t begin, int32_t end) {
    static constexpr std::pair<char32_t, char32_t> kLateMarks[] = {
        {0x0897, 0x0897},   {0x1ACF, 0x1ADD},   {0x1AE0, 0x1AEB},   {0x10D69, 0x10D6D},
        {0x10EFA, 0x10EFC}, {0x113B8, 0x113C0}, {0x113C2, 0x113C2}, {0x113C5, 0x113C5},
        {0x113C7, 0x113CA}, {0x113CC, 0x113D0}, {0x113D2, 0x113D2}, {0x113E1, 0x113E2},
        {0x11B60, 0x11B67}, {0x11F5A, 0x11F5A}, {0x1611E, 0x1612F}, {0x1E5EE, 0x1E5EF},
        {0x1E6E3, 0x1E6E3}, {0x1E6E6, 0x1E6E6}, {0x1E6EE, 0x1E6EF}, {0x1E6F5, 0x1E6F5}};
    size_t pos = static_cast<size_t>(end);
    if (pos >= text.size()) return false;
    const char32_t c = next_char(text, pos);
    const bool late = std::any_of(std::begin(kLateMarks), std::end(kLateMarks),
                                  [&](const auto& r) { return c >= r.first && c <= r.second; });
    if (!late) return false;
    size_t last = static_cast<size_t>(end) - 1;
    while (last > static_cast<size_t>(begin) && (static_cast<uint8_t>(text[last]) & 0xC0) == 0x80) {
      --last;
    }
    const auto gcb = u_getIntPropertyValue(next_char(text, last), UCHAR_GRAPHEME_CLUSTER_BREAK);
    return gcb != U_GCB_CONTROL && gcb != U_GCB_CR && gcb != U_GCB_LF;
  }

  // HF's Precompiled::normalize: a grapheme under 6 bytes replaced whole when the trie knows a
  // prefix of it (the replacement of the shortest such prefix, the rest of the grapheme
  // dropped); else each character replaced by its own entry or kept.
  void append_grapheme(std::string_view grapheme, std::string& out) const {
    if (grapheme.size() < 6) {
      if (auto norm = transform(grapheme)) {
        out += *norm;
        return;
      }
    }
    size_t pos = 0;
    while (pos < grapheme.size()) {
      const size_t begin = pos;
      next_char(grapheme, pos);
      const std::string_view c = grapheme.substr(begin, pos - begin);
      out += transform(c).value_or(c);
    }
  }

  // spm_precompiled's transform: the replacement of the first (shortest) key `chunk` starts with.
  std::optional<std::string_view> transform(std::string_view chunk) const {
    const auto offset = first_prefix_value(chunk);
    if (!offset) return std::nullopt;
    if (*offset > normalized_.size() ||
        (*offset < normalized_.size() &&
         (static_cast<uint8_t>(normalized_[*offset]) & 0xC0) == 0x80)) {
      throw Error(str("Precompiled: the charsmap's trie points at byte ", *offset,
                      " of its normalized strings, not the start of one (", source_, ")"));
    }
    const size_t end = normalized_.find('\0', *offset);
    return std::string_view(normalized_)
        .substr(*offset, end == std::string::npos ? std::string::npos : end - *offset);
  }

  // Darts-clone's common prefix search, stopped at the first key found (or a NUL byte).
  // A unit: bits 0-7 the label (bit 31 too, so that a leaf never matches), bit 8 "has a leaf",
  // bits 10-31 the offset (shifted left 8 more when bit 9 is set); a leaf's bits 0-30 its value.
  std::optional<size_t> first_prefix_value(std::string_view key) const {
    const auto label = [](uint32_t u) { return u & ((1u << 31) | 0xFFu); };
    const auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    size_t pos = offset(trie_[0]);
    for (const char ch : key) {
      const auto c = static_cast<uint8_t>(ch);
      if (c == 0) break;
      pos ^= c;
      if (pos >= trie_.size() || label(trie_[pos]) != c) return std::nullopt;
      const uint32_t unit = trie_[pos];
      pos ^= offset(unit);
      if ((unit >> 8) & 1) {
        if (pos >= trie_.size()) return std::nullopt;
        return trie_[pos] & ((1u << 31) - 1);
      }
    }
    return std::nullopt;
  }

  std::vector<uint32_t> trie_;
  std::string normalized_;
  std::string source_;
};

}  // namespace

std::unique_ptr<Normalizer> make_precompiled_normalizer(const Node& node) {
  return std::make_unique<Precompiled>(node);
}

}  // namespace shardformer::tokenizer::detail
