// hc_post's column (MODEL.md §4.5), shared by hc_post_kernel (hc.cu) and the MoE's combine
// when it also writes hc_post (moe.cu, Ops::moe_hc_post), so both give the op's bits.
#pragma once
#include <cstdint>

#include "kernels/cuda/hc_device.cuh"

namespace dsv4::cuda {

// hc_post's inputs besides x: res [rows, hc, hidden], post [rows, hc], comb [rows, hc, hc];
// its output out [rows, hc, hidden].
struct HcPost {
  const float* res;
  const float* post;
  const float* comb;
  int hc;
  float* out;
  // The same for the rows from row0 on.
  HcPost from(int64_t row0, int64_t hidden) const {
    return {res + row0 * hc * hidden, post + row0 * hc, comb + row0 * hc * hc, hc, out + row0 * hc * hidden};
  }
};

// out[t,k,d] = post[t,k] xv + sum_j comb[t,j,k] res[t,j,d], j ascending, for xv = x[t,d]:
// the hc values res[t,:,d] read once, the hc outputs written, each in the CPU's order.
__device__ inline void hc_post_column(float xv, const HcPost& p, int64_t t, int d, int hidden) {
  const int hc = p.hc;
  const float* rt = p.res + t * hc * hidden + d;  // res[t, j, d] at rt[j * hidden]
  const float* ct = p.comb + t * hc * hc;         // comb[t, j, k] at ct[j * hc + k]
  float r[hc::kMaxHc];
#pragma unroll
  for (int j = 0; j < hc::kMaxHc; ++j)
    if (j < hc) r[j] = rt[static_cast<int64_t>(j) * hidden];
#pragma unroll
  for (int k = 0; k < hc::kMaxHc; ++k) {
    if (k >= hc) break;
    float acc = p.post[t * hc + k] * xv;
#pragma unroll
    for (int j = 0; j < hc::kMaxHc; ++j)
      if (j < hc) acc += ct[j * hc + k] * r[j];
    p.out[(t * hc + k) * hidden + d] = acc;
  }
}

}  // namespace dsv4::cuda
