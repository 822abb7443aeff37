// Sparse sink attention (MODEL.md §4.20 with D12) for a prefill's rows on tensor cores
// (issue 13), flash-attention style: per query row the heads are the M of mma.m16n8k16,
// the row's gathered kv rows (K = V, one latent row shared by all heads) the N of Q K^T
// and the K of P V, and an online softmax runs over tiles of kKeys index entries.
//
// Block = (row, group of kHeadTile = 32 heads), one warp per kSlice = 64 dims (8 warps
// at dim 512). Warp w owns dims [64w, 64w + 64) in both products: its Q fragments (32
// heads x 64 dims) and its O accumulators (32 heads x 64 dims) live in registers for the
// whole row, and the kv tile's [16 keys x 64 dims] slice it reads serves both its Q K^T
// partial (B operand) and, transposed in registers by movmatrix, its P V (B operand).
// The logits are the sum of the warps' partials, added in warp order through shared
// memory; 8 lanes per head then run the softmax and publish P and the rescale factors. kv tiles come in by cp.async kStages tiles ahead; a tile whose entries
// are all -1 is never loaded nor computed (law 3: trailing -1 pads change no bit, so do
// the tiles of pads a row has beyond another's).
//
// Numerics (law 2's tolerance, issue 13): every operand is split into two bf16 planes,
// x = hi + lo + r with hi = bf16(x), lo = bf16(x - hi), |r| <= 2^-18 |x|; the products
// are hi*hi + hi*lo + lo*hi (three mma, lo*lo <= 2^-18 |xy| dropped), f32 accumulation.
// Each product is thus within ~3 * 2^-18 of exact (f32 would be 2^-24): the logits carry
// ~2^-18 of sqrt(sum (q_i k_i)^2) * scale, o ~2^-18 of its size, about 1e-5 relative or
// below (docs in the twin test). One bf16 plane would give 2^-9 (~2e-3), too close to
// D15's 1e-3; an exact split needs 3 x 3 planes (9 mma). The softmax is f32 (expf), the
// sink in the max (D12) and the denominator as the CPU reference: l = sum_k e^(l_k - m)
// rescaled tile by tile, plus e^(sink - m) at the end.
//
// Row independence (SPECDECODE.md §6.3 R-I3 holds too, though prefill only needs law 2):
// a row's tiles, their order and every reduction order depend on its index row and the
// width alone, never on the row count or the other rows.
#include "kernels/cuda/attention_prefill.cuh"

#include <cuda_bf16.h>
#include <cuda_pipeline_primitives.h>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/mma_bf16.cuh"
#include "kernels/cuda/tile_load.cuh"

namespace dsv4::cuda {

namespace {

constexpr int kMmaM = 16;       // mma.m16n8k16
constexpr int kHeadTile = 32;  // heads per block: two m16 tiles
constexpr int kMTiles = kHeadTile / kMmaM;
constexpr int kKeys = 16;      // index entries per tile: one k16 step of P V, two n8 of Q K^T
constexpr int kSlice = 64;     // dims per warp: four k16 steps of Q K^T, eight n8 of P V
constexpr int kSteps = kSlice / 16;
constexpr int kDimTiles = kSlice / 8;
constexpr int kMaxWarps = 8;   // dim <= 512
constexpr int kStages = 4;     // kv tiles in flight (4 x 32 KB at dim 512)
constexpr int kRowPad = 8;     // floats after each staged kv row: the slice loads hit 32 banks
constexpr int kPartLd = 24;    // floats per head row of a logit partial (16 + 8: no conflicts)
constexpr int kPLd = 24;       // bf16 per head row of a P plane (16 + 8: no conflicts)
constexpr int kQuad = 8;       // lanes per head in the softmax: entries 2j, 2j + 1 for lane j

static_assert(kKeys == 16 && kSlice % 16 == 0, "the fragment maps below assume k16 tiles");

// movmatrix.trans: lane (g, t) holds row g, columns 2t, 2t+1 of an 8x8 b16 matrix before,
// row g of its transpose after (PTX ISA "movmatrix").
__device__ inline uint32_t transpose8x8(uint32_t v) {
  uint32_t r;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(v));
  return r;
}

// Shared-memory layout of one block (dynamic; floats first, 16-byte aligned).
struct Layout {
  int ld = 0;  // floats per staged kv row
  size_t stage = 0, part = 0, p = 0, stats = 0, idx = 0, mask = 0, list = 0, bytes = 0;
  __host__ __device__ Layout(int dim, int warps, int width) {
    const int tiles = (width + kKeys - 1) / kKeys;
    ld = dim + kRowPad;
    stage = 0;
    part = stage + sizeof(float) * kStages * kKeys * ld;
    p = part + sizeof(float) * warps * kHeadTile * kPartLd;
    stats = p + sizeof(uint16_t) * 2 * kHeadTile * kPLd;
    idx = stats + sizeof(float) * (2 + 2 * kQuad) * kHeadTile;  // alpha, sink, running max and sums
    mask = idx + sizeof(int32_t) * width;
    list = mask + sizeof(uint32_t) * tiles;
    bytes = list + sizeof(int32_t) * (tiles + 1);  // the non-empty tiles, then their count
  }
};

// One block's view of the shared memory.
struct Smem {
  float* stage;     // [kStages][kKeys][ld] kv rows of the tiles in flight (pads zeroed)
  float* part;      // [warps][kHeadTile][kPartLd] each warp's logit partial
  uint16_t* p;      // [2][kHeadTile][kPLd] P's bf16 planes (hi, lo)
  float* alpha;     // [kHeadTile] e^(m_old - m_new) of the tile
  float* sink;      // [kHeadTile]
  float* run_max;   // [kHeadTile][kQuad] m, a copy per softmax lane (starts at the sink: D12)
  float* run_sum;   // [kHeadTile][kQuad] each softmax lane's share of l (no sink term)
  int32_t* idx;     // [width] the row's index entries
  uint32_t* mask;   // [tiles] bit k: entry k of the tile is valid
  int32_t* list;    // [tiles] the non-empty tiles, ascending; list[tiles] = their count
  __device__ Smem(unsigned char* base, const Layout& l)
      : stage(reinterpret_cast<float*>(base + l.stage)),
        part(reinterpret_cast<float*>(base + l.part)),
        p(reinterpret_cast<uint16_t*>(base + l.p)),
        alpha(reinterpret_cast<float*>(base + l.stats)),
        sink(alpha + kHeadTile),
        run_max(alpha + 2 * kHeadTile),
        run_sum(alpha + (2 + kQuad) * kHeadTile),
        idx(reinterpret_cast<int32_t*>(base + l.idx)),
        mask(reinterpret_cast<uint32_t*>(base + l.mask)),
        list(reinterpret_cast<int32_t*>(base + l.list)) {}
};

// Starts the copies of non-empty tile i of the list into stage slot i % kStages (rows of
// -1 entries zeroed, so no stale value meets a zero weight) and commits them as one group;
// an empty group past the end keeps every thread's group count uniform.
__device__ inline void issue_tile(const Smem& s, int ld, int i, int n, const float* kv, int dim,
                                  bool vec) {
  if (i < n) {
    const int c = s.list[i];
    const uint32_t mask = s.mask[c];
    float* dst = s.stage + static_cast<size_t>(i % kStages) * kKeys * ld;
    const int warps = blockDim.x / kWarp;
    for (int k = threadIdx.x / kWarp; k < kKeys; k += warps) {
      const float* src = (mask >> k) & 1 ? kv + static_cast<int64_t>(s.idx[c * kKeys + k]) * dim : nullptr;
      warp_copy_row_async(dst + k * ld, src, dim, vec);
    }
  }
  __pipeline_commit();
}

// The row's index entries into shared memory, the valid mask of every tile, and the list
// of tiles with at least one valid entry (ascending), its count at list[tiles].
__device__ inline void index_tiles(const Smem& s, const int32_t* row, int width) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int tiles = (width + kKeys - 1) / kKeys;
  for (int e = threadIdx.x; e < width; e += blockDim.x) s.idx[e] = row[e];
  __syncthreads();
  for (int c = warp; c < tiles; c += warps) {  // lanes 0-15: the tile's entries
    const int e = c * kKeys + lane;
    const bool valid = lane < kKeys && e < width && s.idx[e] >= 0;
    const uint32_t bits = __ballot_sync(kFullMask, valid);
    if (lane == 0) s.mask[c] = bits;
  }
  __syncthreads();
  if (warp == 0) {
    int n = 0;
    for (int c0 = 0; c0 < tiles; c0 += kWarp) {  // warp-uniform bounds
      const int c = c0 + lane;
      const bool used = c < tiles && s.mask[c] != 0;
      const uint32_t bits = __ballot_sync(kFullMask, used);
      if (used) s.list[n + __popc(bits & ((1u << lane) - 1))] = c;
      n += __popc(bits);
    }
    if (lane == 0) s.list[tiles] = n;
  }
  __syncthreads();
}

// The online softmax of one tile: thread (head h, lane j of its 8-lane group) owns entries
// 2j, 2j + 1 of head h, h = threadIdx.x / 8 (+ blockDim.x / 8 while < 32: warp-uniform,
// as 32 is a multiple of 4 heads per warp). Logits = scale x (the warps' partials added in
// warp order); the group's max by a fixed butterfly; P's planes; alpha; and the lane's own
// share of l, l_j = l_j alpha + e_2j + e_2j+1 (the shares are added in lane order at the
// end, so no sum is in this step's critical path).
__device__ inline void softmax_tile(const Smem& s, uint32_t mask, float scale) {
  const int warps = blockDim.x / kWarp;
  const int j = threadIdx.x % kQuad;
  const bool v0 = (mask >> (2 * j)) & 1, v1 = (mask >> (2 * j + 1)) & 1;
  for (int h = threadIdx.x / kQuad; h < kHeadTile; h += blockDim.x / kQuad) {
    float2 dot = make_float2(0.0f, 0.0f);
    for (int w = 0; w < warps; ++w) {
      const float2 p = *reinterpret_cast<const float2*>(s.part + (w * kHeadTile + h) * kPartLd + 2 * j);
      dot.x += p.x;
      dot.y += p.y;
    }
    const float l0 = v0 ? scale * dot.x : -INFINITY, l1 = v1 ? scale * dot.y : -INFINITY;
    float tile_max = fmaxf(l0, l1);
    for (int o = kQuad / 2; o > 0; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(kFullMask, tile_max, o));
    float& m = s.run_max[h * kQuad + j];
    float& l = s.run_sum[h * kQuad + j];
    const float m_old = m;
    const float m_new = fmaxf(m_old, tile_max);  // finite: the tile has a valid entry
    const float e0 = v0 ? expf(l0 - m_new) : 0.0f, e1 = v1 ? expf(l1 - m_new) : 0.0f;
    const float alpha = expf(m_old - m_new);
    m = m_new;
    l = l * alpha + (e0 + e1);
    if (j == 0) s.alpha[h] = alpha;
    uint32_t planes[2];  // {e_2j, e_2j+1} as hi and lo bf16x2 planes
    bf16x2_planes<2>(e0, e1, planes);
    *reinterpret_cast<uint32_t*>(s.p + h * kPLd + 2 * j) = planes[0];
    *reinterpret_cast<uint32_t*>(s.p + (kHeadTile + h) * kPLd + 2 * j) = planes[1];
  }
}

// f(mi, st, r) for every A-operand register of a warp's Q: m16 tile mi, k16 step st, a_r.
template <class F>
__device__ __forceinline__ void each_q_register(F f) {
#pragma unroll
  for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
    for (int st = 0; st < kSteps; ++st)
#pragma unroll
      for (int r = 0; r < 4; ++r) f(mi, st, r);
}

// d += a b over the two planes: lo*hi, hi*lo, hi*hi (the smallest terms first).
__device__ inline void mma_planes(float (&d)[4], const uint32_t (&a)[2][4], const uint32_t (&b0)[2],
                                  const uint32_t (&b1)[2]) {
  mma_m16n8k16_bf16(d, a[1], b0[0], b1[0]);
  mma_m16n8k16_bf16(d, a[0], b0[1], b1[1]);
  mma_m16n8k16_bf16(d, a[0], b0[0], b1[0]);
}

// Grid: x = head group, y = rows (looping past 65535). Block: dim / 64 warps.
__global__ void __launch_bounds__(kMaxWarps * kWarp, 1)
sink_prefill_kernel(const float* __restrict__ q, int rows, int heads, int dim, const float* __restrict__ kv,
                    const int32_t* __restrict__ idx, int width, DenseW sink, float scale, bool vec,
                    float* __restrict__ o) {
  extern __shared__ float4 smem4[];
  const int warps = blockDim.x / kWarp;
  const Layout layout(dim, warps, width);
  const Smem s(reinterpret_cast<unsigned char*>(smem4), layout);
  const int ld = layout.ld;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int g = lane / 4, tq = lane % 4;  // the mma fragment coordinates (mma_bf16.cuh)
  const int h0 = blockIdx.x * kHeadTile;
  const int d0 = warp * kSlice;
  for (int t = blockIdx.y; t < rows; t += gridDim.y) {
    __syncthreads();  // the previous row's readers of the shared state are done
    for (int i = threadIdx.x; i < kHeadTile * kQuad; i += blockDim.x) {
      const int h = h0 + i / kQuad;
      const float sk = h < heads ? sink.at(h) : 0.0f;
      if (i % kQuad == 0) s.sink[i / kQuad] = sk;
      s.run_max[i] = sk;  // D12: the sink takes part in the max
      s.run_sum[i] = 0.0f;
    }
    // Q rows of heads h0 + 16 mi + {g, g + 8}, dims d0 + 16 st + {2tq, 2tq + 8} (+1): the
    // loads start before the index row's, the planes are made once the first kv tiles are
    // on their way, so the three latencies overlap.
    float2 qraw[kMTiles][kSteps][4];
    each_q_register([&](int mi, int st, int r) {
      const int h = h0 + 16 * mi + g + 8 * (r & 1);
      const int col = d0 + 16 * st + 8 * (r >> 1) + 2 * tq;
      qraw[mi][st][r] = h < heads  // heads past the last: zero rows, never stored
                            ? *reinterpret_cast<const float2*>(q + (static_cast<int64_t>(t) * heads + h) * dim + col)
                            : make_float2(0.0f, 0.0f);
    });
    index_tiles(s, idx + static_cast<int64_t>(t) * width, width);
    const int tiles = (width + kKeys - 1) / kKeys;
    const int n = s.list[tiles];
    for (int i = 0; i < kStages; ++i) issue_tile(s, ld, i, n, kv, dim, vec);
    uint32_t qf[kMTiles][kSteps][2][4];  // qf[mi][st][plane]: an A operand (a0..a3, mma_bf16.cuh)
    each_q_register([&](int mi, int st, int r) {
      uint32_t planes[2];
      bf16x2_planes<2>(qraw[mi][st][r].x, qraw[mi][st][r].y, planes);
      qf[mi][st][0][r] = planes[0];
      qf[mi][st][1][r] = planes[1];
    });
    __pipeline_wait_prior(kStages - 1);  // tile 0
    __syncthreads();

    float acc[kMTiles][kDimTiles][4];  // O of heads h0 + 16 mi + {g, g + 8}, dims d0 + 8 nd + 2tq (+1)
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
      for (int nd = 0; nd < kDimTiles; ++nd)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][nd][r] = 0.0f;

    for (int i = 0; i < n; ++i) {
      const uint32_t mask = s.mask[s.list[i]];
      const float* tile = s.stage + static_cast<size_t>(i % kStages) * kKeys * ld;
      // Q K^T partial over this warp's dims. kf[j][st][b][plane]: keys 8j + g, dims d0 +
      // 16 st + 8b + 2tq (+1), the B operand halves; also the 8x8 blocks P V transposes.
      uint32_t kf[2][kSteps][2][2];
      float part[kMTiles][2][4] = {};
#pragma unroll
      for (int st = 0; st < kSteps; ++st) {
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const float2 v = *reinterpret_cast<const float2*>(tile + (8 * j + g) * ld + d0 + 16 * st + 8 * b + 2 * tq);
            bf16x2_planes<2>(v.x, v.y, kf[j][st][b]);
          }
#pragma unroll
        for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const uint32_t k0[2] = {kf[j][st][0][0], kf[j][st][0][1]};
            const uint32_t k1[2] = {kf[j][st][1][0], kf[j][st][1][1]};
            mma_planes(part[mi][j], qf[mi][st], k0, k1);
          }
      }
      float* mine = s.part + warp * kHeadTile * kPartLd;
#pragma unroll
      for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int h = 16 * mi + g;
          *reinterpret_cast<float2*>(mine + h * kPartLd + 8 * j + 2 * tq) = make_float2(part[mi][j][0], part[mi][j][1]);
          *reinterpret_cast<float2*>(mine + (h + 8) * kPartLd + 8 * j + 2 * tq) =
              make_float2(part[mi][j][2], part[mi][j][3]);
        }
      __syncthreads();  // partials complete; every warp has read its slice of slot i % kStages
      softmax_tile(s, mask, scale);
      issue_tile(s, ld, i + kStages, n, kv, dim, vec);  // into that slot
      __pipeline_wait_prior(kStages - 1);  // tile i + 1 (this thread's copies)
      __syncthreads();  // P, alpha published; tile i + 1 visible

      // O = alpha O + P V over this warp's dims.
#pragma unroll
      for (int mi = 0; mi < kMTiles; ++mi) {
        const float a0 = s.alpha[16 * mi + g], a1 = s.alpha[16 * mi + g + 8];
#pragma unroll
        for (int nd = 0; nd < kDimTiles; ++nd) {
          acc[mi][nd][0] *= a0;
          acc[mi][nd][1] *= a0;
          acc[mi][nd][2] *= a1;
          acc[mi][nd][3] *= a1;
        }
      }
      uint32_t pf[kMTiles][2][4];  // A operand: heads 16 mi + g (+8), entries 2tq (+1), 2tq + 8 (+1)
#pragma unroll
      for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
        for (int plane = 0; plane < 2; ++plane)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int h = 16 * mi + g + 8 * (r & 1);
            const int k = 2 * tq + 8 * (r >> 1);
            pf[mi][plane][r] = *reinterpret_cast<const uint32_t*>(s.p + (plane * kHeadTile + h) * kPLd + k);
          }
#pragma unroll
      for (int nd = 0; nd < kDimTiles; ++nd) {
        const int st = nd / 2, b = nd % 2;  // dims d0 + 8 nd = d0 + 16 st + 8 b
        // B operand of P V: entries 2tq (+1) (keys 0-7 block) and 8 + 2tq (+1), dim g.
        const uint32_t v0[2] = {transpose8x8(kf[0][st][b][0]), transpose8x8(kf[0][st][b][1])};
        const uint32_t v1[2] = {transpose8x8(kf[1][st][b][0]), transpose8x8(kf[1][st][b][1])};
#pragma unroll
        for (int mi = 0; mi < kMTiles; ++mi) mma_planes(acc[mi][nd], pf[mi], v0, v1);
      }
    }

    // o = O / (l + e^(sink - m)) (§4.20: the sink has a zero value vector).
#pragma unroll
    for (int mi = 0; mi < kMTiles; ++mi)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int hl = 16 * mi + g + 8 * half;
        const int h = h0 + hl;
        if (h >= heads) continue;
        float l = 0.0f;  // the softmax lanes' shares, in lane order
        for (int j = 0; j < kQuad; ++j) l += s.run_sum[hl * kQuad + j];
        const float den = l + expf(s.sink[hl] - s.run_max[hl * kQuad]);
        float* out = o + (static_cast<int64_t>(t) * heads + h) * dim + d0 + 2 * tq;
#pragma unroll
        for (int nd = 0; nd < kDimTiles; ++nd)
          *reinterpret_cast<float2*>(out + 8 * nd) =
              make_float2(acc[mi][nd][2 * half] / den, acc[mi][nd][2 * half + 1] / den);
      }
  }
}

}  // namespace

bool prefill_attention_supports(int dim) { return dim > 0 && dim % kSlice == 0 && dim <= kMaxWarps * kSlice; }

void sink_attention_prefill(const float* q, int rows, int heads, int dim, const float* kv,
                            const int32_t* idx, int width, const void* sink, bool sink_bf16,
                            float scale, float* o, cudaStream_t stream) {
  if (!prefill_attention_supports(dim))
    throw Error(cat("sink_attention (prefill kernel): head dim ", dim, " is not a multiple of ", kSlice,
                    " up to ", kMaxWarps * kSlice));
  if (rows == 0 || heads == 0) return;
  DSV4_CHECK(reinterpret_cast<uintptr_t>(q) % 8 == 0 && reinterpret_cast<uintptr_t>(o) % 8 == 0,
             "sink_attention (prefill kernel): q and o must be 8-byte aligned (float2 rows)");
  const int warps = dim / kSlice;
  const Layout layout(dim, warps, width);
  int device = 0, limit = 0;
  DSV4_CUDA_CHECK(cudaGetDevice(&device));
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (layout.bytes > static_cast<size_t>(limit))
    throw Error(cat("sink_attention (prefill kernel): index width ", width, " needs ", layout.bytes,
                    " bytes of shared memory, the device has ", limit));
  DSV4_CUDA_CHECK(cudaFuncSetAttribute(sink_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(layout.bytes)));
  const bool vec = aligned16(kv);  // dim % 64 == 0: rows stay 16-byte aligned
  const unsigned groups = static_cast<unsigned>((heads + kHeadTile - 1) / kHeadTile);
  sink_prefill_kernel<<<dim3(groups, grid_rows(rows)), warps * kWarp, layout.bytes, stream>>>(
      q, rows, heads, dim, kv, idx, width, DenseW{sink, sink_bf16, heads}, scale, vec, o);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4::cuda

namespace dsv4 {

// A prefill's rows (ops.def sink_attention_gemm): the tensor-core kernel where it takes
// the head dim; the split kernel otherwise, and for a call without entries (o = 0).
void CudaOps::sink_attention_gemm(const float* q, int rows, int heads, int dim, const float* kv,
                                  const int32_t* idx, int width, const TensorView& sink, float scale,
                                  float* o) {
  if (!cuda::prefill_attention_supports(dim) || width == 0 || rows == 0 || heads == 0)
    return sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
  if (sink.numel() != heads)
    throw Error(cat("sink_attention_gemm: ", sink.name, " has ", sink.numel(), " entries, expected ",
                    heads, " heads"));
  activate();
  const cuda::DenseW s = dense(sink, heads);
  cuda::sink_attention_prefill(q, rows, heads, dim, kv, idx, width, s.p, s.bf16, scale, o, stream_);
}

}  // namespace dsv4
