#include "stage/replay_drafter.h"

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "base/error.h"
#include "model/json_strict.h"

namespace dsv4 {
namespace {

constexpr std::string_view kCorruptKey = "corrupt=";

int parse_index(const std::string& item, const std::string& text) {
  size_t used = 0;
  int r = 0;
  try {
    r = std::stoi(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (item.empty() || used != item.size() || r < 1)
    throw Error(cat("--drafter replay:", text, ": corrupt index '", item,
                    "' is not a draft index >= 1"));
  return r;
}

void append_ids(const nlohmann::json& j, const char* key, const std::string& file,
                std::vector<int32_t>& out) {
  if (!j.contains(key)) return;
  const nlohmann::json& a = j.at(key);
  if (!a.is_array()) throw Error(cat("replay file ", file, ": \"", key, "\" is not an array"));
  for (size_t i = 0; i < a.size(); ++i) {
    // Full width first: a recorded id past 32 bits is refused, not truncated.
    if (!a[i].is_number_integer() || (a[i].is_number_unsigned() && a[i].get<uint64_t>() > INT32_MAX) ||
        a[i].get<int64_t>() < 0 || a[i].get<int64_t>() > INT32_MAX)
      throw Error(cat("replay file ", file, ": \"", key, "\"[", i, "] = ", a[i].dump(),
                      " is not a token id in [0, 2147483647]"));
    out.push_back(static_cast<int32_t>(a[i].get<int64_t>()));
  }
}

}  // namespace

ReplaySpec parse_replay_spec(const std::string& text) {
  ReplaySpec s;
  s.file = text;
  const size_t colon = text.rfind(':');
  if (colon != std::string::npos && text.compare(colon + 1, kCorruptKey.size(), kCorruptKey) == 0) {
    s.file = text.substr(0, colon);
    std::stringstream list(text.substr(colon + 1 + kCorruptKey.size()));
    for (std::string item; std::getline(list, item, ',');) s.corrupt.push_back(parse_index(item, text));
    if (s.corrupt.empty()) throw Error(cat("--drafter replay:", text, ": empty corrupt list"));
    std::sort(s.corrupt.begin(), s.corrupt.end());
    s.corrupt.erase(std::unique(s.corrupt.begin(), s.corrupt.end()), s.corrupt.end());
  }
  if (s.file.empty()) throw Error(cat("--drafter replay:", text, ": no file named"));
  return s;
}

std::vector<int32_t> read_replay_tokens(const std::string& file) {
  nlohmann::json j;
  try {
    j = load_json_strict(file);  // a repeated key is refused, not silently overridden
  } catch (const Error& e) {
    throw Error(cat("replay file ", e.what()));
  }
  if (!j.is_object() || !j.contains("tokens"))
    throw Error(cat("replay file ", file, ": no \"tokens\" array"));
  std::vector<int32_t> seq;
  append_ids(j, "prompt", file, seq);
  append_ids(j, "tokens", file, seq);
  return seq;
}

ReplayDrafter::ReplayDrafter(std::vector<int32_t> sequence, std::vector<int> corrupt,
                             int block_size, int64_t vocab, int32_t fallback)
    : seq_(std::move(sequence)), corrupt_(std::move(corrupt)), B_(block_size), vocab_(vocab),
      fallback_(fallback) {
  if (B_ < 1) throw Error(cat("replay drafter: block size ", B_, " < 1"));
  for (size_t m = 0; m < seq_.size(); ++m)
    if (seq_[m] < 0 || seq_[m] >= vocab_)
      throw Error(cat("replay drafter: recorded token ", seq_[m], " at position ", m,
                      " outside [0, vocab_size ", vocab_, ")"));
  for (int r : corrupt_)
    if (r < 1 || r > B_)
      throw Error(cat("replay drafter: corrupt index ", r, " outside [1, block size ", B_, "]"));
  if (fallback_ < 0 || fallback_ >= vocab_)
    throw Error(cat("replay drafter: fallback token ", fallback_, " outside [0, ", vocab_, ")"));
}

Proposal ReplayDrafter::propose(int32_t head, int64_t anchor) {
  if (anchor < 0) throw Error(cat("replay drafter: anchor ", anchor, " < 0"));
  Proposal p;
  p.out_ids.assign(B_ + 1, fallback_);
  p.out_ids[0] = head;
  const int64_t m0 = anchor + 1;
  for (int j = 1; j <= B_; ++j) {
    const int64_t m = m0 + j;  // draft j is for position m0 + j
    if (m < static_cast<int64_t>(seq_.size())) p.out_ids[j] = seq_[m];
  }
  for (int r : corrupt_) p.out_ids[r] = static_cast<int32_t>((p.out_ids[r] + 1) % vocab_);
  p.confidence.assign(B_, 0.0f);
  return p;
}

}  // namespace dsv4
