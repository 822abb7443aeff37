// The OpenAI-compatible HTTP server on rank 0 (issue 14, cpp-httplib): /v1/completions,
// /v1/chat/completions (stream: true as server-sent events ending in `data: [DONE]`),
// /v1/models, /health (503 while loading or draining, 200 when ready), /metrics
// (Prometheus), /tokenize, /detokenize. Handler threads parse and check each request
// (a bad one is answered 4xx and never reaches the engine) and queue it; the engine
// thread (the rank's main thread, the only one that talks MPI) runs the queue one
// request at a time. A streaming client that goes away cancels its request at the next
// token. stop() drains: no new requests, the accepted ones finish, run_engine returns.
#pragma once
#include <spdlog/logger.h>

#include <functional>
#include <memory>
#include <string>

#include "launcher/openai_api.h"
#include "launcher/text_generation.h"
#include "model/tokenizer.h"

namespace dsv4 {

class HttpServer {
 public:
  // Binds host:port and starts serving (every API call answers 503 until set_ready);
  // throws Error when the address cannot be bound.
  HttpServer(const Tokenizer& tok, const std::string& host, int port,
             std::shared_ptr<spdlog::logger> log);
  ~HttpServer();  // stops and joins

  void set_ready(const ServedModel& model);
  // Runs queued requests through `generate` until stop() and the queue is drained. An
  // exception from `generate` fails its request and is rethrown (the engine is broken).
  void run_engine(const std::function<TextResult(const TextRequest&)>& generate);
  // Begins the drain (thread- and signal-watcher-safe; idempotent).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv4
