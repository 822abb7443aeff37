// Device helpers the indexer's scoring (indexer.cu) and top-k (indexer_select.cu) share.
#pragma once
#include <cstdint>

namespace dsv4::cuda {

// Row t's visible keys, within [0, n_max] (a device n_visible is not checked on the host).
__device__ inline int64_t visible_keys(const int32_t* n_visible, int t, int64_t n_max) {
  const int64_t n = n_visible[t];
  return n < 0 ? 0 : (n > n_max ? n_max : n);
}

}  // namespace dsv4::cuda
