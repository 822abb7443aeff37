#include "model/pre_tokenizer.h"

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <nlohmann/json.hpp>

#include "model/byte_level.h"
#include "base/error.h"

namespace dsv4 {

bool pre_tokenizer_available() { return true; }


struct PreTokenizer::Impl {
  std::vector<std::unique_ptr<icu::RegexPattern>> splits;  // applied in order
};

namespace {

std::unique_ptr<icu::RegexPattern> compile_split(const nlohmann::json& s, const std::string& where) {
  const std::string behavior = s.value("behavior", "");
  if (behavior != "Isolated" || s.value("invert", false))
    throw Error(cat(where, ": Split behavior '", behavior, "'", s.value("invert", false) ? " inverted" : "",
                    " is not supported (only Isolated, not inverted)"));
  if (!s.contains("pattern") || !s["pattern"].contains("Regex"))
    throw Error(cat(where, ": Split without a {\"Regex\": ...} pattern is not supported"));
  const std::string pattern = s["pattern"]["Regex"].get<std::string>();
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse{};
  std::unique_ptr<icu::RegexPattern> re(
      icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(pattern), 0, parse, status));
  if (U_FAILURE(status))
    throw Error(cat(where, ": Split regex does not compile in ICU (", u_errorName(status),
                    " at offset ", parse.offset, "): ", pattern));
  return re;
}

// Isolated split of one piece: matches and the gaps between them, in order.
void split_isolated(const icu::RegexPattern& re, const std::string& piece,
                    std::vector<std::string>& out) {
  const icu::UnicodeString text = icu::UnicodeString::fromUTF8(piece);
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(re.matcher(text, status));
  DSV4_CHECK(U_SUCCESS(status), "ICU matcher: ", u_errorName(status));
  auto emit = [&](int32_t begin, int32_t end) {
    if (end <= begin) return;
    std::string utf8;
    text.tempSubStringBetween(begin, end).toUTF8String(utf8);
    out.push_back(std::move(utf8));
  };
  int32_t last = 0;
  while (m->find(status)) {
    const int32_t begin = m->start(status), end = m->end(status);
    DSV4_CHECK(U_SUCCESS(status), "ICU match: ", u_errorName(status));
    if (end == begin) continue;  // empty matches make no piece
    emit(last, begin);
    emit(begin, end);
    last = end;
  }
  emit(last, text.length());
}

}  // namespace

PreTokenizer::PreTokenizer(const nlohmann::json& spec, const std::string& where)
    : impl_(std::make_unique<Impl>()) {
  const std::string field = cat(where, ": pre_tokenizer");
  if (!spec.is_object() || spec.value("type", "") != "Sequence" || !spec.contains("pretokenizers"))
    throw Error(cat(field, ": expected a Sequence of Splits and ByteLevel"));
  const auto& steps = spec["pretokenizers"];
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string type = steps[i].value("type", "");
    const std::string at = cat(field, ".pretokenizers[", i, "]");
    const bool last = i + 1 == steps.size();
    if (type == "Split" && !last) {
      impl_->splits.push_back(compile_split(steps[i], at));
    } else if (type == "ByteLevel" && last) {
      if (steps[i].value("add_prefix_space", false) || steps[i].value("use_regex", true))
        throw Error(cat(at, ": ByteLevel with add_prefix_space or use_regex is not supported"));
    } else {
      throw Error(cat(at, ": '", type, "' here is not supported (Splits, then one ByteLevel)"));
    }
  }
  if (steps.empty() || steps.back().value("type", "") != "ByteLevel")
    throw Error(cat(field, ": the Sequence must end with ByteLevel"));
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> pieces{std::string(text)};
  for (const auto& re : impl_->splits) {
    std::vector<std::string> next;
    for (const auto& p : pieces) split_isolated(*re, p, next);
    pieces = std::move(next);
  }
  for (auto& p : pieces) p = bytes_to_symbols(p);
  return pieces;
}

}  // namespace dsv4
