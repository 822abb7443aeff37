// The control plane (ARCHITECTURE.md "What crosses a boundary"): small MPI messages with
// rank 0 as the root. Rank 0 sends each operation's header to every other rank; the
// head rank returns what rank 0 needs (argmax ids, optionally logits rows). A commit
// count travels as the header of a commit operation. Errors use the endpoint's failure
// protocol. comm knows no model: ids and floats are opaque payload here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/mpi_endpoint.h"

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

class ControlPlane {
 public:
  explicit ControlPlane(MpiEndpoint& ep) : ep_(ep) {}
  int head_rank() const { return ep_.size() - 1; }

  void send_header(const OpHeader& h);  // rank 0 -> every other rank
  OpHeader recv_header();               // any rank > 0, from rank 0
  void send_result(const OpResult& r);  // head rank -> rank 0
  OpResult recv_result();               // rank 0, from the head rank

 private:
  MpiEndpoint& ep_;
};

}  // namespace dsv4
