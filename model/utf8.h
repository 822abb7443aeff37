// UTF-8 helpers for the tokenizer: lossy decoding that replaces each maximal invalid
// subsequence with U+FFFD (Unicode §3.9 "substitution of maximal subparts", what HF
// tokenizers' String::from_utf8_lossy and the WHATWG TextDecoder do), and the complete
// prefix of a byte stream (what a streaming decoder may emit without breaking a
// character that the next token may finish).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsv4 {

// bytes as valid UTF-8, every maximal invalid subsequence replaced by U+FFFD.
std::string utf8_lossy(std::string_view bytes);
// The length of the longest prefix of `bytes` that does not end inside a valid but
// incomplete character: the tail after it (at most 3 bytes) may still be completed.
size_t utf8_complete_prefix(std::string_view bytes);
// Appends the UTF-8 encoding of code point cp (< 0x110000, not a surrogate).
void append_utf8(std::string& out, uint32_t cp);
// Decodes the code point starting at s[i] of valid UTF-8 and advances i.
uint32_t next_code_point(std::string_view s, size_t& i);

}  // namespace dsv4
