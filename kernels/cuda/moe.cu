// MoE experts (MODEL.md §4.23-§4.24, D4, D16; the router is route.cu). Every (row, slot) is
// computed on its own with the GEMV family's fixed order, so a row's result does not
// depend on the other rows (SPECDECODE.md §6.3); the combine adds the row's experts in
// ascending id, then the shared expert, as the CPU reference.
#include <cmath>
#include <vector>

#include "kernels/cuda/linear.cuh"
#include "kernels/cuda/quant.cuh"
#include "kernels/cuda/swiglu.cuh"
#include "base/error.h"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;
constexpr int kFp8Block = 128;  // §4.9 activation block
constexpr int kFp4Block = 32;   // §4.23 FP4GEMM K-block
constexpr int kMaxK = 16;       // experts per token
constexpr int kMoeChunk = 256;  // rows per pass, bounds the scratch

// §4.9 as values, one warp per (row, 128-block): q [rows, K] (may alias x), s [rows, K/128].
__global__ void act_quant128_kernel(const float* x, int64_t rows, int64_t K, float* q, float* s) {
  const int64_t blocks = K / kFp8Block;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / cuda::kWarp);
  for (int64_t w = blockIdx.x * int64_t{blockDim.x / cuda::kWarp} + threadIdx.x / cuda::kWarp;
       w < rows * blocks; w += warps) {
    const int64_t off = (w / blocks) * K + (w % blocks) * kFp8Block;
    const float scale = cuda::act_quant128(x + off, q + off);
    if (threadIdx.x % cuda::kWarp == 0) s[w] = scale;
  }
}

// x[0 .. 32) into a, bf16-rounded when act_bf16; float4 loads when x is 16-byte aligned
// (same values either way).
__device__ void load_run(const float* x, bool act_bf16, float (&a)[kFp4Block]) {
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kFp4Block; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(x + i);
      a[i] = v.x;
      a[i + 1] = v.y;
      a[i + 2] = v.z;
      a[i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kFp4Block; ++i) a[i] = x[i];
  }
  if (act_bf16)
#pragma unroll
    for (int i = 0; i < kFp4Block; ++i) a[i] = bf16_round(a[i]);
}

// Outputs n[o] of the NW projections w (one warp) on the activation row x [K], K a multiple
// of 32. Lane l owns the 32-element runs l, l+32, ... (one 16-byte load of packed nibbles
// each; kAhead runs of every (projection, output) are loaded before the first is used). A
// run's dot is taken on the UNSCALED e2m1 values in four independent chains of 8 (ascending
// k inside each; the chains are what keeps the FMA pipes busy), combined as (c0 + c1) and
// (c2 + c3) and scaled once per scale group: MXFP4 ((c0 + c1) + (c2 + c3)) * e8m0, NVFP4
// (c0 + c1) * sv0 + (c2 + c3) * sv1 with sv = e4m3(sb) * s2 (§3.6, §3.7; a power-of-two
// e8m0 scale commutes with the rounding). Native (xs = the row's per-128 scales; §4.23 arm
// B, D4): the run's sum is multiplied by xs[c0/128]; the lane adds its runs in ascending k
// (L-bf16: xs null, no activation scale). Then the fixed butterfly. Nothing depends on the
// slot or row count (SPECDECODE.md §6.3).
constexpr int kAhead = 2;
constexpr int kUpOutputs = 2;    // output rows of w1 and w3 per warp (4 pairs)
constexpr int kDownOutputs = 4;  // output rows of w2 per warp

// f[i] = e2m1 value of nibble i of `word` (element 8*word_index + i of a run).
__device__ inline void e2m1_word(uint32_t word, float (&f)[8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = e2m1_to_f32(static_cast<uint8_t>((word >> (4 * i)) & 0xFu));
}

// The run's dot of x[c0 .. c0 + 32) with the projection's unscaled values, scaled (see above).
__device__ inline float run_dot(const cuda::Fp4W& w, const uint32_t (&words)[4], int64_t n, int64_t c0,
                                const float (&a)[kFp4Block]) {
  float c[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float f[8];
    e2m1_word(words[q], f);
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc = fmaf(a[8 * q + i], f[i], acc);
    c[q] = acc;
  }
  const uint8_t* sp = w.scales + n * (w.cols / w.group) + c0 / w.group;
  if (w.nv)
    return fmaf(c[2] + c[3], e4m3_to_f32(__ldg(sp + 1)) * w.scale_2,
                (c[0] + c[1]) * (e4m3_to_f32(__ldg(sp)) * w.scale_2));
  return ((c[0] + c[1]) + (c[2] + c[3])) * e8m0_to_f32(__ldg(sp));
}

// NW projections x NO output rows share each activation run, so a warp reads x once for
// all of them (the kernels are L1-bound otherwise: x would be read once per output).
template <int NW, int NO>
__device__ void expert_dots(const cuda::Fp4W (&w)[NW], const int64_t (&n)[NO], const float* x,
                            const float* xs, int64_t K, bool act_bf16, float (&out)[NW][NO]) {
  constexpr int kRun = cuda::Fp4W::kRun;
  static_assert(kRun == kFp4Block, "a run is one FP4 K-block");
  constexpr int64_t kStep = int64_t{kRun} * cuda::kWarp;  // between a lane's runs
  float acc[NW][NO];
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int o = 0; o < NO; ++o) acc[j][o] = 0.0f;
  for (int64_t base = int64_t{threadIdx.x % cuda::kWarp} * kRun; base < K; base += kStep * kAhead) {
    uint32_t words[kAhead][NW][NO][4];
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int o = 0; o < NO; ++o)
          if (base + u * kStep < K) w[j].words(n[o], base + u * kStep, words[u][j][o]);
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t c0 = base + u * kStep;
      if (c0 >= K) break;
      float a[kRun];
      load_run(x + c0, act_bf16, a);
      const float xscale = xs ? xs[c0 / kFp8Block] : 1.0f;
#pragma unroll
      for (int j = 0; j < NW; ++j)
#pragma unroll
        for (int o = 0; o < NO; ++o) {
          const float p = run_dot(w[j], words[u][j][o], n[o], c0, a);
          acc[j][o] = xs ? fmaf(p, xscale, acc[j][o]) : acc[j][o] + p;
        }
    }
  }
#pragma unroll
  for (int j = 0; j < NW; ++j)
#pragma unroll
    for (int o = 0; o < NO; ++o) out[j][o] = cuda::warp_sum(acc[j][o]);
}

struct ExpertArgs {
  const cuda::ExpertW* experts;
  const int32_t* sel;  // [slots], slot = row * k + j
  int k, inter, hidden;
  bool native, act_bf16;
};

// The warp's first output row of per_warp; rows past the end are computed as the last
// row and not written (no bounds checks inside the dots).
__device__ inline int64_t warp_row0(int per_warp) {
  return (static_cast<int64_t>(blockIdx.x) * cuda::kGemvWarps + threadIdx.x / cuda::kWarp) * per_warp;
}

// g, u [slots, I] = w1 / w3 of the slot's expert applied to the slot's row.
__global__ void expert_up_kernel(ExpertArgs a, int64_t slots, const float* x, const float* xq,
                                 const float* xs, float* g, float* u) {
  const int64_t n0 = warp_row0(kUpOutputs);
  if (n0 >= a.inter) return;
  int64_t n[kUpOutputs];
#pragma unroll
  for (int o = 0; o < kUpOutputs; ++o) n[o] = n0 + o < a.inter ? n0 + o : a.inter - 1;
  for (int64_t s = blockIdx.y; s < slots; s += gridDim.y) {
    const cuda::ExpertW& e = a.experts[a.sel[s]];
    const cuda::Fp4W w[2] = {e.w1, e.w3};
    const int64_t row = s / a.k;
    float gu[2][kUpOutputs];
    if (a.native)
      expert_dots(w, n, xq + row * a.hidden, xs + row * (a.hidden / kFp8Block), a.hidden, false, gu);
    else
      expert_dots(w, n, x + row * a.hidden, nullptr, a.hidden, a.act_bf16, gu);
    if (threadIdx.x % cuda::kWarp == 0)
      for (int o = 0; o < kUpOutputs && n0 + o < a.inter; ++o) {
        g[s * a.inter + n0 + o] = gu[0][o];
        u[s * a.inter + n0 + o] = gu[1][o];
      }
  }
}

// y [slots, H] = w2 of the slot's expert applied to h (native: hq, hs).
__global__ void expert_down_kernel(ExpertArgs a, int64_t slots, const float* h, const float* hs,
                                   float* y) {
  const int64_t n0 = warp_row0(kDownOutputs);
  if (n0 >= a.hidden) return;
  int64_t n[kDownOutputs];
#pragma unroll
  for (int o = 0; o < kDownOutputs; ++o) n[o] = n0 + o < a.hidden ? n0 + o : a.hidden - 1;
  for (int64_t s = blockIdx.y; s < slots; s += gridDim.y) {
    const cuda::Fp4W w[1] = {a.experts[a.sel[s]].w2};
    float v[1][kDownOutputs];
    expert_dots(w, n, h + s * a.inter, a.native ? hs + s * (a.inter / kFp8Block) : nullptr, a.inter,
                !a.native && a.act_bf16, v);
    if (threadIdx.x % cuda::kWarp == 0)
      for (int o = 0; o < kDownOutputs && n0 + o < a.hidden; ++o) y[s * a.hidden + n0 + o] = v[0][o];
  }
}

// §4.23 steps 2-4: clamp (u both sides, g from above; limit <= 0 off), h = wt (silu(g) u).
// wt [slots] or null (shared expert: 1).
__global__ void swiglu_kernel(const float* g, const float* u, const float* wt, int64_t slots,
                              int inter, float limit, float* h) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < slots * inter;
       i += int64_t{gridDim.x} * blockDim.x)
    h[i] = cuda::swiglu(g[i], u[i], wt ? wt[i / inter] : 1.0f, limit);
}

// out[t, d] = (sum over the row's slots in ascending expert id of y[slot, d], from 0) + sh[t, d].
__global__ void combine_kernel(const float* y, const float* sh, const int32_t* sel, int64_t rows,
                               int k, int hidden, float* out) {
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
    for (int j = 0; j < k; ++j) acc += y[(t * k + order[j]) * hidden + d];
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
  if (hidden % kFp4Block != 0 || inter % kFp4Block != 0)  // whole runs (expert_dots)
    throw Error(cat("moe: layer ", b.layer_id, " needs expert widths that are multiples of ", kFp4Block,
                    ": hidden ", hidden, " inter ", inter));
  if (native && (hidden % kFp8Block != 0 || inter % kFp8Block != 0))
    throw Error(cat("moe: layer ", b.layer_id, " native arm needs multiples of 128: hidden ", hidden,
                    " inter ", inter));
  if (!native && b.expert_recipe == ExpertRecipe::nvfp4)
    for (const ExpertWeights& e : b.experts)
      if (!(is_pow2(e.w1.scale_2) && is_pow2(e.w2.scale_2) && is_pow2(e.w3.scale_2)))
        throw Error(cat("moe: expert ", e.w1.weight.name, " has a weight_scale_2 that is not a power "
                        "of two; the bf16 expert arm cannot be exact (C4)"));
  const cuda::Fp8W sw1 = fp8(b.shared_w1), sw3 = fp8(b.shared_w3), sw2 = fp8(b.shared_w2);
  if (rows == 0) return;
  activate();
  // Scratch per chunk of C rows (floats): xq, xs, g, u, h, hs, y_e, shared g/u/h, shared out.
  const int64_t C = std::min(rows, kMoeChunk), S = C * k, H = hidden, I = inter, Is = shared_inter;
  const int64_t sizes[] = {C * H, C * H / kFp8Block + 1, S * I, S * I, S * I, S * I / kFp8Block + 1,
                           S * H, C * Is, C * Is, C * Is, C * H};
  // Each part starts 16-byte aligned, so the expert dots take their 128-bit activation loads.
  auto padded = [](int64_t n) { return (n + 3) / 4 * 4; };
  int64_t total = 0;
  for (int64_t n : sizes) total += padded(n);
  float* base = scratch_f32(Slot::f32_a, static_cast<size_t>(total));
  float* part[11];
  for (int i = 0; i < 11; ++i) {
    part[i] = base;
    base += padded(sizes[i]);
  }
  float *xq = part[0], *xs = part[1], *g = part[2], *u = part[3], *h = part[4], *hs = part[5],
        *ye = part[6], *sg = part[7], *su = part[8], *sh_h = part[9], *sh = part[10];
  const bool act = num.act_bf16();
  for (int row0 = 0; row0 < rows; row0 += static_cast<int>(C)) {
    const int64_t n_rows = std::min<int64_t>(C, rows - row0), slots = n_rows * k;
    const float* xc = x + row0 * H;
    const ExpertArgs a{experts, sel + row0 * k, k, inter, hidden, native, act};
    if (native) {
      act_quant128_kernel<<<cuda::blocks_for(n_rows * (H / kFp8Block) * cuda::kWarp, kThreads), kThreads, 0,
                            stream_>>>(xc, n_rows, H, xq, xs);
      DSV4_CUDA_LAUNCH_CHECK();
    }
    const int64_t up_rows = cuda::kGemvWarps * kUpOutputs, down_rows = cuda::kGemvWarps * kDownOutputs;
    const dim3 up_grid(static_cast<unsigned>((I + up_rows - 1) / up_rows),
                       cuda::grid_rows(slots));
    expert_up_kernel<<<up_grid, cuda::kGemvWarps * cuda::kWarp, 0, stream_>>>(a, slots, xc, xq, xs, g, u);
    DSV4_CUDA_LAUNCH_CHECK();
    swiglu_kernel<<<cuda::blocks_for(slots * I, kThreads), kThreads, 0, stream_>>>(
        g, u, wt + row0 * k, slots, inter, swiglu_limit, h);
    DSV4_CUDA_LAUNCH_CHECK();
    if (native) {  // h is re-quantized after the routing-weight multiply (§4.23)
      act_quant128_kernel<<<cuda::blocks_for(slots * (I / kFp8Block) * cuda::kWarp, kThreads), kThreads, 0,
                            stream_>>>(h, slots, I, h, hs);
      DSV4_CUDA_LAUNCH_CHECK();
    }
    const dim3 down_grid(static_cast<unsigned>((H + down_rows - 1) / down_rows),
                         cuda::grid_rows(slots));
    expert_down_kernel<<<down_grid, cuda::kGemvWarps * cuda::kWarp, 0, stream_>>>(a, slots, h, hs, ye);
    DSV4_CUDA_LAUNCH_CHECK();
    // §4.24: the shared expert (L-bf16 on FP8 weights, no routing weight).
    gemv_rows(sw1, xc, H, act, sg, Is, static_cast<int>(n_rows));
    gemv_rows(sw3, xc, H, act, su, Is, static_cast<int>(n_rows));
    swiglu_kernel<<<cuda::blocks_for(n_rows * Is, kThreads), kThreads, 0, stream_>>>(
        sg, su, nullptr, n_rows, shared_inter, swiglu_limit, sh_h);
    DSV4_CUDA_LAUNCH_CHECK();
    gemv_rows(sw2, sh_h, Is, act, sh, H, static_cast<int>(n_rows));
    combine_kernel<<<cuda::blocks_for(n_rows * H, kThreads), kThreads, 0, stream_>>>(
        ye, sh, sel + row0 * k, n_rows, k, hidden, out + row0 * H);
    DSV4_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace dsv4
