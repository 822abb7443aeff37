#include "model/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/byte_level.h"
#include "base/error.h"
#include "model/utf8.h"

namespace dsv4 {

namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(cat(path.string(), ": cannot open"));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat(path.string(), ": not valid JSON: ", e.what()));
  }
}

// tokenizer_config.json names a token as a string or as {"content": ...}.
std::string config_token(const nlohmann::json& config, const char* key) {
  if (config.is_null() || !config.contains(key) || config[key].is_null()) return "";
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
  throw Error(cat("tokenizer_config.json: ", key, " is neither a string nor {\"content\": ...}"));
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::filesystem::path base(dir);
  const auto config_path = base / "tokenizer_config.json";
  const nlohmann::json config =
      std::filesystem::exists(config_path) ? read_json(config_path) : nlohmann::json();
  return Tokenizer(read_json(base / "tokenizer.json"), config, (base / "tokenizer.json").string());
}

Tokenizer::Tokenizer(const nlohmann::json& t, const nlohmann::json& config,
                     const std::string& where)
    : model_(t.at("model"), where), pre_(t.at("pre_tokenizer"), where) {
  if (t.contains("normalizer") && !t["normalizer"].is_null()) {
    const auto& n = t["normalizer"];
    const bool empty_sequence = n.value("type", "") == "Sequence" &&
                                n.contains("normalizers") && n["normalizers"].empty();
    if (!empty_sequence) throw Error(cat(where, ": normalizer: only none is supported"));
  }
  if (t.contains("decoder") && t["decoder"].value("type", "") != "ByteLevel")
    throw Error(cat(where, ": decoder: only ByteLevel is supported"));
  for (const auto& a : t.value("added_tokens", nlohmann::json::array())) {
    if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false))
      throw Error(cat(where, ": added token ", a.dump(), ": lstrip / rstrip / single_word are not supported"));
    AddedToken tok{a.at("id").get<int32_t>(), a.at("content").get<std::string>(),
                   a.value("special", false), a.value("normalized", false)};
    if (tok.content.empty()) throw Error(cat(where, ": added token ", tok.id, " has no content"));
    added_.push_back(std::move(tok));
  }
  std::stable_sort(added_.begin(), added_.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  int32_t max_id = -1;
  for (const auto& [token, id] : model_.vocab()) max_id = std::max(max_id, id);
  for (const auto& a : added_) max_id = std::max(max_id, a.id);
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [token, id] : model_.vocab()) id_to_token_[static_cast<size_t>(id)] = token;
  for (size_t i = 0; i < added_.size(); ++i) {
    starts_added_[static_cast<uint8_t>(added_[i].content[0])] = true;
    added_by_id_[added_[i].id] = i;
    id_to_token_[static_cast<size_t>(added_[i].id)] = added_[i].content;
  }

  auto id_of = [&](const char* key) {
    const std::string content = config_token(config, key);
    if (content.empty()) return -1;
    const int32_t id = token_id(content);
    if (id < 0) throw Error(cat("tokenizer_config.json: ", key, " '", content, "' is not a token of ", where));
    return id;
  };
  bos_ = id_of("bos_token");
  eos_ = id_of("eos_token");
  add_bos_ = !config.is_null() && config.value("add_bos_token", false);
  if (add_bos_ && bos_ < 0)
    throw Error("tokenizer_config.json: add_bos_token is true but no bos_token is set");
}

int32_t Tokenizer::token_id(const std::string& token) const {
  for (const auto& a : added_)
    if (a.content == token) return a.id;
  return model_.token_id(token);
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  for (const auto& piece : pre_.split(text)) model_.encode_word(piece, out);
}

// One of HF's two added-token passes: leftmost-longest matches of the tokens whose
// `normalized` flag is `normalized`; the text between matches goes to the next pass.
void Tokenizer::split_added(std::string_view text, bool normalized, std::vector<int32_t>& out,
                            bool last_pass) const {
  auto rest = [&](std::string_view gap) {
    if (gap.empty()) return;
    if (last_pass) encode_plain(gap, out);
    else split_added(gap, true, out, true);
  };
  size_t gap_begin = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = nullptr;
    if (starts_added_[static_cast<uint8_t>(text[i])])
      for (const auto& a : added_)  // longest first
        if (a.normalized == normalized && text.compare(i, a.content.size(), a.content) == 0) {
          hit = &a;
          break;
        }
    if (!hit) {
      ++i;
      continue;
    }
    rest(text.substr(gap_begin, i - gap_begin));
    out.push_back(hit->id);
    i += hit->content.size();
    gap_begin = i;
  }
  rest(text.substr(gap_begin));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool match_added) const {
  const std::string valid = utf8_lossy(text);
  std::vector<int32_t> ids;
  if (match_added) split_added(valid, false, ids, false);
  else encode_plain(valid, ids);
  return ids;
}

std::vector<int32_t> Tokenizer::encode_prompt(std::string_view text) const {
  std::vector<int32_t> ids;
  if (add_bos_) ids.push_back(bos_);
  const auto body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::string Tokenizer::token_bytes_of(int32_t id, bool skip_special) const {
  if (id < 0 || id >= vocab_size() || id_to_token_[static_cast<size_t>(id)].empty())
    throw Error(cat("token id ", id, " is outside the vocabulary (", vocab_size(), " ids)"));
  const auto added = added_by_id_.find(id);
  if (added != added_by_id_.end() && skip_special && added_[added->second].special) return "";
  return token_bytes(id_to_token_[static_cast<size_t>(id)]);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) bytes += token_bytes_of(id, skip_special);
  return utf8_lossy(bytes);
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tokenizer_.token_bytes_of(id, skip_special_);
  const size_t done = utf8_complete_prefix(pending_);
  std::string text = utf8_lossy(std::string_view(pending_).substr(0, done));
  pending_.erase(0, done);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text = utf8_lossy(pending_);
  pending_.clear();
  return text;
}

}  // namespace dsv4
