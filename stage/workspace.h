// Scratch of one stage, allocated ONCE at construction for `rows` rows (the largest
// prefill, or the verify depth tmax) and shared by its layers in turn: the decode and
// verify paths allocate no backend memory (the CUDA backend depends on this).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/config.h"
#include "stage/attention_index.h"

namespace dsv4 {

struct WorkspaceSizes {
  int rows = 0;          // R: rows of every per-row buffer
  int step_rows = 1;     // S: rows of a plain decode step or verify round (max(tmax, 1))
  int max_blocks = 0;    // most compressed blocks a prefill of R rows emits in a layer
  int index_width = 0;   // widest merged index row (window + compressed tail)
  int cmp_latent = 0;    // widest attention-compressor latent Lc (0: none)
  int idx_latent = 0;    // indexer-compressor latent (0: no indexer)
};

// Issue 13: the merged index rows of a prefill or chunk call depend on the call (its first
// position and rows) and the layer's ratio class alone (attention_index.h), so the call's
// layers of one class share one upload (Layer::call_index): one buffer per ratio, holding
// the rows of the call it names.
struct CallIndex {
  int ratio = 0;
  IBuf idx;                // [R, index_width] (ratio 0: [R, W])
  int64_t pos0 = -1;       // the call whose rows idx holds (-1: none yet)
  int rows = 0;
  int64_t trans_base = 0;  // chunk calls: the layers' transient rows (step_index)
  MergedIndex m;
};

struct Workspace {
  Workspace(Ops& ops, const ModelConfig& c, const WorkspaceSizes& sz);

  WorkspaceSizes sizes;
  FBuf y, x;              // [R, H]   hc collapse, sub-block input (norm output)
  FBuf post, comb;        // [R, hc], [R, hc, hc]
  FBuf h_mid;             // [R, hc, H] state between the attention and FFN sub-blocks
  FBuf qr, q, o;          // [R, Qr], [R, nh, D], [R, nh, D]
  FBuf og, a;             // [R, G*Or], [R, H]
  FBuf kv_src;            // [R + max_blocks, D] prefill KV source (window ++ compressed)
  FBuf raw_kv, raw_score;     // [R, Lc] prefill raw attention-compressor projections
  FBuf iraw_kv, iraw_score;   // [R, Li] prefill raw indexer-compressor projections
  FBuf qi, wi;            // [R, Ih, Id], [R, Ih] indexer queries and head weights
  FBuf wt, moe_out;       // [R, K], [R, H]
  IBuf idx, sel;          // [R, index_width], [R, K]
  // The StepState (issue 12): the inputs of a plain decode step or a verify round of
  // T <= S rows in backend memory, [2S]: positions [S] then token ids [S], row t at
  // positions[t] = pos0 + t. Written once before the step by upload_step; every op of the
  // step reads its positions and tokens from here, so the step's op calls are the same at
  // every position (kernels/ops.h "device step").
  IBuf step;
  IBuf n_visible;         // [S] the step rows' visible indexer blocks (Ops::decode_index)
  std::vector<CallIndex> call_index;  // one per compress ratio of the model (prefill, chunks)
  std::vector<int32_t> idx_host;   // host staging of idx
  std::vector<int32_t> positions;  // host [R]
  std::vector<int32_t> step_host;  // host staging of step [2S]

  const int32_t* step_pos() const { return step.data(); }
  const int32_t* step_token() const { return step.data() + sizes.step_rows; }
  // The StepState of `rows` rows at positions pos0.. with tokens [rows] (host): one upload,
  // issued before the step's Ops::run_step.
  void upload_step(Ops& ops, int64_t pos0, const int32_t* tokens, int rows);

  uint64_t bytes() const;
};

}  // namespace dsv4
