// The prefill MoE's routed experts on the fragment layout (issue 13; MODEL.md §4.23,
// native arm: e4m3 activations per 128): many rows of one prefill chunk, their (row, slot)
// pairs grouped by expert into tiles of up to 64 slots (expert_gemm.cuh: group_tiles, the
// list moe_gemm builds on the device), each tile's relaid weights (expert_fp4.cuh) read
// once and every decoded A fragment (16 rows x k16) fed to one mma per 8 slots of the tile
// (the mma.sync kernel) or, four warps' fragments (64 rows) together, to one wgmma over the
// tile's used slots (the wgmma kernel, compute capability 9.0; expert_kernel.h
// Fp4GemmKernel picks one).
// Every output is the decode fp4 kernel's (launch_expert_fp4) bit for bit: the same exact
// products and the same f32 order (expert_fp4_gemm.cu; docs/numerics.md "MoE experts").
// The engine's native arm runs it from CudaOps::moe_gemm (moe_prefill.cu, routed_fp4_gemm)
// on the table CudaOps::expert_table relaid in place; the dev bench
// (bench/dev/moe_prefill_variants.cu) on relaid copies.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/expert_fp4.cuh"
#include "kernels/cuda/expert_kernel.h"

namespace dsv4::cuda {

// One projection family (up or down) over a tile list.
struct Fp4GemmArgs {
  const ExpertFrag* experts;   // [n_experts], relaid, every projection of one recipe
  const int32_t* tile_expert;  // [tiles] (prefill_moe::DeviceTiles / TileList)
  const int32_t* tile_slot;    // [tiles * 64]
  const int32_t* tile_count;   // [1] the tiles of a device-built list; null: tiles_max is the count
  int64_t tiles_max;           // the list's bound: the grid is sized from it
  const __half* act;           // act_fp16_rows of the activation rows [rows, k], fp4_gemm_act_order's order
  const float* act_scale;      // [rows, k / 128]
  int act_div;                 // slot s's activation row: s / act_div (up: the layer's top-k; down: 1)
  int64_t m, k;                // weight rows (outputs) and columns
  float* out;                  // [slots, m]: h (up) or the expert's output (down)
  const float* wt;             // up: routing weight [slots]
  float limit;                 // up: SwiGLU clamp, <= 0 off (D16)
};

// Whether `device` runs the sm_90a wgmma kernel (compute capability 9.0).
bool fp4_wgmma_runs_on(int device);
// The kernel `automatic` names on `device` for NVFP4 (nv) or MXFP4 experts (wgmma_tma for NVFP4
// on a 9.0 device, mma_sync otherwise: the measurements at fp4_gemm_kernel_on); a named
// kernel as it is, wgmma and wgmma_tma refused by name on a device that cannot run them.
Fp4GemmKernel fp4_gemm_kernel_on(Fp4GemmKernel kernel, bool nv, int device);
// The order of the activation rows the kernel reads: the decode kernel's B-fragment order
// (mma_sync) or K order (wgmma, wgmma_tma: their B tiles are 16-byte runs of 8 consecutive k).
ActOrder fp4_gemm_act_order(Fp4GemmKernel kernel);

// up: h = swiglu(w1 x, w3 x) x wt (§4.23; m = inter); down: y = w2 h (m = hidden). m a
// multiple of 16, k of 128; NVFP4 (nv) or MXFP4 experts; `kernel` named (not
// automatic), a.act in its order (fp4_gemm_act_order).
void launch_expert_fp4_gemm(bool up, bool nv, Fp4GemmKernel kernel, const Fp4GemmArgs& a, int device,
                            cudaStream_t stream);

// The routed part of the native arm's moe_gemm on relaid experts: x [rows, hidden] ->
// y [rows * k, hidden], the slots' expert outputs (combine_experts then adds them): §4.9
// activations of x (act_fp16_rows), up, h re-quantized, down; rows >= 1. The tile list:
// expert, slot and count as prefill_moe::group_tiles writes them, tiles_max its bound;
// kernel: as fp4_gemm_kernel_on takes it.
struct RoutedFp4Gemm {
  Fp4GemmKernel kernel;
  const ExpertFrag* experts;
  bool nv;
  const int32_t *tile_expert, *tile_slot, *tile_count;
  int64_t tiles_max;
  const float* x;
  int rows, k;
  int64_t hidden, inter;
  const float* wt;  // [rows * k]
  float limit;
};
// The floats of scratch routed_fp4_gemm needs (its parts carved 32-byte aligned, scratch_carve.h).
int64_t routed_fp4_gemm_scratch(int64_t rows, int k, int64_t hidden, int64_t inter);
void routed_fp4_gemm(const RoutedFp4Gemm& c, float* scratch, float* y, int device, cudaStream_t stream);

}  // namespace dsv4::cuda
