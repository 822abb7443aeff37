// The wgmma kernel of the prefill routed-expert GEMM on the fragment layout
// (expert_fp4_gemm.cuh; docs/fp4-fragment-kernel.md "The wgmma prefill kernel"): the
// shared chunk walk (expert_fp4_gemm_walk.cuh) with each chunk multiplied by
// wgmma.mma_async.m64nNk16.f32.f16.f16, A from registers, B from shared memory. Compiled
// for sm_90a alone (kernels/CMakeLists.txt); run on a compute capability 9.0 device
// (fp4_gemm_kernel_on).
//
// A: warpgroup q (warps 4q .. 4q + 3) multiplies the item's 64 rows of its four warps;
// wgmma's register fragment of A for 16-bit types gives warp i of the warpgroup rows 16i ..
// 16i + 15 in the m16n8k16 A layout (lane (g, t): a_0 row g, k {2t, 2t+1}; a_1 row g + 8;
// a_2 row g, k {2t+8, 2t+9}; a_3 row g + 8, the same k), which is what frag_step_pair
// decodes for the warp's rows: each lane feeds its own decoded registers, no exchange. D:
// lane (g, t)'s registers 4n .. 4n + 3 are n8 tile n's (row g, columns 8n + 2t, 2t + 1;
// row g + 8, the same), the mma.sync C layout per n8 tile, so the walk's acc[n][i] serve
// both kernels.
//
// B: the stage's activations in wgmma's K-major canonical layout without swizzle: core
// matrix = 8 columns x 16 bytes (8 consecutive k), 128 contiguous bytes. Piece q (k 8q ..
// 8q + 7 of the chunk; step q / 2, K half q % 2) of column col at uint4 q kPlane + col:
// plane q holds the 64 columns' pieces q contiguously plus 16 bytes of padding (a staging
// warp's 8 neighbouring threads, pieces 0-7 or 8-15 of one column, land on distinct bank
// quads). The descriptor of step st: start = plane 2 st, leading byte offset (the K half)
// = kPlane 16 bytes, stride byte offset (the next 8 columns) = 128 bytes. The activation
// rows are therefore in K order (act_fp16_rows ActOrder::k: a column's 16-byte piece q is
// 8 consecutive k, one cp.async each).
//
// K order (the decode kernel's, as the mma.sync kernel's): NVFP4, the chunk's 8 k16 steps
// chained in the tensor core into chunk from zero (one wgmma a step, N = 8 x the tile's
// used n8 tiles), then acc = fma(s_a 2^14, chunk, acc) per n8 tile (frag_chunk_scaled);
// MXFP4, each 32-group's 2 steps chained from zero into d, then chunk = fma(group scale,
// d, chunk), groups ascending. The products are exact (expert_fp4.cuh); whether the bits
// equal the mma.sync kernel's is whether wgmma's k16 accumulation rounds as mma.sync's
// does (the twin test reports it; tests/gpu/test_moe_twin.cpp check_gemm_vs_moe).
//
// Ordering: each thread's landed cp.async writes are fenced to the async proxy
// (fence.proxy.async) before the chunk's barrier, which wgmma reads through; wgmma.fence
// before each step pair's wgmmas (their A registers were just written); one commit and
// wait_group 0 per chunk (NVFP4) or 32-group (MXFP4) before the accumulators are read, so
// the stage is free when the walk's next barrier lets it be refilled. A warpgroup whose
// first rows are past m skips the chunk; an idle warp of a working one (m not a multiple
// of 64) multiplies zero codes and scales (A = +0) and writes nothing.
//
// Two rings feed it: the walk's cp.async ring (WgmmaPolicy, launch_wgmma) and an mbarrier
// ring (WgmmaTmaPolicy, launch_wgmma_tma: Fp4GemmKernel::wgmma_tma), which changes only how
// the stage's bytes arrive and when a stage is reused, so both give the same bits.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/expert_fp4_gemm_walk.cuh"
#include "kernels/cuda/sm90a/mbarrier_ring.cuh"

namespace dsv4::cuda::fp4_gemm {

namespace {

constexpr int kPlane = kTileSlots + 1;  // uint4: a piece plane of 64 columns + padding

// The wgmma instructions exist on sm_90a alone: another target's compile of this file (as
// nvcc -arch=sm_90a's compute_90 PTX) keeps the symbols and traps.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSV4_SM90A_ASM(...) asm volatile(__VA_ARGS__)
#else
#define DSV4_SM90A_ASM(...) __trap()
#endif
__device__ inline void wgmma_fence() { DSV4_SM90A_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void wgmma_commit() { DSV4_SM90A_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// At most `kLeft` committed groups of this warp still running.
template <int kLeft>
__device__ inline void wgmma_wait() {
  DSV4_SM90A_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kLeft) : "memory");
}
// Orders the compiler's uses of accumulators d[0 .. T) after the wait (their values arrive with it).
template <int T>
__device__ inline void fence_operands(float (&d)[kNt][4]) {
#pragma unroll
  for (int n = 0; n < T; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[n][i])::"memory");
}

// d[n] += A B for n8 tiles n < T (N = 8 T): the instruction's accumulators d[0 .. T) are
// operands %0 .. %(4T - 1), then A and the descriptor (DSV4_WG_IN's numbers).
#define DSV4_WG_D(n) "+f"(d[n][0]), "+f"(d[n][1]), "+f"(d[n][2]), "+f"(d[n][3])
#define DSV4_WG_N8 "%0, %1, %2, %3"
#define DSV4_WG_N16 DSV4_WG_N8 ", %4, %5, %6, %7"
#define DSV4_WG_N24 DSV4_WG_N16 ", %8, %9, %10, %11"
#define DSV4_WG_N32 DSV4_WG_N24 ", %12, %13, %14, %15"
#define DSV4_WG_N40 DSV4_WG_N32 ", %16, %17, %18, %19"
#define DSV4_WG_N48 DSV4_WG_N40 ", %20, %21, %22, %23"
#define DSV4_WG_N56 DSV4_WG_N48 ", %24, %25, %26, %27"
#define DSV4_WG_N64 DSV4_WG_N56 ", %28, %29, %30, %31"
#define DSV4_WG_IN(a0, a1, a2, a3, b) "}, {%" #a0 ", %" #a1 ", %" #a2 ", %" #a3 "}, %" #b ", 1, 1, 1, 0;\n"
#define DSV4_WGMMA(N, IN, ...)                                                                         \
  DSV4_SM90A_ASM("wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16 {" DSV4_WG_N##N IN              \
               : __VA_ARGS__                                                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))

template <int T>
__device__ inline void wgmma_f16(float (&d)[kNt][4], const uint32_t (&a)[4], uint64_t desc) {
  if constexpr (T == 1) {
    DSV4_WGMMA(8, DSV4_WG_IN(4, 5, 6, 7, 8), DSV4_WG_D(0));
  } else if constexpr (T == 2) {
    DSV4_WGMMA(16, DSV4_WG_IN(8, 9, 10, 11, 12), DSV4_WG_D(0), DSV4_WG_D(1));
  } else if constexpr (T == 3) {
    DSV4_WGMMA(24, DSV4_WG_IN(12, 13, 14, 15, 16), DSV4_WG_D(0), DSV4_WG_D(1), DSV4_WG_D(2));
  } else if constexpr (T == 4) {
    DSV4_WGMMA(32, DSV4_WG_IN(16, 17, 18, 19, 20), DSV4_WG_D(0), DSV4_WG_D(1), DSV4_WG_D(2), DSV4_WG_D(3));
  } else if constexpr (T == 5) {
    DSV4_WGMMA(40, DSV4_WG_IN(20, 21, 22, 23, 24), DSV4_WG_D(0), DSV4_WG_D(1), DSV4_WG_D(2), DSV4_WG_D(3),
               DSV4_WG_D(4));
  } else if constexpr (T == 6) {
    DSV4_WGMMA(48, DSV4_WG_IN(24, 25, 26, 27, 28), DSV4_WG_D(0), DSV4_WG_D(1), DSV4_WG_D(2), DSV4_WG_D(3),
               DSV4_WG_D(4), DSV4_WG_D(5));
  } else if constexpr (T == 7) {
    DSV4_WGMMA(56, DSV4_WG_IN(28, 29, 30, 31, 32), DSV4_WG_D(0), DSV4_WG_D(1), DSV4_WG_D(2), DSV4_WG_D(3),
               DSV4_WG_D(4), DSV4_WG_D(5), DSV4_WG_D(6));
  } else {
    DSV4_WGMMA(64, DSV4_WG_IN(32, 33, 34, 35, 36), DSV4_WG_D(0), DSV4_WG_D(1), DSV4_WG_D(2), DSV4_WG_D(3),
               DSV4_WG_D(4), DSV4_WG_D(5), DSV4_WG_D(6), DSV4_WG_D(7));
  }
}
#undef DSV4_WGMMA
#undef DSV4_SM90A_ASM
#undef DSV4_WG_IN
#undef DSV4_WG_D

// The shared-memory matrix descriptors of a stage's B (no swizzle, K-major; the layout
// above): start address >> 4 in bits 0-13, leading byte offset (the K half) >> 4 at 16,
// stride byte offset (the next 8 columns) >> 4 at 32. Made once a chunk from the stage's
// address; step st's (column 8 T0 on) is a compile-time offset of its low word: the
// shared window is below 2^18 bytes, so the start field never carries (the SASS had
// recomputed and masked the address for each wgmma: 7 instructions, now 1-3).
struct BDesc {
  uint32_t lo;  // the stage's start >> 4 and the leading byte offset
  __device__ explicit BDesc(const uint4* act)
      : lo(((static_cast<uint32_t>(__cvta_generic_to_shared(act)) & 0x3FFFFu) >> 4) |
           (kPlane * sizeof(uint4) >> 4) << 16) {}
  // Step st's descriptor at the stage's column 8 t0.
  __device__ uint64_t at(int st, int t0 = 0) const {
    constexpr uint64_t kSbo = kMmaCols * sizeof(uint4) >> 4;
    return uint64_t{lo + static_cast<uint32_t>(2 * st * kPlane + t0 * kMmaCols)} | kSbo << 32;
  }
};

// MXFP4: one 32-group (steps st, st + 1 of pair f) of n8 tiles [T0, T0 + T) into chunk:
// from zero in d, then chunk = fma(group scale, d, chunk) (frag_pair_mma).
template <int T0, int T>
__device__ inline void wgmma_group(const FragPair& f, const BDesc& b, int st, float (&chunk)[kNt][4]) {
  float d[kNt][4];
#pragma unroll
  for (int n = 0; n < T; ++n) d[n][0] = d[n][1] = d[n][2] = d[n][3] = 0.0f;
  wgmma_fence();
  wgmma_f16<T>(d, f.a[0], b.at(st, T0));
  wgmma_f16<T>(d, f.a[1], b.at(st + 1, T0));
  wgmma_commit();
  wgmma_wait<0>();
  fence_operands<T>(d);
#pragma unroll
  for (int n = 0; n < T; ++n) {
    chunk[T0 + n][0] = __fmaf_rn(f.sg, d[n][0], chunk[T0 + n][0]);
    chunk[T0 + n][1] = __fmaf_rn(f.sg, d[n][1], chunk[T0 + n][1]);
    chunk[T0 + n][2] = __fmaf_rn(f.sg8, d[n][2], chunk[T0 + n][2]);
    chunk[T0 + n][3] = __fmaf_rn(f.sg8, d[n][3], chunk[T0 + n][3]);
  }
}

// The group's n8 tiles [T0, T) in column blocks of B tiles (the last possibly fewer).
template <int T0, int T, int B>
__device__ inline void wgmma_groups(const FragPair& f, const BDesc& b, int st, float (&chunk)[kNt][4]) {
  constexpr int kHere = T - T0 < B ? T - T0 : B;
  wgmma_group<T0, kHere>(f, b, st, chunk);
  if constexpr (T0 + kHere < T) wgmma_groups<T0 + kHere, T, B>(f, b, st, chunk);
}

// acc[n] += the chunk's products of the warp's rows with n8 tile n < T (the warpgroup's
// wgmmas of N = 8 T). NVFP4: a step pair's two wgmmas a group, one group left in flight
// while the next pair decodes (its A registers live until the wait retires it). MXFP4:
// above 4 n8 tiles a group's wgmmas run in column blocks of 2 n8 tiles (N = 16), so d
// holds 8 registers beside chunk and acc (each column's sum is the same; at 5-8 tiles a
// block of 4 spills).
template <int T, bool NV>
__device__ inline void wgmma_chunk(const Stage& st, int warp, bool active, float (&acc)[kNt][4]) {
  using Scales = std::conditional_t<NV, uint4, uint2>;
  const int lane = threadIdx.x % kWarp, g = lane / 4;
  const Scales sc = active ? reinterpret_cast<const Scales*>(st.scales)[warp * 8 + g] : Scales{};
  const BDesc b(st.act);
  float chunk[kNt][4];
#pragma unroll
  for (int n = 0; n < T; ++n) chunk[n][0] = chunk[n][1] = chunk[n][2] = chunk[n][3] = 0.0f;
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    const uint4 unit = active ? st.codes[(warp * kUnits + u) * kWarp + lane] : uint4{};
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const FragPair f = frag_step_pair<NV>(unit, sc, u, p);
      const int step = 4 * u + 2 * p;
      if constexpr (NV) {
        wgmma_fence();
        wgmma_f16<T>(chunk, f.a[0], b.at(step));
        wgmma_f16<T>(chunk, f.a[1], b.at(step + 1));
        wgmma_commit();
        wgmma_wait<1>();
      } else {
        wgmma_groups<0, T, (T <= 4 ? T : 2)>(f, b, step, chunk);
      }
    }
  }
  if constexpr (NV) {
    wgmma_wait<0>();
    fence_operands<T>(chunk);
  }
#pragma unroll
  for (int n = 0; n < T; ++n) frag_chunk_scaled<NV>(st.act_scale + n * kMmaCols, chunk[n], acc[n]);
}

struct WgmmaPolicy {
  static constexpr bool kBulkRing = false;
  static constexpr int kActU4 = kPieces * kPlane;
  __device__ static int act_at(int col, int piece) { return piece * kPlane + col; }
  // This thread's landed copies, visible to wgmma's (async proxy) reads after the barrier.
  __device__ static void staged() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

  template <bool NV>
  __device__ static void chunk(const Stage& st, int warp, bool active, bool group_active, int used,
                               float (&acc)[kNt][4]) {
    if (!group_active) return;  // uniform over the warpgroup (as used is over the block)
    with_tiles<kNt>(used, [&](auto t) { wgmma_chunk<decltype(t)::value, NV>(st, warp, active, acc); });
  }
};
static_assert(WgmmaPolicy::kActU4 * sizeof(uint4) >= kTileSlots * kChunk * 2, "a stage holds a tile's chunk");

// The same multiply on the mbarrier ring (the walk's kBulkRing; launch_wgmma_tma). A stage's
// "full" barrier completes when every thread's cp.async of it has landed (the activation
// pieces and scales, zero-filled as on the cp.async ring: the same bytes; MXFP4's 8-byte
// scales, 8-byte aligned alone) and each warp's bulk copies have: its code units (1 KiB a
// chunk, contiguous in the fragment layout) and NVFP4 scales (128 bytes), issued by its
// lane 0 after an arrival expecting their bytes (0 for a warp past m). Its "empty" barrier
// completes when every warp has released the stage: after the chunk's wgmma wait_group 0
// (the tensor core's reads of it are done) and its lanes' loads, lane 0 arrives. The fill
// of step f into stage f % S waits for the release of step f - S; it is issued after the
// warp's own chunk, so a warp stalls there only on a warp a whole chunk behind (the
// cp.async ring's barrier held every warp to the slowest at every chunk). Fences: the bulk
// copies write through the async proxy, as wgmma reads; the cp.async pieces are generic
// writes, so each consumer fences the async proxy after its full wait (as staged() did
// before the barrier).
struct WgmmaTmaPolicy : WgmmaPolicy {
  static constexpr bool kBulkRing = true;
  static constexpr uint32_t kCodeBytes = kUnits * kWarp * sizeof(uint4);  // a warp's code units of a chunk

  __device__ static void ring_init(uint64_t* bars) {
    if (threadIdx.x == 0) {
      for (int b = 0; b < kStages; ++b) {
        mbarrier::init(bars + b, kThreads + kWarps);  // every thread's cp.async, each warp's bulk bytes
        mbarrier::init(bars + kStages + b, kWarps);   // each warp's release
      }
      mbarrier::init_fence();
    }
    __syncthreads();
  }
  // This thread's weight copies of chunk c into stage st, counted by `full`.
  template <bool NV>
  __device__ static void weight_copies(const Copies& cp, int c, const Stage& st, uint64_t* full) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    constexpr int kSb = kScaleBytes<NV>;
    if constexpr (!NV)
      if (cp.scales) cp_async<kSb>(st.scales + (warp * 8 + lane) * kSb, cp.scales + c * 8 * kSb, true);
    if (lane == 0) {  // cp.codes, cp.scales: the warp's first (lane 0's), or null past m
      mbarrier::arrive_expect_tx(full, cp.codes ? kCodeBytes + (NV ? 8 * kSb : 0) : 0);
      if (cp.codes) {
        mbarrier::bulk_copy(st.codes + warp * kUnits * kWarp, cp.codes + kUnits * c * kWarp, kCodeBytes, full);
        if constexpr (NV) mbarrier::bulk_copy(st.scales + warp * 8 * kSb, cp.scales + c * 8 * kSb, 8 * kSb, full);
      }
    }
  }
  __device__ static void arrive_copies(uint64_t* full) { mbarrier::arrive_on_cp_async(full); }
  __device__ static void wait_full(uint64_t* bars, int b, int parity) {
    mbarrier::wait(bars + b, parity);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the cp.async pieces, to wgmma's reads
  }
  __device__ static void wait_empty(uint64_t* bars, int b, int parity) { mbarrier::wait(bars + kStages + b, parity); }
  __device__ static void release(uint64_t* bars, int b) {
    __syncwarp();
    if (threadIdx.x % kWarp == 0) mbarrier::arrive(bars + kStages + b);
  }
};

}  // namespace

void launch_wgmma(bool up, bool nv, const Fp4GemmArgs& a, int device, cudaStream_t stream) {
  launch_walk<WgmmaPolicy>(up, nv, a, device, stream);
}

void launch_wgmma_tma(bool up, bool nv, const Fp4GemmArgs& a, int device, cudaStream_t stream) {
  launch_walk<WgmmaTmaPolicy>(up, nv, a, device, stream);
}

}  // namespace dsv4::cuda::fp4_gemm
