// The OpenAI-compatible request and response bodies (issue 14): /v1/completions and
// /v1/chat/completions requests parsed and checked into a TextRequest before they reach
// the engine (a bad one is an ApiError: HTTP status + OpenAI-style error body), and the
// response objects and stream chunks built from the results.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "launcher/text_generation.h"
#include "model/tokenizer.h"

namespace dsv4 {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";  // OpenAI's error.type
  std::string message;
  std::string param;                           // the offending field ("" none)
  std::string code;                            // e.g. model_not_found
};
// {"error": {"message", "type", "param", "code"}}.
nlohmann::json error_body(const ApiError& e);

// What the server knows when it checks a request.
struct ServedModel {
  std::string name;        // the id clients must name
  int64_t max_seq = 0;     // positions a sequence may use
  int64_t max_prompt = 0;  // the longest prompt
  int64_t vocab = 0;
};

enum class Endpoint { completions, chat };

struct ApiRequest {
  Endpoint endpoint = Endpoint::completions;
  TextRequest text;                  // prompt ids, limits, stops, sampling (seed drawn if none)
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
};

// Parses and checks a request body; throws ApiError (never reaches the engine).
ApiRequest parse_api_request(Endpoint endpoint, const std::string& body, const ServedModel& model,
                             const Tokenizer& tok);

// A whole response (stream: false).
nlohmann::json completion_response(const ApiRequest& req, const std::string& id, int64_t created,
                                   const ServedModel& model, const TextResult& result);
// One stream chunk with text `delta` (finish: the last chunk carries a finish reason).
nlohmann::json stream_chunk(const ApiRequest& req, const std::string& id, int64_t created,
                            const ServedModel& model, const std::string& delta,
                            const char* finish_reason);
// The usage chunk of stream_options.include_usage (choices empty).
nlohmann::json usage_chunk(const ApiRequest& req, const std::string& id, int64_t created,
                           const ServedModel& model, const TextResult& result);

}  // namespace dsv4
