// The control plane (ARCHITECTURE.md "What crosses a boundary"): small messages with
// rank 0 as the root. Rank 0 sends each operation's header to every other rank; the
// head rank returns what rank 0 needs (argmax ids, optionally logits rows). A commit
// count travels as the header of a commit operation. comm knows no model: ids and floats
// are opaque payload here. Implementations: comm/mpi_control_plane.cpp (the ranks are
// MPI processes; errors use the endpoint's failure protocol) and the stage tests'
// in-process planes (tests/unit/stage/in_process_planes.h: every rank in one process).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dsv4 {

// Operation kinds (ARCHITECTURE.md "Operations every stage implements"; the spec round
// kinds propose / verify / commit of SPECDECODE.md §5 are part of the message set).
enum class OpKind : int32_t { prefill, decode, propose, verify, commit, reset, stop };
const char* op_kind_name(OpKind k);

struct OpHeader {
  OpKind kind = OpKind::stop;
  int64_t seq = 0;               // sequence id
  int64_t pos = 0;               // position of the first row
  std::vector<int32_t> ids;      // the T token ids (every stage needs them: hash routing)
  int32_t count = 0;             // commit: the commit count (rows kept)
  bool want_logits = false;      // head rank returns the logits rows too
  // prefill: this chunk ends the prompt (the head scores its last row and answers);
  // false for the earlier chunks of a chunked prefill, which return nothing.
  bool last_chunk = true;
  int64_t rows() const { return static_cast<int64_t>(ids.size()); }  // T
};

// Head rank -> rank 0.
struct OpResult {
  std::vector<int32_t> ids;      // argmax per returned row (or a proposal's draft ids)
  std::vector<float> logits;     // [rows, V] when the header asked for them
  std::vector<float> scores;     // a proposal's confidences (SPECDECODE.md §2.10)
};

std::vector<uint8_t> encode_header(const OpHeader& h);
OpHeader decode_header(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> encode_result(const OpResult& r);
OpResult decode_result(const std::vector<uint8_t>& bytes);

// One rank's end of the control plane. Every call blocks until its message is handed over
// or has arrived; a wait whose sender failed throws (MPI: PeerFailed).
class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual void send_header(const OpHeader& h) = 0;  // rank 0 -> every other rank
  virtual OpHeader recv_header() = 0;               // any rank > 0, from rank 0
  virtual void send_result(const OpResult& r) = 0;  // head rank -> rank 0
  virtual OpResult recv_result() = 0;               // rank 0, from the head rank
};

class MpiEndpoint;
std::unique_ptr<ControlPlane> make_mpi_control_plane(MpiEndpoint& ep);

}  // namespace dsv4
