// The prefill MoE (issue 13; MODEL.md §4.23-§4.24) on the decode MoE's FP4 tensor-core
// arithmetic (expert_mma.cuh), sized for many rows. The chunk's slots (row, j) are grouped
// by expert on the device (group_tiles_kernel: no host round trip per layer) into tiles of
// up to 64 slots of one expert; an item is 256 weight rows of one tile (up: 128 rows of w1
// and of w3), so each used expert's weights are read
// about once per chunk (decoded in registers, never materialized), and the tile's
// activations, staged once per K chunk in shared memory as exact bf16 planes, feed a
// block's 8 warps (each A fragment feeds up to 8 mma, one per 8 slots). The shared expert
// runs as dense GEMMs (linear_fp8_gemm); the combine adds each row's experts in ascending
// id, then the shared expert, as the CPU reference (every output written once, no atomics).
//
// This GEMM serves the bf16 expert arm, whose experts keep the checkpoint layout; the
// native arm's are relaid into the fragment layout at load (CudaOps::expert_table), and its
// routed experts run the fragment-layout prefill kernel (expert_fp4_gemm.cuh,
// routed_fp4_gemm) on the same device-built tile list. Both arms share the tile list, the
// shared expert's GEMMs and the combine.
//
// Numerics per arm (kernels/ops.h moe_gemm; docs/numerics.md "The prefill GEMMs"): the
// routed experts compute what `moe` computes, bit for bit — the bf16 arm: the same exact
// products (e2m1 x block scale x bf16-rounded activations, or f32 as three exact planes)
// and, for every output column, the same f32 order: chunk c into partial c % 8 (chunks
// ascending, the mma chained), the 8 partials added in order, then NVFP4's scale_2; the
// native arm: the decode fragment kernel's products and order (partial w over the
// contiguous chunks [w n / 8, (w + 1) n / 8), expert_fp4_gemm.cu). Only the shared
// expert's GEMM order differs from decode (law 2). The bf16 arm's expert kernel is
// expert_gemm.cuh's.
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/expert_fp4_gemm.cuh"
#include "kernels/cuda/expert_gemm.cuh"
#include "kernels/cuda/expert_kernel.h"

namespace dsv4 {
namespace {

using cuda::prefill_moe::kTileSlots;

constexpr int kGroupThreads = 256;
constexpr int kGroupPer = 4;  // consecutive slots per thread and pass of group_tiles_kernel
using GroupScan = cub::BlockScan<int, kGroupThreads>;

// Block e: counts[e] = the slots that select expert e.
__global__ void __launch_bounds__(kGroupThreads) count_slots_kernel(const int32_t* sel, int64_t slots,
                                                                    int32_t* counts) {
  __shared__ typename GroupScan::TempStorage scan;
  const int e = static_cast<int>(blockIdx.x);
  int c = 0;
  for (int64_t s = threadIdx.x; s < slots; s += kGroupThreads) c += sel[s] == e;
  int before = 0, total = 0;
  GroupScan(scan).ExclusiveSum(c, before, total);
  if (threadIdx.x == 0) counts[e] = total;
}

// Block e writes expert e's tiles where the host's order puts them (experts ascending,
// an expert's slots ascending, -1 past its last; expert_gemm.cuh TileList): its first
// tile follows the tiles of experts 0 .. e-1; a block scan per pass of kGroupThreads *
// kGroupPer consecutive slots places each hit after the hits before it. Block n_experts - 1
// writes the tile count. Ids outside [0, n_experts) join no tile (combine_experts adds NaN
// for them, as moe does). At most max_tiles tiles, the bound the list is sized by.
__global__ void __launch_bounds__(kGroupThreads) group_tiles_kernel(const int32_t* sel, int64_t slots,
                                                                    const int32_t* counts, int32_t* tile_expert,
                                                                    int32_t* tile_slot, int32_t* tile_count) {
  __shared__ typename GroupScan::TempStorage scan;
  const int e = static_cast<int>(blockIdx.x);
  int tiles_before = 0;
  for (int f = threadIdx.x; f < e; f += kGroupThreads) tiles_before += (counts[f] + kTileSlots - 1) / kTileSlots;
  int unused = 0, first = 0;
  GroupScan(scan).ExclusiveSum(tiles_before, unused, first);
  const int n = counts[e], tiles = (n + kTileSlots - 1) / kTileSlots;
  if (e == static_cast<int>(gridDim.x) - 1 && threadIdx.x == 0) *tile_count = first + tiles;
  if (n == 0) return;  // uniform
  int32_t* out = tile_slot + int64_t{first} * kTileSlots;
  int placed = 0;
  for (int64_t s0 = 0; s0 < slots; s0 += kGroupThreads * kGroupPer) {  // uniform trip count
    const int64_t s = s0 + int64_t{threadIdx.x} * kGroupPer;
    int hit[kGroupPer], at[kGroupPer];
#pragma unroll
    for (int i = 0; i < kGroupPer; ++i) hit[i] = s + i < slots && sel[s + i] == e;
    int total = 0;
    __syncthreads();  // the last scan's storage is read
    GroupScan(scan).ExclusiveSum(hit, at, total);
#pragma unroll
    for (int i = 0; i < kGroupPer; ++i)
      if (hit[i]) out[placed + at[i]] = static_cast<int32_t>(s + i);
    placed += total;
  }
  for (int j = n + threadIdx.x; j < tiles * kTileSlots; j += kGroupThreads) out[j] = -1;
  for (int t = threadIdx.x; t < tiles; t += kGroupThreads) tile_expert[first + t] = e;
}

}  // namespace

namespace cuda::prefill_moe {

// sum_e ceil(c_e / 64) <= floor((slots + 63 * distinct) / 64), and never more than one per slot.
int64_t max_tiles(int64_t slots, int64_t n_experts) {
  return std::min(slots, (slots + (kTileSlots - 1) * std::min(slots, n_experts)) / kTileSlots);
}

void group_tiles(const int32_t* sel, int64_t slots, int n_experts, const DeviceTiles& t, cudaStream_t stream) {
  count_slots_kernel<<<static_cast<unsigned>(n_experts), kGroupThreads, 0, stream>>>(sel, slots, t.counts);
  DSV4_CUDA_LAUNCH_CHECK();
  group_tiles_kernel<<<static_cast<unsigned>(n_experts), kGroupThreads, 0, stream>>>(sel, slots, t.counts, t.expert,
                                                                                     t.slot, t.count);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace cuda::prefill_moe

void CudaOps::moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                       int k, float swiglu_limit, const Numerics& num, float* out) {
  moe_gemm_on(cuda::Fp4GemmKernel::automatic, b, x, rows, sel, wt, k, swiglu_limit, num, out);
}

std::vector<cuda::Fp4GemmKernel> cuda::fp4_gemm_kernels(const Ops& ops) {
  std::vector<Fp4GemmKernel> out{Fp4GemmKernel::mma_sync};
  if (fp4_wgmma_runs_on(cuda_backend(ops, "fp4_gemm_kernels").device()))
    out.insert(out.end(), {Fp4GemmKernel::wgmma, Fp4GemmKernel::wgmma_tma});
  return out;
}

void cuda::moe_gemm_with(Ops& ops, Fp4GemmKernel kernel, const BlockWeights& b, const float* x, int rows,
                         const int32_t* sel, const float* wt, int k, float swiglu_limit, const Numerics& num,
                         float* out) {
  cuda_backend(ops, "moe_gemm_with").moe_gemm_on(kernel, b, x, rows, sel, wt, k, swiglu_limit, num, out);
}

void CudaOps::moe_gemm_on(cuda::Fp4GemmKernel kernel, const BlockWeights& b, const float* x, int rows,
                          const int32_t* sel, const float* wt, int k, float swiglu_limit, const Numerics& num,
                          float* out) {
  using namespace cuda::prefill_moe;
  const int hidden = static_cast<int>(b.shared_w1.in()), shared_inter = static_cast<int>(b.shared_w1.out());
  const int n_experts = static_cast<int>(b.experts.size());
  cuda::check_experts(b, k, hidden, num);
  const ExpertTable& table = expert_table(b, hidden, num.expert_arm);  // cp.async-aligned (checked there)
  const int inter = table.inter;
  const bool native = num.expert_arm == ExpertArm::native;
  if (rows == 0) return;
  DSV4_CHECK(reinterpret_cast<uintptr_t>(x) % 16 == 0, "moe_gemm: layer ", b.layer_id,
             " needs x 16-byte aligned (the activation planes read it in 128-bit loads)");
  activate();
  const int64_t S = static_cast<int64_t>(rows) * k, H = hidden, I = inter, Is = shared_inter;
  // The tile list [T] experts, [T * 64] slots, the count, then [n_experts] counts; T the
  // bound (max_tiles): the expert kernels' grids are sized from it and their blocks walk
  // the items of the count the device wrote.
  const int64_t T = max_tiles(S, n_experts);

  // Activation planes (the bf16 arm): bf16-rounded activations are bf16-exact (one
  // plane); f32 activations take three, so every product stays exact (moe.cu).
  const int P = num.act_bf16() ? 1 : 3;
  const int64_t R = native ? 0 : 1;  // the bf16 arm's GEMM parts, or none
  // Scratch (floats, each part 32-byte aligned): the slots' expert outputs y [S, H]; the
  // bf16 arm's h [S, I] and planes of x and of h; the native arm's routed_fp4_gemm scratch
  // (its e4m3 activations and h); the shared expert's gate / up / h [rows, Is] and out;
  // the tile list.
  const std::array<int64_t, 10> sizes{S * H, R * S * I, R * P * rows * H / 2, R * P * S * I / 2,
                                      native ? cuda::routed_fp4_gemm_scratch(rows, k, H, I) : 0,
                                      rows * Is, rows * Is, rows * Is, rows * H, T * (1 + kTileSlots) + 1 + n_experts};
  const auto [y, h, xb_f, hb_f, fp4_scratch, sg, su, sh_h, sh, tiles_f] = carve_scratch(Slot::f32_b, sizes);
  auto* xb = reinterpret_cast<uint4*>(xb_f);
  auto* hb = reinterpret_cast<uint4*>(hb_f);
  auto* tiles = reinterpret_cast<int32_t*>(tiles_f);  // int32 parts in float-sized words

  // §4.24: the shared expert, L-bf16 in every arm, unweighted.
  const bool shared_act = num.act_bf16();
  linear_fp8_gemm(b.shared_w1, x, rows, shared_act, sg);
  linear_fp8_gemm(b.shared_w3, x, rows, shared_act, su);
  cuda::shared_swiglu(sg, su, rows, shared_inter, swiglu_limit, sh_h, stream_);
  linear_fp8_gemm(b.shared_w2, sh_h, rows, shared_act, sh);

  int32_t *tile_slot = tiles + T, *tile_count = tile_slot + T * kTileSlots, *counts = tile_count + 1;
  group_tiles(sel, S, n_experts, DeviceTiles{tiles, tile_slot, tile_count, counts}, stream_);
  if (native) {
    // The fragment layout (CudaOps::expert_table relaid it in place): §4.9 activations of
    // x, up + SwiGLU, h re-quantized, down (expert_fp4_gemm.cuh).
    const cuda::RoutedFp4Gemm routed{kernel, static_cast<const cuda::ExpertFrag*>(table.table.ptr),
                                     b.experts.front().w1.recipe == ExpertRecipe::nvfp4,  // every expert's
                                     tiles, tile_slot, tile_count, T, x, rows, k, H, I, wt, swiglu_limit};
    cuda::routed_fp4_gemm(routed, fp4_scratch, y, device_, stream_);
  } else {
    const auto* experts = static_cast<const cuda::ExpertW*>(table.table.ptr);
    // One projection family over every tile: bf16 planes of `in` [n_in, K], then the kernel.
    auto project = [&](auto up, const float* in, int64_t n_in, int act_div, int64_t m, int64_t K, uint4* planes,
                       float* o) {
      constexpr bool Up = decltype(up)::value;
      const int64_t groups = n_in * K / kGroup;
      const GemmArgs args{experts, tiles, tile_slot, planes, groups, act_div, m, K, o, wt, swiglu_limit, tile_count};
      const int64_t items = T * ((m + kItemRows<Up> - 1) / kItemRows<Up>);  // at most
      auto run = [&](auto plane_count) {
        constexpr int Pc = decltype(plane_count)::value;
        bf16_planes_kernel<Pc><<<cuda::blocks_for(groups, kThreads), kThreads, 0, stream_>>>(in, groups, planes);
        DSV4_CUDA_LAUNCH_CHECK();
        launch_expert_gemm<Up, Pc>(args, items, sm_count_, stream_);
      };
      if (P == 1)
        run(std::integral_constant<int, 1>{});
      else
        run(std::integral_constant<int, 3>{});
    };
    project(std::true_type{}, x, rows, k, I, H, xb, h);
    project(std::false_type{}, h, S, 1, H, I, hb, y);
  }
  cuda::combine_experts(y, sh, sel, rows, k, hidden, n_experts, out, stream_);
}

}  // namespace dsv4
