// The failure protocol of MpiEndpoint (ARCHITECTURE.md control plane: "any rank -> all:
// an error, after which every rank exits non-zero with the failing rank's message; no
// rank may hang waiting for a peer that died").
//
//   failing rank k                      every other rank r
//   Isend text (kTagError) to all  -->  a wait throws PeerFailed; r prints one line
//   wait for acks (grace)          <--  Isend ack (kTagAck)
//   Isend release (kTagRelease)    -->  exits non-zero
//   exits non-zero (MPI_Abort by the caller when an ack is missing)
//
// While waiting, each side acknowledges any other failure announced concurrently, so two
// failing ranks never wait on each other.
#include <chrono>
#include <numeric>
#include <thread>

#include "comm/mpi_check.h"
#include "comm/mpi_endpoint.h"

namespace dsv4 {

namespace {
using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

void idle() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }

bool test(MPI_Request& req) {
  int done = 0;
  MPI_CHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
  return done != 0;
}
}  // namespace

bool MpiEndpoint::announce_failure(const std::string& message, double grace_s) {
  if (size_ == 1) return true;
  const std::string text = message.substr(0, kMaxErrorBytes);
  std::vector<MPI_Request> sends, acks(static_cast<size_t>(size_), MPI_REQUEST_NULL);
  std::vector<char> ack_bytes(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request s;
    MPI_CHECK(MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, r, kTagError,
                        comm_, &s));
    sends.push_back(s);
    MPI_CHECK(MPI_Irecv(&ack_bytes[static_cast<size_t>(r)], 1, MPI_CHAR, r, kTagAck, comm_,
                        &acks[static_cast<size_t>(r)]));
  }
  const auto deadline = deadline_after(grace_s);
  const char ack = 1;
  int missing = size_ - 1;
  while (missing > 0 && Clock::now() < deadline) {
    for (auto& s : sends) test(s);
    for (auto& a : acks)
      if (a != MPI_REQUEST_NULL && test(a)) --missing;
    int other = -1;
    std::string other_text;
    if (poll_error(&other, &other_text)) {  // a concurrent failure: let it finish too
      MPI_Request s;
      MPI_CHECK(MPI_Isend(&ack, 1, MPI_CHAR, other, kTagAck, comm_, &s));
      sends.push_back(s);
    }
    idle();
  }
  if (missing > 0) return false;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request s;
    MPI_CHECK(MPI_Isend(&ack, 1, MPI_CHAR, r, kTagRelease, comm_, &s));
    sends.push_back(s);
  }
  while (Clock::now() < deadline) {  // let the releases leave before the caller exits
    bool all_sent = true;
    for (auto& s : sends) all_sent = test(s) && all_sent;
    if (all_sent) break;
    idle();
  }
  return true;
}

bool MpiEndpoint::acknowledge_failure(int failed_rank, double grace_s) {
  const char ack = 1;
  char release = 0;
  std::vector<MPI_Request> sends(1);
  MPI_CHECK(MPI_Isend(&ack, 1, MPI_CHAR, failed_rank, kTagAck, comm_, &sends[0]));
  MPI_Request released;
  MPI_CHECK(MPI_Irecv(&release, 1, MPI_CHAR, failed_rank, kTagRelease, comm_, &released));
  const auto deadline = deadline_after(grace_s);
  while (Clock::now() < deadline) {
    for (auto& s : sends) test(s);
    if (test(released)) return true;
    int other = -1;
    std::string other_text;
    if (poll_error(&other, &other_text)) {  // a second failing rank waits for our ack too
      MPI_Request s;
      MPI_CHECK(MPI_Isend(&ack, 1, MPI_CHAR, other, kTagAck, comm_, &s));
      sends.push_back(s);
    }
    idle();
  }
  return false;
}

std::vector<std::string> MpiEndpoint::gather_errors(const std::string& my_error) {
  return allgather_text(my_error, kMaxErrorBytes);
}

std::vector<std::string> MpiEndpoint::allgather_text(const std::string& mine, size_t max_bytes) {
  const std::string text = mine.substr(0, max_bytes);
  std::vector<int> lengths(static_cast<size_t>(size_));
  const int my_length = static_cast<int>(text.size());
  MPI_CHECK(MPI_Allgather(&my_length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_));
  std::vector<int> offsets(static_cast<size_t>(size_), 0);
  std::exclusive_scan(lengths.begin(), lengths.end(), offsets.begin(), 0);
  std::vector<char> all(static_cast<size_t>(offsets.back() + lengths.back()) + 1);
  MPI_CHECK(MPI_Allgatherv(text.data(), my_length, MPI_CHAR, all.data(), lengths.data(),
                           offsets.data(), MPI_CHAR, comm_));
  std::vector<std::string> errors;
  for (int r = 0; r < size_; ++r)
    errors.emplace_back(all.data() + offsets[static_cast<size_t>(r)],
                        static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  return errors;
}

}  // namespace dsv4
