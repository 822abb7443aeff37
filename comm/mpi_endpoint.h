// One rank's MPI endpoint: point-to-point sends and receives that never hang on a dead
// peer (ARCHITECTURE.md "What crosses a boundary", control plane). Every wait polls the
// request together with a standing receive on the error tag; when another rank reports
// a failure first, the wait throws PeerFailed instead of blocking forever.
// comm moves bytes and knows no model.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsv4 {

// Message tags: one space for the control plane, the data plane and the failure protocol.
enum MessageTag : int {
  kTagHeader = 101,   // rank 0 -> all: operation header
  kTagResult = 102,   // head rank -> rank 0: argmax ids (+ logits rows)
  kTagHidden = 103,   // stage r -> r+1: h rows
  kTagTaps = 104,     // stage r -> r+1: tap rows
  kTagError = 190,    // failing rank -> all: the error text
  kTagAck = 191,      // receiver -> failing rank: error seen and reported
  kTagRelease = 192,  // failing rank -> receivers: every rank has reported, exit now
};

// Thrown by a wait when another rank announced a failure (the text is that rank's).
class PeerFailed : public std::runtime_error {
 public:
  PeerFailed(int rank, const std::string& message)
      : std::runtime_error(message), failed_rank(rank) {}
  int failed_rank;
};

class MpiEndpoint {
 public:
  static constexpr size_t kMaxErrorBytes = 4096;  // longer error texts are truncated

  explicit MpiEndpoint(MPI_Comm comm);  // posts the standing error receive
  ~MpiEndpoint();                       // cancels it
  MpiEndpoint(const MpiEndpoint&) = delete;
  MpiEndpoint& operator=(const MpiEndpoint&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }

  // Waits for `req` while watching the error tag; throws PeerFailed.
  void wait(MPI_Request& req, MPI_Status* status = MPI_STATUS_IGNORE);
  // Throws PeerFailed when an error message has arrived (non-blocking).
  void check_peer_failure();

  // Byte messages of a size both sides know (chunked above 1 GiB).
  void send(int dst, int tag, const void* data, size_t bytes);
  void recv(int src, int tag, void* data, size_t bytes);
  // A message whose size only the sender knows (control plane).
  void send_message(int dst, int tag, const std::vector<uint8_t>& bytes);
  std::vector<uint8_t> recv_message(int src, int tag);
  // The same message, posted and left in flight (the bytes live with it): the caller
  // goes on while the receiver is busy. Sends found complete are released on each
  // post; finish_posted() waits for the rest (watching the error tag). The destructor
  // releases what is still in flight.
  void post_message(int dst, int tag, std::shared_ptr<const std::vector<uint8_t>> bytes);
  void finish_posted();

  // Failure protocol (comm/error_broadcast.cpp). The failing rank sends its text to
  // every other rank, waits up to `grace_s` for their acknowledgements, then releases
  // them; returns false when some rank did not acknowledge in time (caller aborts).
  bool announce_failure(const std::string& message, double grace_s);
  // A rank that caught PeerFailed (and has reported it) acknowledges and waits up to
  // `grace_s` for the release; returns false on timeout.
  bool acknowledge_failure(int failed_rank, double grace_s);
  // Collective for start-up: every rank passes its error text ("" when it is fine) and
  // gets every rank's text, indexed by rank. Start-up has no other blocking exchange,
  // so every living rank reaches this call.
  std::vector<std::string> gather_errors(const std::string& my_error);
  // Collective: every rank's text (up to `max_bytes` of it), indexed by rank.
  std::vector<std::string> allgather_text(const std::string& mine, size_t max_bytes);

 private:
  void post_error_receive();
  // Non-blocking: true (and the sender and text) when an error message has arrived;
  // the standing receive is posted again.
  bool poll_error(int* source, std::string* text);

  struct Posted {
    std::shared_ptr<const std::vector<uint8_t>> bytes;
    MPI_Request req = MPI_REQUEST_NULL;
  };

  int rank_ = 0, size_ = 1;
  std::vector<Posted> posted_;
  MPI_Comm comm_;
  MPI_Request error_req_ = MPI_REQUEST_NULL;
  std::vector<char> error_buf_;
};

}  // namespace dsv4
