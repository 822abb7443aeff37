// The HTTP server's states over loopback with httplib's client (issue 14): 503 while
// loading, 200 when ready, requests queued in arrival order through run_engine, and a
// drain that answers 503 and lets run_engine return. The engine here is a stand-in
// that echoes; tests/server/ drives the real engine with the openai client.
#include <doctest/doctest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "launcher/http_server.h"
#include "model/presets.h"
#include "model/tiny_tokenizer.h"

using namespace dsv4;

namespace {
// A port the kernel had free a moment ago (bound to 0, read back, closed).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}
}  // namespace

TEST_CASE("the server is 503 while loading, 200 when ready, and drains on stop") {
  const ModelConfig c = preset_by_name("tiny", 0);
  const Tokenizer tok(tiny_tokenizer_json(c), tiny_tokenizer_config_json(c), "tiny");
  const int port = free_port();
  auto log = std::make_shared<spdlog::logger>("test");  // no sinks: quiet
  HttpServer server(tok, "127.0.0.1", port, log);
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  const std::string body = R"({"model": "tiny", "prompt": "ab", "max_tokens": 3, "temperature": 0})";

  auto health = client.Get("/health");
  REQUIRE(health);
  CHECK(health->status == 503);
  auto early = client.Post("/v1/completions", body, "application/json");
  REQUIRE(early);
  CHECK(early->status == 503);
  CHECK(nlohmann::json::parse(early->body)["error"]["message"] == "the model is loading");

  server.set_ready({"tiny", 256, 256, 512});
  CHECK(client.Get("/health")->status == 200);
  std::vector<size_t> prompt_sizes;  // what the engine saw, in order
  std::thread engine([&] {
    server.run_engine([&](const TextRequest& r) {
      prompt_sizes.push_back(r.prompt.size());
      TextResult out;
      out.text = "xyz";
      out.tokens = {7, 8, 9};
      r.on_text(out.text);
      return out;
    });
  });
  auto done = client.Post("/v1/completions", body, "application/json");
  REQUIRE(done);
  CHECK(done->status == 200);
  const auto reply = nlohmann::json::parse(done->body);
  CHECK(reply["choices"][0]["text"] == "xyz");
  CHECK(reply["usage"]["completion_tokens"] == 3);
  CHECK(reply["usage"]["prompt_tokens"] == tok.encode_prompt("ab").size());
  CHECK(client.Get("/no/such/route")->status == 404);

  server.stop();
  engine.join();  // the drain ends run_engine
  CHECK(prompt_sizes == std::vector<size_t>{tok.encode_prompt("ab").size()});
  auto after = client.Get("/health");
  CHECK((!after || after->status == 503));
}
