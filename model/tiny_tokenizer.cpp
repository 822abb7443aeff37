#include "model/tiny_tokenizer.h"

#include <map>
#include <set>

#include "model/byte_level.h"
#include "base/error.h"
#include "model/pre_tokenizer.h"

namespace dsv4 {

namespace {

const char* kBos = "<｜begin▁of▁sentence｜>";
const char* kEos = "<｜end▁of▁sentence｜>";
const std::vector<std::string>& added_contents() {
  static const std::vector<std::string> a{kBos, kEos, "<｜▁pad▁｜>", "<｜User｜>",
                                          "<｜Assistant｜>", "<think>", "</think>"};
  return a;
}

const char* kSample =
    "The engine serves the model across several processes. Each process holds a range of "
    "layers, and the state of the sequence travels from one stage to the next. The first "
    "rank owns the token stream: it reads the prompt, sends every operation, and decides "
    "what is committed. The last rank holds the head, computes the logits and returns the "
    "next token. Hello, world! How are you today? I am fine, thank you. What is the time? "
    "It is ten past four in the afternoon, and the weather is nice and warm.\n"
    "def generate(prompt, max_tokens=16):\n    tokens = encode(prompt)\n    for i in "
    "range(max_tokens):\n        tokens.append(sample(model(tokens)))\n    return "
    "decode(tokens)\n\nint main(int argc, char** argv) {\n  return run(argc, argv);\n}\n";

// The DeepSeek pre-tokenizer (the same three Splits and ByteLevel as DeepSeek-V3).
nlohmann::json deepseek_pre_tokenizer() {
  auto split = [](const char* re) {
    return nlohmann::json{{"type", "Split"}, {"pattern", {{"Regex", re}}},
                          {"behavior", "Isolated"}, {"invert", false}};
  };
  return {{"type", "Sequence"},
          {"pretokenizers",
           {split("\\p{N}{1,3}"), split("[一-龥぀-ゟ゠-ヿ]+"),
            split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
                  "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"),
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
             {"use_regex", false}}}}};
}

// Greedy BPE training on the sample's pre-tokenized words, until `count` merges have made
// new symbols (a merge whose result another merge already made adds no token).
std::vector<std::pair<std::string, std::string>> learn_merges(const PreTokenizer& pre, int count) {
  std::map<std::vector<std::string>, int> words;  // symbols of a word -> occurrences
  for (const auto& piece : pre.split(kSample)) {
    std::vector<std::string> symbols;
    for (size_t i = 0; i < piece.size();) {
      const size_t begin = i;
      i += static_cast<uint8_t>(piece[i]) < 0x80 ? 1 : 2;  // byte-level symbols are < U+0800
      symbols.push_back(piece.substr(begin, i - begin));
    }
    ++words[symbols];
  }
  std::vector<std::pair<std::string, std::string>> merges;
  std::set<std::string> made;
  while (static_cast<int>(made.size()) < count) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [symbols, n] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += n;
    if (pairs.empty())
      throw Error(cat("tiny tokenizer: the sample yields only ", made.size(), " of ", count,
                      " merged tokens"));
    auto best = pairs.begin();  // most frequent, the smallest pair text among equals
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    const auto merge = best->first;
    merges.push_back(merge);
    made.insert(merge.first + merge.second);
    std::map<std::vector<std::string>, int> next;
    for (const auto& [symbols, n] : words) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == merge.first && symbols[i + 1] == merge.second) {
          merged.push_back(merge.first + merge.second);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      next[merged] += n;
    }
    words = std::move(next);
  }
  return merges;
}

}  // namespace

nlohmann::json tiny_tokenizer_json(const ModelConfig& c) {
  const int n_added = static_cast<int>(added_contents().size());
  const int first_merge = n_added + 256;
  if (c.vocab_size < first_merge || c.bos_token_id != 0 || c.eos_token_id != 1)
    throw Error(cat("tiny tokenizer: needs vocab_size >= ", first_merge, " and bos/eos ids 0/1 (",
                    c.source, " has ", c.vocab_size, ", ", c.bos_token_id, "/", c.eos_token_id, ")"));
  nlohmann::json added = nlohmann::json::array();
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < n_added; ++i) {
    const std::string& content = added_contents()[static_cast<size_t>(i)];
    added.push_back({{"id", i}, {"content", content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", i < 3}});
    vocab[content] = i;
  }
  for (int b = 0; b < 256; ++b) vocab[bytes_to_symbols(std::string(1, static_cast<char>(b)))] = n_added + b;
  const nlohmann::json pre = deepseek_pre_tokenizer();
  const PreTokenizer pre_tokenizer(pre, "tiny tokenizer");
  nlohmann::json merges = nlohmann::json::array();
  int id = first_merge;
  for (const auto& [left, right] : learn_merges(pre_tokenizer, static_cast<int>(c.vocab_size) - first_merge)) {
    merges.push_back(left + " " + right);
    if (!vocab.contains(left + right)) vocab[left + right] = id++;
  }
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", true},
                                     {"trim_offsets", true}, {"use_regex", true}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", {{"type", "Sequence"}, {"normalizers", nlohmann::json::array()}}},
          {"pre_tokenizer", pre},
          {"post_processor", byte_level},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
            {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}}}};
}

nlohmann::json tiny_tokenizer_config_json(const ModelConfig& c) {
  return {{"add_bos_token", true},
          {"add_eos_token", false},
          {"bos_token", kBos},
          {"eos_token", kEos},
          {"pad_token", kEos},
          {"model_max_length", c.max_position_embeddings},
          {"tokenizer_class", "LlamaTokenizerFast"}};
}

}  // namespace dsv4
