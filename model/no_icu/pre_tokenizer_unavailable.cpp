// The pre-tokenizer of a build without ICU (CMakeLists.txt: the GPU machine's image has
// no libicu-dev): loading a tokenizer is refused by name; token-id runs are unaffected.
#include "base/error.h"
#include "model/pre_tokenizer.h"

namespace dsv4 {

bool pre_tokenizer_available() { return false; }

struct PreTokenizer::Impl {};

PreTokenizer::PreTokenizer(const nlohmann::json&, const std::string& where) {
  throw Error(cat(where, ": this build has no ICU (Debian libicu-dev), which the tokenizer's "
                  "pre-tokenizer regexes need: rebuild with ICU, or give token ids (--prompt-ids)"));
}
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
std::vector<std::string> PreTokenizer::split(std::string_view) const { return {}; }

}  // namespace dsv4
