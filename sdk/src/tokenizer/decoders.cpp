// tokenizer.json's decoders (ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace,
// WordPiece, BPEDecoder, Sequence): tokens back to text pieces, as HF tokenizers' decode_chain.
#include "pipeline.h"
#include "tokenizer_data.h"
#include "unicode.h"

#include <array>

namespace shardformer::tokenizer::detail {

namespace {

// Each token's byte-level characters back to bytes (a token with any other character is kept
// as it is), all joined and read as UTF-8 with invalid sequences replaced.
class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      std::string mapped;
      bool all = true;
      size_t pos = 0;
      while (pos < token.size() && all) {
        const auto byte = char_to_byte(next_char(token, pos));
        if (byte) {
          mapped += static_cast<char>(*byte);
        } else {
          all = false;
        }
      }
      bytes += all ? mapped : token;
    }
    tokens = {utf8_lossy(bytes)};
  }
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, PrependScheme scheme)
      : replacement_(replacement), scheme_(scheme) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      size_t pos = 0;
      while (pos < tokens[i].size()) {
        const size_t begin = pos;
        if (next_char(tokens[i], pos) != replacement_) {
          out.append(tokens[i], begin, pos - begin);
        } else if (i != 0 || scheme_ == PrependScheme::kNever) {
          out += ' ';
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  PrependScheme scheme_;
};

// Runs of "<0xXX>" tokens become the text of their bytes, or one U+FFFD per byte when the run
// is not valid UTF-8.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t run = 0;
    const auto flush = [&] {
      if (run == 0) return;
      if (utf8_lossy(bytes) == bytes) {
        out.push_back(bytes);
      } else {
        for (size_t i = 0; i < run; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
      run = 0;
    };
    for (std::string& token : tokens) {
      if (auto byte = parse_byte(token)) {
        bytes += static_cast<char>(*byte);
        ++run;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static std::optional<uint8_t> parse_byte(std::string_view token) {
    if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
    int value = 0;
    for (const char c : token.substr(3, 2)) {
      int digit = -1;
      if (c >= '0' && c <= '9') digit = c - '0';
      if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
      if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
      if (digit < 0) return std::nullopt;
      value = value * 16 + digit;
    }
    return static_cast<uint8_t>(value);
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const std::string& t : tokens) joined += t;
    tokens = {joined};
  }
};

// Up to `start` leading and `stop` trailing copies of one character off every token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::u32string chars = decode_utf8(token, "token");
      size_t begin = 0;
      size_t end = chars.size();
      while (begin < end && begin < start_ && chars[begin] == content_) ++begin;
      while (end > begin && chars.size() - end < stop_ && chars[end - 1] == content_) --end;
      token = encode_utf8(std::u32string_view(chars).substr(begin, end - begin));
    }
  }

 private:
  char32_t content_;
  size_t start_;
  size_t stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(Regex pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace_all(token, content_);
  }

 private:
  Regex pattern_;
  std::string content_;
};

// "##" continuation pieces glued on, every other token after a space.
class WordPieceDecoder final : public Decoder {
 public:
  WordPieceDecoder(std::string prefix, bool cleanup)
      : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i != 0) {
        if (token.starts_with(prefix_)) {
          token.erase(0, prefix_.size());
        } else {
          token.insert(0, " ");
        }
      }
      if (cleanup_) clean_up_tokenization(token);
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

// The end-of-word suffix becomes a space (none after the last token).
class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string space = i + 1 == tokens.size() ? "" : " ";
      std::string out;
      size_t previous = 0;
      std::string& token = tokens[i];
      for (size_t at = token.find(suffix_); !suffix_.empty() && at != std::string::npos;
           at = token.find(suffix_, previous)) {
        out.append(token, previous, at - previous);
        out += space;
        previous = at + suffix_.size();
      }
      out.append(token, previous);
      token = std::move(out);
    }
  }

 private:
  std::string suffix_;
};

class DecoderSequence final : public Decoder {
 public:
  explicit DecoderSequence(std::vector<std::unique_ptr<Decoder>> stages)
      : stages_(std::move(stages)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& stage : stages_) stage->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> stages_;
};

}  // namespace

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  size_t at = 0;
  while ((at = text.find(from, at)) != std::string::npos) {
    text.replace(at, from.size(), to);
    at += to.size();
  }
}

void clean_up_tokenization(std::string& text) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kRules = {{
      {" .", "."},
      {" ?", "?"},
      {" !", "!"},
      {" ,", ","},
      {" ' ", "'"},
      {" n't", "n't"},
      {" 'm", "'m"},
      {" 's", "'s"},
      {" 've", "'ve"},
      {" 're", "'re"},
  }};
  for (const auto& [from, to] : kRules) replace_all(text, from, to);
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  size_t i = 0;
  const auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  while (i < bytes.size()) {
    const unsigned char lead = at(i);
    if (lead < 0x80) {
      out += static_cast<char>(lead);
      ++i;
      continue;
    }
    size_t need = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      need = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      need = 2;
      if (lead == 0xE0) low = 0xA0;
      if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      need = 3;
      if (lead == 0xF0) low = 0x90;
      if (lead == 0xF4) high = 0x8F;
    }
    size_t len = 1;
    bool ok = need > 0;
    for (size_t k = 1; ok && k <= need; ++k) {
      if (i + k >= bytes.size()) {
        ok = false;
        break;
      }
      const unsigned char c = at(i + k);
      const unsigned char lo = k == 1 ? low : 0x80;
      const unsigned char hi = k == 1 ? high : 0xBF;
      if (c < lo || c > hi) {
        ok = false;
        break;
      }
      ++len;
    }
    if (ok) {
      out.append(bytes.substr(i, need + 1));
      i += need + 1;
    } else {
      out += "\xEF\xBF\xBD";
      i += len;
    }
  }
  return out;
}

std::unique_ptr<Decoder> make_decoder(const Node& node) {
  if (node.value.is_null()) return nullptr;
  node.object();
  const std::string type = node["type"].string();
  if (type == "ByteLevel") {
    node.only_keys({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_unique<ByteLevelDecoder>();
  }
  if (type == "Metaspace") {
    return std::make_unique<MetaspaceDecoder>(single_char(node["replacement"]),
                                              read_prepend_scheme(node));
  }
  if (type == "ByteFallback" || type == "Fuse") {
    node.only_keys({"type"});
    if (type == "Fuse") return std::make_unique<Fuse>();
    return std::make_unique<ByteFallback>();
  }
  if (type == "Strip") {
    node.only_keys({"type", "content", "start", "stop"});
    return std::make_unique<StripDecoder>(single_char(node["content"]), node["start"].size(),
                                          node["stop"].size());
  }
  if (type == "Replace") {
    node.only_keys({"type", "pattern", "content"});
    return std::make_unique<ReplaceDecoder>(read_pattern(node["pattern"]),
                                            node["content"].string());
  }
  if (type == "WordPiece") {
    node.only_keys({"type", "prefix", "cleanup"});
    return std::make_unique<WordPieceDecoder>(node.has("prefix") ? node["prefix"].string() : "##",
                                              !node.has("cleanup") || node["cleanup"].boolean());
  }
  if (type == "BPEDecoder") {
    node.only_keys({"type", "suffix"});
    return std::make_unique<BpeDecoder>(node.has("suffix") ? node["suffix"].string() : "</w>");
  }
  if (type == "Sequence") {
    node.only_keys({"type", "decoders"});
    const Node list = node["decoders"];
    if (!list.value.is_array()) list.fail_type("an array");
    std::vector<std::unique_ptr<Decoder>> stages;
    for (size_t i = 0; i < list.value.size(); ++i) {
      if (auto stage = make_decoder(list.at(i))) stages.push_back(std::move(stage));
    }
    return std::make_unique<DecoderSequence>(std::move(stages));
  }
  node["type"].fail(str("decoder \"", type,
                        "\" is not supported (supported: ByteLevel, Metaspace, ByteFallback, "
                        "Fuse, Strip, Replace, WordPiece, BPEDecoder, Sequence)"));
}

}  // namespace shardformer::tokenizer::detail
