#include "model/chat_layout.h"

#include "base/error.h"

namespace dsv4 {

namespace {

int32_t required_token(const Tokenizer& tok, const std::string& content) {
  const int32_t id = tok.token_id(content);
  if (id < 0) throw Error(cat("chat: the tokenizer has no '", content, "' token (not a DeepSeek chat tokenizer)"));
  return id;
}

// A marker as one token when the vocabulary has it, else as text.
void append_marker(const Tokenizer& tok, const std::string& marker, std::vector<int32_t>& ids) {
  const int32_t id = tok.token_id(marker);
  if (id >= 0) {
    ids.push_back(id);
    return;
  }
  const auto text = tok.encode(marker);
  ids.insert(ids.end(), text.begin(), text.end());
}

// Message text: never a special token, whatever it spells.
void append_text(const Tokenizer& tok, const std::string& text, std::vector<int32_t>& ids) {
  const auto body = tok.encode(text, false);
  ids.insert(ids.end(), body.begin(), body.end());
}

}  // namespace

std::vector<int32_t> encode_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                                 bool thinking) {
  if (messages.empty()) throw Error("messages: empty (a chat needs at least one user message)");
  if (messages.back().role != "user")
    throw Error(cat("messages[", messages.size() - 1, "]: the last message is '",
                    messages.back().role, "' (a chat prompt ends with a user message)"));
  if (tok.bos_id() < 0 || tok.eos_id() < 0)
    throw Error("chat: tokenizer_config.json names no bos_token / eos_token");
  const int32_t user = required_token(tok, "<｜User｜>");
  const int32_t assistant = required_token(tok, "<｜Assistant｜>");

  std::string system;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      throw Error(cat("messages[", i, "].role: '", role, "' (allowed: system, user, assistant)"));
    if (role == "system") system += (system.empty() ? "" : "\n\n") + messages[i].content;
  }
  std::vector<int32_t> ids{tok.bos_id()};
  append_text(tok, system, ids);
  for (const auto& m : messages) {
    if (m.role == "user") {
      ids.push_back(user);
      append_text(tok, m.content, ids);
    } else if (m.role == "assistant") {
      ids.push_back(assistant);
      append_marker(tok, "</think>", ids);
      append_text(tok, m.content, ids);
      ids.push_back(tok.eos_id());
    }
  }
  ids.push_back(assistant);
  append_marker(tok, thinking ? "<think>" : "</think>", ids);
  return ids;
}

}  // namespace dsv4
