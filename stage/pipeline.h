// What one rank does for each operation (ARCHITECTURE.md "Ranks and roles", "What
// crosses a boundary"): take the header, take h (+ taps) from rank r-1 or embed on rank
// 0, run this rank's Stage, then send h to rank r+1 or, on the head rank, compute the
// logits rows, their argmax, and return them to rank 0.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/control_plane.h"
#include "comm/data_plane.h"
#include "model/config.h"
#include "stage/drafter.h"
#include "stage/stage.h"

namespace dsv4 {

// One boundary crossing in host memory, for --dump-boundary and stage replay. Incoming:
// the header with h (+ taps) received from rank r-1 (nothing more on rank 0, whose
// input is the token ids). Outgoing: h (+ taps) sent to rank r+1, or on the head rank
// the logits rows [rows, V] and their argmax returned to rank 0, or a proposal (its ids
// in argmax, its confidences in scores).
struct BoundaryRecord {
  int op_index = 0;
  bool outgoing = false;
  const OpHeader* header = nullptr;
  std::vector<float> h, taps, logits, scores;
  std::vector<int32_t> argmax;
};

struct PipelineHooks {
  std::function<void(int op_index, const OpHeader&)> before_op;
  std::function<void(int op_index, const OpHeader&, double ms)> after_op;
  std::function<void(const BoundaryRecord&)> boundary;  // set: records are built
  // Head rank, operations with rows: the rows its layers produced (h, taps; backend
  // memory) once the head has scored them; the stage tests read every row's logits and
  // the tap rows here.
  std::function<void(const OpHeader&, const BoundaryPayload&)> head_rows;
};

// The head's answer for an operation: argmax of each row it scored, and the rows.
struct HeadOutput {
  std::vector<int32_t> argmax;   // a proposal: its out_ids [B + 1]
  std::vector<float> logits;  // [rows, V] host, kept only when asked
  std::vector<float> scores;     // a proposal's confidence logits [B]
};

// The stage's part of one operation with the boundary input already in h / taps
// (backend memory; the first stage embeds the ids into h). On the last stage also scores
// the head rows: the last row of a prefill, the row of a decode step, every row of a
// verify round. A NaN in an emitted row is an error naming rank and position (S9).
// With a drafter (head stage, SPECDECODE.md §5): prefill primes its rings from the
// prefill taps, propose asks it for a proposal (ids[0] = head token, pos = m0), commit
// writes the ring rows of the committed positions from `taps` (the round's verify taps),
// reset resets it. A decode on the head stage scores its row inside the step into
// step_logits (backend [1, V]; the same buffer every step keeps the step's graph, see
// Stage::decode), or into a buffer of the operation's own when it is null; a verify round
// its rows into round_logits (backend [T, V], kept by the caller: no allocation around a
// round keeps the graphs of the rounds, Stage::verify), or a buffer of its own.
// Tap rows [rows, n_targets, H] an operation carries across a boundary with the drafter
// on (S14: a prefill only its last min(W, p0) rows; 0 for operations without rows).
int64_t boundary_tap_rows(const OpHeader& header, const ModelConfig& config);

HeadOutput compute_operation(Stage& stage, Ops& ops, const ModelConfig& config,
                             const OpHeader& header, float* h, float* taps, bool keep_logits,
                             Drafter* drafter = nullptr, float* step_logits = nullptr,
                             float* round_logits = nullptr);

class Pipeline {
 public:
  // control / data are null on a single-rank run; drafter only on the head rank of a
  // speculative run.
  Pipeline(Stage& stage, Ops& ops, const ModelConfig& config, ControlPlane* control,
           DataPlane* data, PipelineHooks hooks, Drafter* drafter = nullptr);

  // This rank's part of one operation. On rank 0 returns the head's result (received
  // from the head rank when P > 1); on other ranks returns an empty result.
  OpResult execute(const OpHeader& header);
  // Ranks > 0: executes headers from rank 0 until a stop.
  void serve();

 private:
  size_t hidden_floats(int64_t rows) const;
  size_t tap_floats(int64_t rows) const;
  std::vector<float> to_host(const float* p, size_t n);
  void record(const OpHeader& header, bool outgoing, const BoundaryPayload& payload,
              const HeadOutput* head);

  Stage& stage_;
  Ops& ops_;
  const ModelConfig& config_;
  ControlPlane* control_;
  DataPlane* data_;
  PipelineHooks hooks_;
  Drafter* drafter_;
  // Plain decode's boundary buffers h [1, hc, H], taps [1, n_targets, H] and (head rank)
  // logits [1, V], allocated once: its captured step graph replays their addresses.
  FBuf step_h_, step_taps_, step_logits_;
  // A verify round's (drafter on), the same for T <= tmax rows: h [tmax, hc, H], taps
  // [tmax, n_targets, H] (the head rank's commit reads the open round's) and (head rank)
  // logits [tmax, V]; the rounds' graphs replay their addresses.
  int64_t round_rows_ = 0;  // tmax (0: drafter off)
  FBuf round_h_, round_taps_, round_logits_;
  int op_index_ = 0;
};

}  // namespace dsv4
