// hc_pre_norm's fused kernels (issue 12; MODEL.md §4.4 steps 1-3 then §4.2): the mix
// partials, then y = the collapse and x = rmsnorm(y) in the same launch, bit for bit
// hc_pre's y then the rmsnorm op's x (the split, post / comb, stays hc.cu's, on its side
// stream). Host-includable (CudaOps::hc_pre_norm and the dev bench call it); device pointers,
// f32 or bf16 weights.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::cuda {

// last_block: the block that takes the grid's last ticket reduces the partials, collapses
// and norms every row alone. cluster4 / cluster8: the last ticket's thread-block cluster
// (4 or 8 blocks, sm_90) shares the collapse and the norm (hc_pre_norm.cu).
enum class HcNormKernel { last_block, cluster4, cluster8 };

struct HcWeight {  // a weight tensor on the device, f32 or bf16
  const void* p;
  bool bf16;
};

struct HcPreNormArgs {
  const float* h;  // [rows, hc, hidden]
  int rows, hc, hidden, m;
  HcWeight fn, scale, base;  // hc_pre's fn [m, hc * hidden], scale [3], base [m]
  HcWeight norm;             // [hidden]
  double norm_eps, hc_eps;
  unsigned* ticket;  // 0 before the launch, 0 after it (a counter no concurrent launch shares)
  double* part;      // hc_part_count(rows, hc * hidden, m) doubles: the partials (the split reads them)
  float *y, *x;      // [rows, hidden]
};

// Whether `kernel` takes these rows and shapes on the current device; where none does,
// the caller runs hc_pre then rmsnorm (the same bits).
bool hc_pre_norm_takes(HcNormKernel kernel, int rows, int hc, int hidden, int m);

// How many clusters of a cluster kernel the device holds at once at these shapes
// (cudaOccupancyMaxActiveClusters): below the grid's slices / cluster, its mix takes two
// waves (the dev bench prints it).
int hc_pre_norm_resident_clusters(HcNormKernel kernel, int rows, int hc, int hidden, int m);

// The fused op by `kernel` (which must take the shapes), with the PDL attribute where it is on.
void hc_pre_norm_fused(HcNormKernel kernel, const HcPreNormArgs& a, cudaStream_t stream);

}  // namespace dsv4::cuda
