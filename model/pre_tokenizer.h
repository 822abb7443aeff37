// The pre-tokenizer of a tokenizer.json (HF tokenizers): a Sequence of regex Splits
// (behavior Isolated: every match and every gap between matches is a piece) followed
// by ByteLevel without its own regex, as DeepSeek's tokenizers use. The regexes run in
// ICU, whose Unicode properties match HF's splits (issue 14). Anything else is refused
// with an Error naming the field.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dsv4 {

// False in a build without ICU (model/no_icu), where constructing one throws.
bool pre_tokenizer_available();

class PreTokenizer {
 public:
  // `spec` is tokenizer.json's "pre_tokenizer"; `where` names the file in errors.
  PreTokenizer(const nlohmann::json& spec, const std::string& where);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;

  // The pieces of valid UTF-8 `text`, each already mapped to byte-level symbols.
  std::vector<std::string> split(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv4
