// The prefill MoE (issue 13; MODEL.md §4.23-§4.24) on the decode MoE's FP4 tensor-core
// arithmetic (expert_mma.cuh), sized for many rows. The chunk's slots (row, j) are grouped
// by expert on the host into tiles of up to 64 slots of one expert; an item is 256 weight
// rows of one tile (up: 128 rows of w1 and of w3), so each used expert's weights are read
// about once per chunk (decoded in registers, never materialized), and the tile's
// activations, staged once per K chunk in shared memory as exact bf16 planes, feed a
// block's 8 warps (each A fragment feeds up to 8 mma, one per 8 slots). The shared expert
// runs as dense GEMMs (linear_fp8_gemm); the combine adds each row's experts in ascending
// id, then the shared expert, as the CPU reference (every output written once, no atomics).
//
// Numerics per arm (kernels/ops.h moe_gemm; docs/numerics.md "The prefill GEMMs"): the
// routed experts compute what `moe` computes, bit for bit — the same exact products
// (e2m1 x block scale; native: e4m3 x 2^k activations, bf16 arm: bf16-rounded ones, or
// f32 as three exact planes) and, for every output column, the same f32 order: chunk c
// into partial c % 8 (chunks ascending, the mma chained), the 8 partials added in order,
// then NVFP4's scale_2. Only the shared expert's GEMM order differs from decode (law 2).
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/expert_mma.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;  // 8 warps sharing each staged activation chunk
constexpr int kWarps = kThreads / cuda::kWarp;
constexpr int kPartials = cuda::kKWarps;  // moe.cu's K split: chunk c into partial c % 8
constexpr int kNt = 8;                              // n8 tiles per tile: each A fragment feeds 8 mma
constexpr int kTileSlots = kNt * cuda::kMmaCols;    // 64 slots per tile
constexpr int kChunk = cuda::kKChunk;
constexpr int kGroup = 8;                 // activation elements per 16-byte bf16 group
constexpr int kGroups = kChunk / kGroup;  // groups per column and K chunk (t, q)

// The chunk's tiles: tile i applies expert[i] to slot[i * 64 ..] (ascending, -1 padded),
// experts ascending; an expert with n slots fills ceil(n / 64) tiles.
struct TileList {
  std::vector<int32_t> ints;  // expert [tiles], then slot [tiles * 64]
  int64_t tiles = 0;
};

TileList tile_list(const std::vector<int32_t>& sel, int n_experts, int layer) {
  std::vector<std::vector<int32_t>> by_expert(static_cast<size_t>(n_experts));
  for (size_t s = 0; s < sel.size(); ++s) {
    const int32_t e = sel[s];
    if (e < 0 || e >= n_experts)
      throw Error(cat("moe_gemm: layer ", layer, " selects expert ", e, " outside [0, ", n_experts, ")"));
    by_expert[static_cast<size_t>(e)].push_back(static_cast<int32_t>(s));
  }
  TileList t;
  for (const auto& slots : by_expert) t.tiles += (static_cast<int64_t>(slots.size()) + kTileSlots - 1) / kTileSlots;
  t.ints.assign(static_cast<size_t>(t.tiles * (1 + kTileSlots)), -1);
  int32_t* slot = t.ints.data() + t.tiles;
  int64_t i = 0;
  for (int e = 0; e < n_experts; ++e)
    for (size_t j = 0; j < by_expert[e].size(); ++j) {
      if (j % kTileSlots == 0) t.ints[static_cast<size_t>(i++)] = e;
      slot[(i - 1) * kTileSlots + static_cast<int64_t>(j % kTileSlots)] = by_expert[e][j];
    }
  return t;
}

int64_t padded8(int64_t n) { return (n + 7) / 8 * 8; }

// x [rows, K] f32 -> P bf16 planes [P][rows, K] (cuda::bf16x2_planes), each 8-element group
// stored as the mma B registers of its word (16 bytes): {x0, x4}, {x1, x5}, {x2, x6},
// {x3, x7}, so a lane loads a step pair's B fragment in one 128-bit read.
template <int P>
__global__ void bf16_planes_kernel(const float* x, int64_t n_groups, uint4* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_groups;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float4 a = reinterpret_cast<const float4*>(x)[2 * i], b = reinterpret_cast<const float4*>(x)[2 * i + 1];
    const float v[kGroup] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    uint32_t w[4][P];
#pragma unroll
    for (int j = 0; j < 4; ++j) cuda::bf16x2_planes<P>(v[j], v[j + 4], w[j]);
#pragma unroll
    for (int p = 0; p < P; ++p) out[p * n_groups + i] = make_uint4(w[0][p], w[1][p], w[2][p], w[3][p]);
  }
}

struct GemmArgs {
  const cuda::ExpertW* experts;  // the block's expert table
  const int32_t* tile_expert;    // [tiles]
  const int32_t* tile_slot;      // [tiles * 64]
  const uint4* act;              // bf16_planes_kernel's planes of the activation rows
  int64_t plane;                 // groups per plane
  int act_div;                   // slot s's activation row: s / act_div (up: k; down: 1)
  int64_t m, k;                  // weight rows (outputs) and columns
  float* out;                    // [slots, m]: h (up) or the expert's output (down)
  const float* wt;               // up: routing weight [slots]
  float limit;                   // up: SwiGLU clamp, <= 0 off (D16)
};

// 16-byte global -> shared copy, zero-filled when !valid (PTX "cp.async").
__device__ inline void cp_async16(void* dst, const void* src, bool valid) {
  const auto d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ inline void cp_async_wait_prior() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ inline void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p)); }

// The chunk after c in the K order: partial c % 8's chunks ascending, partials ascending
// (the decode kernel's warp w = c % 8); -1 after the last.
__device__ inline int next_chunk(int c, int chunks) {
  if (c + kPartials < chunks) return c + kPartials;
  const int r = c % kPartials + 1;
  return r < kPartials && r < chunks ? r : -1;
}

// Shared memory of one stage: [P][q 4] planes of [col 64][t 4] 16-byte B groups, each
// plane padded by 32 bytes. Lane (g, t) of n-tile n reads (q, 8n + g, t): a warp's 32
// reads are 512 contiguous bytes; a staging thread (col, 4t + q) writes its group, and
// the pad spreads 8 consecutive threads' (q, t) over distinct banks.
constexpr int kPlanePad = 2;                               // uint4 per q plane
constexpr int kPlane = kTileSlots * 4 + kPlanePad;         // uint4 per q plane
template <int P>
constexpr int kStage = P * 4 * kPlane;                     // uint4 per stage
constexpr int kSets = 2;  // A fragment sets per warp: each staged B fragment feeds both
// The kernel's dynamic shared memory: two stages, then v [warps][kSets][kNt][4][lanes] floats.
template <int P>
constexpr size_t kGemmSmem = 2 * kStage<P> * sizeof(uint4) + size_t{kWarps} * kSets * kNt * 4 * cuda::kWarp * 4;

// Weight rows per block: up, warp w takes rows 16w .. of w1 and of w3 (128 rows of h);
// down, rows 32w .. of w2 as two 16-row sets (256 rows; a warp past m idles).
template <bool Up>
constexpr int kItemRows = kWarps * kSets * cuda::kMmaRows / (Up ? 2 : 1);

// Block = (tile, kItemRows weight rows from m0) items, item i + gridDim.x after item i
// (one resident block per SM; an item's first chunk loads while the one before finishes).
// A warp owns two 16-row sets (projection, rows) — up (w1, r0), (w3, r0); down (w2, r0),
// (w2, r0 + 16) — and all 64 slots (n-tiles used only while the tile has slots there).
// For every column the sum is moe.cu's tile_product's: lane (g, t) takes the run at
// 128c + 32t of rows g and g + 8 of a set, chunk c goes into acc (the mma chained, chunks
// of one partial ascending), each finished partial into v in partial order (v = partial
// 0, then v += partial r). Two stages: the next chunk's activations (cp.async) and
// weights (registers) load while this one computes. Up: out = swiglu(w1 sum, w3 sum)
// (§4.23); down: the w2 sums.
// Per mma (1,024 per block and chunk): 16 B of activation and 16 B of weight into the SM,
// 128 B of shared memory read (one 16-byte B group feeds 2 sets x 2 steps).
template <bool Up, int P>
__global__ void __launch_bounds__(kThreads, 1) expert_gemm_kernel(GemmArgs a, int64_t items) {
  extern __shared__ uint4 stage[];  // [2][kStage] (kGemmSmem)
  __shared__ int64_t s_off[2][kTileSlots];
  const int lane = threadIdx.x % cuda::kWarp, warp = threadIdx.x / cuda::kWarp;
  const int g = lane / 4, t = lane % 4;
  const int64_t m_items = (a.m + kItemRows<Up> - 1) / kItemRows<Up>;
  const int chunks = static_cast<int>(a.k / kChunk);

  // An item's warp-side part: its tile's slots, the warp's two sets, whether the warp has rows.
  struct Item {
    const int32_t* slots;
    cuda::Fp4W w[kSets];
    int64_t rows[kSets];
    int gs[kSets];  // log2 of the scale group
    bool active;    // whole warps: m % 32 == 0 (its rows, or none)
    int n_used;     // n-tiles with slots
  };
  // Item `it`'s sets, and its slots' activation offsets into s_off[sb] (a barrier: every
  // thread calls it; the caller ensures nobody still reads s_off[sb]).
  auto item_at = [&](int64_t it, int sb, Item& x) {
    const int64_t tile = it / m_items;
    const int64_t r0 = it % m_items * kItemRows<Up> + warp * (kItemRows<Up> / kWarps);
    x.active = r0 < a.m;
    x.slots = a.tile_slot + tile * kTileSlots;
    const cuda::ExpertW* e = a.experts + a.tile_expert[tile];
    if constexpr (Up) {
      x.w[0] = e->w1, x.rows[0] = r0;
      x.w[1] = e->w3, x.rows[1] = r0;
    } else {
      x.w[0] = x.w[1] = e->w2;
      x.rows[0] = r0, x.rows[1] = r0 + cuda::kMmaRows;
    }
#pragma unroll
    for (int j = 0; j < kSets; ++j) x.gs[j] = __ffs(x.w[j].group) - 1;
    bool used = false;
    if (threadIdx.x < kTileSlots) {
      const int32_t s = x.slots[threadIdx.x];
      used = s >= 0;
      s_off[sb][threadIdx.x] = used ? int64_t{s / a.act_div} * (a.k / kGroup) : -1;
    }
    x.n_used = (__syncthreads_count(used) + cuda::kMmaCols - 1) / cuda::kMmaCols;  // and s_off is set
  };
  auto stage_chunk = [&](int sb, int c, int buf) {  // every thread: P * 1024 copies / 256
#pragma unroll 1
    for (int r = 0; r < P * kTileSlots * kGroups / kThreads; ++r) {
      const int i = r * kThreads + threadIdx.x;
      const int p = i / (kTileSlots * kGroups), col = i / kGroups % kTileSlots, tq = i % kGroups;
      const int64_t off = s_off[sb][col];
      uint4* dst = stage + buf * kStage<P> + (p * 4 + tq % 4) * kPlane + col * 4 + tq / 4;
      cp_async16(dst, a.act + p * a.plane + (off >= 0 ? off : 0) + c * kGroups + tq, off >= 0);
    }
  };
  auto prefetch_a = [&](const Item& x, int c) {  // the lines load_a(x, c) reads
    const int64_t k0 = int64_t{c} * kChunk + 32 * t;
#pragma unroll
    for (int j = 0; j < kSets; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t r = x.rows[j] + g + 8 * h;
        prefetch_l2(x.w[j].packed + r * (x.w[j].cols >> 1) + (k0 >> 1));
        prefetch_l2(x.w[j].scales + (r * x.w[j].cols >> x.gs[j]) + (k0 >> x.gs[j]));
      }
  };
  auto load_a = [&](const Item& x, int c, uint32_t (&raw)[kSets][2][4], uint8_t (&sc)[kSets][2][2]) {
    const int64_t k0 = int64_t{c} * kChunk + 32 * t;
#pragma unroll
    for (int j = 0; j < kSets; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) cuda::load_run(x.w[j], x.gs[j], x.rows[j] + g + 8 * h, k0, raw[j][h], sc[j][h]);
  };

  float acc[kSets][kNt][4];
#pragma unroll
  for (int j = 0; j < kSets; ++j)
#pragma unroll
    for (int n = 0; n < kNt; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[j][n][i] = 0.0f;
  // v: the finished partials' running sum, each lane's own [kSets][kNt][4] at stride 32
  // (no registers left).
  float* v = reinterpret_cast<float*>(stage + 2 * kStage<P>) + warp * (kSets * kNt * 4 * cuda::kWarp) + lane;
  auto v_at = [&](int j, int n, int i) -> float& { return v[((j * kNt + n) * 4 + i) * cuda::kWarp]; };
  uint32_t raw[kSets][2][4];
  uint8_t sc[kSets][2][2];

  int64_t it = blockIdx.x;  // < items: the grid has at most `items` blocks
  int sb = 0, buf = 0;
  Item cur, nxt;
  item_at(it, sb, cur);
  stage_chunk(sb, 0, buf);
  cp_async_commit();
  if (cur.active) load_a(cur, 0, raw, sc);
#pragma unroll 1
  for (;;) {
    const int64_t it_n = it + gridDim.x;
    const bool more = it_n < items;        // uniform
    if (more) item_at(it_n, sb ^ 1, nxt);  // s_off[sb ^ 1] was last read two barriers ago
    bool first = true;
#pragma unroll 1
    for (int c = 0; c >= 0;) {
      const int cn = next_chunk(c, chunks);
      // The next chunk: this item's, or the next item's first.
      if (cn >= 0)
        stage_chunk(sb, cn, buf ^ 1);
      else if (more)
        stage_chunk(sb ^ 1, 0, buf ^ 1);
      cp_async_commit();  // possibly empty: the wait below then covers chunk c alone
      uint32_t raw_n[kSets][2][4];
      uint8_t sc_n[kSets][2][2];
      const bool loaded = cn >= 0 ? cur.active : more && nxt.active;  // uniform over the warp
      if (cn >= 0 && cur.active)
        load_a(cur, cn, raw_n, sc_n);
      else if (cn < 0 && loaded)
        load_a(nxt, 0, raw_n, sc_n);
      // The chunk after that into L2 (a hint: no registers, no effect on any value), so the
      // register loads the next iteration issues wait on L2, not on HBM: one chunk of
      // compute does not cover a weight load's HBM latency.
      const int pf_cur = cn >= 0 ? next_chunk(cn, chunks) : -1;
      const int pf_nxt = !more ? -1 : cn >= 0 ? (pf_cur < 0 ? 0 : -1) : next_chunk(0, chunks);
      if (pf_cur >= 0 && cur.active) prefetch_a(cur, pf_cur);
      if (pf_nxt >= 0 && nxt.active) prefetch_a(nxt, pf_nxt);
      cp_async_wait_prior();
      __syncthreads();  // chunk c's stage is complete for every thread
      if (cur.active) {  // chunk c into acc
        __nv_bfloat162 s[kSets][2][2];
#pragma unroll
        for (int j = 0; j < kSets; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) cuda::scale_pairs(cur.w[j], sc[j][h], s[j][h]);
        const uint4* sbuf = stage + buf * kStage<P>;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          uint32_t frag[kSets][2][4];
#pragma unroll
          for (int j = 0; j < kSets; ++j)
            cuda::a_fragments(raw[j][0][q], raw[j][1][q], s[j][0][q / 2], s[j][1][q / 2], frag[j]);
#pragma unroll
          for (int n = 0; n < kNt; ++n) {
            if (n >= cur.n_used) break;  // uniform over the block
            uint4 b[P];
#pragma unroll
            for (int p = 0; p < P; ++p) b[p] = sbuf[(p * 4 + q) * kPlane + (n * cuda::kMmaCols + g) * 4 + t];
#pragma unroll
            for (int j = 0; j < kSets; ++j)
#pragma unroll
              for (int st = 0; st < 2; ++st)
#pragma unroll
                for (int p = 0; p < P; ++p)
                  cuda::mma_m16n8k16_bf16(acc[j][n], frag[j][st], st ? b[p].z : b[p].x, st ? b[p].w : b[p].y);
          }
        }
      }
      if (c + kPartials >= chunks) {  // partial c % 8 is complete
#pragma unroll
        for (int j = 0; j < kSets; ++j)
#pragma unroll
          for (int n = 0; n < kNt; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              float& vi = v_at(j, n, i);
              vi = first ? acc[j][n][i] : vi + acc[j][n][i];
              acc[j][n][i] = 0.0f;
            }
        first = false;
      }
      __syncthreads();  // every warp is done with `buf` before the next iteration refills it
      if (loaded) {
#pragma unroll
        for (int j = 0; j < kSets; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int i = 0; i < 4; ++i) raw[j][h][i] = raw_n[j][h][i];
            sc[j][h][0] = sc_n[j][h][0];
            sc[j][h][1] = sc_n[j][h][1];
          }
      }
      buf ^= 1;
      c = cn;
    }
    if (cur.active) {
      // Accumulator i of lane (g, t): row g (+ 8 for i >= 2), column 8n + 2t + i % 2 (the
      // mma's D fragment). The partials decode's idle warps hold (chunks < 8) add 0.
      auto sum = [&](int j, int n, int i) {
        const float vi = v_at(j, n, i);
        return (chunks < kPartials ? vi + 0.0f : vi) * cur.w[j].scale_2;  // §3.7 weight_scale_2 (1 for MXFP4)
      };
#pragma unroll
      for (int n = 0; n < kNt; ++n) {
        if (n >= cur.n_used) break;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int32_t slot = cur.slots[n * cuda::kMmaCols + 2 * t + i % 2];
          if (slot < 0) continue;
          float* o = a.out + slot * a.m + g + 8 * (i / 2);
          if constexpr (Up) {
            o[cur.rows[0]] = cuda::swiglu(sum(0, n, i), sum(1, n, i), a.wt[slot], a.limit);
          } else {
#pragma unroll
            for (int j = 0; j < kSets; ++j) o[cur.rows[j]] = sum(j, n, i);
          }
        }
      }
    }
    if (!more) break;
    it = it_n;
    cur = nxt;
    sb ^= 1;
  }
}

}  // namespace

void CudaOps::moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                       int k, float swiglu_limit, const Numerics& num, float* out) {
  const int hidden = static_cast<int>(b.shared_w1.in()), shared_inter = static_cast<int>(b.shared_w1.out());
  const int n_experts = static_cast<int>(b.experts.size());
  int inter = 0;
  const cuda::ExpertW* experts = expert_table(b, hidden, &inter);
  cuda::check_experts(b, k, hidden, inter, num);
  const bool native = num.expert_arm == ExpertArm::native;
  if (rows == 0) return;
  DSV4_CHECK(reinterpret_cast<uintptr_t>(x) % 16 == 0, "moe_gemm: layer ", b.layer_id,
             " needs x 16-byte aligned (the activation planes read it in 128-bit loads)");
  activate();
  const int64_t S = static_cast<int64_t>(rows) * k, H = hidden, I = inter, Is = shared_inter;
  std::vector<int32_t> sel_host(static_cast<size_t>(S));
  download_i32(sel_host.data(), sel, sel_host.size());
  const TileList tl = tile_list(sel_host, n_experts, b.layer_id);
  const int32_t* tiles = stage_i32(Slot::host_args, tl.ints.data(), tl.ints.size());

  // Activation planes: e4m3 values (native) and bf16-rounded ones are bf16-exact (one
  // plane); f32 activations take three, so every product stays exact (moe.cu).
  const int P = native || num.act_bf16() ? 1 : 3;
  // Scratch (floats, each part 32-byte aligned): xq [rows, H] (native), h and y [S, I] /
  // [S, H], the planes of x and of h, the shared expert's gate / up / h [rows, Is] and out.
  const int64_t sizes[] = {native ? rows * H : 0, S * I, S * H, P * rows * H / 2, P * S * I / 2,
                           rows * Is, rows * Is, rows * Is, rows * H};
  int64_t total = 0;
  for (int64_t n : sizes) total += padded8(n);
  float* base = scratch_f32(Slot::f32_b, static_cast<size_t>(total));
  auto take = [&base](int64_t n) { return std::exchange(base, base + padded8(n)); };
  float *xq = take(sizes[0]), *h = take(sizes[1]), *y = take(sizes[2]);
  auto* xb = reinterpret_cast<uint4*>(take(sizes[3]));
  auto* hb = reinterpret_cast<uint4*>(take(sizes[4]));
  float *sg = take(sizes[5]), *su = take(sizes[6]), *sh_h = take(sizes[7]), *sh = take(sizes[8]);

  // One projection family over every tile: bf16 planes of `in` [n_in, K], then the kernel.
  auto project = [&](auto up, const float* in, int64_t n_in, int act_div, int64_t m, int64_t K, uint4* planes,
                     float* o) {
    constexpr bool Up = decltype(up)::value;
    const int64_t groups = n_in * K / kGroup;
    const GemmArgs args{experts, tiles, tiles + tl.tiles, planes, groups, act_div, m, K, o, wt, swiglu_limit};
    const int64_t items = tl.tiles * ((m + kItemRows<Up> - 1) / kItemRows<Up>);
    auto run = [&](auto planes_kernel, auto gemm_kernel, size_t smem) {
      planes_kernel<<<cuda::blocks_for(groups, kThreads), kThreads, 0, stream_>>>(in, groups, planes);
      DSV4_CUDA_LAUNCH_CHECK();
      allow_smem(reinterpret_cast<const void*>(gemm_kernel), smem);
      int per_sm = 0;  // resident blocks: the grid walks the items with no wave tail of launches
      DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemm_kernel, kThreads, smem));
      const int64_t blocks = std::min<int64_t>(items, int64_t{std::max(per_sm, 1)} * sm_count_);
      gemm_kernel<<<static_cast<unsigned>(blocks), kThreads, smem, stream_>>>(args, items);
      DSV4_CUDA_LAUNCH_CHECK();
    };
    if (P == 1)
      run(bf16_planes_kernel<1>, expert_gemm_kernel<Up, 1>, kGemmSmem<1>);
    else
      run(bf16_planes_kernel<3>, expert_gemm_kernel<Up, 3>, kGemmSmem<3>);
  };
  if (native) cuda::act_quant128_rows(x, rows, H, xq, stream_);
  project(std::true_type{}, native ? xq : x, rows, k, I, H, xb, h);
  if (native) cuda::act_quant128_rows(h, S, I, h, stream_);  // re-quantized after the weight (§4.23)
  project(std::false_type{}, h, S, 1, H, I, hb, y);

  // §4.24: the shared expert, L-bf16 in every arm, unweighted.
  const bool shared_act = num.act_bf16();
  linear_fp8_gemm(b.shared_w1, x, rows, shared_act, sg);
  linear_fp8_gemm(b.shared_w3, x, rows, shared_act, su);
  cuda::shared_swiglu(sg, su, rows, shared_inter, swiglu_limit, sh_h, stream_);
  linear_fp8_gemm(b.shared_w2, sh_h, rows, shared_act, sh);
  cuda::combine_experts(y, sh, sel, rows, k, hidden, n_experts, out, stream_);
}

}  // namespace dsv4
