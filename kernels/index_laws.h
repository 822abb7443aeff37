// Host builders of the attention index rows (MODEL.md §4.15, §4.17, §6.3; SPECDECODE.md
// §4.2). Entries address rows of the attention's KV source; -1 is a pad. Backend
// independent: the stage builds rows here and uploads them.
#pragma once
#include <cstdint>
#include <vector>

namespace dsv4 {

// §4.15 prefill of s tokens from position 0: [s, min(s, W)]; row t lists positions
// max(0, t-W+1) .. t ascending (= KV-source rows), then -1 up to the width.
std::vector<int32_t> window_prefill_rows(int s, int W);

// §4.15 / §6.3 decode at position p: [W] ring slots (slot q mod W holds position q),
// oldest position first; [0 .. p] then -1 while p < W-1.
std::vector<int32_t> window_decode_row(int64_t p, int W);

// SPECDECODE.md §4.2: the decode row of p with each position q re-addressed to
// trans_base + (q - pos0) when q >= pos0 (in-round transient row), q mod W otherwise
// (persistent ring); same entry order and pads as window_decode_row.
std::vector<int32_t> window_verify_row(int64_t p, int64_t pos0, int W, int64_t trans_base);

// §4.17 coarse prefill (non-overlap ratio r): [s, s/r]; idx[t][j] = s + j if
// j < (t+1)/r, else -1 (compressed block j is KV-source row s + j).
std::vector<int32_t> coarse_prefill_rows(int s, int r);

// §4.17 coarse decode at p: [(p+1)/r] entries W + j (includes a block emitted at p).
std::vector<int32_t> coarse_decode_row(int64_t p, int r, int W);

}  // namespace dsv4
