// The HTTP server of a build without cpp-httplib (CMakeLists.txt: the GPU machine's image
// has none): --serve is refused by name; every other run is unaffected.
#include "base/error.h"
#include "launcher/http_server.h"

namespace dsv4 {

struct HttpServer::Impl {};

HttpServer::HttpServer(const Tokenizer&, const std::string&, int, std::shared_ptr<spdlog::logger>) {
  throw Error("--serve: this build has no cpp-httplib (Debian libcpp-httplib-dev); rebuild with it");
}
HttpServer::~HttpServer() = default;
void HttpServer::set_ready(const ServedModel&) {}
void HttpServer::run_engine(const std::function<TextResult(const TextRequest&)>&) {}
void HttpServer::stop() {}

}  // namespace dsv4
