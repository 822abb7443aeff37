#include "launcher/text_cli.h"

#include <cstdio>
#include <random>

#include "model/chat_layout.h"

namespace dsv4 {

std::vector<int32_t> text_prompt_ids(const RunConfig& cfg, const Tokenizer& tok) {
  if (!cfg.chat) return tok.encode_prompt(cfg.prompt);
  std::vector<ChatMessage> messages;
  if (!cfg.system.empty()) messages.push_back({"system", cfg.system});
  messages.push_back({"user", cfg.prompt});
  return encode_chat(tok, messages, cfg.thinking);
}

TextRequest text_request(const RunConfig& cfg, const Tokenizer& tok, std::vector<int32_t> prompt,
                         spdlog::logger& log) {
  TextRequest req;
  req.prompt = std::move(prompt);
  req.max_tokens = cfg.max_new;
  req.stop = cfg.stop;
  req.stop_ids = cfg.stop_ids;
  if (!cfg.ignore_eos && tok.eos_id() >= 0) req.stop_ids.push_back(tok.eos_id());
  req.sampling = run_sampling(cfg, log);
  return req;
}

SamplingParams run_sampling(const RunConfig& cfg, spdlog::logger& log) {
  SamplingParams p = cfg.sampling;
  if (!p.greedy() && !cfg.seed_set) {
    p.seed = std::random_device{}();
    log.info("sampling seed {} (drawn; --seed {} repeats this run)", p.seed, p.seed);
  }
  return p;
}

void run_text_on_rank0(const Tokenizer& tok, Coordinator& coordinator, TextRequest req,
                       spdlog::logger& log) {
  req.on_text = [](const std::string& delta) {
    std::fwrite(delta.data(), 1, delta.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  const TextResult res = generate_text(coordinator, tok, req);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::string ids;
  for (size_t i = 0; i < res.tokens.size(); ++i) ids += (i ? "," : "") + std::to_string(res.tokens[i]);
  log.info("prompt of {} tokens; {} tokens generated (finish {}): {}", req.prompt.size(),
           res.tokens.size(), finish_reason_name(res.finish), ids);
  const auto& e = res.engine;
  const double per_token = e.decode_steps ? e.decode_ms / e.decode_steps : 0.0;
  log.info("prefill {:.1f} ms, decode {:.2f} ms/token over {} steps", e.prefill_ms, per_token,
           e.decode_steps);
}

}  // namespace dsv4
