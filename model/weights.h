// Typed weight tables of one block, the head and the DSpark drafter, as views into
// the memory-mapped checkpoint (CHECKPOINT.md §2). Built and validated by
// checkpoint.h's loaders; consumed by kernels (which know nothing of files).
#pragma once
#include <optional>
#include <vector>

#include "model/tensor_view.h"

namespace dsv4 {

struct HcParams {      // §2.3
  TensorView fn;       // F32 [M, hc*H]
  TensorView base;     // F32 [M]
  TensorView scale;    // F32 [3]
};

struct CompressorWeights {  // §2.2 (attention compressor, or the indexer's)
  int ratio = 0;            // r
  bool overlap = false;     // r == 4: two series, latent 2d
  bool rotate = false;      // indexer compressor: Hadamard + FP4 QAT instead of act_quant
  int d = 0;                // output width (D, or Id for the indexer)
  TensorView wkv, wgate;    // BF16 or F32 [Lc, H], Lc = (overlap ? 2 : 1) * d
  TensorView ape;           // F32 [r, Lc]
  TensorView norm;          // [d]
  int latent() const { return overlap ? 2 * d : d; }
};

struct IndexerWeights {     // §2.2, r == 4 layers only
  Fp8Linear wq_b;           // [Ih*Id, Qr]
  TensorView weights_proj;  // BF16 [Ih, H]
  CompressorWeights compressor;
};

struct ExpertWeights {      // §2.5: w1 gate [I, H], w2 down [H, I], w3 up [I, H]
  Fp4Linear w1, w2, w3;
};

struct BlockWeights {
  int layer_id = 0;         // trunk l, or L + k for drafter block k
  int ratio = 0;
  bool hash = false;
  HcParams hc_attn, hc_ffn;
  TensorView attn_norm, ffn_norm;           // [H]
  Fp8Linear wq_a, wq_b, wkv, wo_a, wo_b;    // §2.1
  TensorView q_norm, kv_norm;               // [Qr], [D]
  TensorView attn_sink;                     // F32 [nh]
  std::optional<CompressorWeights> compressor;
  std::optional<IndexerWeights> indexer;
  TensorView gate_weight;                   // [E, H]
  std::optional<TensorView> gate_bias;      // F32 [E], score-routed layers
  std::vector<int32_t> tid2eid;             // [V*K] (hash layers), range-checked (C7)
  ExpertRecipe expert_recipe = ExpertRecipe::mxfp4;
  std::vector<ExpertWeights> experts;       // E
  Fp8Linear shared_w1, shared_w2, shared_w3;
};

struct HeadWeights {        // §2.6 (trunk head) — also the drafter's exit head fields
  TensorView norm;          // [H]
  TensorView hc_head_fn;    // F32 [hc, hc*H]
  TensorView hc_head_base;  // F32 [hc]
  TensorView hc_head_scale; // F32 [1]
};

struct DrafterWeights {     // §2.7 / SPECDECODE.md §2.2
  std::vector<BlockWeights> blocks;   // mtp.0 .. mtp.{N_blk-1}
  Fp8Linear main_proj;                // [H, T*H]
  TensorView main_norm;               // [H]
  HeadWeights exit;                   // mtp.last.{norm, hc_head_*}
  TensorView markov_w1, markov_w2;    // BF16 [V, R]
  TensorView confidence;              // BF16 [1, H + R]
};

}  // namespace dsv4
