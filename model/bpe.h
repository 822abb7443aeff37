// The BPE model of a tokenizer.json (HF tokenizers "model": {"type": "BPE"}): the
// vocabulary and the ranked merges. A word (one pre-tokenized piece of byte-level
// symbols) starts as one symbol per code point; the adjacent pair of lowest merge rank
// is merged, the leftmost first among equal ranks, until no pair has a merge (HF's
// Word::merge_all order, without dropout).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dsv4 {

class BpeModel {
 public:
  // `spec` is tokenizer.json's "model"; `where` names the file in errors.
  BpeModel(const nlohmann::json& spec, const std::string& where);

  // Appends the ids of one word (UTF-8 byte-level symbols) to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // -1 when the token is not in the vocabulary.
  int32_t token_id(const std::string& token) const;
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank, id;  // priority and the merged symbol's id
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace dsv4
