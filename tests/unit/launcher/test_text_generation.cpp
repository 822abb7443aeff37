// Stop strings over streamed text and the OpenAI request checks (issue 14): what is
// released when, and which bodies are refused with which status before the engine.
#include <doctest/doctest.h>

#include "launcher/openai_api.h"
#include "launcher/stop_strings.h"
#include "model/presets.h"
#include "model/tiny_tokenizer.h"

using namespace dsv4;

TEST_CASE("stop strings: text is held back only while it may start a stop string") {
  StopMatcher m({"END", "\n\n"});
  CHECK(m.push("Hello E") == "Hello ");  // "E" may start END
  CHECK(m.push("N") == "");
  CHECK(m.push("Dless") == "");          // END matched: nothing after it is shown
  CHECK(m.stopped());
  CHECK(m.push("more") == "");
  StopMatcher n({"END"});
  CHECK(n.push("a EN") == "a ");
  CHECK(n.push("X") == "ENX");           // no longer a stop string's start
  CHECK(n.push("xE") == "x");
  CHECK(n.finish() == "E");
  CHECK(!n.stopped());
  StopMatcher across({"ab"});
  CHECK(across.push("xa") == "x");
  CHECK(across.push("b!") == "");
  CHECK(across.stopped());
}

namespace {
const Tokenizer& tiny_tok() {
  static const ModelConfig c = preset_by_name("tiny", 0);
  static const Tokenizer t(tiny_tokenizer_json(c), tiny_tokenizer_config_json(c), "tiny");
  return t;
}
ServedModel served() { return {"tiny", 256, 200, 512}; }
ApiError refused(Endpoint e, const std::string& body, ServedModel m = served()) {
  try {
    parse_api_request(e, body, m, tiny_tok());
  } catch (const ApiError& err) {
    return err;
  }
  return {0, "", "accepted", "", ""};
}
}  // namespace

TEST_CASE("OpenAI requests: defaults, and the fields a request sets") {
  const ApiRequest c = parse_api_request(
      Endpoint::completions, R"({"model": "tiny", "prompt": "Hi", "stop": "x", "seed": 4,
      "top_k": -1, "stream": true, "stream_options": {"include_usage": true}})", served(), tiny_tok());
  CHECK(c.text.prompt == tiny_tok().encode_prompt("Hi"));
  CHECK(c.text.max_tokens == 16);           // OpenAI's completion default
  CHECK(c.text.sampling.temperature == 1);  // OpenAI's default
  CHECK(c.text.sampling.top_k == 0);
  CHECK(c.text.sampling.seed == 4);
  CHECK(c.text.stop == std::vector<std::string>{"x"});
  CHECK(c.text.stop_ids == std::vector<int32_t>{1});  // EOS
  CHECK(c.stream);
  CHECK(c.include_usage);
  const ApiRequest chat = parse_api_request(
      Endpoint::chat, R"({"model": "tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
      "ignore_eos": true, "chat_template_kwargs": {"thinking": true}})", served(), tiny_tok());
  CHECK(chat.text.prompt == std::vector<int32_t>{0, 3, 7 + 'h', 7 + 'i', 4, 5});
  CHECK(chat.text.max_tokens == 256 - 6 + 1);  // chat: what the context leaves
  CHECK(chat.text.stop_ids.empty());
}

TEST_CASE("OpenAI requests: malformed bodies are refused with status and field") {
  CHECK(refused(Endpoint::completions, "{bad").status == 400);
  CHECK(refused(Endpoint::completions, "[1]").message == "the body must be a JSON object");
  const ApiError model = refused(Endpoint::completions, R"({"model": "gpt", "prompt": "a"})");
  CHECK(model.status == 404);
  CHECK(model.code == "model_not_found");
  CHECK(refused(Endpoint::completions, R"({"prompt": "a"})").param == "model");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny"})").param == "prompt");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "max_tokens": 256})").param == "max_tokens");  // 2 + 256 - 1 > 256
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "max_tokens": 255})").message == "accepted");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "max_tokens": 0})").param == "max_tokens");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "temperature": "hot"})").param == "temperature");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "top_p": 0})").message.find("top_p") != std::string::npos);
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "n": 3})").param == "n");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": ["a", "b"]})").param == "prompt");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": [1, 512]})").param == "prompt");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "stop": [1]})").param == "stop");
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "a", "seed": -1})").param == "seed");
  CHECK(refused(Endpoint::chat, R"({"model": "tiny", "messages": []})").param == "messages");
  CHECK(refused(Endpoint::chat, R"({"model": "tiny", "messages": [{"role": "tool", "content": "x"}]})").param == "messages");
  ServedModel small = served();
  small.max_prompt = 2;
  CHECK(refused(Endpoint::completions, R"({"model": "tiny", "prompt": "abc"})", small).param == "prompt");
}
