// The DeepSeek-V4 chat layout (issue 14), as DeepSeek-V3.1 / V3.2 lay out a conversation
// (V4 keeps their special tokens); built as ids, so message text is encoded as text and
// can never inject a special token:
//   BOS  system...  <｜User｜> user  <｜Assistant｜> </think> answer EOS  <｜User｜> user ...
//   <｜Assistant｜> then <think> (thinking) or </think> (non-thinking: the answer follows)
// System messages are joined by "\n\n" right after BOS; an earlier assistant turn keeps
// only its answer (its reasoning is dropped, as DeepSeek's encoder does by default) and
// ends with EOS. With the tiny tokenizer (model/tiny_tokenizer.h) a one-turn chat
// "hi" is [0, 3, 'h', 'i', 4, 6] with byte ids 7 + byte: BOS 0, <｜User｜> 3,
// <｜Assistant｜> 4, <think> 5, </think> 6, EOS 1. A marker that is not one token of the
// vocabulary (DeepSeek-V3 has no <think>) is encoded as text.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/tokenizer.h"

namespace dsv4 {

struct ChatMessage {
  std::string role;     // system | user | assistant
  std::string content;
};

// Throws Error naming the message for an unknown role, an empty conversation or one that
// does not end with a user message, and when the tokenizer lacks BOS, EOS, <｜User｜> or
// <｜Assistant｜>.
std::vector<int32_t> encode_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                 bool thinking);

}  // namespace dsv4
