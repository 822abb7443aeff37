// The prefill MoE (issue 13; MODEL.md §4.23-§4.24): a chunk's (row, slot) pairs grouped by
// expert, each expert's projections dequantized exactly to bf16 and run as tensor-core
// GEMMs over all of its rows (gemm_prefill.cu), the shared expert as dense GEMMs, and a
// combine that adds each row's experts in ascending id, then the shared expert, as the
// CPU reference does (no float atomics: every output is written once, in a fixed order).
//
// Numerics per arm (kernels/ops.h moe_gemm; law 2's tolerance):
// - native (D4): x and h are fake-quantized per 128 (§4.9) and the GEMM takes the values
//   e4m3 x 2^k (exact in bf16); the reference's "partial x activation scale" then sums the
//   same exact products in another order.
// - bf16 arm: x and h rounded to bf16 (dense_act bf16) or split exactly (f32), as the
//   dense GEMMs.
// Weights: e2m1 x e8m0 (MXFP4) or e2m1 x e4m3(sb) (NVFP4) have at most 2 + 4 significant
// bits, exact in bf16; NVFP4's per-tensor scale_2 is the GEMM's alpha, multiplying the sum
// (the CPU rounds e4m3(sb) x scale_2 into each weight: equal when scale_2 is a power of
// two, ~1e-7 relative otherwise, as the decode MoE's mma kernel). The bf16 arm refuses a
// scale_2 that is not a power of two as moe does (C4).
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/cuda/gemm_prefill.cuh"
#include "kernels/cuda/quant.cuh"
#include "kernels/cuda/swiglu.cuh"

namespace dsv4 {

namespace {

constexpr int kThreads = 256;
constexpr int kFp8Block = 128;  // §4.9 activation block
constexpr int kFp4Run = 32;     // a scale group of either recipe lies in one 32-run

// A chunk's slots grouped by expert. Position p runs over the slots expert by expert
// (ascending id), inside an expert by (row, slot) ascending.
struct ExpertGroups {
  std::vector<int32_t> index;   // [3 S]: row_of[p], then slot_of[p] (= t*k + j), then
                                // combine[t*k + i] = the position of row t's i-th expert by id
  std::vector<int64_t> first;   // [E + 1]: expert e holds positions [first[e], first[e + 1])
};

ExpertGroups group_by_expert(const std::vector<int32_t>& sel, int rows, int k, int n_experts, int layer) {
  const int64_t S = static_cast<int64_t>(rows) * k;
  ExpertGroups g;
  g.first.assign(static_cast<size_t>(n_experts) + 1, 0);
  for (int32_t e : sel) {
    if (e < 0 || e >= n_experts)
      throw Error(cat("moe_gemm: layer ", layer, " selects expert ", e, " outside [0, ", n_experts, ")"));
    ++g.first[static_cast<size_t>(e) + 1];
  }
  for (int e = 0; e < n_experts; ++e) g.first[e + 1] += g.first[e];
  g.index.assign(static_cast<size_t>(3 * S), 0);
  int32_t* row_of = g.index.data();
  int32_t* slot_of = row_of + S;
  int32_t* combine = slot_of + S;
  std::vector<int64_t> next(g.first.begin(), g.first.end() - 1);
  std::vector<int32_t> pos(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    const int64_t p = next[sel[s]]++;
    row_of[p] = static_cast<int32_t>(s / k);
    slot_of[p] = static_cast<int32_t>(s);
    pos[s] = static_cast<int32_t>(p);
  }
  // §4.23 step 6: a row's experts in ascending id (ties by slot), i.e. by position.
  for (int t = 0; t < rows; ++t) {
    std::copy_n(pos.begin() + static_cast<int64_t>(t) * k, k, combine + static_cast<int64_t>(t) * k);
    std::sort(combine + static_cast<int64_t>(t) * k, combine + static_cast<int64_t>(t + 1) * k);
  }
  return g;
}

int64_t padded4(int64_t n) { return (n + 3) / 4 * 4; }

bool is_pow2(float v) {
  int e;
  return v > 0.0f && std::frexp(v, &e) == 0.5f;
}

// out[p, :] = x[row_of[p], :] for p < n, rows of `width`.
__global__ void gather_rows_kernel(const float* x, const int32_t* row_of, int64_t n, int64_t width, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * width;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = x[row_of[i / width] * width + i % width];
}

// §4.9 in place as values: each 128-block of each row becomes e4m3(v / s) * s (exact: s is
// a power of two). One warp per (row, block); act_quant128 reads the block before writing.
__global__ void quantize_values_kernel(float* v, int64_t rows, int64_t width) {
  const int64_t blocks = width / kFp8Block;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / cuda::kWarp);
  const int lane = threadIdx.x % cuda::kWarp;
  for (int64_t w = blockIdx.x * int64_t{blockDim.x / cuda::kWarp} + threadIdx.x / cuda::kWarp;
       w < rows * blocks; w += warps) {
    float* b = v + (w / blocks) * width + (w % blocks) * kFp8Block;
    const float s = cuda::act_quant128(b, b);
    for (int i = lane; i < kFp8Block; i += cuda::kWarp) b[i] *= s;  // the lane's own elements
  }
}

// §4.23 steps 2-4 on positions p < n: h = w * (silu(g) * u) with the clamp (limit <= 0 off),
// w = wt[slot_of[p]] (routed) or 1 (wt null: the shared expert).
__global__ void swiglu_rows_kernel(const float* g, const float* u, const float* wt, const int32_t* slot_of,
                                   int64_t n, int inter, float limit, float* h) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * inter;
       i += int64_t{gridDim.x} * blockDim.x)
    h[i] = cuda::swiglu(g[i], u[i], wt ? wt[slot_of[i / inter]] : 1.0f, limit);
}

// out[t, d] = (sum over i < k of y[combine[t*k + i], d], from 0) + sh[t, d].
__global__ void combine_rows_kernel(const float* y, const float* sh, const int32_t* combine, int64_t rows,
                                    int k, int hidden, float* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * hidden;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / hidden, d = i % hidden;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) acc += y[int64_t{combine[t * k + j]} * hidden + d];
    out[i] = acc + sh[i];
  }
}

// FP4 [rows, cols] -> bf16 [rows, cols]: e2m1 x e4m3(sb) (NVFP4, group 16; scale_2 left to
// the GEMM) or e2m1 x e8m0 (MXFP4, group 32), §3.5-§3.7. One thread per 8
// elements (one packed word, inside one scale group), rows on grid.y; cols % 32 == 0.
__global__ void fp4_to_bf16_kernel(cuda::Fp4W w, int64_t rows, uint16_t* out) {
  const int64_t c0 = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 8;
  if (c0 >= w.cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint8_t* p = w.packed + r * (w.cols >> 1) + (c0 >> 1);  // byte loads: any alignment
    const uint32_t word = p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
    const uint8_t sb = w.scales[r * (w.cols / w.group) + c0 / w.group];
    const float scale = w.nv ? e4m3_to_f32(sb) : e8m0_to_f32(sb);
    uint32_t pair[4];
    for (int i = 0; i < 8; ++i) {  // element c0 + i is nibble i (even elements low, §3.5)
      const float v = e2m1_to_f32(static_cast<uint8_t>((word >> (4 * i)) & 0xFu)) * scale;
      const uint32_t bits = f32_bits(bf16_round(v)) >> 16;
      pair[i / 2] = i % 2 ? pair[i / 2] | (bits << 16) : bits;
    }
    *reinterpret_cast<uint4*>(out + r * w.cols + c0) = make_uint4(pair[0], pair[1], pair[2], pair[3]);
  }
}

}  // namespace

void CudaOps::moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                       int k, float swiglu_limit, const Numerics& num, float* out) {
  const int hidden = static_cast<int>(b.shared_w1.in()), shared_inter = static_cast<int>(b.shared_w1.out());
  const int n_experts = static_cast<int>(b.experts.size());
  int inter = 0;
  expert_table(b, hidden, &inter);  // the experts' shape checks
  const bool native = num.expert_arm == ExpertArm::native;
  bool exact = true;
  for (const ExpertWeights& e : b.experts)
    exact = exact && (e.w1.recipe != ExpertRecipe::nvfp4 ||
                      (is_pow2(e.w1.scale_2) && is_pow2(e.w2.scale_2) && is_pow2(e.w3.scale_2)));
  const int run = native ? kFp8Block : kFp4Run;  // §4.9 blocks / whole FP4 runs
  if ((!native && !exact) || k <= 0 || k > n_experts || hidden % run != 0 || inter % run != 0) {
    moe(b, x, rows, sel, wt, k, swiglu_limit, num, out);  // its checks and messages
    return;
  }
  if (rows == 0) return;
  activate();
  const int64_t S = static_cast<int64_t>(rows) * k, H = hidden, I = inter, Is = shared_inter;
  std::vector<int32_t> sel_host(static_cast<size_t>(S));
  download_i32(sel_host.data(), sel, sel_host.size());
  const ExpertGroups g = group_by_expert(sel_host, rows, k, n_experts, b.layer_id);
  const int32_t* index = stage_i32(Slot::host_args, g.index.data(), g.index.size());
  const int32_t *row_of = index, *slot_of = index + S, *combine = index + 2 * S;

  // Scratch (floats): xg and y [S, H], gate / up / h [S, I], the shared expert's gate / up / h
  // [rows, Is] and its out [rows, H], each carved 16-byte aligned for the GEMMs' operands.
  float* base = scratch_f32(Slot::f32_b, static_cast<size_t>(2 * padded4(S * H) + 3 * padded4(S * I) +
                                                              3 * padded4(rows * Is) + padded4(rows * H)));
  auto take = [&base](int64_t n) { return std::exchange(base, base + padded4(n)); };
  float *xg = take(S * H), *y = take(S * H), *gt = take(S * I), *up = take(S * I), *h = take(S * I);
  float *sg = take(rows * Is), *su = take(rows * Is), *sh_h = take(rows * Is), *sh = take(rows * H);
  // The GEMM operand: native values are bf16-exact already (act_bf16 then rounds nothing).
  const bool act = native || num.act_bf16();

  gather_rows_kernel<<<cuda::blocks_for(S * H, kThreads), kThreads, 0, stream_>>>(x, row_of, S, H, xg);
  DSV4_CUDA_LAUNCH_CHECK();
  if (native) {
    quantize_values_kernel<<<cuda::blocks_for(S * (H / kFp8Block) * cuda::kWarp, kThreads), kThreads, 0,
                             stream_>>>(xg, S, H);
    DSV4_CUDA_LAUNCH_CHECK();
  }
  // One expert projection over its positions: dequantize into Slot::gemm_w, then the GEMM.
  auto project = [&](const Fp4Linear& w, const float* in, int64_t p0, int64_t n, float* o) {
    const cuda::Fp4W d = fp4(w);
    auto* wb = static_cast<uint16_t*>(scratch(Slot::gemm_w, static_cast<size_t>(w.rows * w.cols) * 2));
    const dim3 grid(cuda::blocks_for(w.cols / 8, kThreads), cuda::grid_rows(w.rows));
    fp4_to_bf16_kernel<<<grid, kThreads, 0, stream_>>>(d, w.rows, wb);
    DSV4_CUDA_LAUNCH_CHECK();
    cuda::GemmProblem q = cuda::linear_problem(wb, in + p0 * w.cols, w.cols, w.rows, static_cast<int>(n), act,
                                               o + p0 * w.rows, w.weight.name);
    q.alpha = d.nv ? d.scale_2 : 1.0f;
    gemm(q);
  };
  for (int e = 0; e < n_experts; ++e) {
    const int64_t p0 = g.first[e], n = g.first[e + 1] - p0;
    if (n == 0) continue;
    project(b.experts[e].w1, xg, p0, n, gt);
    project(b.experts[e].w3, xg, p0, n, up);
  }
  swiglu_rows_kernel<<<cuda::blocks_for(S * I, kThreads), kThreads, 0, stream_>>>(gt, up, wt, slot_of, S,
                                                                                     inter, swiglu_limit, h);
  DSV4_CUDA_LAUNCH_CHECK();
  if (native) {  // h is re-quantized after the routing-weight multiply (§4.23)
    quantize_values_kernel<<<cuda::blocks_for(S * (I / kFp8Block) * cuda::kWarp, kThreads), kThreads, 0,
                             stream_>>>(h, S, I);
    DSV4_CUDA_LAUNCH_CHECK();
  }
  for (int e = 0; e < n_experts; ++e) {
    const int64_t p0 = g.first[e], n = g.first[e + 1] - p0;
    if (n > 0) project(b.experts[e].w2, h, p0, n, y);
  }

  // §4.24: the shared expert, L-bf16 in every arm, unweighted.
  const bool shared_act = num.act_bf16();
  linear_fp8_gemm(b.shared_w1, x, rows, shared_act, sg);
  linear_fp8_gemm(b.shared_w3, x, rows, shared_act, su);
  swiglu_rows_kernel<<<cuda::blocks_for(rows * Is, kThreads), kThreads, 0, stream_>>>(
      sg, su, nullptr, nullptr, rows, shared_inter, swiglu_limit, sh_h);
  DSV4_CUDA_LAUNCH_CHECK();
  linear_fp8_gemm(b.shared_w2, sh_h, rows, shared_act, sh);
  combine_rows_kernel<<<cuda::blocks_for(rows * H, kThreads), kThreads, 0, stream_>>>(y, sh, combine, rows, k,
                                                                                       hidden, out);
  DSV4_CUDA_LAUNCH_CHECK();
}

}  // namespace dsv4
