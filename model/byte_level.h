// The byte-level alphabet of GPT-2 style BPE (HF tokenizers' ByteLevel pre-tokenizer and
// decoder): each byte 0..255 is one printable code point, so any byte string is a string
// of vocabulary symbols. Printable Latin-1 bytes map to themselves, the other 68 bytes
// to U+0100.. in byte order (space -> U+0120 'Ġ', newline -> U+010A 'Ċ').
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsv4 {

// UTF-8 of the byte-level symbols of `bytes` (ByteLevel pre-tokenizer, use_regex false).
std::string bytes_to_symbols(std::string_view bytes);
// The byte a symbol code point stands for, none when cp is not a byte-level symbol.
std::optional<uint8_t> symbol_byte(uint32_t cp);
// A vocabulary token's bytes (ByteLevel decoder): every code point mapped back to its
// byte; a token with any code point outside the alphabet (an added token such as
// "<｜User｜>") stands for its own UTF-8 bytes, as HF's decoder does.
std::string token_bytes(std::string_view token);

}  // namespace dsv4
