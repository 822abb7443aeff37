// One window law for every path (MODEL.md §4.15): entry k of the row for query position
// p (width w <= W) is position max(0, p-W+1) + k, or a pad when that exceeds p. Prefill,
// decode and verify differ only in how a position is addressed.
#include "kernels/index_laws.h"

#include <algorithm>

#include "base/error.h"

namespace dsv4 {
namespace {

void check_window(int W, const char* what) {
  if (W <= 0) throw Error(cat(what, ": window size W = ", W, " must be positive"));
}

// Writes width entries for query position p; address(q) maps a position to its row.
template <class Address>
void window_row(int64_t p, int width, int W, int32_t* row, Address address) {
  const int64_t first = std::max<int64_t>(0, p - W + 1);
  for (int k = 0; k < width; ++k) {
    const int64_t q = first + k;
    row[k] = q > p ? -1 : address(q);
  }
}

}  // namespace

std::vector<int32_t> window_prefill_rows(int s, int W) {
  check_window(W, "window_prefill_rows");
  if (s < 0) throw Error(cat("window_prefill_rows: negative token count s = ", s));
  const int width = std::min(s, W);
  std::vector<int32_t> idx(static_cast<size_t>(s) * width);
  for (int t = 0; t < s; ++t)
    window_row(t, width, W, idx.data() + static_cast<size_t>(t) * width,
               [](int64_t q) { return static_cast<int32_t>(q); });
  return idx;
}

std::vector<int32_t> window_decode_row(int64_t p, int W) {
  check_window(W, "window_decode_row");
  if (p < 0) throw Error(cat("window_decode_row: negative position p = ", p));
  std::vector<int32_t> row(W);
  window_row(p, W, W, row.data(), [W](int64_t q) { return static_cast<int32_t>(q % W); });
  return row;
}

std::vector<int32_t> window_verify_row(int64_t p, int64_t pos0, int W, int64_t trans_base) {
  check_window(W, "window_verify_row");
  if (pos0 < 0 || p < pos0)
    throw Error(cat("window_verify_row: position p = ", p, " precedes the round start pos0 = ",
                    pos0));
  std::vector<int32_t> row(W);
  window_row(p, W, W, row.data(), [&](int64_t q) {
    return static_cast<int32_t>(q >= pos0 ? trans_base + (q - pos0) : q % W);
  });
  return row;
}

std::vector<int32_t> coarse_prefill_rows(int s, int r) {
  if (r <= 0) throw Error(cat("coarse_prefill_rows: ratio r = ", r, " must be positive"));
  if (s < 0) throw Error(cat("coarse_prefill_rows: negative token count s = ", s));
  const int nb = s / r;
  std::vector<int32_t> idx(static_cast<size_t>(s) * nb);
  for (int t = 0; t < s; ++t) {
    const int visible = (t + 1) / r;  // blocks whose last token is <= t
    for (int j = 0; j < nb; ++j) idx[static_cast<size_t>(t) * nb + j] = j < visible ? s + j : -1;
  }
  return idx;
}

std::vector<int32_t> coarse_decode_row(int64_t p, int r, int W) {
  if (r <= 0) throw Error(cat("coarse_decode_row: ratio r = ", r, " must be positive"));
  if (p < 0) throw Error(cat("coarse_decode_row: negative position p = ", p));
  const int64_t nb = (p + 1) / r;
  std::vector<int32_t> row(static_cast<size_t>(nb));
  for (int64_t j = 0; j < nb; ++j) row[j] = static_cast<int32_t>(W + j);
  return row;
}

}  // namespace dsv4
