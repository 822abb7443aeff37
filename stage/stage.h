// One pipeline stage: a contiguous range of trunk layers with their caches, plus the
// embedding on the first stage and the head on the last (ARCHITECTURE.md "Operations
// every stage implements"). Model logic is written once against kernels/ops.h.
//
// Boundary payload: `h` is backend memory [T, hc, H] f32. On the first stage prefill /
// decode fill it from the embedding; every stage transforms it in place through its
// layers. `taps` (drafter on) is backend memory [T, n_targets, H]: a stage writes the
// column block of every target layer it owns (SPECDECODE.md §2.3, S14). Row convention:
// decode / verify write taps rows [0, T) for positions pos0 .. pos0+T-1; prefill of n
// tokens writes only the last min(W, n) rows: taps row i holds position
// n - min(W, n) + i (W = sliding_window); so does each chunk of an extend. Column block k = the target's index in
// dspark_target_layer_ids. `taps` may be null when spec.drafter is off.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/numerics.h"
#include "kernels/ops.h"
#include "model/checkpoint.h"
#include "model/placement.h"

namespace dsv4 {

struct StageSpec {
  int rank = 0, n_ranks = 1;
  LayerRange layers;          // trunk layers [begin, end) run here
  int64_t max_seq = 0;        // positions this stage can hold (<= max_position_embeddings)
  int64_t max_prompt = 0;     // longest prompt; 0 = max_seq
  // Rows of one prefill operation (issue 13): a longer prompt comes as a prefill of its
  // first prefill_chunk rows, then extend() chunks. 0 (or >= max_prompt): whole prompts.
  // The workspace holds max(chunk rows, tmax) rows.
  int64_t prefill_chunk = 0;
  Numerics numerics;
  bool drafter = false;       // spec decoding on: verify transient rows, taps
  std::function<void(int loaded, int total)> on_layer_loaded;  // load progress (optional)
  bool first() const { return rank == 0; }
  bool last() const { return rank == n_ranks - 1; }
};

// One cache class of one layer as raw bytes (SPECDECODE.md §4.1; state-identity tests
// compare these bitwise: -0.0, NaN and the -inf score initialization compare exactly).
struct CacheClass {
  std::string name;            // e.g. "layer 3 ring", "layer 2 indexer pending score"
  std::vector<uint8_t> bytes;
};

class Stage {
 public:
  Stage(Checkpoint& ckpt, Ops& ops, const StageSpec& spec);
  ~Stage();

  const StageSpec& spec() const { return spec_; }
  uint64_t resident_bytes() const;
  int64_t pos() const;                 // positions consumed (decode state)

  // First stage only: h [T, hc, H] = repeat_hc(embed(ids)) (§4.1).
  void embed(const std::vector<int32_t>& ids, float* h);
  // All prompt rows at positions 0..n-1 through this stage's layers, filling caches
  // (the first chunk of a chunked prefill: n <= chunk_rows()).
  void prefill(const std::vector<int32_t>& ids, float* h, float* taps);
  // A later chunk of a chunked prefill: T <= chunk_rows() rows at positions pos()..
  // pos()+T-1, written to the caches as T decode steps would write them (bit for bit on
  // the CPU backend, MODEL.md §6.7 law 2).
  void extend(const std::vector<int32_t>& ids, float* h, float* taps);
  // The most rows of one prefill / extend operation.
  int64_t chunk_rows() const;
  // One row at position pos() with token `token`; on the last stage, logits (backend
  // [1, V], optional) also takes the head's logits of the row. The step runs as one
  // Ops::run_step (a CUDA graph per stage, issue 12): h, taps and logits should be the
  // same buffers every step, or the step is issued afresh.
  void decode(int32_t token, float* h, float* taps, float* logits = nullptr);
  // T rows at positions pos()..pos()+T-1 against provisional state (SPECDECODE §3). The
  // round runs as one Ops::run_step (a CUDA graph per stage and T, issue 12), so h and
  // taps should be the same buffers every round, or the round is issued afresh.
  void verify(const std::vector<int32_t>& ids, float* h, float* taps);
  // Keeps the first n rows of the open round, rolls back the rest (SPECDECODE §4).
  void commit(int n);
  // Frees / re-initializes the sequence's caches (pos = 0).
  void reset();
  // Benchmarks only: every layer's caches as after `pos` positions, with generated
  // contents (LayerCache::fill_for_benchmark), so a decode step at a long context can be
  // timed without its prefill. Tokens computed afterwards mean nothing.
  void fill_for_benchmark(int64_t pos, uint64_t seed);

  // Last stage only: logits [rows, V] (backend memory) of h rows [rows, hc, H] (§4.25).
  void head_logits(const float* h, int rows, float* logits);

  // The decode state of every layer (downloaded), plus pos and the block counters.
  // whole = false: only the live entries of MODEL.md §6.7 item 2 (what prefill(m) and
  // prefill(n) + decode(n..m) must share); whole = true: the complete ring and whole
  // pending buffers with the live store rows (SPECDECODE §7 G3, seed cache_classes).
  std::vector<CacheClass> cache_classes(bool whole) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  StageSpec spec_;
};

}  // namespace dsv4
