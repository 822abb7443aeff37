#include "launcher/openai_api.h"

#include <random>

#include "model/chat_layout.h"
#include "base/error.h"

namespace dsv4 {

nlohmann::json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? nlohmann::json() : nlohmann::json(e.param)},
            {"code", e.code.empty() ? nlohmann::json() : nlohmann::json(e.code)}}}};
}

namespace {

[[noreturn]] void refuse(const std::string& param, const std::string& message) {
  throw ApiError{400, "invalid_request_error", message, param, ""};
}

// Field readers: a field of the wrong type is refused by name; null counts as absent.
class Fields {
 public:
  explicit Fields(const nlohmann::json& body) : body_(body) {}
  bool has(const char* key) const { return body_.contains(key) && !body_[key].is_null(); }
  const nlohmann::json& at(const char* key) const { return body_[key]; }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_number()) refuse(key, cat("'", key, "' must be a number"));
    return at(key).get<double>();
  }
  int64_t integer(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_number_integer()) refuse(key, cat("'", key, "' must be an integer"));
    return at(key).get<int64_t>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!at(key).is_boolean()) refuse(key, cat("'", key, "' must be true or false"));
    return at(key).get<bool>();
  }

 private:
  const nlohmann::json& body_;
};

std::vector<std::string> stop_strings(const Fields& f) {
  if (!f.has("stop")) return {};
  const auto& s = f.at("stop");
  if (s.is_string()) return {s.get<std::string>()};
  if (!s.is_array() || s.size() > 4)
    refuse("stop", "'stop' must be a string or a list of at most 4 strings");
  std::vector<std::string> out;
  for (const auto& v : s) {
    if (!v.is_string()) refuse("stop", "'stop' must be a string or a list of at most 4 strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

// A message's content: a string, or a list of {"type": "text", "text": ...} parts.
std::string message_content(const nlohmann::json& m, size_t i) {
  const std::string param = cat("messages[", i, "].content");
  if (!m.contains("content") || m["content"].is_null()) return "";
  const auto& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) refuse(param, cat("'", param, "' must be a string or a list of text parts"));
  std::string text;
  for (const auto& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string())
      refuse(param, cat("'", param, "': only text parts are supported"));
    text += part["text"].get<std::string>();
  }
  return text;
}

std::vector<int32_t> chat_prompt(const Fields& f, const Tokenizer& tok) {
  if (!f.has("messages") || !f.at("messages").is_array())
    refuse("messages", "'messages' is required and must be a list");
  std::vector<ChatMessage> messages;
  const auto& list = f.at("messages");
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object() || !list[i].contains("role") || !list[i]["role"].is_string())
      refuse(cat("messages[", i, "]"), cat("'messages[", i, "]' needs a string 'role'"));
    messages.push_back({list[i]["role"].get<std::string>(), message_content(list[i], i)});
  }
  bool thinking = false;
  if (f.has("chat_template_kwargs")) {
    const auto& kw = f.at("chat_template_kwargs");
    if (!kw.is_object()) refuse("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    thinking = Fields(kw).boolean("thinking", false);
  }
  try {
    return encode_chat(tok, messages, thinking);
  } catch (const Error& e) {
    refuse("messages", e.what());
  }
}

std::vector<int32_t> completion_prompt(const Fields& f, const Tokenizer& tok) {
  if (!f.has("prompt")) refuse("prompt", "'prompt' is required");
  const auto& p = f.at("prompt");
  if (p.is_string()) return tok.encode_prompt(p.get<std::string>());
  if (p.is_array() && p.size() == 1 && p[0].is_string()) return tok.encode_prompt(p[0].get<std::string>());
  if (p.is_array() && !p.empty() && p[0].is_number_integer()) {  // token ids, used as given
    std::vector<int32_t> ids;
    for (const auto& v : p) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok.vocab_size())
        refuse("prompt", cat("'prompt' token ", v.dump(), " is outside [0, ", tok.vocab_size(), ")"));
      ids.push_back(v.get<int32_t>());
    }
    return ids;
  }
  refuse("prompt", "'prompt' must be a string, a list of one string, or a list of token ids "
                   "(one prompt per request)");
}

void refuse_unsupported(const Fields& f) {
  if (f.integer("n", 1) != 1) refuse("n", "'n' must be 1 (one choice per request)");
  if (f.boolean("echo", false)) refuse("echo", "'echo' is not supported");
  if (f.has("logprobs") && !(f.at("logprobs").is_boolean() && !f.at("logprobs").get<bool>()))
    refuse("logprobs", "'logprobs' is not supported");
  for (const char* k : {"presence_penalty", "frequency_penalty"})
    if (f.number(k, 0) != 0) refuse(k, cat("'", k, "' is not supported (must be 0)"));
  if (f.has("tools")) refuse("tools", "'tools' is not supported");
}

}  // namespace

ApiRequest parse_api_request(Endpoint endpoint, const std::string& body, const ServedModel& model,
                             const Tokenizer& tok) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    refuse("", cat("the body is not valid JSON: ", e.what()));
  }
  if (!j.is_object()) refuse("", "the body must be a JSON object");
  const Fields f(j);
  if (!f.has("model") || !f.at("model").is_string()) refuse("model", "'model' is required");
  if (f.at("model").get<std::string>() != model.name)
    throw ApiError{404, "invalid_request_error",
                   cat("the model '", f.at("model").get<std::string>(), "' does not exist (this "
                       "server serves '", model.name, "')"), "model", "model_not_found"};
  refuse_unsupported(f);

  ApiRequest req;
  req.endpoint = endpoint;
  req.stream = f.boolean("stream", false);
  if (f.has("stream_options")) {
    if (!f.at("stream_options").is_object()) refuse("stream_options", "'stream_options' must be an object");
    req.include_usage = Fields(f.at("stream_options")).boolean("include_usage", false);
  }
  TextRequest& t = req.text;
  t.prompt = endpoint == Endpoint::chat ? chat_prompt(f, tok) : completion_prompt(f, tok);
  const auto p0 = static_cast<int64_t>(t.prompt.size());
  if (p0 < 1) refuse("prompt", "the prompt is empty");
  if (p0 > model.max_prompt)
    refuse(endpoint == Endpoint::chat ? "messages" : "prompt",
           cat("the prompt has ", p0, " tokens; this server accepts at most ", model.max_prompt));
  // OpenAI: completions default to 16 tokens, chat to what the context leaves.
  const int64_t room = model.max_seq - p0 + 1;
  const int64_t default_max = endpoint == Endpoint::chat ? room : std::min<int64_t>(16, room);
  const char* max_key = f.has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  t.max_tokens = f.integer(max_key, default_max);
  if (t.max_tokens < 1) refuse(max_key, cat("'", max_key, "' must be >= 1"));
  if (t.max_tokens > room)
    refuse(max_key, cat("the prompt (", p0, " tokens) + '", max_key, "' (", t.max_tokens,
                        ") - 1 exceeds the context of ", model.max_seq, " positions"));
  t.stop = stop_strings(f);
  if (!f.boolean("ignore_eos", false) && tok.eos_id() >= 0) t.stop_ids.push_back(tok.eos_id());

  SamplingParams& s = t.sampling;
  s.temperature = f.number("temperature", 1.0);  // OpenAI's default
  s.top_p = f.number("top_p", 1.0);
  s.min_p = f.number("min_p", 0.0);
  const int64_t top_k = f.integer("top_k", 0);  // -1 is vLLM's "all", as 0
  if (top_k < -1 || top_k > INT32_MAX) refuse("top_k", "'top_k' must be >= 0 (or -1: all)");
  s.top_k = top_k == -1 ? 0 : static_cast<int>(top_k);
  if (f.has("seed") && !f.at("seed").is_number_unsigned())
    refuse("seed", "'seed' must be a non-negative integer");
  s.seed = f.has("seed") ? f.at("seed").get<uint64_t>() : std::random_device{}();
  GenerationRequest engine;  // the engine's own admission rules, checked here
  engine.prompt = t.prompt;
  engine.max_new = t.max_tokens;
  engine.stop_ids = t.stop_ids;
  engine.sampling = s;
  try {
    check_admission(engine, model.max_seq, model.vocab);
  } catch (const Error& e) {
    refuse("", e.what());
  }
  return req;
}

namespace {

nlohmann::json usage(const ApiRequest& req, const TextResult& r) {
  const auto p = static_cast<int64_t>(req.text.prompt.size()), c = static_cast<int64_t>(r.tokens.size());
  return {{"prompt_tokens", p}, {"completion_tokens", c}, {"total_tokens", p + c}};
}

nlohmann::json envelope(const ApiRequest& req, const std::string& id, int64_t created,
                        const ServedModel& model, bool chunk) {
  const bool chat = req.endpoint == Endpoint::chat;
  return {{"id", id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", created},
          {"model", model.name}};
}

}  // namespace

nlohmann::json completion_response(const ApiRequest& req, const std::string& id, int64_t created,
                                   const ServedModel& model, const TextResult& result) {
  nlohmann::json out = envelope(req, id, created, model, false);
  nlohmann::json choice = {{"index", 0}, {"logprobs", nullptr},
                           {"finish_reason", finish_reason_name(result.finish)}};
  if (req.endpoint == Endpoint::chat)
    choice["message"] = {{"role", "assistant"}, {"content", result.text}};
  else
    choice["text"] = result.text;
  out["choices"] = nlohmann::json::array({choice});
  out["usage"] = usage(req, result);
  return out;
}

nlohmann::json stream_chunk(const ApiRequest& req, const std::string& id, int64_t created,
                            const ServedModel& model, const std::string& delta,
                            const char* finish_reason) {
  nlohmann::json out = envelope(req, id, created, model, true);
  nlohmann::json choice = {{"index", 0}, {"logprobs", nullptr},
                           {"finish_reason", finish_reason ? nlohmann::json(finish_reason) : nlohmann::json()}};
  if (req.endpoint == Endpoint::chat) {
    choice["delta"] = finish_reason ? nlohmann::json::object()
                                    : nlohmann::json{{"role", "assistant"}, {"content", delta}};
  } else {
    choice["text"] = delta;
  }
  out["choices"] = nlohmann::json::array({choice});
  if (req.include_usage) out["usage"] = nullptr;
  return out;
}

nlohmann::json usage_chunk(const ApiRequest& req, const std::string& id, int64_t created,
                           const ServedModel& model, const TextResult& result) {
  nlohmann::json out = envelope(req, id, created, model, true);
  out["choices"] = nlohmann::json::array();
  out["usage"] = usage(req, result);
  return out;
}

}  // namespace dsv4
