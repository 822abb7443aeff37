#include "stage/replay_drafter.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "base/error.h"
#include "model/json_strict.h"

namespace dsv4 {
namespace {

// Comma-separated items of an option value; each non-empty.
std::vector<std::string> items(const std::string& value, char sep, const std::string& what) {
  std::vector<std::string> out;
  std::stringstream list(value);
  for (std::string item; std::getline(list, item, sep);) out.push_back(item);
  if (out.empty() || value.back() == sep) throw Error(cat(what, ": empty item in '", value, "'"));
  return out;
}

int parse_index(const std::string& item, const std::string& what) {
  size_t used = 0;
  int r = 0;
  try {
    r = std::stoi(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (item.empty() || used != item.size() || r < 1)
    throw Error(cat(what, ": corrupt index '", item, "' is not a draft index >= 1"));
  return r;
}

float parse_logit(const std::string& item, const std::string& what) {
  size_t used = 0;
  float v = NAN;
  try {
    v = std::stof(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (item.empty() || used != item.size() || !std::isfinite(v))
    throw Error(cat(what, ": confidence '", item, "' is not a finite number"));
  return v;
}


// Applies option key=value; false when `key` is not an option (then it is part of the file).
bool apply_option(const std::string& key, const std::string& value, const std::string& what,
                  ReplayScript& s) {
  if (key == "corrupt") {
    for (const std::string& item : items(value, ',', what)) s.corrupt.push_back(parse_index(item, what));
    std::sort(s.corrupt.begin(), s.corrupt.end());
    s.corrupt.erase(std::unique(s.corrupt.begin(), s.corrupt.end()), s.corrupt.end());
  } else if (key == "confidence") {
    for (const std::string& group : items(value, '/', what)) {
      s.confidence.emplace_back();
      for (const std::string& item : items(group, ',', what))
        s.confidence.back().push_back(parse_logit(item, what));
    }
  } else if (key == "accept_len") {
    s.accept_len_milli = parse_accept_len_milli(value, what);
  } else {
    return false;
  }
  return true;
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

int64_t parse_accept_len_milli(const std::string& value, const std::string& what) {
  const size_t dot = value.find('.');
  const std::string whole = value.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : value.substr(dot + 1);
  auto digits = [](const std::string& t) {
    return std::all_of(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  };
  if (whole.empty() || whole.size() > 6 || !digits(whole) || frac.size() > 3 || !digits(frac) ||
      (dot != std::string::npos && frac.empty()))
    throw Error(cat(what, ": accept_len '", value, "' is not a number with at most 3 decimals"));
  const int64_t milli = std::stoll(whole) * 1000 + std::stoll((frac + "000").substr(0, 3));
  if (milli < 1000) throw Error(cat(what, ": accept_len ", value, " < 1 (a round emits >= 1 token)"));
  return milli;
}

ReplaySpec parse_replay_spec(const std::string& text) {
  const std::string what = cat("--drafter replay:", text);
  ReplaySpec s;
  s.file = text;
  std::vector<std::string> seen;
  for (size_t colon = s.file.rfind(':'); colon != std::string::npos; colon = s.file.rfind(':')) {
    const std::string option = s.file.substr(colon + 1);
    const size_t eq = option.find('=');
    if (eq == std::string::npos) break;
    const std::string key = option.substr(0, eq);
    if (std::count(seen.begin(), seen.end(), key))
      throw Error(cat(what, ": option '", key, "' given twice"));
    if (!apply_option(key, option.substr(eq + 1), what, s.script)) break;
    seen.push_back(key);
    s.file.resize(colon);
  }
  if (s.file.empty()) throw Error(cat(what, ": no file named"));
  if (s.script.accept_len_milli && !s.script.corrupt.empty())
    throw Error(cat(what, ": corrupt and accept_len both choose the rejected drafts; give one"));
  return s;
}

std::vector<int32_t> read_replay_tokens(const std::string& file) {
  // A repeated key is refused, not silently overridden.
  const nlohmann::json j = load_json_strict(file, "replay file");
  if (!j.is_object() || !j.contains("tokens"))
    throw Error(cat("replay file ", file, ": no \"tokens\" array"));
  std::vector<int32_t> seq;
  append_ids(j, "prompt", file, seq);
  append_ids(j, "tokens", file, seq);
  return seq;
}

ReplayDrafter::ReplayDrafter(std::vector<int32_t> sequence, ReplayScript script, int block_size,
                             int64_t vocab, int32_t fallback)
    : seq_(std::move(sequence)), script_(std::move(script)), B_(block_size), vocab_(vocab),
      fallback_(fallback) {
  if (B_ < 1) throw Error(cat("replay drafter: block size ", B_, " < 1"));
  for (size_t m = 0; m < seq_.size(); ++m)
    if (seq_[m] < 0 || seq_[m] >= vocab_)
      throw Error(cat("replay drafter: recorded token ", seq_[m], " at position ", m,
                      " outside [0, vocab_size ", vocab_, ")"));
  for (int r : script_.corrupt)
    if (r < 1 || r > B_)
      throw Error(cat("replay drafter: corrupt index ", r, " outside [1, block size ", B_, "]"));
  for (size_t k = 0; k < script_.confidence.size(); ++k)
    if (static_cast<int>(script_.confidence[k].size()) != B_)
      throw Error(cat("replay drafter: confidence group ", k + 1, " has ",
                      script_.confidence[k].size(), " logits, a proposal has block size ", B_));
  if (script_.accept_len_milli > 1000 * static_cast<int64_t>(B_ + 1))
    throw Error(cat("replay drafter: accept_len ", script_.accept_len_milli / 1000.0,
                    " exceeds block size + 1 = ", B_ + 1, " tokens per round"));
  if (fallback_ < 0 || fallback_ >= vocab_)
    throw Error(cat("replay drafter: fallback token ", fallback_, " outside [0, ", vocab_, ")"));
}

Proposal ReplayDrafter::propose(int32_t head, int64_t anchor) {
  if (anchor < 0) throw Error(cat("replay drafter: anchor ", anchor, " < 0"));
  const int64_t k = proposals_++;
  Proposal p;
  p.out_ids.assign(B_ + 1, fallback_);
  p.out_ids[0] = head;
  const int64_t m0 = anchor + 1;
  for (int j = 1; j <= B_; ++j) {
    const int64_t m = m0 + j;  // draft j is for position m0 + j
    if (m < static_cast<int64_t>(seq_.size())) p.out_ids[j] = seq_[m];
  }
  std::vector<int> corrupt = script_.corrupt;
  if (const int64_t x = script_.accept_len_milli) {
    const int L = scripted_accept_len(k, x);
    if (L <= B_) corrupt = {L};
  }
  for (int r : corrupt) p.out_ids[r] = static_cast<int32_t>((p.out_ids[r] + 1) % vocab_);
  const auto& groups = script_.confidence;
  p.confidence = groups.empty() ? std::vector<float>(B_, 0.0f)
                                : groups[static_cast<size_t>(k) % groups.size()];
  return p;
}

}  // namespace dsv4
