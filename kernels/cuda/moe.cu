// MoE experts (MODEL.md §4.23-§4.24, D4, D16; the router is route.cu) on tensor cores.
// The slots of a call (row, j) are grouped on the device by expert (group_slots_kernel),
// so a distinct expert's weights are read once for all the rows that picked it: its slots
// are the columns of mma.sync.m16n8k16 (bf16 in, f32 accumulate), its weight rows the M.
// A column's result does not depend on which other columns share its tile, and the K
// order (chunks, warps, the fixed combine) depends on the weight shape alone, so a row of
// a T-row call is bit-identical to the row alone (SPECDECODE.md §6.3 R-I3). The combine
// adds the row's experts in ascending id, then the shared expert, as the CPU reference.
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

#include <cmath>
#include <vector>

#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/quant.cuh"
#include "kernels/cuda/swiglu.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / cuda::kWarp;
constexpr int kFp8Block = 128;  // §4.9 activation block
constexpr int kMaxK = 16;       // experts per token
constexpr int kMoeChunk = 256;  // rows per pass, bounds the scratch
constexpr int kCols = 8;        // slots per tile: the n8 of the mma
constexpr int kTileRows = 16;   // weight rows per block: the m16 of the mma
constexpr int kChunk = 128;     // K per lane group and chunk: 4 lanes x one 32-element run
constexpr int kAhead = 2;       // chunks per warp loaded before the first is used

using cuda::swiglu;  // §4.23 steps 2-4 on one element (swiglu.cuh, shared with moe_prefill.cu)

// §4.9 as values, one warp per (row, 128-block): y [rows, K] = e4m3(x / s) * s (may alias
// x). The scale s is a power of two (pow2ceil), so q * s is exact and the expert kernel
// takes the dequantized value as its activation: sum_k (q_k s) w_k equals §4.23's
// "partial * activation scale" up to the order of the f32 sum.
__global__ void act_quant128_kernel(const float* x, int64_t rows, int64_t K, float* y) {
  const int64_t blocks = K / kFp8Block;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / cuda::kWarp);
  for (int64_t w = blockIdx.x * int64_t{blockDim.x / cuda::kWarp} + threadIdx.x / cuda::kWarp;
       w < rows * blocks; w += warps) {
    const int64_t off = (w / blocks) * K + (w % blocks) * kFp8Block;
    const float s = cuda::act_quant128(x + off, y + off);  // the lane's own 4 elements
#pragma unroll
    for (int i = 0; i < 4; ++i) y[off + i * cuda::kWarp + threadIdx.x % cuda::kWarp] *= s;
  }
}

// The call's work list: tile i is the expert w[i] applied to the slots slot[i*kCols ..]
// (ascending, -1 past the expert's last), count tiles in all; an expert's slots fill
// ceil(n / 8) tiles. The tile holds its expert's weights itself, so the expert kernel
// reaches them in one dependent load, not two.
struct Tiles {
  cuda::ExpertW* w;  // [max_tiles]
  int32_t* count;    // [1]
  int32_t* slot;     // [max_tiles * kCols]
};

// The most tiles `slots` slots of n_experts experts can need: sum_e ceil(c_e / 8) <=
// (slots + 7 * distinct) / 8, and never more than one per slot.
int64_t max_tiles(int64_t slots, int64_t n_experts) {
  return std::min(slots, (slots + 7 * std::min(slots, n_experts) + kCols - 1) / kCols);
}

// One block: experts in ascending id, each one's slots in ascending order (a fixed order;
// ids outside [0, n_experts) join no tile). Shared memory: sel [slots], first tile [n_experts].
__global__ void __launch_bounds__(kThreads) group_slots_kernel(const int32_t* sel, int slots,
                                                               const cuda::ExpertW* experts, int n_experts,
                                                               Tiles t) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan;
  extern __shared__ int32_t smem[];
  int32_t* s_sel = smem;
  int32_t* first = smem + slots;
  for (int s = threadIdx.x; s < slots; s += kThreads) s_sel[s] = sel[s];
  __syncthreads();
  int running = 0;
  for (int e0 = 0; e0 < n_experts; e0 += kThreads) {  // uniform trip count
    const int e = e0 + static_cast<int>(threadIdx.x);
    int tiles = 0;
    if (e < n_experts) {
      int c = 0;
      for (int s = 0; s < slots; ++s) c += s_sel[s] == e;
      tiles = (c + kCols - 1) / kCols;
    }
    int offset = 0, total = 0;
    Scan(scan).ExclusiveSum(tiles, offset, total);
    if (e < n_experts) first[e] = running + offset;
    running += total;
    __syncthreads();  // `scan` is reused
  }
  if (threadIdx.x == 0) *t.count = running;
  for (int e = threadIdx.x; e < n_experts; e += kThreads) {
    int32_t* out = t.slot + int64_t{first[e]} * kCols;
    int j = 0;
    for (int s = 0; s < slots; ++s)
      if (s_sel[s] == e) {
        if (j % kCols == 0) t.w[first[e] + j / kCols] = experts[e];
        out[j++] = s;
      }
    for (; j % kCols != 0; ++j) out[j] = -1;
  }
}

// ---- e2m1 -> bf16 (CHECKPOINT.md §3.5) and the mma ----

// Low / high bytes of bf16(|e2m1|) for magnitude codes 0-3 and 4-7 (0, .5, 1, 1.5 | 2, 3,
// 4, 6 = 0x0000 0x3F00 0x3F80 0x3FC0 | 0x4000 0x4040 0x4080 0x40C0), as prmt tables.
constexpr uint32_t kLo03 = 0xC0800000u, kLo47 = 0xC0804000u;
constexpr uint32_t kHi03 = 0x3F3F3F00u, kHi47 = 0x40404040u;
constexpr uint32_t kSigns = 0x80008000u;

// The 8 e2m1 codes of `w` (nibble i = element i) as exact bf16x2 pairs, low half first:
// r[j] = {n_j, n_(j+4)}. Pairing j with j + 4 puts both sign bits 4j + 3 and 4j + 19 one
// shift away from bits 15 and 31. Two byte lookups per 4 codes (magnitudes; the selector's
// bit 3 is cleared first), one interleave per pair: ~2.3 instructions per code.
__device__ inline void e2m1x8_to_bf16x2(uint32_t w, uint32_t (&r)[4]) {
  const uint32_t mag = w & 0x77777777u;
  const uint32_t sel_a = __byte_perm(mag, 0, 0x0020);  // nibbles n0 n1 n4 n5
  const uint32_t sel_b = __byte_perm(mag, 0, 0x0031);  // nibbles n2 n3 n6 n7
  const uint32_t lo_a = __byte_perm(kLo03, kLo47, sel_a), hi_a = __byte_perm(kHi03, kHi47, sel_a);
  const uint32_t lo_b = __byte_perm(kLo03, kLo47, sel_b), hi_b = __byte_perm(kHi03, kHi47, sel_b);
  r[0] = __byte_perm(lo_a, hi_a, 0x6240) | ((w << 12) & kSigns);
  r[1] = __byte_perm(lo_a, hi_a, 0x7351) | ((w << 8) & kSigns);
  r[2] = __byte_perm(lo_b, hi_b, 0x6240) | ((w << 4) & kSigns);
  r[3] = __byte_perm(lo_b, hi_b, 0x7351) | (w & kSigns);
}

__device__ inline uint32_t bits(__nv_bfloat162 v) { return *reinterpret_cast<const uint32_t*>(&v); }
__device__ inline __nv_bfloat162 pair(uint32_t v) { return *reinterpret_cast<const __nv_bfloat162*>(&v); }

// {lo, hi} rounded to bf16 (RNE, the L-bf16 rounding of §3.3).
__device__ inline uint32_t bf16x2(float lo, float hi) { return bits(__floats2bfloat162_rn(lo, hi)); }

// d += A B for one m16n8k16 step (PTX ISA "mma.m16n8k16" fragment layouts).
__device__ inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// x[0 .. 8) (16-byte aligned: two float4 loads; else scalar loads, same values).
__device__ inline void load8(const float* x, float (&v)[8]) {
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
    const float4 p = *reinterpret_cast<const float4*>(x), q = *reinterpret_cast<const float4*>(x + 4);
    v[0] = p.x, v[1] = p.y, v[2] = p.z, v[3] = p.w, v[4] = q.x, v[5] = q.y, v[6] = q.z, v[7] = q.w;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = x[i];
  }
}

// The block scales of a run's two 16-element halves as bf16x2 pairs {s, s}: e8m0 (MXFP4,
// §3.6, one group: both halves the same) or e4m3 (NVFP4, §3.7, by the hardware e4m3x2 ->
// f16x2 conversion; weight_scale_2 is applied to the sum). Exact: a power of two, or 4
// significant bits, both within bf16; so is its product with an e2m1 value (<= 6 bits),
// which is the CPU reference's dequantized weight wherever that is a normal f32.
__device__ inline void scale_pairs(const cuda::Fp4W& w, const uint8_t (&code)[2], __nv_bfloat162 (&s)[2]) {
  if (w.nv) {
    const auto codes = static_cast<__nv_fp8x2_storage_t>(code[0] | (code[1] << 8));
    const float2 v = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3)));
    s[0] = __float2bfloat162_rn(v.x);
    s[1] = __float2bfloat162_rn(v.y);
  } else {
    s[0] = s[1] = __float2bfloat162_rn(e8m0_to_f32(code[0]));
  }
}

struct MmaArgs {
  Tiles tiles;
  const float* act;  // slot s's activation row: act + (s / act_div) * K
  int act_div;       // k (up: the slot's token row) or 1 (down: the slot's own h)
  int64_t m, k;      // weight rows (outputs) and columns
  float* out;        // [slots, m]: h (up) or the expert's output (down)
  const float* wt;   // up: routing weight [slots]
  float limit;       // up: SwiGLU clamp, <= 0 off (D16)
};

// NW = 2: w1, w3 of the tile's expert (up, out h); NW = 1: w2 (down).
template <int NW>
__device__ inline void projections(const cuda::ExpertW& e, cuda::Fp4W (&w)[NW]) {
  if constexpr (NW == 2) {
    w[0] = e.w1;
    w[1] = e.w3;
  } else {
    w[0] = e.w2;
  }
}

// p_j[s, m0 + i] = sum_k W_j(m0 + i, k) a_s(k) for the 16 rows m0 + i and the <= 8 slots
// of `tile`; out = swiglu(p_1, p_3) (up) or p_2 (down). Lane (g, t) = (lane / 4, lane % 4) owns weight rows m0 + g and
// m0 + g + 8 and slot column g; in chunk c it takes the 32-element run at k0 = 128c + 32t
// (one 16-byte load per row, one scale group of MXFP4, two of NVFP4). The mma's k-slots
// {2t, 2t+1, 2t+8, 2t+9} of a step hold four of those elements, the same ones in A and B
// (any bijection of k inside a step is a valid order of the sum): word q of the run gives
// steps 2q and 2q+1 from its pairs {n_j, n_(j+4)}. Warp w takes chunks w, w + 8, ... in
// ascending order (acc chained through every mma); the 8 warps' sums are added in warp
// order. P activation planes: 1 when a_s is bf16-exact (e4m3 values, bf16-rounded), 3 for
// f32 (x = hi + mid + lo, each bf16, exactly: 24 = 3 x 8 significant bits).
template <int NW, int P>
__device__ inline void tile_product(const MmaArgs& a, int tile, int64_t m0, float (&part)[kWarps][NW][4][cuda::kWarp]) {
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int g = lane / 4, t = lane % 4;
  const int32_t* slots = a.tiles.slot + int64_t{tile} * kCols;
  cuda::Fp4W w[NW];
  projections<NW>(a.tiles.w[tile], w);
  const int32_t col = slots[g];
  const float* x = col >= 0 ? a.act + (col / a.act_div) * a.k : nullptr;  // null: zero column
  const int64_t chunks = a.k / kChunk;
  int gs[NW];  // log2 of the scale group, 16 (NVFP4) or 32 (MXFP4): a run holds two or one
#pragma unroll
  for (int j = 0; j < NW; ++j) gs[j] = __ffs(w[j].group) - 1;
  float acc[NW][4];
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;

#pragma unroll 1
  for (int64_t c = warp; c < chunks; c += int64_t{kWarps} * kAhead) {
    uint32_t raw[kAhead][NW][2][4];  // [chunk][projection][row g, g + 8][word]
    uint8_t sc[kAhead][NW][2][2];    // block scale codes of the run's two 16-halves
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t k0 = (c + u * kWarps) * kChunk + 32 * t;
      if (c + u * kWarps < chunks)
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int64_t r = m0 + g + 8 * h;
            w[j].words(r, k0, raw[u][j][h]);
            const uint8_t* sp = w[j].scales + (r * w[j].cols >> gs[j]);
            sc[u][j][h][0] = __ldg(sp + (k0 >> gs[j]));
            sc[u][j][h][1] = __ldg(sp + ((k0 + 16) >> gs[j]));  // the same code when one group
          }
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      if (c + u * kWarps >= chunks) break;
      const int64_t k0 = (c + u * kWarps) * kChunk + 32 * t;
      __nv_bfloat162 s[NW][2][2];
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) scale_pairs(w[j], sc[u][j][h], s[j][h]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float xv[8] = {};
        if (x) load8(x + k0 + 8 * q, xv);
        uint32_t b[P][2][2];  // [plane][step 2q + st][register]
#pragma unroll
        for (int st = 0; st < 2; ++st)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            float lo = xv[2 * st + i], hi = xv[2 * st + i + 4];
#pragma unroll
            for (int p = 0; p < P; ++p) {
              b[p][st][i] = bf16x2(lo, hi);
              const float2 v = __bfloat1622float2(pair(b[p][st][i]));
              lo -= v.x;  // exact: the residual of an RNE rounding is representable
              hi -= v.y;
            }
          }
#pragma unroll
        for (int j = 0; j < NW; ++j) {
          uint32_t r[2][4];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            e2m1x8_to_bf16x2(raw[u][j][h][q], r[h]);
#pragma unroll
            for (int i = 0; i < 4; ++i) r[h][i] = bits(__hmul2(pair(r[h][i]), s[j][h][q / 2]));
          }
#pragma unroll
          for (int st = 0; st < 2; ++st) {
            const uint32_t frag[4] = {r[0][2 * st], r[1][2 * st], r[0][2 * st + 1], r[1][2 * st + 1]};
#pragma unroll
            for (int p = 0; p < P; ++p) mma_bf16(acc[j], frag, b[p][st][0], b[p][st][1]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) part[warp][j][i][lane] = acc[j][i];
  __syncthreads();
  // Thread (j, i, l): accumulator i of lane l, i.e. row l / 4 (+ 8 for i >= 2), column
  // 2 (l % 4) + i % 2 of the mma's D fragment. Up: h = swiglu(g, u) at once (§4.23).
  if (threadIdx.x < 4 * cuda::kWarp) {
    const int i = threadIdx.x / cuda::kWarp, l = threadIdx.x % cuda::kWarp;
    const int32_t slot = slots[2 * (l % 4) + i % 2];
    if (slot >= 0) {
      float v[NW];
#pragma unroll
      for (int j = 0; j < NW; ++j) {
        v[j] = part[0][j][i][l];
        for (int p = 1; p < kWarps; ++p) v[j] += part[p][j][i][l];
        v[j] *= w[j].scale_2;  // §3.7 weight_scale_2 (1 for MXFP4)
      }
      const int64_t at = slot * a.m + m0 + l / 4 + 8 * (i / 2);
      if constexpr (NW == 2)
        a.out[at] = swiglu(v[0], v[1], a.wt[slot], a.limit);
      else
        a.out[at] = v[0];
    }
  }
}

// Resident blocks per SM asked of the compiler: <= 128 registers (NW = 2) / <= 85 (NW = 1).
template <int NW>
constexpr int kMinBlocks = NW == 2 ? 2 : 3;

// Work item i = (tile i / (m / 16), rows 16 (i % (m / 16)) ..): a fixed grid of resident
// blocks walks the items of the tiles that exist (count is known on the device only), so
// a call launches no empty blocks. Which block takes an item changes nothing in it.
template <int NW, int P>
__global__ void __launch_bounds__(kThreads, kMinBlocks<NW>) expert_mma_kernel(MmaArgs a) {
  __shared__ float part[kWarps][NW][4][cuda::kWarp];
  const int64_t m_tiles = a.m / kTileRows;
  const int64_t items = *a.tiles.count * m_tiles;
#pragma unroll 1
  for (int64_t i = blockIdx.x; i < items; i += gridDim.x) {
    tile_product<NW, P>(a, static_cast<int>(i / m_tiles), i % m_tiles * kTileRows, part);
    __syncthreads();  // `part` is rewritten by the next item
  }
}

// Blocks of expert_mma_kernel<NW, P> that fit on the device at once (its occupancy, a
// property of the compiled kernel, times the SMs), and the launch of `items_max` items.
template <int NW, int P>
void launch_expert_mma(const MmaArgs& a, int64_t items_max, int device, cudaStream_t stream) {
  static const int per_sm = [] {
    int n = 0;
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, expert_mma_kernel<NW, P>, kThreads, 0));
    return n;
  }();
  int sms = 0;
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = std::min<int64_t>(items_max, int64_t{std::max(per_sm, 1)} * sms);
  expert_mma_kernel<NW, P><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  DSV4_CUDA_LAUNCH_CHECK();
}

// The shared expert's h [rows, inter] = swiglu(g, u) with weight 1.
__global__ void swiglu_kernel(const float* g, const float* u, int64_t rows, int inter, float limit,
                              float* h) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * inter;
       i += int64_t{gridDim.x} * blockDim.x)
    h[i] = swiglu(g[i], u[i], 1.0f, limit);
}

// out[t, d] = (sum over the row's slots in ascending expert id of y[slot, d], from 0) + sh[t, d].
// A slot whose id is outside [0, n_experts) was computed by no tile: it adds NaN.
__global__ void combine_kernel(const float* y, const float* sh, const int32_t* sel, int64_t rows,
                               int k, int hidden, int n_experts, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * hidden;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / hidden;
    const int d = static_cast<int>(i % hidden);
    int order[kMaxK];
    for (int j = 0; j < k; ++j) {  // insertion sort of the slots by expert id
      int p = j;
      while (p > 0 && sel[t * k + order[p - 1]] > sel[t * k + j]) {
        order[p] = order[p - 1];
        --p;
      }
      order[p] = j;
    }
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int32_t e = sel[t * k + order[j]];
      acc += e >= 0 && e < n_experts ? y[(t * k + order[j]) * hidden + d] : NAN;
    }
    out[i] = acc + sh[i];
  }
}

bool is_pow2(float v) {
  int e;
  return v > 0.0f && std::frexp(v, &e) == 0.5f;
}

}  // namespace

const cuda::ExpertW* CudaOps::expert_table(const BlockWeights& b, int hidden, int* inter) {
  if (b.experts.empty()) throw Error(cat("moe: layer ", b.layer_id, " has no routed experts"));
  const TensorView& w1 = b.experts.front().w1.weight;
  const Key key{w1.storage, w1.data};
  auto it = experts_.find(key);
  if (it == experts_.end()) {
    const int64_t width = b.experts.front().w1.rows;
    std::vector<cuda::ExpertW> host(b.experts.size());
    for (size_t id = 0; id < b.experts.size(); ++id) {
      const ExpertWeights& e = b.experts[id];
      if (!(e.w1.rows == width && e.w1.cols == hidden && e.w3.rows == width && e.w3.cols == hidden &&
            e.w2.rows == hidden && e.w2.cols == width))
        throw Error(cat("moe: expert ", id, " (", e.w1.weight.name, ") projections disagree with [",
                        width, ", ", hidden, "] / [", hidden, ", ", width, "]"));
      host[id] = cuda::ExpertW{fp4(e.w1), fp4(e.w3), fp4(e.w2)};
    }
    const size_t bytes = host.size() * sizeof(cuda::ExpertW);
    void* p = device_copy(host.data(), bytes);
    it = experts_.emplace(key, ExpertTable{Resident{p, bytes}, static_cast<int>(width)}).first;
  }
  *inter = it->second.inter;
  return static_cast<const cuda::ExpertW*>(it->second.table.ptr);
}

void CudaOps::moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                  int k, float swiglu_limit, const Numerics& num, float* out) {
  const int hidden = static_cast<int>(b.shared_w1.in());
  const int shared_inter = static_cast<int>(b.shared_w1.out());
  const bool native = num.expert_arm == ExpertArm::native;
  if (k <= 0 || k > kMaxK) throw Error(cat("moe: layer ", b.layer_id, " experts per token ", k));
  int inter = 0;
  const cuda::ExpertW* experts = expert_table(b, hidden, &inter);
  const int n_experts = static_cast<int>(b.experts.size());
  if (hidden % kChunk != 0 || inter % kChunk != 0)  // whole chunks (expert_mma_kernel, §4.9 blocks)
    throw Error(cat("moe: layer ", b.layer_id, " needs expert widths that are multiples of ", kChunk,
                    ": hidden ", hidden, " inter ", inter));
  if (!native && b.expert_recipe == ExpertRecipe::nvfp4)
    for (const ExpertWeights& e : b.experts)
      if (!(is_pow2(e.w1.scale_2) && is_pow2(e.w2.scale_2) && is_pow2(e.w3.scale_2)))
        throw Error(cat("moe: expert ", e.w1.weight.name, " has a weight_scale_2 that is not a power "
                        "of two; the bf16 expert arm cannot be exact (C4)"));
  const cuda::Fp8W sw1 = fp8(b.shared_w1), sw3 = fp8(b.shared_w3), sw2 = fp8(b.shared_w2);
  if (rows == 0) return;
  activate();
  // Scratch per chunk of C rows (floats): the up projection's activation (native: x
  // quantized), h, y_e, shared g/u/h, shared out; then the tiles (ExpertW, int32).
  const int64_t C = std::min(rows, kMoeChunk), S = C * k, H = hidden, I = inter, Is = shared_inter;
  const int64_t T = max_tiles(S, n_experts);
  const size_t group_smem = static_cast<size_t>(S + n_experts) * sizeof(int32_t);
  if (group_smem > 40 * 1024)
    throw Error(cat("moe: layer ", b.layer_id, " has ", n_experts, " experts; the slot grouping holds at most ",
                    40 * 1024 / 4 - S, " at ", k, " experts per token"));
  static_assert(sizeof(cuda::ExpertW) % sizeof(float) == 0 && alignof(cuda::ExpertW) <= 16);
  const int64_t sizes[] = {C * H, S * I, S * H, C * Is, C * Is, C * Is, C * H,
                           T * static_cast<int64_t>(sizeof(cuda::ExpertW) / sizeof(float)), 1 + T * kCols};
  constexpr int kParts = sizeof(sizes) / sizeof(sizes[0]);
  // Each part starts 16-byte aligned, so the expert kernels take their 128-bit activation loads.
  auto padded = [](int64_t n) { return (n + 3) / 4 * 4; };
  int64_t total = 0;
  for (int64_t n : sizes) total += padded(n);
  float* base = scratch_f32(Slot::f32_a, static_cast<size_t>(total));
  float* part[kParts];
  for (int i = 0; i < kParts; ++i) {
    part[i] = base;
    base += padded(sizes[i]);
  }
  float *xq = part[0], *h = part[1], *ye = part[2], *sg = part[3], *su = part[4], *sh_h = part[5], *sh = part[6];
  auto* ints = reinterpret_cast<int32_t*>(part[8]);
  const Tiles tiles{reinterpret_cast<cuda::ExpertW*>(part[7]), ints, ints + 1};
  const bool act = num.act_bf16();
  // Activation planes: e4m3 values (native) and bf16-rounded ones are bf16-exact; f32
  // activations take three bf16 planes, so every product stays exact as in the CPU
  // reference and only the f32 summation order differs (one pass would round x to 8 bits).
  const bool exact = native || act;
  for (int row0 = 0; row0 < rows; row0 += static_cast<int>(C)) {
    const int64_t n_rows = std::min<int64_t>(C, rows - row0), slots = n_rows * k;
    const float* xc = x + row0 * H;
    group_slots_kernel<<<1, kThreads, group_smem, stream_>>>(sel + row0 * k, static_cast<int>(slots), experts,
                                                             n_experts, tiles);
    DSV4_CUDA_LAUNCH_CHECK();
    if (native) {
      act_quant128_kernel<<<cuda::blocks_for(n_rows * (H / kFp8Block) * cuda::kWarp, kThreads), kThreads, 0,
                            stream_>>>(xc, n_rows, H, xq);
      DSV4_CUDA_LAUNCH_CHECK();
    }
    const int64_t tiles_max = max_tiles(slots, n_experts);
    const MmaArgs up{tiles, native ? xq : xc, k, I, H, h, wt + row0 * k, swiglu_limit};
    if (exact)
      launch_expert_mma<2, 1>(up, tiles_max * (I / kTileRows), device_, stream_);
    else
      launch_expert_mma<2, 3>(up, tiles_max * (I / kTileRows), device_, stream_);
    if (native) {  // h is re-quantized after the routing-weight multiply (§4.23)
      act_quant128_kernel<<<cuda::blocks_for(slots * (I / kFp8Block) * cuda::kWarp, kThreads), kThreads, 0,
                            stream_>>>(h, slots, I, h);
      DSV4_CUDA_LAUNCH_CHECK();
    }
    const MmaArgs down{tiles, h, 1, H, I, ye, nullptr, 0.0f};
    if (exact)
      launch_expert_mma<1, 1>(down, tiles_max * (H / kTileRows), device_, stream_);
    else
      launch_expert_mma<1, 3>(down, tiles_max * (H / kTileRows), device_, stream_);
    // §4.24: the shared expert (L-bf16 on FP8 weights, no routing weight).
    gemv_rows(sw1, xc, H, act, sg, Is, static_cast<int>(n_rows));
    gemv_rows(sw3, xc, H, act, su, Is, static_cast<int>(n_rows));
    swiglu_kernel<<<cuda::blocks_for(n_rows * Is, kThreads), kThreads, 0, stream_>>>(
        sg, su, n_rows, shared_inter, swiglu_limit, sh_h);
    DSV4_CUDA_LAUNCH_CHECK();
    gemv_rows(sw2, sh_h, Is, act, sh, H, static_cast<int>(n_rows));
    combine_kernel<<<cuda::blocks_for(n_rows * H, kThreads), kThreads, 0, stream_>>>(
        ye, sh, sel + row0 * k, n_rows, k, hidden, n_experts, out + row0 * H);
    DSV4_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace dsv4
