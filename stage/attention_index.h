// Merged attention index rows of one layer (MODEL.md §4.19): window part first,
// compressed part second, one uniform width for all rows of a call, -1 pads (bit-inert,
// §6.8 law 3). Built on the host from kernels/index_laws; the indexer's top-k columns
// (ratio 4) are left -1 here and written on the backend by Ops::indexer_topk.
#pragma once
#include <cstdint>
#include <vector>

namespace dsv4 {

struct MergedIndex {
  int width = 0;                   // columns per row
  int window_width = 0;            // columns [0, window_width): window part
  int tail_width = 0;              // columns [window_width, width): compressed part
  std::vector<int32_t> n_visible;  // ratio 4: compressed blocks row t may score [rows]
};

// Prefill of s rows from position 0 (§4.15, §4.17, §4.18 steps 5-7): KV-source rows
// [0, s) are the window latents, row s + j is compressed block j. idx [s, width].
MergedIndex prefill_index(int ratio, int s, int window, int index_topk,
                          std::vector<int32_t>& idx);

// Rows at positions pos0 .. pos0+rows-1 against the layer cache (§4.15 decode law,
// §4.17 decode law, §6.5): compressed block j at kvc row W + j. trans_base < 0: the
// window addresses the ring (plain decode); else SPECDECODE §4.2 redirect of in-round
// positions to transient rows trans_base + (q - pos0). idx [rows, width].
MergedIndex step_index(int ratio, int64_t pos0, int rows, int window, int index_topk,
                       int64_t trans_base, std::vector<int32_t>& idx);

// The one shape of every plain decode row of a layer (Ops::decode_index writes the rows
// on the backend from the StepState position): the tail at the layer's capacity of
// cap_blocks = max_seq / ratio blocks (ratio 4: min(index_topk, cap_blocks) top-k
// columns), so neither the width nor any op argument changes with the position. The
// columns past step_index's width are -1 pads (bit-inert, §6.8 law 3). n_visible empty.
MergedIndex decode_index_shape(int ratio, int window, int index_topk, int cap_blocks);

// SPECDECODE §2.6 step 4 (DSpark draft block): every one of `rows` rows lists ring slots
// 0 .. n_ring-1 (slot order), then the transient rows trans_base .. trans_base+rows-1.
// No causal mask, no pads. idx [rows, n_ring + rows].
MergedIndex draft_index(int n_ring, int rows, int64_t trans_base, std::vector<int32_t>& idx);

}  // namespace dsv4
