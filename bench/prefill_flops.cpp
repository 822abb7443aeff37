#include "bench/prefill_flops.h"

#include <algorithm>

namespace dsv4 {
namespace {

// Per row of layer l, 2 x the multiply-adds of its matrices (MODEL.md §2.2 shapes):
//   hc_pre of attention and FFN:   2 * M * hc*H          (M = (2 + hc) hc)
//   wq_a, wq_b, wkv:               Qr*H + nh*D*Qr + D*H
//   grouped wo_a, wo_b:            G * Or * (nh*D/G) + H * G*Or
//   router gate, shared, routed:   E*H + S * 3*I*H + K * 3*I*H  (K of the E experts run)
//   compressor (r > 0):            2 * Lc*H              (wkv, wgate; Lc = (1 + overlap) D)
//   indexer (r = 4):               Ih*Id*Qr + Ih*H + 2 * 2Id*H  (wq_b, weights_proj, compressor)
double dense_row_flops(const ModelConfig& c, int layer) {
  const double H = c.hidden_size, D = c.head_dim, nh = c.num_attention_heads;
  const double I = c.moe_intermediate_size, Ih = c.index_n_heads, Id = c.index_head_dim;
  const int r = c.ratio(layer);
  double mac = 2.0 * c.hc_mix() * c.hc_mult * H;
  mac += c.q_lora_rank * H + nh * D * c.q_lora_rank + D * H;
  mac += static_cast<double>(c.o_lora_rank) * nh * D + H * c.o_groups * c.o_lora_rank;
  mac += c.n_routed_experts * H + (c.n_shared_experts + c.num_experts_per_tok) * 3.0 * I * H;
  if (r > 0) mac += 2.0 * (c.overlap(layer) ? 2 : 1) * D * H;
  if (c.has_indexer(layer)) mac += Ih * Id * c.q_lora_rank + Ih * H + 2.0 * 2 * Id * H;
  return 2 * mac;
}

// Per row at position p: sink attention, QK^T and PV over its keys (4 nh D per key),
// the keys being min(p + 1, W) window rows plus the compressed rows it reads (r = 4: the
// indexer's top-k of the (p + 1) / 4 complete blocks, §4.17; other r: every complete
// block), and the r = 4 indexer's scores of every complete block (2 Ih Id per block).
double context_row_flops(const ModelConfig& c, int layer, int64_t p) {
  const double nh = c.num_attention_heads, D = c.head_dim;
  const int r = c.ratio(layer);
  const int64_t blocks = r > 0 ? (p + 1) / r : 0;
  const int64_t window = std::min<int64_t>(p + 1, c.sliding_window);
  const int64_t compressed = c.has_indexer(layer) ? std::min<int64_t>(blocks, c.index_topk) : blocks;
  double f = 4.0 * nh * D * static_cast<double>(window + compressed);
  if (c.has_indexer(layer)) f += 2.0 * c.index_n_heads * c.index_head_dim * static_cast<double>(blocks);
  return f;
}

}  // namespace

double prefill_flops(const ModelConfig& c, int64_t prompt_len) {
  double f = 2.0 * static_cast<double>(c.vocab_size) * c.hidden_size;  // the head's last row
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    f += dense_row_flops(c, l) * static_cast<double>(prompt_len);
    for (int64_t p = 0; p < prompt_len; ++p) f += context_row_flops(c, l, p);
  }
  return f;
}

}  // namespace dsv4
