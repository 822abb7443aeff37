// A small tokenizer for synthetic checkpoints (issue 14): the DeepSeek format exactly
// (tokenizer.json with the DeepSeek pre-tokenizer and byte-level BPE, and
// tokenizer_config.json), with the vocabulary sized to the model's vocab_size:
//   ids 0..6    BOS, EOS (config.json's bos/eos ids must be 0 and 1), <｜▁pad▁｜>,
//               <｜User｜>, <｜Assistant｜>, <think>, </think> (added tokens)
//   ids 7..262  the 256 byte-level symbols in byte order
//   ids 263..   merges learnt greedily (most frequent pair, ties by the pair's text)
//               from a fixed English + code sample, until vocab_size is reached.
#pragma once
#include <nlohmann/json.hpp>

#include "model/config.h"

namespace dsv4 {

// Throws Error when vocab_size cannot hold the added tokens and bytes, or the sample
// runs out of pairs before vocab_size.
nlohmann::json tiny_tokenizer_json(const ModelConfig& c);
nlohmann::json tiny_tokenizer_config_json(const ModelConfig& c);

}  // namespace dsv4
