#include "model/byte_level.h"

#include <array>

#include "model/utf8.h"

namespace dsv4 {

namespace {

bool maps_to_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr uint32_t kSymbols = 256 + 68;  // code points [0, 324) hold every symbol

struct Alphabet {
  std::array<uint32_t, 256> symbol{};     // byte -> code point
  std::array<int, kSymbols> byte{};       // code point -> byte, -1 for none
  Alphabet() {
    byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = maps_to_itself(b) ? static_cast<uint32_t>(b) : next++;
      symbol[static_cast<size_t>(b)] = cp;
      byte[cp] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string bytes_to_symbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, alphabet().symbol[static_cast<uint8_t>(c)]);
  return out;
}

std::optional<uint8_t> symbol_byte(uint32_t cp) {
  if (cp >= kSymbols || alphabet().byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(alphabet().byte[cp]);
}

std::string token_bytes(std::string_view token) {
  std::string out;
  size_t i = 0;
  while (i < token.size()) {
    const auto byte = symbol_byte(next_code_point(token, i));
    if (!byte) return std::string(token);
    out += static_cast<char>(*byte);
  }
  return out;
}

}  // namespace dsv4
