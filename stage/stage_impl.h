// Stage::Impl: the layers of one stage, their shared workspace, the rope tables, the
// embedding (first stage) and head (last stage) weights, and the sequence state.
#pragma once
#include <memory>
#include <vector>

#include "stage/layer.h"
#include "stage/stage.h"
#include "stage/workspace.h"

namespace dsv4 {

struct Stage::Impl {
  Impl(Checkpoint& ckpt, Ops& ops, const StageSpec& spec);

  Ops& ops;
  const ModelConfig& cfg;
  StageSpec spec;
  int tmax = 0;                        // verify depth ceiling B + 1 (0: drafter off)
  int64_t chunk_rows = 0;              // rows of one prefill / extend operation
  int n_targets = 0;
  RopeTable plain, yarn;               // MODEL.md §4.6 (plain has max_seq + B rows)
  TensorView embed_table;              // first stage
  HeadWeights head;                    // last stage
  TensorView head_matrix;
  std::vector<std::unique_ptr<Layer>> layers;
  std::unique_ptr<Workspace> ws;
  uint64_t weight_bytes = 0;

  int64_t pos = 0;                     // positions consumed
  bool round_open = false;             // SPECDECODE §3.2
  int round_rows = 0;

  LayerContext context() { return LayerContext{ops, cfg, spec.numerics, *ws, n_targets}; }
  void check_tokens(const std::vector<int32_t>& ids, const char* what) const;
  void check_no_round(const char* what) const;
  // One plain decode row at pos (Stage::decode after its checks).
  void run_decode(int32_t token, float* h, float* taps, float* logits);
  // One verify round of ids.size() rows at pos (Stage::verify after its checks).
  void run_verify(const std::vector<int32_t>& ids, float* h, float* taps);
};

}  // namespace dsv4
