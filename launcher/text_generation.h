// Text out of the coordinator (issue 14): each committed token is detokenized as it
// comes (model/tokenizer.h StreamDecoder, special tokens left out), stop strings are
// applied (stop_strings.h) and the text handed to the caller as it becomes final. The
// CLI and the HTTP server both generate through here.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "stage/coordinator.h"

namespace dsv4 {

struct TextRequest {
  std::vector<int32_t> prompt;          // token ids (encode_prompt or encode_chat)
  int64_t max_tokens = 16;
  std::vector<std::string> stop;        // stop strings
  std::vector<int32_t> stop_ids;        // stop tokens (EOS unless ignore_eos)
  SamplingParams sampling;
  int spec_tmax = 0, depth_cap = 0;     // speculative rounds (GenerationRequest)
  const VerifyCosts* auto_depth = nullptr;  // spec_depth auto
  // Text that became final; returning false stops the run (the client went away).
  std::function<bool(const std::string& delta)> on_text;
};

enum class FinishReason { stop, length, cancelled };
const char* finish_reason_name(FinishReason r);  // "stop" | "length" | "cancelled"

struct TextResult {
  std::string text;                // everything handed to on_text
  std::vector<int32_t> tokens;     // the committed tokens (a stop token included)
  FinishReason finish = FinishReason::length;
  GenerationResult engine;         // timings and round records
};

TextResult generate_text(Coordinator& coordinator, const Tokenizer& tok, const TextRequest& req);

}  // namespace dsv4
