// Text <-> token ids as HF tokenizers does for a checkpoint's tokenizer.json (byte-level
// BPE; issue 14) plus tokenizer_config.json's BOS policy. Encoding: added tokens are
// matched first (leftmost-longest; non-normalized ones before normalized ones, as HF's
// AddedVocabulary does), the rest is pre-tokenized (model/pre_tokenizer.h) and each
// piece BPE-encoded (model/bpe.h). Decoding: every token's bytes, concatenated, as
// lossy UTF-8 (model/utf8.h). Input text that is not valid UTF-8 is read lossily first
// (each invalid subsequence becomes U+FFFD, as a WHATWG TextDecoder reads it).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/bpe.h"
#include "model/pre_tokenizer.h"

namespace dsv4 {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;     // skipped by decode(skip_special = true)
  bool normalized = false;  // matched after the non-normalized ones (no normalizer here)
};

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
  static Tokenizer load(const std::string& dir);
  // The parsed files; `where` names them in errors. `config` may be null.
  Tokenizer(const nlohmann::json& tokenizer, const nlohmann::json& config,
            const std::string& where);

  // HF's encode(text) without special tokens added (the post-processor adds none).
  // match_added = false encodes added-token text as plain text (chat message content).
  std::vector<int32_t> encode(std::string_view text, bool match_added = true) const;
  // encode(text) after BOS when tokenizer_config.json's add_bos_token is true.
  std::vector<int32_t> encode_prompt(std::string_view text) const;
  // HF's decode(ids, skip_special_tokens). Throws Error on an id outside the vocabulary.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // The bytes one token stands for ("" for a special token when skip_special).
  std::string token_bytes_of(int32_t id, bool skip_special) const;

  int32_t bos_id() const { return bos_; }   // -1: none configured
  int32_t eos_id() const { return eos_; }
  bool adds_bos() const { return add_bos_; }
  // The id of a token text (added or in the vocabulary), -1 when it has none.
  int32_t token_id(const std::string& token) const;
  int64_t vocab_size() const { return static_cast<int64_t>(id_to_token_.size()); }

 private:
  void split_added(std::string_view text, bool normalized, std::vector<int32_t>& out,
                   bool last_pass) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;

  BpeModel model_;
  PreTokenizer pre_;
  std::vector<AddedToken> added_;                  // sorted longest first
  std::array<bool, 256> starts_added_{};           // first bytes of added tokens
  std::unordered_map<int32_t, size_t> added_by_id_;
  std::vector<std::string> id_to_token_;           // [max id + 1], "" for holes
  int32_t bos_ = -1, eos_ = -1;
  bool add_bos_ = false;
};

// Incremental detokenization for streaming: push() returns the text that is final
// after each token, holding back a character that the next token may complete, so the
// concatenation of every push() and finish() equals decode(all ids).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}
  std::string push(int32_t id);
  std::string finish();  // the held-back bytes (lossy)

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes of an unfinished character
};

}  // namespace dsv4
