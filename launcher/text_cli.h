// Text runs from the command line (issue 14): the prompt of the run config as ids (plain,
// with BOS per tokenizer_config.json, or the chat layout), generation streamed to stdout
// as text, the ids and timings logged.
#pragma once
#include <spdlog/logger.h>

#include "launcher/run_config.h"
#include "launcher/text_generation.h"
#include "model/tokenizer.h"

namespace dsv4 {

// The run's sampling settings; without a seed, one is drawn and logged.
SamplingParams run_sampling(const RunConfig& cfg, spdlog::logger& log);
// The prompt ids of a text run (cfg.prompt, cfg.chat / system / thinking).
std::vector<int32_t> text_prompt_ids(const RunConfig& cfg, const Tokenizer& tok);
// The run config's generation settings for `prompt`: stop strings, EOS unless
// ignore_eos (plus stop_ids), sampling (a drawn seed is logged), max_new.
TextRequest text_request(const RunConfig& cfg, const Tokenizer& tok, std::vector<int32_t> prompt,
                         spdlog::logger& log);
// Rank 0 of a text run: generates `req` and streams the text to stdout.
void run_text_on_rank0(const Tokenizer& tok, Coordinator& coordinator, TextRequest req,
                       spdlog::logger& log);

}  // namespace dsv4
