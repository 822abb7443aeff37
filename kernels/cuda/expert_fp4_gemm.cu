// The prefill routed-expert GEMM on the fragment layout (expert_fp4_gemm.cuh): the
// mma.sync kernel's multiply on the shared chunk walk (expert_fp4_gemm_walk.cuh), the
// kernel choice and routed_fp4_gemm.
//
// The mma.sync multiply: a lane decodes each of its A fragments once (frag_step_pair) and
// feeds it to one mma per used n8 tile, its B fragments read from the stage by one 16-byte
// load a step pair (activations [p 4][col 64][t 4] uint4, lane t's uint4 p of column col:
// steps 2p, 2p + 1; each p plane padded by 2: a staging thread's 8 neighbours (t, p) land
// on distinct banks, a reading warp's 32 lanes (g, t) read 512 contiguous bytes).
#include "kernels/cuda/expert_fp4_gemm.cuh"

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/expert_fp4_gemm_walk.cuh"
#include "kernels/cuda/scratch_carve.h"

namespace dsv4::cuda {

namespace {

using namespace fp4_gemm;

// One 16-byte shared-memory load (PTX ld.shared.v4): a warp's 32 lanes reading 512
// contiguous bytes take 4 wavefronts; left to itself the compiler splits the B load into
// two 8-byte loads (x, y for one step, z, w for the next), 8 wavefronts, and the B reads
// (512 bytes for every two mma) are what the shared-memory pipe carries most.
__device__ inline uint4 lds128(const uint4* p) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p)))
               : "memory");
  return v;
}

struct MmaSyncPolicy {
  static constexpr bool kBulkRing = false;
  static constexpr int kActPlane = kTileSlots * 4 + 2;
  static constexpr int kActU4 = 4 * kActPlane;
  // Piece 4t + p of a column's chunk (fragment order: lane t's uint4 p).
  __device__ static int act_at(int col, int piece) { return piece % 4 * kActPlane + col * 4 + piece / 4; }
  __device__ static void staged() {}

  // acc[n] += the chunk's products for n8 tiles n < min(T, used) (one mma per tile and
  // step, each tile's B uint4 of a step pair by one lds128). The tile loops break at used:
  // none is left where used is T at compile time.
  template <int T, bool NV>
  __device__ static void chunk_of(const Stage& st, int warp, int used, float (&acc)[kNt][4]) {
    using Scales = std::conditional_t<NV, uint4, uint2>;
    const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
    float chunk[kNt][4] = {};
    const Scales sc = reinterpret_cast<const Scales*>(st.scales)[warp * 8 + g];
#pragma unroll
    for (int u = 0; u < kUnits; ++u) {
      const uint4 unit = st.codes[(warp * kUnits + u) * kWarp + lane];
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const FragPair f = frag_step_pair<NV>(unit, sc, u, p);
        const uint4* b = st.act + (2 * u + p) * kActPlane + g * 4 + t;  // column 8n + g, lane t
#pragma unroll
        for (int n = 0; n < T; ++n) {
          if (n >= used) break;  // uniform over the block
          frag_pair_mma<NV>(f, lds128(b + n * kMmaCols * 4), chunk[n]);
        }
      }
    }
#pragma unroll
    for (int n = 0; n < T; ++n) {
      if (n >= used) break;
      frag_chunk_scaled<NV>(st.act_scale + n * kMmaCols, chunk[n], acc[n]);
    }
  }

  // 1-4 n8 tiles compiled for their count; 5-8 share one body with the loops' breaks (a
  // body for each of them spilled the walk's registers: 32-184 bytes, reloaded every chunk).
  template <bool NV>
  __device__ static void chunk(const Stage& st, int warp, bool active, bool, int used, float (&acc)[kNt][4]) {
    if (!active) return;
    with_tiles<5>(used, [&](auto tiles) {
      constexpr int T = decltype(tiles)::value;
      if constexpr (T < 5)
        chunk_of<T, NV>(st, warp, T, acc);
      else
        chunk_of<kNt, NV>(st, warp, used, acc);
    });
  }
};

}  // namespace

namespace {
// The device's compute capability as {major, minor}.
std::pair<int, int> compute_capability(int device) {
  int major = 0, minor = 0;
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return {major, minor};
}
}  // namespace

bool fp4_wgmma_runs_on(int device) {
  return compute_capability(device) == std::pair{9, 0};  // the sm_90a code runs there alone
}

Fp4GemmKernel fp4_gemm_kernel_on(Fp4GemmKernel kernel, bool nv, int device) {
  // `automatic`: dsv4-dev-moe-prefill at 4b66632 on one H200 (bit for bit the decode kernel
  // on every line): NVFP4 wgmma / mma_sync 1.22-1.26x at 1,024 rows, 1.30-1.43x at 2,048;
  // MXFP4 (ceb4662) 1.15x at 1,024 uniform rows but 0.91-0.99x skewed and 0.95-1.03x at
  // 2,048, so MXFP4 keeps mma_sync (bench/RESULTS.md, tenth session). At 871afa1 the
  // mbarrier ring (wgmma_tma, the same bits) is 1.04-1.10x wgmma on every NVFP4 line; on
  // MXFP4 it beats mma_sync's up (1.04x) but not its down (0.92x): NVFP4 takes it (eleventh
  // session).
  if (kernel == Fp4GemmKernel::automatic)
    return nv && fp4_wgmma_runs_on(device) ? Fp4GemmKernel::wgmma_tma : Fp4GemmKernel::mma_sync;
  if (kernel != Fp4GemmKernel::mma_sync && !fp4_wgmma_runs_on(device)) {
    const auto [major, minor] = compute_capability(device);
    throw Error(cat("expert_fp4_gemm: the ", kernel == Fp4GemmKernel::wgmma ? "wgmma" : "wgmma_tma",
                    " kernel needs a compute capability 9.0 device; device ", device, " is ",
                    major, ".", minor));
  }
  return kernel;
}

ActOrder fp4_gemm_act_order(Fp4GemmKernel kernel) {
  return kernel == Fp4GemmKernel::mma_sync ? ActOrder::fragment : ActOrder::k;
}

void launch_expert_fp4_gemm(bool up, bool nv, Fp4GemmKernel kernel, const Fp4GemmArgs& a, int device,
                            cudaStream_t stream) {
  if (a.m <= 0 || a.k <= 0 || a.m % kMmaRows != 0 || a.k % kChunk != 0)
    throw Error(cat("expert_fp4_gemm: a ", a.m, " x ", a.k, " projection is not whole ", kMmaRows, " x ", kChunk,
                    " blocks"));
  // A slot's activation offset in 32 bits: at most tiles_max x 64 slots (Copies).
  if (a.tiles_max * kTileSlots * (a.k / 8) > INT32_MAX)
    throw Error(cat("expert_fp4_gemm: ", a.tiles_max, " tiles of ", a.k, "-wide activations exceed 32-bit offsets"));
  if (kernel == Fp4GemmKernel::wgmma)
    launch_wgmma(up, nv, a, device, stream);
  else if (kernel == Fp4GemmKernel::wgmma_tma)
    launch_wgmma_tma(up, nv, a, device, stream);
  else if (kernel == Fp4GemmKernel::mma_sync)
    launch_walk<MmaSyncPolicy>(up, nv, a, device, stream);
  else
    throw Error("expert_fp4_gemm: a kernel must be named (fp4_gemm_kernel_on resolves automatic)");
}

namespace {

// routed_fp4_gemm's scratch in floats (carve: each part 32-byte aligned): xq [rows, H] halves, xs
// [rows, H / 128], h [S, I], hq [S, I] halves, hs [S, I / 128] (S = rows k slots).
std::array<int64_t, 5> scratch_parts(int64_t rows, int k, int64_t hidden, int64_t inter) {
  const int64_t slots = rows * k;
  return {rows * hidden / 2, rows * hidden / kChunk, slots * inter, slots * inter / 2, slots * inter / kChunk};
}

}  // namespace

int64_t routed_fp4_gemm_scratch(int64_t rows, int k, int64_t hidden, int64_t inter) {
  return static_cast<int64_t>(carved_floats(scratch_parts(rows, k, hidden, inter)));
}

void routed_fp4_gemm(const RoutedFp4Gemm& c, float* scratch, float* y, int device, cudaStream_t stream) {
  const auto [xq_f, xs, h, hq_f, hs] = carve(scratch, scratch_parts(c.rows, c.k, c.hidden, c.inter));
  auto* xq = reinterpret_cast<__half*>(xq_f);
  auto* hq = reinterpret_cast<__half*>(hq_f);
  const Fp4GemmKernel kernel = fp4_gemm_kernel_on(c.kernel, c.nv, device);
  const ActOrder order = fp4_gemm_act_order(kernel);
  act_fp16_rows(c.x, c.rows, c.hidden, xq, xs, stream, order);
  Fp4GemmArgs a{c.experts, c.tile_expert, c.tile_slot, c.tile_count, c.tiles_max, xq,
                xs,        c.k,           c.inter,     c.hidden,     h,           c.wt, c.limit};
  launch_expert_fp4_gemm(true, c.nv, kernel, a, device, stream);
  act_fp16_rows(h, int64_t{c.rows} * c.k, c.inter, hq, hs, stream, order);  // re-quantized after the weight (§4.23)
  a.act = hq;
  a.act_scale = hs;
  a.act_div = 1;
  a.m = c.hidden;
  a.k = c.inter;
  a.out = y;
  launch_expert_fp4_gemm(false, c.nv, kernel, a, device, stream);
}

}  // namespace dsv4::cuda
