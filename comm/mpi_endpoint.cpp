#include "comm/mpi_endpoint.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "base/call_failure.h"
#include "comm/mpi_check.h"

namespace dsv4 {

[[noreturn]] void mpi_call_failed(const char* call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  const std::string failure = call_failure_text("MPI", call, cat("error ", code, " (", text, ")"),
                                                file, line);
  std::fprintf(stderr, "%s; aborting the job\n", failure.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

namespace {
constexpr size_t kChunkBytes = size_t{1} << 30;  // MPI counts are int

// Lets other ranks (often on the same cores) run while we poll.
void back_off(int& spins) {
  if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
}
}  // namespace

MpiEndpoint::MpiEndpoint(MPI_Comm comm) : comm_(comm), error_buf_(kMaxErrorBytes) {
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  post_error_receive();
}

MpiEndpoint::~MpiEndpoint() {
  for (Posted& p : posted_)  // completes in the background (MPI_Request_free)
    if (p.req != MPI_REQUEST_NULL) MPI_Request_free(&p.req);
  if (error_req_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&error_req_);
    MPI_Wait(&error_req_, MPI_STATUS_IGNORE);
  }
}

void MpiEndpoint::post_error_receive() {
  if (size_ == 1) return;  // nobody can fail but us
  MPI_CHECK(MPI_Irecv(error_buf_.data(), static_cast<int>(error_buf_.size()), MPI_CHAR,
                      MPI_ANY_SOURCE, kTagError, comm_, &error_req_));
}

bool MpiEndpoint::poll_error(int* source, std::string* text) {
  if (error_req_ == MPI_REQUEST_NULL) return false;
  int done = 0;
  MPI_Status st;
  MPI_CHECK(MPI_Test(&error_req_, &done, &st));
  if (!done) return false;
  int n = 0;
  MPI_CHECK(MPI_Get_count(&st, MPI_CHAR, &n));
  *source = st.MPI_SOURCE;
  text->assign(error_buf_.data(), static_cast<size_t>(n));
  post_error_receive();
  return true;
}

void MpiEndpoint::check_peer_failure() {
  int source = -1;
  std::string text;
  if (poll_error(&source, &text)) throw PeerFailed(source, text);
}

void MpiEndpoint::wait(MPI_Request& req, MPI_Status* status) {
  int spins = 0;
  for (;;) {
    int done = 0;
    MPI_CHECK(MPI_Test(&req, &done, status));
    if (done) return;
    check_peer_failure();
    back_off(spins);
  }
}

namespace {
size_t chunk_count(size_t bytes) { return std::max<size_t>(1, (bytes + kChunkBytes - 1) / kChunkBytes); }
}  // namespace

void MpiEndpoint::send(int dst, int tag, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t c = 0; c < chunk_count(bytes); ++c) {
    const size_t off = c * kChunkBytes, n = std::min(kChunkBytes, bytes - off);
    MPI_Request req;
    MPI_CHECK(MPI_Isend(p + off, static_cast<int>(n), MPI_BYTE, dst, tag, comm_, &req));
    wait(req);
  }
}

void MpiEndpoint::recv(int src, int tag, void* data, size_t bytes) {
  auto* p = static_cast<uint8_t*>(data);
  for (size_t c = 0; c < chunk_count(bytes); ++c) {
    const size_t off = c * kChunkBytes, n = std::min(kChunkBytes, bytes - off);
    MPI_Request req;
    MPI_Status st;
    MPI_CHECK(MPI_Irecv(p + off, static_cast<int>(n), MPI_BYTE, src, tag, comm_, &req));
    wait(req, &st);
    int got = 0;
    MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &got));
    DSV4_CHECK(static_cast<size_t>(got) == n, "rank ", rank_, " expected ", n,
               " bytes from rank ", src, " tag ", tag, ", got ", got);
  }
}

void MpiEndpoint::send_message(int dst, int tag, const std::vector<uint8_t>& bytes) {
  DSV4_CHECK(bytes.size() <= static_cast<size_t>(INT_MAX), "control message of ",
             bytes.size(), " bytes");
  send(dst, tag, bytes.data(), bytes.size());
}

void MpiEndpoint::post_message(int dst, int tag,
                               std::shared_ptr<const std::vector<uint8_t>> bytes) {
  DSV4_CHECK(bytes->size() <= static_cast<size_t>(INT_MAX), "control message of ",
             bytes->size(), " bytes");
  std::erase_if(posted_, [](Posted& p) {
    int done = 0;
    MPI_CHECK(MPI_Test(&p.req, &done, MPI_STATUS_IGNORE));
    return done != 0;
  });
  Posted p{std::move(bytes)};
  MPI_CHECK(MPI_Isend(p.bytes->data(), static_cast<int>(p.bytes->size()), MPI_BYTE, dst, tag,
                      comm_, &p.req));
  posted_.push_back(std::move(p));
}

void MpiEndpoint::finish_posted() {
  for (Posted& p : posted_) wait(p.req);
  posted_.clear();
}

std::vector<uint8_t> MpiEndpoint::recv_message(int src, int tag) {
  int spins = 0;
  for (;;) {
    int found = 0;
    MPI_Message msg;
    MPI_Status st;
    MPI_CHECK(MPI_Improbe(src, tag, comm_, &found, &msg, &st));
    if (found) {
      int n = 0;
      MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &n));
      std::vector<uint8_t> bytes(static_cast<size_t>(n));
      MPI_CHECK(MPI_Mrecv(bytes.data(), n, MPI_BYTE, &msg, MPI_STATUS_IGNORE));
      return bytes;
    }
    check_peer_failure();
    back_off(spins);
  }
}

}  // namespace dsv4
