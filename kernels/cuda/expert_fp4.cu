// The fragment-layout FP4 expert path (expert_fp4.cuh): the relayout at load, the §4.9
// activations in fp16 B order, and the expert kernel.
//
// Work items are the shipped kernel's (moe.cu): item i = (tile i / (m/16), rows 16 (i %
// (m/16)) ..), a fixed grid of resident blocks walking them. Block = 8 warps; warp w takes
// K's 128-element chunks [w n / 8, (w + 1) n / 8) (partial_chunks). Each lane streams its
// own 16-byte code units and its column's activation run, and lanes t = 0 / < 8 the
// scales, through a per-warp cp.async ring of `ring` slots, ring - 1 chunk steps ahead of
// the mma, across items. The K order of an output (row, slot), fixed by K alone (never by
// the row count or the other slots of the tile): within chunk c, NVFP4: its 8 k16 steps
// chained in the tensor core from zero (A pre-scaled), then acc = fma(s_a 2^14, chunk,
// acc); MXFP4: each 32-group's 2 steps chained from zero, chunk = fma(2^(e-127) 2^14,
// group, chunk) over the 4 groups, then acc = fma(s_a, chunk, acc); the warp's chunks
// ascending; the 8 warps' sums added in warp order, times weight_scale_2 (tile_epilogue).
// So K is walked ascending and the prefill kernel (expert_fp4_gemm.cu) keeps this order
// with one running partial per output. The shipped kernel instead chains every mma of a
// warp (bf16, scales inside the operands) through one accumulator.
#include "kernels/cuda/expert_fp4.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "base/cuda_check.h"
#include "base/error.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/quant.cuh"

namespace dsv4::cuda {

namespace {

constexpr int kThreads = kExpertThreads;
constexpr int kWarps = kKWarps;
constexpr int kChunk = kKChunk;
constexpr int kUnits = kChunk / kFragUnitK;  // 2 code units a chunk

// ---- relayout ----

// One thread per destination word: the lane's 4 registers of one k16 step (layout in
// expert_fp4.cuh, codes placed as `layout`); register j's two codes are one checkpoint
// byte (k even: low nibble k).
__global__ void relayout_codes_kernel(const uint8_t* packed, int64_t rows, int64_t cols, FragCodes layout,
                                      uint32_t* out) {
  const int64_t units = cols / kFragUnitK, words = rows / kMmaRows * units * kWarp * 4;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < words; i += int64_t{gridDim.x} * blockDim.x) {
    const int q = static_cast<int>(i % 4), lane = static_cast<int>(i / 4 % kWarp);
    const int64_t unit = i / (4 * kWarp), b = unit / units, u = unit % units;
    const int g = lane / 4, t = lane % 4;
    uint32_t w = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = kMmaRows * b + g + 8 * (j & 1);
      const int64_t k = kFragUnitK * u + 16 * q + 2 * t + 8 * (j >> 1);
      const uint32_t byte = packed[r * (cols / 2) + k / 2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // h = 0: code k (low nibble), 1: code k + 1
        const uint32_t n = byte >> (4 * h) & 0xF;
        w |= (n & 7) << (kMagAt(layout, j) + 16 * h) | (n >> 3) << (kSignAt(layout, j) + 16 * h);
      }
    }
    out[i] = w;
  }
}

// One thread per destination scale byte (layout in expert_fp4.cuh).
__global__ void relayout_scales_kernel(const uint8_t* scales, int64_t rows, int64_t cols, bool nv, uint8_t* out) {
  const int group = nv ? 16 : 32, per = kChunk / group;  // groups a chunk: 8 / 4
  const int64_t chunks = cols / kChunk, n = rows * cols / group;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int h = static_cast<int>(i % 2), s = static_cast<int>(i / 2 % per), g = static_cast<int>(i / (2 * per) % 8);
    const int64_t bc = i / (16 * per), b = bc / chunks, c = bc % chunks;
    const int64_t r = kMmaRows * b + g + 8 * h;
    const uint8_t code = scales[r * (cols / group) + per * c + s];
    out[i] = nv ? code : static_cast<uint8_t>(code + kMxScaleBias);
  }
}

// *bad = 1 when one of the n MXFP4 scale codes exceeds kMxMaxCode (the layout's + 14 would
// leave the finite f32 exponents).
__global__ void mxfp4_codes_over_kernel(const uint8_t* scales, int64_t n, int* bad) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    if (scales[i] > kMxMaxCode) atomicOr(bad, 1);
}

// ---- activations ----

// One warp per (row, 128-block): §4.9 (cuda::act_quant128), then each lane's 4 values to
// their B-order places (kKOrder: their K places; expert_fp4.cuh act_fp16_rows).
template <bool kKOrder>
__global__ void act_fp16_kernel(const float* x, int64_t rows, int64_t K, __half* q, float* s) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  __shared__ float vals[kThreads / kWarp][kChunk];
  const int lane = threadIdx.x % kWarp, wib = threadIdx.x / kWarp;
  const int64_t blocks = K / kChunk, warps = int64_t{gridDim.x} * (blockDim.x / kWarp);
  for (int64_t w = blockIdx.x * int64_t{blockDim.x / kWarp} + wib; w < rows * blocks; w += warps) {
    const int64_t r = w / blocks, c = w % blocks;
    const float scale = act_quant128(x + r * K + c * kChunk, vals[wib]);  // the lane's own 4 elements
    if (lane == 0) s[w] = scale;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = i * kWarp + lane, st = e / 16, slot = e % 16;
      const int t = (slot % 8) / 2, at = kKOrder ? e : t * 32 + st * 4 + (slot / 8) * 2 + slot % 2;
      q[r * K + c * kChunk + at] = __float2half_rn(vals[wib][e]);  // an e4m3 value: exact
    }
    __syncwarp();  // vals is rewritten by the warp's next block
  }
}

// ---- the expert kernel ----

// The A sets of a step: up, projections w1 and w3 of the item's 16 rows; down, w2's two
// 16-row blocks of the item's 32 rows. Both multiply the same B, so a step's copies,
// activation loads and waits serve 16 mma either way.
constexpr int kSets = 2;
// Rows of an item: 16 up, 32 down.
template <int NW>
constexpr int kItemRows = NW == 2 ? kMmaRows : kSets * kMmaRows;

// A slot of a warp's ring: lane L's code units (A set j, unit u of the chunk), lane L's
// activation run (its column g, k-slots of the 8 steps), the scales of lane group g
// (copied by lane 4g), and column L's activation scale (copied by lane L < 8).
template <bool NV>
struct FragSlot {
  using Scales = std::conditional_t<NV, uint4, uint2>;
  uint4 codes[kSets][kUnits][kWarp];
  uint4 act[4][kWarp];
  Scales scales[kSets][8];
  float act_scale[8];
};

// cp.async (PTX ISA "cp.async"), .cg (L2 only) for the streamed codes, .ca for the rest.
__device__ inline void copy_cg16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src)
               : "memory");
}
template <int N>
__device__ inline void copy_ca(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "n"(N)
               : "memory");
}
__device__ inline void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// What the walk needs of an item: its tile's slots, per A set the code unit of lane 0 at
// chunk 0 and the scales of lane group 0 at chunk 0 of its first 16-row block, and the
// projections' weight_scale_2 (the epilogue's).
template <int NW, bool NV>
struct FragItem {
  using Scales = typename FragSlot<NV>::Scales;
  const int32_t* slots;
  const uint4* codes[kSets];
  const Scales* scales[kSets];
  float scale_2[NW];
};

// Item i looked up in global memory: its tile's slots, the tile's expert (sel of its first
// slot) and that expert's projections: three dependent loads.
template <int NW, bool NV>
__device__ inline FragItem<NW, NV> item_lookup(const FragArgs& a, int64_t i, int64_t m_tiles, int chunks) {
  using Scales = typename FragSlot<NV>::Scales;
  FragItem<NW, NV> it;
  it.slots = a.mma.tiles.slot + i / m_tiles * kMmaCols;
  Fp4Frag w[NW];
  projections<NW>(a.experts[a.sel[it.slots[0]]], w);
#pragma unroll
  for (int j = 0; j < kSets; ++j) {  // set j: projection j (up) or 16-row block j (down)
    const Fp4Frag& f = w[NW == 2 ? j : 0];
    const int64_t b = i % m_tiles * (kItemRows<NW> / kMmaRows) + (NW == 2 ? 0 : j);
    it.codes[j] = f.codes + b * (a.mma.k / kFragUnitK) * kWarp;
    it.scales[j] = reinterpret_cast<const Scales*>(f.scales) + b * chunks * 8;
  }
#pragma unroll
  for (int j = 0; j < NW; ++j) it.scale_2[j] = w[j].scale_2;
  return it;
}

// A table row of an item (v1, v2: FragItem with the slots held).
template <int NW, bool NV>
struct FragRow {
  int32_t slots[kMmaCols];
  FragItem<NW, NV> item;
};

// The block's items blockIdx.x + n gridDim.x, n = 0, 1, ...: v0 looks item n up when asked
// (item_lookup), v1 / v2 read row n of the table the block filled once (fill, before any copy).
template <int NW, bool NV, bool kTable>
struct FragWalk {
  int64_t m_tiles;
  int chunks;
  int mine;                // the block's items (v1 / v2: the table's rows in use)
  FragRow<NW, NV>* table;  // v1 / v2: [kFragTableItems] in shared memory
  __device__ FragWalk(const FragArgs& a, FragRow<NW, NV>* table_)
      : m_tiles(a.mma.m / kItemRows<NW>), chunks(static_cast<int>(a.mma.k / kChunk)), table(table_) {
    const int64_t items = *a.mma.tiles.count * m_tiles;
    mine = items > blockIdx.x ? static_cast<int>((items - 1 - blockIdx.x) / gridDim.x + 1) : 0;
  }
  __device__ void fill(const FragArgs& a) const {
    if constexpr (kTable) {
      if (mine > kFragTableItems) {  // a bug: launch_fp4 runs v0 for calls that could need more rows
        if (threadIdx.x == 0)
          printf("expert_fp4 table: block %u has %d items, its table %d rows\n", blockIdx.x, mine, kFragTableItems);
        __trap();
      }
      for (int n = threadIdx.x; n < mine; n += blockDim.x) {
        FragRow<NW, NV>& r = table[n];
        r.item = item_lookup<NW, NV>(a, blockIdx.x + int64_t{n} * gridDim.x, m_tiles, chunks);
#pragma unroll
        for (int s = 0; s < kMmaCols; ++s) r.slots[s] = r.item.slots[s];
        r.item.slots = r.slots;
      }
      __syncthreads();
    }
  }
  __device__ FragItem<NW, NV> item(const FragArgs& a, int n) const {
    if constexpr (kTable)
      return table[n].item;
    else
      return item_lookup<NW, NV>(a, blockIdx.x + int64_t{n} * gridDim.x, m_tiles, chunks);
  }
};

// A warp's copies, ring - 1 (item, chunk) steps ahead of its mma, in the order the kernel
// consumes them: the block's items n = 0, 1, ..., in each the warp's chunks ascending
// (consecutive: a lane's next code units are the next 1 KiB of its rows' units).
// A zero column's activation run and scale are stored as zeros (so the mma never needs to
// know which columns live). A warp with no chunk copies nothing; past the last step a
// commit group is empty.
template <int NW, bool NV, bool kTable>
struct FragFeeder {
  using Scales = typename FragSlot<NV>::Scales;
  const FragWalk<NW, NV, kTable> walk;  // a copy: the kernel's (registers, never the stack)
  int n;                     // the block's item of the next step (>= walk.mine: none)
  int c = 0, c_end;          // the next step's chunk; the warp's range ends at c_end
  // The next step's sources (advanced by one chunk after each copy):
  const uint4* codes[kSets];         // the lane's first unit of the chunk's rows
  const Scales* scales[kSets];       // lane group g's scales of the chunk (read by lane 4g)
  const __half* act = nullptr;       // column g's activation run + 32t (null: a zero column)
  const float* act_scale = nullptr;  // lane L < 8: column L's scale of the chunk (null: none)
  __device__ FragFeeder(const FragArgs& a, const FragWalk<NW, NV, kTable>& w) : walk(w), n(w.mine) {
    const int warp = threadIdx.x / kWarp;
    c_end = partial_chunks(warp + 1, walk.chunks);
    if (partial_chunks(warp, walk.chunks) < c_end) enter(a, 0);
  }
  __device__ void enter(const FragArgs& a, int n_) {
    n = n_;
    c = partial_chunks(threadIdx.x / kWarp, walk.chunks);
    if (n >= walk.mine) return;
    const int lane = threadIdx.x % kWarp, g = lane / 4, t = lane % 4;
    const FragItem<NW, NV> it = walk.item(a, n);
#pragma unroll
    for (int j = 0; j < kSets; ++j) {
      codes[j] = it.codes[j] + kUnits * c * kWarp + lane;
      scales[j] = it.scales[j] + c * 8 + g;
    }
    const int32_t col = it.slots[g], own = it.slots[lane % 8];
    act = col >= 0 ? a.act + (col / a.mma.act_div) * a.mma.k + int64_t{c} * kChunk + 32 * t : nullptr;
    act_scale = lane < 8 && own >= 0 ? a.act_scale + (own / a.mma.act_div) * walk.chunks + c : nullptr;
  }
  __device__ void step(const FragArgs& a, FragSlot<NV>& slot) {
    if (n < walk.mine) {
      const int lane = threadIdx.x % kWarp, t = lane % 4;
#pragma unroll
      for (int j = 0; j < kSets; ++j) {
#pragma unroll
        for (int u = 0; u < kUnits; ++u) copy_cg16(&slot.codes[j][u][lane], codes[j] + u * kWarp);
        if (t == 0) copy_ca<sizeof(Scales)>(&slot.scales[j][lane / 4], scales[j]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if (act)
          copy_ca<16>(&slot.act[i][lane], act + 8 * i);
        else
          slot.act[i][lane] = make_uint4(0, 0, 0, 0);
      }
      if (act_scale)
        copy_ca<4>(&slot.act_scale[lane], act_scale);
      else if (lane < 8)
        slot.act_scale[lane] = 0.0f;
      if (c + 1 < c_end) {
        ++c;
#pragma unroll
        for (int j = 0; j < kSets; ++j) {
          codes[j] += kUnits * kWarp;
          scales[j] += 8;
        }
        if (act) act += kChunk;
        if (act_scale) ++act_scale;
      } else {
        enter(a, n + 1);
      }
    }
    commit_copies();
  }
};

// acc[j] += chunk's products (A set j) from `in`: lane (g, t)'s A registers (its code
// units, its scales), B of column g, D columns 2t, 2t + 1 times their activation scales
// (expert_fp4.cuh frag_step_pair, frag_pair_mma, frag_chunk_scaled).
template <bool NV, FragCodes C>
__device__ inline void frag_chunk(const FragSlot<NV>& in, float (&acc)[kSets][4]) {
  const int lane = threadIdx.x % kWarp, g = lane / 4;
  float chunk[kSets][4] = {};
  typename FragSlot<NV>::Scales sc[kSets];
#pragma unroll
  for (int j = 0; j < kSets; ++j) sc[j] = in.scales[j][g];
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    uint4 units[kSets];
#pragma unroll
    for (int j = 0; j < kSets; ++j) units[j] = in.codes[j][u][lane];
#pragma unroll
    for (int p = 0; p < 2; ++p) {  // steps 4u + 2p, 4u + 2p + 1: one activation load
      const uint4 bv = in.act[2 * u + p][lane];
#pragma unroll
      for (int j = 0; j < kSets; ++j) frag_pair_mma<NV>(frag_step_pair<NV, typename FragSlot<NV>::Scales, C>(units[j], sc[j], u, p), bv,
                                                          chunk[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kSets; ++j) frag_chunk_scaled<NV>(in.act_scale, chunk[j], acc[j]);
}

// part: the 8 warps' accumulators of one item (two sets); then each warp's ring; v1: then
// the block's item table.
template <int NW, bool NV, int S, bool kTable>
constexpr size_t kFragSmem = sizeof(float) * kWarps * kSets * 4 * kWarp + sizeof(FragSlot<NV>) * kWarps * S +
                             (kTable ? sizeof(FragRow<NW, NV>) * kFragTableItems : 0);

// Step n of a warp waits for its slot n % S, then (all lanes past step n - 1) refills slot
// (n - 1) % S with step n + S - 1, then multiplies slot n % S.
template <int NW, bool NV, int S, bool kTable, FragCodes C>
__global__ void __launch_bounds__(kThreads, 2) expert_fp4_kernel(FragArgs a) {
  static_assert(S >= 2, "one slot read while the others fill");
  cuda::pdl_wait();  // launch.cuh: the tiles, activations and sel are earlier kernels' outputs
  cuda::pdl_launch_dependents();
  extern __shared__ uint4 smem[];
  using Part = float[kWarps][kSets][4][kWarp];
  static_assert(sizeof(Part) % sizeof(uint4) == 0 && sizeof(FragSlot<NV>) % sizeof(uint4) == 0);
  Part& part = *reinterpret_cast<Part*>(smem);
  const int warp = threadIdx.x / kWarp;
  auto* rings = reinterpret_cast<FragSlot<NV>*>(smem + sizeof(Part) / sizeof(uint4));
  auto* ring = rings + warp * S;
  const FragWalk<NW, NV, kTable> walk(a, reinterpret_cast<FragRow<NW, NV>*>(rings + kWarps * S));
  walk.fill(a);
  FragFeeder<NW, NV, kTable> feed(a, walk);
#pragma unroll
  for (int s = 0; s < S - 1; ++s) feed.step(a, ring[s]);
  int slot = 0;
#pragma unroll 1
  for (int n = 0; n < walk.mine; ++n) {
    const FragItem<NW, NV> it = walk.item(a, n);  // for the epilogue
    float acc[kSets][4];
#pragma unroll
    for (int j = 0; j < kSets; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
#pragma unroll 1
    for (int c = partial_chunks(warp, walk.chunks); c < partial_chunks(warp + 1, walk.chunks); ++c) {
      wait_copies<S - 2>();
      __syncwarp();  // the lanes' copies of this slot landed; every lane is past the previous one
      feed.step(a, ring[(slot + S - 1) % S]);
      frag_chunk<NV, C>(ring[slot], acc);
      slot = (slot + 1) % S;
    }
    Fp4W scale_2[NW];  // tile_epilogue's weight_scale_2
#pragma unroll
    for (int j = 0; j < NW; ++j) scale_2[j].scale_2 = it.scale_2[j];
    const int64_t m0 = (blockIdx.x + int64_t{n} * gridDim.x) % walk.m_tiles * kItemRows<NW>;
    if constexpr (NW == 2) {
      tile_epilogue<2>(a.mma, it.slots, scale_2, m0, acc, part);
    } else {  // the item's two 16-row blocks, one after the other through part's first half
      using Part1 = float[kWarps][1][4][kWarp];
      using Acc1 = const float[1][4];
#pragma unroll
      for (int j = 0; j < kSets; ++j) {
        if (j > 0) __syncthreads();  // part read by the previous block's epilogue
        tile_epilogue<1>(a.mma, it.slots, scale_2, m0 + j * kMmaRows, reinterpret_cast<Acc1&>(acc[j]),
                         *reinterpret_cast<Part1*>(smem));
      }
    }
    __syncthreads();  // `part` is rewritten by the next item
  }
  wait_copies<0>();  // no copy outlives the block
}

template <int NW, bool NV, int S, bool kTable, FragCodes C>
void launch_fp4(const FragArgs& a, int64_t tiles_max, int device, cudaStream_t stream) {
  constexpr size_t smem = kFragSmem<NW, NV, S, kTable>;
  constexpr auto kernel = expert_fp4_kernel<NW, NV, S, kTable, C>;
  // 228 KiB of shared memory an SM, 1 KiB of it reserved a block (the table included).
  static_assert(S > 3 || 2 * (smem + 1024) <= 228 * 1024, "rings of 2-3 slots keep two blocks an SM");
  const int64_t items_max = tiles_max * (a.mma.m / kItemRows<NW>);
  const int64_t blocks = resident_grid<kernel, smem>(items_max, device);
  if (blocks <= 0) return;
  if constexpr (kTable)
    if ((items_max + blocks - 1) / blocks > kFragTableItems)  // more items a block than rows: v0's walk
      return launch_fp4<NW, NV, S, false, C>(a, tiles_max, device, stream);
  cuda::launch(kernel, static_cast<unsigned>(blocks), kThreads, smem, stream, a);
}

// Variant V's walk (v0: lookups, v1-v2: the table) and codes at ring 2-4.
template <int NW, bool NV, FragVariant V>
void launch_fp4(int ring, const FragArgs& a, int64_t tiles_max, int device, cudaStream_t stream) {
  constexpr bool kTable = V != FragVariant::lookup;
  constexpr FragCodes C = codes_of(V);
  switch (ring) {
    case 2:
      return launch_fp4<NW, NV, 2, kTable, C>(a, tiles_max, device, stream);
    case 3:
      return launch_fp4<NW, NV, 3, kTable, C>(a, tiles_max, device, stream);
    case 4:
      return launch_fp4<NW, NV, 4, kTable, C>(a, tiles_max, device, stream);
    default:
      throw Error(cat("expert_fp4: a ring of ", ring, " slots (2-4 are built)"));
  }
}

template <int NW, bool NV>
void launch_fp4(int ring, FragVariant variant, const FragArgs& a, int64_t tiles_max, int device, cudaStream_t stream) {
  if (a.mma.m % kItemRows<NW> != 0 || a.mma.k % kChunk != 0)
    throw Error(cat("expert_fp4: a ", a.mma.m, " x ", a.mma.k, " projection is not whole ", kItemRows<NW>, " x ", kChunk,
                    " items"));
  switch (variant) {
    case FragVariant::lookup:
      return launch_fp4<NW, NV, FragVariant::lookup>(ring, a, tiles_max, device, stream);
    case FragVariant::table:
      return launch_fp4<NW, NV, FragVariant::table>(ring, a, tiles_max, device, stream);
    case FragVariant::paired:
      return launch_fp4<NW, NV, FragVariant::paired>(ring, a, tiles_max, device, stream);
  }
  throw Error(cat("expert_fp4: no variant v", static_cast<int>(variant)));
}

}  // namespace

void relayout_fp4(const Fp4W& src, int64_t rows, uint8_t* codes, uint8_t* scales, cudaStream_t stream,
                  FragCodes layout) {
  relayout_codes_kernel<<<blocks_for(rows * src.cols / 8, kThreads), kThreads, 0, stream>>>(
      src.packed, rows, src.cols, layout, reinterpret_cast<uint32_t*>(codes));
  DSV4_CUDA_LAUNCH_CHECK();
  relayout_scales_kernel<<<blocks_for(rows * src.cols / src.group, kThreads), kThreads, 0, stream>>>(
      src.scales, rows, src.cols, src.nv, scales);
  DSV4_CUDA_LAUNCH_CHECK();
}

std::vector<ExpertFrag> relay_experts(const std::vector<ExpertW>& experts, int64_t hidden, int64_t inter,
                                      FragPlace place, const std::string& owner,
                                      std::map<const uint8_t*, Fp4Frag>& relaid, std::vector<void*>& owned,
                                      cudaStream_t stream, FragCodes layout) {
  struct Job {
    Fp4W w;
    int64_t rows;
    size_t expert;
  };
  std::vector<Job> jobs;  // the distinct projections not relaid yet, in expert order
  std::map<const uint8_t*, size_t> queued;
  int64_t max_codes = 0, max_scales = 0;
  for (size_t e = 0; e < experts.size(); ++e)
    for (const auto& [w, rows] : {std::pair{experts[e].w1, inter}, {experts[e].w3, inter}, {experts[e].w2, hidden}}) {
      if (rows % kMmaRows != 0 || w.cols % kChunk != 0)
        throw Error(cat("expert_fp4: ", owner, " expert ", e, " has a projection of ", rows, " x ", w.cols,
                        ", not whole 16 x 128 tiles"));
      if (relaid.count(w.packed) || queued.count(w.packed)) continue;
      queued.emplace(w.packed, jobs.size());
      jobs.push_back({w, rows, e});
      max_codes = std::max(max_codes, rows * w.cols / 2);
      max_scales = std::max(max_scales, rows * w.cols / w.group);
    }
  auto device_bytes = [&owned](int64_t n) {
    void* p = nullptr;
    DSV4_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(n, 1))));
    owned.push_back(p);
    return static_cast<uint8_t*>(p);
  };
  // The scale check first, so a refusal leaves every byte as it was.
  std::vector<int> over(jobs.size(), 0);
  if (!jobs.empty()) {
    int* bad = reinterpret_cast<int*>(device_bytes(static_cast<int64_t>(sizeof(int) * jobs.size())));
    DSV4_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(int) * jobs.size(), stream));
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Job& j = jobs[i];
      const int64_t n = j.rows * j.w.cols / j.w.group;
      if (j.w.nv) continue;
      mxfp4_codes_over_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(j.w.scales, n, bad + i);
      DSV4_CUDA_LAUNCH_CHECK();
    }
    DSV4_CUDA_CHECK(cudaMemcpyAsync(over.data(), bad, sizeof(int) * over.size(), cudaMemcpyDeviceToHost, stream));
    DSV4_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  for (size_t i = 0; i < jobs.size(); ++i)
    if (over[i])
      throw Error(cat("expert_fp4: ", owner, " expert ", jobs[i].expert, " has an MXFP4 scale code above ",
                      kMxMaxCode, " (2^", kMxMaxCode - 127, "), which the fragment layout cannot hold"));
  uint8_t *scratch_codes = nullptr, *scratch_scales = nullptr;
  if (place == FragPlace::in_place && !jobs.empty()) {
    scratch_codes = device_bytes(max_codes);
    scratch_scales = device_bytes(max_scales);
  }
  for (const Job& j : jobs) {
    const int64_t codes_n = j.rows * j.w.cols / 2, scales_n = j.rows * j.w.cols / j.w.group;
    // in_place: the caller's own device bytes (resident copies or weights generated in
    // place), rewritten once, stream-ordered after every earlier reader.
    auto* codes = place == FragPlace::in_place ? const_cast<uint8_t*>(j.w.packed) : device_bytes(codes_n);
    auto* scales = place == FragPlace::in_place ? const_cast<uint8_t*>(j.w.scales) : device_bytes(scales_n);
    if (place == FragPlace::in_place) {
      relayout_fp4(j.w, j.rows, scratch_codes, scratch_scales, stream, layout);
      DSV4_CUDA_CHECK(cudaMemcpyAsync(codes, scratch_codes, codes_n, cudaMemcpyDeviceToDevice, stream));
      DSV4_CUDA_CHECK(cudaMemcpyAsync(scales, scratch_scales, scales_n, cudaMemcpyDeviceToDevice, stream));
    } else {
      relayout_fp4(j.w, j.rows, codes, scales, stream, layout);
    }
    relaid.emplace(j.w.packed, Fp4Frag{reinterpret_cast<const uint4*>(codes), scales, j.w.scale_2, j.w.nv});
  }
  std::vector<ExpertFrag> table(experts.size());
  for (size_t e = 0; e < experts.size(); ++e)
    table[e] = {relaid.at(experts[e].w1.packed), relaid.at(experts[e].w3.packed), relaid.at(experts[e].w2.packed)};
  return table;
}

FragExperts::FragExperts(const std::vector<ExpertW>& experts, int64_t hidden, int64_t inter, cudaStream_t stream,
                         FragCodes layout) {
  try {
    std::map<const uint8_t*, Fp4Frag> relaid;
    const std::vector<ExpertFrag> host =
        relay_experts(experts, hidden, inter, FragPlace::copies, "the dev bench's", relaid, owned_, stream, layout);
    DSV4_CUDA_CHECK(cudaMalloc(&table_, sizeof(ExpertFrag) * host.size()));
    owned_.push_back(table_);
    DSV4_CUDA_CHECK(cudaMemcpyAsync(table_, host.data(), sizeof(ExpertFrag) * host.size(), cudaMemcpyHostToDevice,
                                    stream));
    DSV4_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    for (void* p : owned_) cudaFree(p);
    throw;
  }
}

FragExperts::~FragExperts() {
  for (void* p : owned_) cudaFree(p);
}

void act_fp16_rows(const float* x, int64_t rows, int64_t K, __half* q, float* s, cudaStream_t stream,
                   ActOrder order) {
  cuda::launch(order == ActOrder::k ? act_fp16_kernel<true> : act_fp16_kernel<false>,
               blocks_for(rows * (K / kChunk) * kWarp, kThreads), kThreads, 0, stream, x, rows, K, q, s);
}

void launch_expert_fp4(int nw, bool nv, int ring, const FragArgs& a, int64_t tiles_max, int device,
                       cudaStream_t stream, FragVariant variant) {
  if (nw == 2)
    nv ? launch_fp4<2, true>(ring, variant, a, tiles_max, device, stream)
       : launch_fp4<2, false>(ring, variant, a, tiles_max, device, stream);
  else
    nv ? launch_fp4<1, true>(ring, variant, a, tiles_max, device, stream)
       : launch_fp4<1, false>(ring, variant, a, tiles_max, device, stream);
}

}  // namespace dsv4::cuda
