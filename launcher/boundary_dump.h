// --dump-boundary files (ARCHITECTURE.md "Debugging a stage in isolation"): one
// safetensors file per boundary crossing, DIR/rank<r>_op<i>_<recv|send>.safetensors:
//   h           F32 [T, hc, H]        hidden rows received / sent (when they cross)
//   taps        F32 [T, n_targets, H] tap rows (drafter on)
//   logits      F32 [rows, V]         head rank's send: the rows it scored
//   argmax      I64 [rows]            head rank's send: their argmax (a proposal: its
//                                     B + 1 ids, the head token first)
//   scores      F32 [B]               head rank's send of a proposal: its confidences
//   op_kind     I64 [1]               OpKind value (prefill 0, decode 1, ... stop 6)
//   op_seq      I64 [1]               sequence id
//   op_count    I64 [1]               commit count
//   op_pos      I64 [1]               position of the first row (a commit's m0, a propose's m0)
//   op_last_chunk I64 [1]             1, or 0 for a prefill chunk before the prompt's last
//                                     (the head scores nothing; its send file holds h);
//                                     absent: 1
//   positions   I64 [T]               positions of the rows (absent when T = 0)
//   token_ids   I64 [T]               the rows' token ids (absent when T = 0)
//   layer_range I64 [2]               this rank's trunk layers [begin, end)
//   n_ranks     I64 [1]               P of the run
// Rank 0's recv file holds the header tensors only (its input is the token ids). Every
// operation a rank executes has a recv file; those that move rows (prefill, decode,
// verify) also a send file, and so does the head rank's propose. Rank 0 also writes
// DIR/run_description.txt: the start-up agreement items of the run
// (launcher/startup_agreement.h), which a replay checks (the settings it must share:
// checkpoint, numerics, max_seq, prefill_chunk, drafter, spec_depth, placement).
#pragma once
#include <optional>
#include <string>

#include "model/config.h"
#include "model/placement.h"
#include "stage/pipeline.h"

namespace dsv4 {

struct DumpedCrossing {
  OpHeader header;
  std::vector<float> h, taps, logits, scores;
  std::vector<int32_t> argmax;
  LayerRange layers;
  int n_ranks = 1;
};

inline constexpr const char* kRunDescriptionFile = "run_description.txt";

std::string boundary_file(const std::string& dir, int rank, int op, bool outgoing);

// The number of operations dumped for `rank` (recv files op 0 .. N-1); throws Error
// naming the first missing file when the indices have a gap or a send file has no recv.
int count_dumped_operations(const std::string& dir, int rank);

void write_boundary_record(const std::string& dir, int rank, int n_ranks, LayerRange layers,
                           const ModelConfig& config, const BoundaryRecord& rec);

// Removes the files of a previous dump in `dir` (rank<r>_op<i>_*.safetensors and the run
// description), so a replay never mixes two runs.
void clear_boundary_dump(const std::string& dir);

// nullopt when the file does not exist; throws Error naming the file and tensor when it
// is malformed (a missing or mistyped tensor, values past their 32-bit fields, positions
// that are negative or not consecutive from op_pos, ids and positions of different counts).
std::optional<DumpedCrossing> read_boundary_record(const std::string& dir, int rank, int op,
                                                   bool outgoing);

}  // namespace dsv4
