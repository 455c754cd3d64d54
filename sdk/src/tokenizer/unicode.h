// Internal Unicode support of the WordPiece tokenizer: UTF-8 conversion, the character classes
// BERT normalization needs, lowercasing and canonical (NFD/NFC) normalization, each in the
// flavour of the HF implementation being reproduced. Tables: unicode_tables.inc (generated).
#pragma once

#include <string>
#include <string_view>

namespace shardformer::tokenizer::detail {

// Whose character data a function follows. The Rust `tokenizers` library (tokenizer.json) and
// transformers' slow Python BertTokenizer (vocab.txt) disagree on a few hundred code points
// (characters added in recent Unicode versions, U+1C..U+1F, part of CJK extension E);
// unicode_tables.inc records both, checked over every code point when it is generated.
enum class Flavor { kTokenizers, kPython };

// Decodes UTF-8. Throws shardformer::Error naming `what` and the byte offset of an invalid
// sequence (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::u32string decode_utf8(std::string_view text, std::string_view what);
void append_utf8(char32_t cp, std::string& out);
std::string encode_utf8(std::u32string_view text);

// Removed by clean_text (besides U+0000 and U+FFFD): tokenizers' is_control (Cc, Cf, Co, Cs
// in its own tables) or the slow tokenizer's _is_control (any C* category, unassigned included).
bool is_control(char32_t cp, Flavor flavor);
// Turned into ' ' by clean_text: Rust char::is_whitespace, or ' ', \t, \n, \r and Zs in Python.
bool is_clean_space(char32_t cp, Flavor flavor);
// Where words split: Rust char::is_whitespace (BertPreTokenizer), or Python str.isspace()
// (whitespace_tokenize's str.split()).
bool is_split_space(char32_t cp, Flavor flavor);
// BERT punctuation: every ASCII non-alphanumeric printable character and the P* categories.
bool is_punctuation(char32_t cp, Flavor flavor);
// The CJK ideograph ranges that handle_chinese_chars surrounds with spaces.
bool is_chinese_char(char32_t cp, Flavor flavor);
// General category Mn: what strip_accents drops after NFD.
bool is_nonspacing_mark(char32_t cp, Flavor flavor);

// Canonical decomposition (NFD): full decomposition, Hangul included, then canonical ordering.
std::u32string nfd(std::u32string_view text, Flavor flavor);
// Canonical composition (NFC) as Python's unicodedata.normalize("NFC", ...).
std::u32string nfc(std::u32string_view text);

// Lowercases: code point by code point as Rust's char::to_lowercase (kTokenizers), or as
// Python's str.lower(), whose U+03A3 becomes final sigma U+03C2 at the end of a word (kPython).
std::u32string lowercase(std::u32string_view text, Flavor flavor);

}  // namespace shardformer::tokenizer::detail
