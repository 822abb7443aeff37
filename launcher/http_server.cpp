#include "launcher/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "launcher/request_queue.h"
#include "launcher/server_metrics.h"
#include "model/chat_layout.h"
#include "base/error.h"

namespace dsv4 {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kKeepAlive = std::chrono::seconds(1);  // a stream's heartbeat while it waits
constexpr size_t kMaxBody = 8u << 20;

// One accepted request: the handler thread waits on it, the engine thread fills it.
struct Job {
  ApiRequest api;
  std::string id;
  int64_t created = 0;
  Clock::time_point arrived = Clock::now();
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::string> deltas;  // text not yet sent (stream)
  bool done = false, failed = false;
  TextResult result;
  std::atomic<bool> cancelled{false};
};

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

std::string sse(const nlohmann::json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

std::string request_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%llx%06llx", prefix, static_cast<unsigned long long>(salt & 0xffffff),
                static_cast<unsigned long long>(++counter));
  return buf;
}

}  // namespace

struct HttpServer::Impl {
  const Tokenizer& tok;
  std::shared_ptr<spdlog::logger> log;
  httplib::Server http;
  std::thread thread;
  RequestQueue<Job> queue;
  ServerMetrics metrics;
  std::mutex model_m;
  ServedModel model;
  std::atomic<bool> ready{false}, draining{false}, running{false};

  Impl(const Tokenizer& t, std::shared_ptr<spdlog::logger> l) : tok(t), log(std::move(l)) {}

  ServedModel served() {
    std::lock_guard lock(model_m);
    return model;
  }
  // 503 while loading or draining; true when the request may go on.
  bool available(httplib::Response& res) {
    if (ready && !draining) return true;
    send_error(res, {503, "server_error", draining ? "the server is shutting down" : "the model is loading", "", ""});
    return false;
  }
  void update_queue_metrics() {
    metrics.set_queue(static_cast<int64_t>(queue.size()), running ? 1 : 0);
  }

  void routes();
  void generate_route(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void stream(const std::shared_ptr<Job>& job, httplib::Response& res);
  void tokenize_route(const httplib::Request& req, httplib::Response& res);
  void detokenize_route(const httplib::Request& req, httplib::Response& res);
};

void HttpServer::Impl::generate_route(Endpoint endpoint, const httplib::Request& req,
                                      httplib::Response& res) {
  if (!available(res)) return;
  auto job = std::make_shared<Job>();
  try {
    job->api = parse_api_request(endpoint, req.body, served(), tok);
  } catch (const ApiError& e) {
    metrics.count_request("rejected");
    send_error(res, e);
    return;
  }
  job->id = request_id(endpoint == Endpoint::chat ? "chatcmpl" : "cmpl");
  job->created = static_cast<int64_t>(std::time(nullptr));
  if (!queue.push(job)) {
    send_error(res, {503, "server_error", "the server is shutting down", "", ""});
    return;
  }
  update_queue_metrics();
  log->debug("{}: queued ({} prompt tokens, max_tokens {})", job->id, job->api.text.prompt.size(),
             job->api.text.max_tokens);
  if (job->api.stream) return stream(job, res);
  std::unique_lock lock(job->m);
  job->cv.wait(lock, [&] { return job->done; });
  if (job->failed) {
    send_error(res, {500, "server_error", "the engine failed (see the server log)", "", ""});
    return;
  }
  send_json(res, 200, completion_response(job->api, job->id, job->created, served(), job->result));
}

// Server-sent events: a chunk per text delta, the finish chunk, the usage chunk when
// asked, then [DONE]. A failed write (the client went away) cancels the request.
void HttpServer::Impl::stream(const std::shared_ptr<Job>& job, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  const ServedModel m = served();
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, job, m](size_t, httplib::DataSink& sink) {
        std::unique_lock lock(job->m);
        job->cv.wait_for(lock, kKeepAlive, [&] { return !job->deltas.empty() || job->done; });
        std::deque<std::string> deltas;
        deltas.swap(job->deltas);
        const bool done = job->done, failed = job->failed;
        lock.unlock();
        auto write = [&](const std::string& s) {
          if (sink.write(s.data(), s.size())) return true;
          job->cancelled = true;
          return false;
        };
        if (deltas.empty() && !done) return write(": keep-alive\n\n");
        for (const auto& d : deltas)
          if (!write(sse(stream_chunk(job->api, job->id, job->created, m, d, nullptr)))) return false;
        if (!done) return true;
        if (failed) {
          write(sse(error_body({500, "server_error", "the engine failed (see the server log)", "", ""})));
        } else {
          write(sse(stream_chunk(job->api, job->id, job->created, m, "",
                                 finish_reason_name(job->result.finish))));
          if (job->api.include_usage) write(sse(usage_chunk(job->api, job->id, job->created, m, job->result)));
        }
        write("data: [DONE]\n\n");
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancelled = true;
      });
}

void HttpServer::Impl::tokenize_route(const httplib::Request& req, httplib::Response& res) {
  if (!available(res)) return;
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("prompt") || !body["prompt"].is_string()) {
    send_error(res, {400, "invalid_request_error", "expected {\"prompt\": \"text\"}", "prompt", ""});
    return;
  }
  const bool special = body.value("add_special_tokens", true);
  const std::string text = body["prompt"].get<std::string>();
  const auto ids = special ? tok.encode_prompt(text) : tok.encode(text);
  send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", served().max_seq}});
}

void HttpServer::Impl::detokenize_route(const httplib::Request& req, httplib::Response& res) {
  if (!available(res)) return;
  nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
  std::vector<int32_t> ids;
  if (body.is_object() && body.contains("tokens") && body["tokens"].is_array()) {
    for (const auto& v : body["tokens"])
      if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX)
        ids.push_back(v.get<int32_t>());
  }
  if (!body.is_object() || !body.contains("tokens") || ids.size() != body["tokens"].size()) {
    send_error(res, {400, "invalid_request_error", "expected {\"tokens\": [ids]}", "tokens", ""});
    return;
  }
  try {
    send_json(res, 200, {{"prompt", tok.decode(ids)}});
  } catch (const Error& e) {
    send_error(res, {400, "invalid_request_error", e.what(), "tokens", ""});
  }
}

void HttpServer::Impl::routes() {
  http.set_payload_max_length(kMaxBody);
  http.set_keep_alive_timeout(1);
  http.Post("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) {
    generate_route(Endpoint::completions, q, r);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& q, httplib::Response& r) {
    generate_route(Endpoint::chat, q, r);
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
    if (!available(r)) return;
    const ServedModel m = served();
    send_json(r, 200, {{"object", "list"},
                       {"data", {{{"id", m.name}, {"object", "model"}, {"created", 0},
                                  {"owned_by", "dsv4-stage"}, {"max_model_len", m.max_seq}}}}});
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
    if (!available(r)) return;
    r.status = 200;
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
    update_queue_metrics();
    r.set_content(metrics.exposition(), "text/plain; version=0.0.4");
  });
  http.Post("/tokenize", [this](const httplib::Request& q, httplib::Response& r) { tokenize_route(q, r); });
  http.Post("/detokenize", [this](const httplib::Request& q, httplib::Response& r) { detokenize_route(q, r); });
  http.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
    if (!r.body.empty()) return;  // a route's own error body
    const std::string what = r.status == 404 ? cat("no route ", q.method, " ", q.path)
                                             : cat("HTTP status ", r.status);
    r.set_content(error_body({r.status, "invalid_request_error", what, "", ""}).dump(), "application/json");
  });
}

HttpServer::HttpServer(const Tokenizer& tok, const std::string& host, int port,
                       std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(tok, std::move(log))) {
  impl_->routes();
  if (!impl_->http.bind_to_port(host.c_str(), port))
    throw Error(cat("--host ", host, " --port ", port, ": cannot listen there (in use, or not "
                    "an address of this machine)"));
  impl_->thread = std::thread([impl = impl_.get()] {
    impl->http.listen_after_bind();
    impl->queue.close();  // every handler has returned: nothing more will be queued
  });
  impl_->log->info("serving the OpenAI API on http://{}:{} (loading)", host, port);
}

HttpServer::~HttpServer() {
  stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void HttpServer::set_ready(const ServedModel& model) {
  {
    std::lock_guard lock(impl_->model_m);
    impl_->model = model;
  }
  impl_->ready = true;
  impl_->log->info("ready: model '{}', max_seq {}, max_prompt {}", model.name, model.max_seq,
                   model.max_prompt);
}

void HttpServer::stop() {
  if (impl_->draining.exchange(true)) return;
  impl_->log->info("draining: new requests get 503, accepted ones finish");
  impl_->http.stop();
}

void HttpServer::run_engine(const std::function<TextResult(const TextRequest&)>& generate) {
  Impl& s = *impl_;
  while (auto job = s.queue.pop()) {
    if (job->cancelled) {  // the client left while it waited
      s.metrics.count_request("cancelled");
      continue;
    }
    s.running = true;
    s.update_queue_metrics();
    const auto started = Clock::now();
    TextRequest request = job->api.text;
    request.on_text = [job](const std::string& delta) {
      {
        std::lock_guard lock(job->m);
        job->deltas.push_back(delta);
      }
      job->cv.notify_all();
      return !job->cancelled;
    };
    TextResult result;
    try {
      result = generate(request);
    } catch (...) {
      {
        std::lock_guard lock(job->m);
        job->failed = job->done = true;
      }
      job->cv.notify_all();
      s.metrics.count_request("failed");
      stop();
      throw;
    }
    s.running = false;
    const auto& e = result.engine;
    const double queued_s = std::chrono::duration<double>(started - job->arrived).count();
    s.metrics.observe_ttft(queued_s + e.prefill_ms / 1000);
    if (result.tokens.size() > 1) s.metrics.observe_tpot(e.decode_ms / 1000 / double(result.tokens.size() - 1));
    s.metrics.count_tokens(static_cast<int64_t>(request.prompt.size()), static_cast<int64_t>(result.tokens.size()));
    s.metrics.count_request(result.finish == FinishReason::cancelled ? "cancelled" : "ok");
    s.log->info("{}: {} prompt + {} generated tokens, finish {}, queued {:.1f} ms, prefill {:.1f} ms, "
                "decode {:.1f} ms", job->id, request.prompt.size(), result.tokens.size(),
                finish_reason_name(result.finish), queued_s * 1000, e.prefill_ms, e.decode_ms);
    {
      std::lock_guard lock(job->m);
      job->result = std::move(result);
      job->done = true;
    }
    job->cv.notify_all();
    s.update_queue_metrics();
  }
}

}  // namespace dsv4
