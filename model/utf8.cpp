#include "model/utf8.h"

#include "base/error.h"

namespace dsv4 {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Bytes a sequence starting with `lead` has (0: not a lead byte), and the range its
// second byte must lie in (Unicode Table 3-7: no overlongs, surrogates or > U+10FFFF).
struct LeadRule {
  int length;
  uint8_t second_lo, second_hi;
};

LeadRule lead_rule(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from s[i] form a valid prefix of the character that starts there
// (== rule.length when complete; 0 when s[i] is not a lead byte).
int valid_run(std::string_view s, size_t i, const LeadRule& rule) {
  if (rule.length == 0) return 0;
  int k = 1;
  for (; k < rule.length && i + k < s.size(); ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    const uint8_t lo = k == 1 ? rule.second_lo : 0x80, hi = k == 1 ? rule.second_hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  return k;
}

}  // namespace

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const LeadRule rule = lead_rule(static_cast<uint8_t>(s[i]));
    const int run = valid_run(s, i, rule);
    if (run > 0 && run == rule.length) {
      out.append(s.substr(i, static_cast<size_t>(run)));
      i += static_cast<size_t>(run);
    } else {  // one replacement per maximal subpart (a bad lead byte is a subpart of one)
      out.append(kReplacement);
      i += static_cast<size_t>(run > 0 ? run : 1);
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  const size_t from = s.size() > 3 ? s.size() - 3 : 0;  // a character has <= 4 bytes
  for (size_t i = from; i < s.size(); ++i) {
    const LeadRule rule = lead_rule(static_cast<uint8_t>(s[i]));
    if (rule.length < 2) continue;
    const int run = valid_run(s, i, rule);
    if (run < rule.length && i + static_cast<size_t>(run) == s.size()) return i;
  }
  return s.size();
}

void append_utf8(std::string& out, uint32_t cp) {
  DSV4_CHECK(cp < 0x110000 && (cp < 0xD800 || cp > 0xDFFF), "code point ", cp);
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  const LeadRule rule = lead_rule(b0);
  DSV4_CHECK(rule.length > 0 && i + static_cast<size_t>(rule.length) <= s.size(),
             "invalid UTF-8 at byte ", i);
  uint32_t cp = rule.length == 1 ? b0 : b0 & (0x7F >> rule.length);
  for (int k = 1; k < rule.length; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  i += static_cast<size_t>(rule.length);
  return cp;
}

}  // namespace dsv4
