// MODEL.md §4.15-§4.19; SPECDECODE.md §4.2 (uniform width with -1 pads).
#include "stage/attention_index.h"

#include <algorithm>

#include "kernels/index_laws.h"

namespace dsv4 {
namespace {

constexpr int kOverlapRatio = 4;  // the only overlap ratio; the indexer exists iff r == 4

// Copies `part` (row-major, `part_width` columns) into columns [col0, col0+part_width)
// of idx rows of width `width`.
void place_columns(std::vector<int32_t>& idx, int width, int row, int col0,
                   const std::vector<int32_t>& part) {
  std::copy(part.begin(), part.end(), idx.begin() + static_cast<int64_t>(row) * width + col0);
}

}  // namespace

MergedIndex prefill_index(int ratio, int s, int window, int index_topk,
                          std::vector<int32_t>& idx) {
  MergedIndex m;
  // The window part is W columns whatever s (-1 pads past the prompt, bit-inert: §6.8 law
  // 3), so every row's entries sit in the columns step_index gives its position: the
  // first chunk of a chunked prefill then has the unchunked prefill's layout, and a
  // kernel that groups columns (attention_prefill.cu's 16-entry tiles) the same bits.
  m.window_width = window;
  const int window_entries = std::min(s, window);  // window_prefill_rows' row width
  if (ratio == kOverlapRatio) {
    m.tail_width = std::min(index_topk, s / ratio);
    m.n_visible.resize(s);
    for (int t = 0; t < s; ++t) m.n_visible[t] = (t + 1) / ratio;  // §4.18 step 5
  } else if (ratio > 0) {
    m.tail_width = s / ratio;
  }
  m.width = m.window_width + m.tail_width;
  idx.assign(static_cast<size_t>(s) * m.width, -1);
  const std::vector<int32_t> win = window_prefill_rows(s, window);
  const std::vector<int32_t> coarse =
      (ratio > 0 && ratio != kOverlapRatio) ? coarse_prefill_rows(s, ratio)
                                            : std::vector<int32_t>{};
  for (int t = 0; t < s; ++t) {
    std::copy_n(win.begin() + static_cast<int64_t>(t) * window_entries, window_entries,
                idx.begin() + static_cast<int64_t>(t) * m.width);
    if (!coarse.empty())
      std::copy_n(coarse.begin() + static_cast<int64_t>(t) * m.tail_width, m.tail_width,
                  idx.begin() + static_cast<int64_t>(t) * m.width + m.window_width);
  }
  return m;
}

MergedIndex step_index(int ratio, int64_t pos0, int rows, int window, int index_topk,
                       int64_t trans_base, std::vector<int32_t>& idx) {
  MergedIndex m;
  m.window_width = window;
  // SPECDECODE §4.2 uniform width: the widest row's tail; rows with fewer visible
  // blocks are padded with -1.
  const int64_t nb_last = (pos0 + rows) / std::max(ratio, 1);  // nb of the last row
  if (ratio == kOverlapRatio) {
    m.tail_width = static_cast<int>(std::min<int64_t>(index_topk, nb_last));
    m.n_visible.resize(rows);
    for (int i = 0; i < rows; ++i) m.n_visible[i] = static_cast<int32_t>((pos0 + i + 1) / ratio);
  } else if (ratio > 0) {
    m.tail_width = static_cast<int>(nb_last);
  }
  m.width = m.window_width + m.tail_width;
  idx.assign(static_cast<size_t>(rows) * m.width, -1);
  for (int i = 0; i < rows; ++i) {
    const int64_t p = pos0 + i;
    place_columns(idx, m.width, i, 0,
                  trans_base < 0 ? window_decode_row(p, window)
                                 : window_verify_row(p, pos0, window, trans_base));
    if (ratio > 0 && ratio != kOverlapRatio)
      place_columns(idx, m.width, i, m.window_width, coarse_decode_row(p, ratio, window));
  }
  return m;
}

MergedIndex decode_index_shape(int ratio, int window, int index_topk, int cap_blocks) {
  MergedIndex m;
  m.window_width = window;
  if (ratio == kOverlapRatio)
    m.tail_width = std::min(index_topk, cap_blocks);
  else if (ratio > 0)
    m.tail_width = cap_blocks;
  m.width = m.window_width + m.tail_width;
  return m;
}

MergedIndex draft_index(int n_ring, int rows, int64_t trans_base, std::vector<int32_t>& idx) {
  MergedIndex m;
  m.window_width = m.width = n_ring + rows;
  idx.resize(static_cast<size_t>(rows) * m.width);
  for (int i = 0; i < rows; ++i) {
    int32_t* row = idx.data() + static_cast<int64_t>(i) * m.width;
    for (int k = 0; k < n_ring; ++k) row[k] = k;
    for (int j = 0; j < rows; ++j) row[n_ring + j] = static_cast<int32_t>(trans_base + j);
  }
  return m;
}

}  // namespace dsv4
