// One trunk block with its cache (MODEL.md §5): prefill from position 0, the later chunks
// of a chunked prefill, incremental rows (plain decode, or a verify round against
// transient rows, SPECDECODE.md §3.4), and the round's commit. Written once against
// kernels/ops.h.
#pragma once
#include <cstdint>

#include "kernels/ops.h"
#include "model/config.h"
#include "model/weights.h"
#include "stage/attention_index.h"
#include "stage/layer_cache.h"
#include "stage/workspace.h"

namespace dsv4 {

// What every layer of a stage shares.
struct LayerContext {
  Ops& ops;
  const ModelConfig& cfg;
  const Numerics& num;
  Workspace& ws;
  int n_targets = 0;  // tap row width in units of hidden (SPECDECODE §2.3)
  // The rows are a prefill or a prefill chunk: the L-bf16 linears run as GEMMs (the *_gemm
  // ops, moe_gemm and route_gemm's gate logits, law 2's tolerance); off for decode, verify
  // and draft rows (R-I3: row-independent).
  bool gemm = false;
  // Plain decode and verify rows: positions and token ids come from ws.step (backend), not
  // ws.positions.
  bool device_step = false;
};

class Layer {
 public:
  // tap_col: column block of this layer in the tap rows, -1 when not a target.
  // chunk_rows: the most rows of a later prefill chunk (extend), 0 when prompts come whole.
  Layer(Ops& ops, BlockWeights w, const ModelConfig& cfg, const RopeTable& rope,
        int64_t max_seq, int trans_rows, int row_cap, int tap_col, int chunk_rows = 0);
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // h [s, hc, H] in place; positions 0..s-1; fills the cache (§6.6). Taps: the last
  // min(W, s) rows.
  void prefill(LayerContext& ctx, const int32_t* ids, int s, float* h, float* taps);
  // Plain decode (MODEL.md §6.2) of h [1, hc, H] at the position and token of ws.step
  // (ctx.device_step): the ring slot, index row, compressor blocks and hash route are
  // computed on the backend, so the op calls are the same at every position. Ops only
  // (the body of a captured step, Ops::run_step): count_decoded keeps the host side.
  void decode(LayerContext& ctx, float* h, float* taps);
  // After every plain decode step at position pos: the compressors' host block counts.
  void count_decoded(int64_t pos);
  // A verify round: h [rows, hc, H] at the positions and tokens of ws.step (ctx.device_step,
  // pos0 .. pos0+rows-1) against transient rows, checkpointing the compressors (SPECDECODE
  // §3.4, §4.2, §4.3); like decode, ops only, the same calls at every position (a captured
  // graph per row count): count_verified keeps the host side.
  void verify(LayerContext& ctx, int rows, float* h, float* taps);
  // After every verify round of `rows` rows at pos0: the compressors' host block counts
  // and the round's checkpoint count (checked against the positions).
  void count_verified(int64_t pos0, int rows);
  // A later chunk of a chunked prefill (layer_extend.cpp): h [rows, hc, H] at positions
  // pos0..pos0+rows-1 after a prefill of pos0 rows; writes the caches as `rows`
  // consecutive decode steps would (MODEL.md §6.7 law 2). Taps: the last min(W, rows).
  void extend(LayerContext& ctx, const int32_t* ids, int64_t pos0, int rows, float* h,
              float* taps);
  // SPECDECODE §4.6 commit order: ring scatter, then the compressor rollbacks.
  void commit(Ops& ops, int64_t pos0, int n, int rows);
  // DSpark draft block (ratio 0, SPECDECODE §2.6): h [rows, hc, H] at positions
  // pos0..pos0+rows-1. The draft kv goes to transient rows [0, rows); every row attends
  // ring slots [0, n_ring) then all transient rows (no causal mask). No persistent write.
  void draft(LayerContext& ctx, const int32_t* ids, int64_t pos0, int rows, int n_ring,
             float* h);
  // SPECDECODE §2.5: ring slot p mod W = the kv path of x [1, H] (main_x) at position p.
  void write_context_row(LayerContext& ctx, const float* x, int64_t p);
  void reset(Ops& ops) { cache_.reset(ops); }
  void fill_for_benchmark(Ops& ops, int64_t pos, uint64_t seed) { cache_.fill_for_benchmark(ops, pos, seed); }

  const BlockWeights& weights() const { return w_; }
  const LayerCache& cache() const { return cache_; }

 private:
  // The L-bf16 linears of the block: Ops::linear_fp8 / linear_bf16, or their GEMMs when
  // ctx.gemm.
  static void linear(LayerContext& ctx, const Fp8Linear& w, const float* x, int rows, float* y);
  static void linear(LayerContext& ctx, const TensorView& w, const float* x, int rows, float* y);
  // decode (round false, one row) and verify (round true): the rows at ws.step.
  void step_rows(LayerContext& ctx, int rows, bool round, float* h, float* taps);
  void count_rows(int64_t pos0, int rows, bool round);
  // Rope of v [rows, heads, dim] at the rows' positions: ws.step's (ctx.device_step) or
  // the host ws.positions.
  void rope_rows(LayerContext& ctx, float* v, int rows, int heads, int dim, bool inverse);
  void attention_front(LayerContext& ctx, const float* h, int rows);  // input, then query
  void attention_input(LayerContext& ctx, const float* h, int rows);
  void query(LayerContext& ctx, int rows);
  void kv_path(LayerContext& ctx, int rows, float* kv);
  void indexer_query(LayerContext& ctx, int rows);
  void upload_index(LayerContext& ctx, const MergedIndex& m, int rows);
  // The merged index rows of a prefill (pos0 0) or chunk call of `rows` rows in backend
  // memory (ws.call_index of this layer's ratio): built and uploaded by the call's first
  // layer of the class, the same rows for the rest (issue 13).
  const CallIndex& call_index(LayerContext& ctx, int64_t pos0, int rows);
  // The top-k and the attention read and write the index rows idx [rows, m.width].
  void indexer_select(LayerContext& ctx, const MergedIndex& m, int32_t* idx, int rows,
                      const float* keys, int index_base);
  void attention_back(LayerContext& ctx, const float* kv_source, const MergedIndex& m,
                      const int32_t* idx, const float* h, int rows);
  // ids: host [rows], or the StepState token (backend) when ctx.device_step.
  void ffn(LayerContext& ctx, const int32_t* ids, int rows, float* h);
  void write_taps(LayerContext& ctx, const float* h, int rows, float* taps);
  // S14: the taps of a prefill (or chunk) of `rows` rows: its last min(W, rows) rows.
  void write_last_taps(LayerContext& ctx, const float* h, int rows, float* taps);

  BlockWeights w_;
  const RopeTable* rope_;
  LayerCache cache_;
  int tap_col_;
};

// Makes every tensor of a block resident on the backend (Ops::prepare).
void prepare_block(Ops& ops, const BlockWeights& b);

}  // namespace dsv4
