// MoE experts (MODEL.md §4.23-§4.24, D4, D16; the router is route.cu) on tensor cores.
// The slots of a call (row, j) are grouped on the device by expert (group_slots_kernel),
// so a distinct expert's weights are read once for all the rows that picked it: its slots
// are the columns of mma.sync.m16n8k16 (f32 accumulate), its weight rows the M. Two
// routed-expert kernels, one per expert arm, each on its own layout of the expert bytes
// (decided once per layer, CudaOps::expert_table): the native arm (D4, the default) runs
// the fragment-layout kernel of expert_fp4.cuh (fp16 mma on e4m3 activation values,
// weights relaid in place at load; routed_fragment), the bf16 arm the shipped kernel below
// (expert_mma_kernel, bf16 mma on the checkpoint layout; routed_shipped). In both a
// column's result does not depend on which other columns share its tile, and the K order
// (chunks, warps, the fixed combine) depends on the weight shape alone, so a row of a
// T-row call is bit-identical to the row alone (SPECDECODE.md §6.3 R-I3). The combine
// adds the row's experts in ascending id, then the shared expert, as the CPU reference.
#include <cub/block/block_scan.cuh>
#include <cuda_bf16.h>

#include <array>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/expert_fp4.cuh"
#include "kernels/cuda/expert_mma.cuh"
#include "kernels/cuda/hc_post.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/moe_experts.cuh"
#include "kernels/cuda/quant.cuh"
#include "kernels/cuda/swiglu.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = cuda::kExpertThreads;
constexpr int kWarps = kThreads / cuda::kWarp;
constexpr int kMaxK = 16;       // experts per token
constexpr int kMoeChunk = 256;  // rows per pass, bounds the scratch
constexpr int kCols = cuda::kMmaCols;       // slots per tile
constexpr int kTileRows = cuda::kMmaRows;   // weight rows per block
constexpr int kChunk = cuda::kKChunk;
using cuda::MmaArgs;
using cuda::Tiles;
using cuda::max_tiles;
constexpr int kSharedLine = 1;  // the shared expert's line (Ops::on_line), beside the routed ones

using cuda::swiglu;  // §4.23 steps 2-4 on one element (swiglu.cuh)

// One block: experts in ascending id, each one's slots in ascending order (a fixed order;
// ids outside [0, n_experts) join no tile). Shared memory: sel [slots], first tile [n_experts].
// experts null: t.w is not written (the fragment kernel finds a tile's expert by sel).
__global__ void __launch_bounds__(kThreads) group_slots_kernel(const int32_t* sel, int slots,
                                                               const cuda::ExpertW* experts, int n_experts,
                                                               Tiles t) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
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
        if (experts != nullptr && j % kCols == 0) t.w[first[e] + j / kCols] = experts[e];
        out[j++] = s;
      }
    for (; j % kCols != 0; ++j) out[j] = -1;
  }
}

// A warp's weight runs of one group: chunks c, c + 8, ..., c + 8 (A - 1) of rows m0 + g
// and m0 + g + 8 (chunks past the weight's last are neither loaded nor multiplied).
template <int NW, int A>
struct RunGroup {
  uint32_t raw[A][NW][2][4];  // [chunk][projection][row g, g + 8][word]
  uint8_t sc[A][NW][2][2];    // block scale codes of the run's two 16-halves

  __device__ void load(const cuda::Fp4W (&w)[NW], const int (&gs)[NW], int64_t m0, int64_t c, int64_t chunks) {
    const int lane = threadIdx.x % cuda::kWarp, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int u = 0; u < A; ++u) {
      const int64_t k0 = (c + u * kWarps) * kChunk + 32 * t;
      if (c + u * kWarps < chunks)
#pragma unroll
        for (int j = 0; j < NW; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h) cuda::load_run(w[j], gs[j], m0 + g + 8 * h, k0, raw[u][j][h], sc[u][j][h]);
    }
  }
  template <int P, cuda::Fp4Decode kDecode>
  __device__ void multiply(cuda::TileItem<NW>& it, int64_t c, int64_t chunks) const {
    const int t = threadIdx.x % cuda::kWarp % 4;
#pragma unroll
    for (int u = 0; u < A; ++u) {
      if (c + u * kWarps >= chunks) break;
      const int64_t k0 = (c + u * kWarps) * kChunk + 32 * t;
      cuda::chunk_product<NW, P, kDecode>(it.w, raw[u], sc[u], it.x ? it.x + k0 : nullptr, it.acc);
    }
  }
};

// p_j[s, m0 + i] = sum_k W_j(m0 + i, k) a_s(k) for the 16 rows m0 + i and the <= 8 slots
// of `tile`; out = swiglu(p_1, p_3) (up) or p_2 (down). Lane (g, t) = (lane / 4, lane % 4) owns weight rows m0 + g and
// m0 + g + 8 and slot column g; in chunk c it takes the 32-element run at k0 = 128c + 32t
// (one 16-byte load per row, one scale group of MXFP4, two of NVFP4); word q of the run
// gives steps 2q and 2q+1 (cuda::a_fragments). Warp w takes chunks w, w + 8, ... in
// ascending order (acc chained through every mma), kAhead of them loaded before the
// first is multiplied; the 8 warps' sums are added in warp order. P activation planes: 1
// when a_s is bf16-exact (e4m3 values, bf16-rounded), 3 for f32 (x = hi + mid + lo, each
// bf16, exactly: 24 = 3 x 8 significant bits).
template <int NW, int P, cuda::MmaKnobs kn>
__device__ inline void tile_product(const MmaArgs& a, int tile, int64_t m0, float (&part)[kWarps][NW][4][cuda::kWarp]) {
  const int warp = threadIdx.x / cuda::kWarp;
  cuda::TileItem<NW> it(a, tile);
  const int64_t chunks = a.k / kChunk;
#pragma unroll 1
  for (int64_t c = warp; c < chunks; c += int64_t{kWarps} * cuda::kAhead) {
    RunGroup<NW, cuda::kAhead> runs;
    runs.load(it.w, it.gs, m0, c, chunks);
    runs.template multiply<P, kn.decode>(it, c, chunks);
  }
  cuda::tile_epilogue<NW>(a, it.slots, it.w, m0, it.acc, part);
}

// The knobs of the shipped kernel's variants (expert_kernel.h); the engine runs `shipped`.
__host__ __device__ constexpr cuda::MmaKnobs knobs_of(cuda::ExpertKernel v) {
  return v == cuda::ExpertKernel::lookup ? cuda::MmaKnobs{.decode = cuda::Fp4Decode::lookup} : cuda::kShippedKnobs;
}

// Work item i = (tile i / (m / 16), rows 16 (i % (m / 16)) ..): a fixed grid of resident
// blocks walks the items of the tiles that exist (count is known on the device only), so
// a call launches no empty blocks. Which block takes an item changes nothing in it.
// (A kernel's template arguments name the variant: nvcc's host stubs take no class-type
// ones.)
template <int NW, int P, cuda::ExpertKernel V>
__global__ void __launch_bounds__(kThreads, cuda::kMinBlocks<NW>) expert_mma_kernel(MmaArgs a) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  constexpr cuda::MmaKnobs kn = knobs_of(V);
  __shared__ float part[kWarps][NW][4][cuda::kWarp];
  const int64_t m_tiles = a.m / kTileRows;
  const int64_t items = *a.tiles.count * m_tiles;
#pragma unroll 1
  for (int64_t i = blockIdx.x; i < items; i += gridDim.x) {
    tile_product<NW, P, kn>(a, static_cast<int>(i / m_tiles), i % m_tiles * kTileRows, part);
    __syncthreads();  // `part` is rewritten by the next item
  }
}

// Blocks of expert_mma_kernel<NW, P, V> that fit on the device at once (its occupancy, a
// property of the compiled kernel, times the SMs), and the launch of `items_max` items.
template <int NW, int P, cuda::ExpertKernel V>
void launch_mma(const MmaArgs& a, int64_t items_max, int device, cudaStream_t stream) {
  static const int per_sm = [] {
    int n = 0;
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, expert_mma_kernel<NW, P, V>, kThreads, 0));
    return n;
  }();
  int sms = 0;
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = std::min<int64_t>(items_max, int64_t{std::max(per_sm, 1)} * sms);
  cuda::launch(expert_mma_kernel<NW, P, V>, static_cast<unsigned>(blocks), kThreads, 0, stream, a);
}

template <cuda::ExpertKernel V>
void launch_mma(int nw, int planes, const MmaArgs& a, int64_t items_max, int device, cudaStream_t stream) {
  if (nw == 2)
    planes == 1 ? launch_mma<2, 1, V>(a, items_max, device, stream) : launch_mma<2, 3, V>(a, items_max, device, stream);
  else
    planes == 1 ? launch_mma<1, 1, V>(a, items_max, device, stream) : launch_mma<1, 3, V>(a, items_max, device, stream);
}

// The shared expert's h [rows, inter] = swiglu(g, u) with weight 1.
__global__ void swiglu_kernel(const float* g, const float* u, int64_t rows, int inter, float limit,
                              float* h) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * inter;
       i += int64_t{gridDim.x} * blockDim.x)
    h[i] = swiglu(g[i], u[i], 1.0f, limit);
}

// out[t, d] = (sum over the row's slots in ascending expert id of y[slot, d], from 0) + sh[t, d].
// A slot whose id is outside [0, n_experts) was computed by no tile: it adds NaN. With
// post.out set, hc_post's column (t, d) of that value too (Ops::moe_hc_post).
__global__ void combine_kernel(const float* y, const float* sh, const int32_t* sel, int64_t rows,
                               int k, int hidden, int n_experts, float* out, cuda::HcPost post) {
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
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
    const float v = acc + sh[i];
    out[i] = v;
    if (post.out) cuda::hc_post_column(v, post, t, d, hidden);  // uniform
  }
}

// launch_mma of the variant `kernel`: the ExpertKernel values from V up to kLastExpertKernel.
template <int V = 0>
void launch_variant(cuda::ExpertKernel kernel, int nw, int planes, const MmaArgs& a, int64_t items_max, int device,
                    cudaStream_t stream) {
  constexpr auto v = static_cast<cuda::ExpertKernel>(V);
  if constexpr (V > static_cast<int>(cuda::kLastExpertKernel)) {
    throw Error(cat("moe: no expert kernel variant ", static_cast<int>(kernel)));
  } else {
    if (kernel == v) return launch_mma<v>(nw, planes, a, items_max, device, stream);
    launch_variant<V + 1>(kernel, nw, planes, a, items_max, device, stream);
  }
}

bool is_pow2(float v) {
  int e;
  return v > 0.0f && std::frexp(v, &e) == 0.5f;
}

const char* arm_name(ExpertArm arm) { return arm == ExpertArm::native ? "native" : "bf16"; }

// The kernels that stream a projection copy 16-byte runs of its codes by cp.async and its
// scales in 4-byte words (the bf16 arm's prefill GEMM, expert_gemm.cuh) or 16 / 8-byte ones
// (the native arm's fragment kernel: a lane group's NVFP4 / MXFP4 scales of a chunk,
// expert_fp4.cuh). Every device tensor is its own cudaMalloc allocation (CudaOps::resident's
// copy, CudaWeightMemory::generate; 256-byte aligned), so this holds by construction; a
// projection that breaks it is refused by name, not read misaligned.
void check_cp_async_aligned(const Fp4Linear& stored, const cuda::Fp4W& w, ExpertArm arm) {
  const uintptr_t scale_align = arm == ExpertArm::native ? (w.nv ? 16 : 8) : 4;
  if (reinterpret_cast<uintptr_t>(w.packed) % 16 != 0)
    throw Error(cat("moe: expert tensor '", stored.weight.name, "' is not 16-byte aligned in device memory"));
  if (reinterpret_cast<uintptr_t>(w.scales) % scale_align != 0)
    throw Error(cat("moe: expert tensor '", stored.scale.name, "' is not ", scale_align,
                    "-byte aligned in device memory"));
}

// The refusal of a call whose expert arm is not the one the layer's expert bytes are laid
// out for (CudaOps::expert_table).
Error other_arm(const BlockWeights& b, const std::string& tensor, ExpertArm held, ExpertArm asked) {
  return Error(cat("moe: layer ", b.layer_id, ": expert tensor '", tensor, "' holds the ", arm_name(held),
                   " expert arm's layout (", held == ExpertArm::native ? "the fragment layout" : "the checkpoint's",
                   "), a call asks for the ", arm_name(asked),
                   " arm; one CudaOps serves one expert arm (docs/fp4-fragment-kernel.md \"Adoption\")"));
}

}  // namespace

namespace cuda {

void shared_swiglu(const float* g, const float* u, int64_t rows, int inter, float limit, float* h,
                   cudaStream_t stream) {
  cuda::launch(swiglu_kernel, blocks_for(rows * inter, kThreads), kThreads, 0, stream, g, u, rows, inter, limit, h);
}

void combine_experts(const float* y, const float* sh, const int32_t* sel, int64_t rows, int k, int hidden,
                     int n_experts, float* out, cudaStream_t stream, const HcPost* post) {
  cuda::launch(combine_kernel, blocks_for(rows * hidden, kThreads), kThreads, 0, stream, y, sh, sel, rows, k, hidden,
               n_experts, out, post ? *post : HcPost{});
}

void launch_expert_mma(ExpertKernel kernel, int nw, int planes, const MmaArgs& a, int64_t items_max, int device,
                       cudaStream_t stream) {
  launch_variant(kernel, nw, planes, a, items_max, device, stream);
}

void group_slots(const int32_t* sel, int slots, const ExpertW* experts, int n_experts, const Tiles& t,
                 cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(slots + n_experts) * sizeof(int32_t);
  cuda::launch(group_slots_kernel, 1, kThreads, smem, stream, sel, slots, experts, n_experts, t);
}

void check_experts(const BlockWeights& b, int k, int hidden, const Numerics& num) {
  // Before the table's build (CudaOps::expert_table relays the bytes): a width the kernels
  // cannot tile is refused here, by its widths, not by the relayout. No experts: inter 0,
  // and the table refuses the layer by name.
  const int64_t inter = b.experts.empty() ? 0 : b.experts.front().w1.rows;
  if (k <= 0 || k > kMaxK) throw Error(cat("moe: layer ", b.layer_id, " experts per token ", k));
  if (hidden % kChunk != 0 || inter % kChunk != 0)  // whole chunks (the expert kernels, §4.9 blocks)
    throw Error(cat("moe: layer ", b.layer_id, " needs expert widths that are multiples of ", kChunk,
                    ": hidden ", hidden, " inter ", inter));
  if (num.expert_arm != ExpertArm::native && b.expert_recipe == ExpertRecipe::nvfp4)
    for (const ExpertWeights& e : b.experts)
      if (!(is_pow2(e.w1.scale_2) && is_pow2(e.w2.scale_2) && is_pow2(e.w3.scale_2)))
        throw Error(cat("moe: expert ", e.w1.weight.name, " has a weight_scale_2 that is not a power "
                        "of two; the bf16 expert arm cannot be exact (C4)"));
}

}  // namespace cuda

// The layout of a layer's expert bytes is decided once, by the first arm that uses them
// (docs/fp4-fragment-kernel.md "Adoption"; docs/numerics.md "MoE experts"): the native arm
// relays every projection in place into the fragment layout (cuda::relay_experts: Flash
// cannot hold two copies of its experts), which only the fragment kernel reads; the bf16
// arm keeps the checkpoint layout for the shipped kernels (decode expert_mma_kernel,
// prefill expert_gemm_ring_kernel). A later call with the other arm on the same device
// bytes is refused by name (other_arm), never computed on the wrong layout: one CudaOps
// serves one expert arm. The relayout runs at the table's first build, which is a
// prefill's or a warm-up step's first MoE, never a captured one (device_copy refuses).
const CudaOps::ExpertTable& CudaOps::expert_table(const BlockWeights& b, int hidden, ExpertArm arm) {
  if (b.experts.empty()) throw Error(cat("moe: layer ", b.layer_id, " has no routed experts"));
  const TensorView& w1 = b.experts.front().w1.weight;
  const Key key{w1.storage, w1.data};
  auto it = experts_.find(key);
  if (it != experts_.end()) {
    if (it->second.arm != arm) throw other_arm(b, w1.name, it->second.arm, arm);
    return it->second;
  }
  const int64_t width = b.experts.front().w1.rows;
  std::vector<cuda::ExpertW> host(b.experts.size());
  for (size_t id = 0; id < b.experts.size(); ++id) {
    const ExpertWeights& e = b.experts[id];
    if (!(e.w1.rows == width && e.w1.cols == hidden && e.w3.rows == width && e.w3.cols == hidden &&
          e.w2.rows == hidden && e.w2.cols == width))
      throw Error(cat("moe: expert ", id, " (", e.w1.weight.name, ") projections disagree with [", width, ", ",
                      hidden, "] / [", hidden, ", ", width, "]"));
    const ExpertRecipe recipe = b.experts.front().w1.recipe;
    if (arm == ExpertArm::native && (e.w1.recipe != recipe || e.w2.recipe != recipe || e.w3.recipe != recipe))
      throw Error(cat("moe: layer ", b.layer_id, ": expert ", id, " (", e.w1.weight.name, ") mixes FP4 recipes with "
                      "expert 0's; the native arm's fragment kernel runs one recipe a layer"));
    host[id] = cuda::ExpertW{fp4(e.w1), fp4(e.w3), fp4(e.w2)};
    for (const auto& [stored, w] : {std::pair{&e.w1, host[id].w1}, {&e.w3, host[id].w3}, {&e.w2, host[id].w2}}) {
      check_cp_async_aligned(*stored, w, arm);
      auto held = expert_layout_.find(w.packed);  // bytes another table laid out already
      if (held != expert_layout_.end() && held->second != arm) throw other_arm(b, stored->weight.name, held->second, arm);
    }
  }
  Resident table{};
  if (arm == ExpertArm::native) {
    refuse_in_capture("relayout of a layer's experts", 0);
    activate();
    std::map<const uint8_t*, cuda::Fp4Frag> relaid;  // this layer's projections relaid by an earlier table
    for (const cuda::ExpertW& e : host)
      for (const cuda::Fp4W* w : {&e.w1, &e.w3, &e.w2})
        if (expert_layout_.count(w->packed))
          relaid.emplace(w->packed, cuda::Fp4Frag{reinterpret_cast<const uint4*>(w->packed), w->scales, w->scale_2, w->nv});
    std::vector<void*> scratch;
    std::vector<cuda::ExpertFrag> frags;
    try {
      frags = cuda::relay_experts(host, hidden, width, cuda::FragPlace::in_place, cat("layer ", b.layer_id), relaid,
                                  scratch, stream_);
    } catch (...) {
      for (void* p : scratch) cudaFree(p);
      throw;
    }
    const size_t bytes = frags.size() * sizeof(cuda::ExpertFrag);
    table = Resident{device_copy(frags.data(), bytes), bytes};  // waits for the relayout too
    for (void* p : scratch) DSV4_CUDA_CHECK(cudaFree(p));
  } else {
    const size_t bytes = host.size() * sizeof(cuda::ExpertW);
    table = Resident{device_copy(host.data(), bytes), bytes};
  }
  for (const cuda::ExpertW& e : host)
    for (const cuda::Fp4W* w : {&e.w1, &e.w3, &e.w2}) expert_layout_.emplace(w->packed, arm);
  return experts_.emplace(key, ExpertTable{table, static_cast<int>(width), arm}).first->second;
}

void CudaOps::moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                  int k, float swiglu_limit, const Numerics& num, float* out) {
  moe_on(cuda::ExpertKernel::shipped, b, x, rows, sel, wt, k, swiglu_limit, num, out);
}

void cuda::moe_with(Ops& ops, ExpertKernel kernel, const BlockWeights& b, const float* x, int rows,
                    const int32_t* sel, const float* wt, int k, float swiglu_limit, const Numerics& num, float* out) {
  cuda_backend(ops, "moe_with").moe_on(kernel, b, x, rows, sel, wt, k, swiglu_limit, num, out);
}

void CudaOps::check_grouping(const BlockWeights& b, int64_t slots) const {
  const int64_t n_experts = static_cast<int64_t>(b.experts.size());
  if ((slots + n_experts) * 4 > 40 * 1024)
    throw Error(cat("moe: layer ", b.layer_id, " has ", n_experts, " experts; the slot grouping holds at most ",
                    40 * 1024 / 4 - slots, " for ", slots, " slots"));
}

void CudaOps::moe_hc_post(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                          int k, float swiglu_limit, const Numerics& num, float* out, const float* res,
                          const float* post, const float* comb, int hc, float* h) {
  DSV4_CHECK(hc >= 1 && hc <= cuda::hc::kMaxHc, "moe_hc_post: hc=", hc);
  const cuda::HcPost p{res, post, comb, hc, h};
  moe_on(cuda::ExpertKernel::shipped, b, x, rows, sel, wt, k, swiglu_limit, num, out, &p);
}

void CudaOps::moe_on(cuda::ExpertKernel kernel, const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                     const float* wt, int k, float swiglu_limit, const Numerics& num, float* out,
                     const cuda::HcPost* post) {
  const int hidden = static_cast<int>(b.shared_w1.in());
  const int shared_inter = static_cast<int>(b.shared_w1.out());
  const bool native = num.expert_arm == ExpertArm::native;
  cuda::check_experts(b, k, hidden, num);
  const ExpertTable& table = expert_table(b, hidden, num.expert_arm);
  if (native && kernel != cuda::ExpertKernel::shipped)
    throw Error(cat("moe: layer ", b.layer_id, ": the native expert arm runs the fragment-layout kernel; expert "
                    "kernel variant ", static_cast<int>(kernel), " is the bf16 arm's (expert_kernel.h)"));
  const cuda::Fp8W sw1 = fp8(b.shared_w1), sw3 = fp8(b.shared_w3), sw2 = fp8(b.shared_w2);
  if (rows == 0) return;
  activate();
  DSV4_CHECK(line_ == 0, "moe is issued on the main line (its shared expert takes line ", kSharedLine, ")");
  const bool act = num.act_bf16();
  // §4.24: the shared expert (L-bf16 on FP8 weights, no routing weight) needs x alone, so
  // it runs on its own line (its scratch is that line's) beside the routed experts, joined
  // before each combine: its three GEMVs take the SMs the grouping and the small launches
  // leave idle (issue 12).
  on_line(kSharedLine);
  const int64_t Is = shared_inter;
  const std::array<int64_t, 4> shared_sizes{rows * Is, rows * Is, rows * Is, int64_t{rows} * hidden};
  const auto [sg, su, sh_h, sh] = carve_scratch(Slot::f32_a, shared_sizes);
  gemv_rows(sw1, x, hidden, act, sg, Is, rows);
  gemv_rows(sw3, x, hidden, act, su, Is, rows);
  cuda::shared_swiglu(sg, su, rows, shared_inter, swiglu_limit, sh_h, stream_);
  gemv_rows(sw2, sh_h, Is, act, sh, hidden, rows);
  on_line(0);
  if (native)
    routed_fragment(b, table, x, rows, sel, wt, k, swiglu_limit, sh, out, post);
  else
    routed_shipped(kernel, b, table, x, rows, sel, wt, k, swiglu_limit, act, sh, out, post);
}

// The bf16 arm: bf16-rounded activations (one plane) or f32 ones as three exact bf16
// planes, so every product stays exact as in the CPU reference and only the f32 summation
// order differs (one pass would round x to 8 bits).
void CudaOps::routed_shipped(cuda::ExpertKernel kernel, const BlockWeights& b, const ExpertTable& table,
                             const float* x, int rows, const int32_t* sel, const float* wt, int k, float limit,
                             bool act_bf16, const float* sh, float* out, const cuda::HcPost* post) {
  const int64_t C = std::min(rows, kMoeChunk), S = C * k, H = b.shared_w1.in(), I = table.inter;
  const int n_experts = static_cast<int>(b.experts.size());
  const int64_t T = max_tiles(S, n_experts);
  check_grouping(b, S);
  static_assert(sizeof(cuda::ExpertW) % sizeof(float) == 0 && alignof(cuda::ExpertW) <= 16);
  const std::array<int64_t, 4> sizes{S * I, S * H, T * static_cast<int64_t>(sizeof(cuda::ExpertW) / sizeof(float)),
                                     1 + T * kCols};
  const auto [h, ye, tile_w, ints] = carve_scratch(Slot::f32_a, sizes);
  const auto* experts = static_cast<const cuda::ExpertW*>(table.table.ptr);
  auto* counts = reinterpret_cast<int32_t*>(ints);
  const Tiles tiles{reinterpret_cast<cuda::ExpertW*>(tile_w), counts, counts + 1};
  const int planes = act_bf16 ? 1 : 3;
  for (int row0 = 0; row0 < rows; row0 += static_cast<int>(C)) {
    const int64_t n_rows = std::min<int64_t>(C, rows - row0), slots = n_rows * k;
    const int64_t tiles_max = max_tiles(slots, n_experts);
    cuda::group_slots(sel + row0 * k, static_cast<int>(slots), experts, n_experts, tiles, stream_);
    const MmaArgs up{tiles, x + row0 * H, k, I, H, h, wt + row0 * k, limit};
    cuda::launch_expert_mma(kernel, 2, planes, up, tiles_max * (I / kTileRows), device_, stream_);
    const MmaArgs down{tiles, h, 1, H, I, ye, nullptr, 0.0f};
    cuda::launch_expert_mma(kernel, 1, planes, down, tiles_max * (H / kTileRows), device_, stream_);
    join_lines();  // the shared expert's sh
    if (post) join_split();  // hc_post's post and comb
    const cuda::HcPost rows_post = post ? post->from(row0, H) : cuda::HcPost{};
    cuda::combine_experts(ye, sh + row0 * H, sel + row0 * k, n_rows, k, static_cast<int>(H), n_experts,
                          out + row0 * H, stream_, post ? &rows_post : nullptr);
  }
}

// The native arm (D4) on the fragment layout (expert_fp4.cuh): x and the re-quantized h
// as §4.9 e4m3 values in fp16 B order with their per-128 scales (act_fp16_rows), the up
// and down projections by launch_expert_fp4 on the relaid table, each pass of at most
// kMoeChunk rows combined with sh as soon as its slots are done. The K order is the
// fragment kernel's (docs/numerics.md "MoE experts"), fixed by K alone: a row of a T-row
// call equals the row alone bit for bit (SPECDECODE.md R-I3).
void CudaOps::routed_fragment(const BlockWeights& b, const ExpertTable& table, const float* x, int rows,
                              const int32_t* sel, const float* wt, int k, float limit, const float* sh, float* out,
                              const cuda::HcPost* post) {
  const int64_t C = std::min(rows, kMoeChunk), S = C * k, H = b.shared_w1.in(), I = table.inter;
  const int n_experts = static_cast<int>(b.experts.size());
  const bool nv = b.experts.front().w1.recipe == ExpertRecipe::nvfp4;  // every expert's (expert_table)
  const int64_t T = max_tiles(S, n_experts);
  check_grouping(b, S);
  // fp16 parts in floats: two halves a float.
  const std::array<int64_t, 7> sizes{C * H / 2, C * H / kChunk, S * I, S * I / 2, S * I / kChunk, S * H,
                                     1 + T * kCols};
  const auto [xq, xs, h, hq, hs, ye, ints] = carve_scratch(Slot::f32_a, sizes);
  const auto* experts = static_cast<const cuda::ExpertFrag*>(table.table.ptr);
  auto* counts = reinterpret_cast<int32_t*>(ints);
  const Tiles tiles{nullptr, counts, counts + 1};  // the kernel finds a tile's expert by sel
  for (int row0 = 0; row0 < rows; row0 += static_cast<int>(C)) {
    const int64_t n_rows = std::min<int64_t>(C, rows - row0), slots = n_rows * k;
    const int64_t tiles_max = max_tiles(slots, n_experts);
    const int32_t* sel_c = sel + row0 * k;
    cuda::group_slots(sel_c, static_cast<int>(slots), nullptr, n_experts, tiles, stream_);
    cuda::act_fp16_rows(x + row0 * H, n_rows, H, reinterpret_cast<__half*>(xq), xs, stream_);
    const cuda::FragArgs up{MmaArgs{tiles, nullptr, k, I, H, h, wt + row0 * k, limit}, sel_c, experts,
                            reinterpret_cast<const __half*>(xq), xs};
    cuda::launch_expert_fp4(2, nv, cuda::kFragRing, up, tiles_max, device_, stream_);
    // re-quantized after the weight (§4.23)
    cuda::act_fp16_rows(h, slots, I, reinterpret_cast<__half*>(hq), hs, stream_);
    const cuda::FragArgs down{MmaArgs{tiles, nullptr, 1, H, I, ye, nullptr, 0.0f}, sel_c, experts,
                              reinterpret_cast<const __half*>(hq), hs};
    cuda::launch_expert_fp4(1, nv, cuda::kFragRing, down, tiles_max, device_, stream_);
    join_lines();  // the shared expert's sh
    if (post) join_split();  // hc_post's post and comb
    const cuda::HcPost rows_post = post ? post->from(row0, H) : cuda::HcPost{};
    cuda::combine_experts(ye, sh + row0 * H, sel_c, n_rows, k, static_cast<int>(H), n_experts, out + row0 * H,
                          stream_, post ? &rows_post : nullptr);
  }
}

}  // namespace dsv4
