// Shape checks the CUDA linears (linear.cu's GEMVs, gemm_prefill.cu's GEMMs) share: an
// Error naming the op and the tensor.
#pragma once
#include <cstdint>

#include "base/error.h"
#include "kernels/ops.h"

namespace dsv4::cuda {

inline void require_2d(const TensorView& t, const char* what) {
  if (t.shape.size() != 2) throw Error(cat(what, ": weight '", t.name, "' must be 2-D [out, in]"));
}

// §4.21: the rows Or of one wo_a group, when wo_a's rows divide into `groups`.
inline int64_t wo_a_group_rows(const Fp8Linear& wo_a, int groups, const char* what) {
  const int64_t out = wo_a.out();
  if (groups <= 0 || out % groups != 0)
    throw Error(cat(what, ": '", wo_a.weight.name, "' has ", out, " rows, not divisible into ", groups,
                    " groups"));
  return out / groups;
}

}  // namespace dsv4::cuda
