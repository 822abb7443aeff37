// dsv4-dev-moe-prefill: the prefill MoE's routed-expert GEMMs (kernels/cuda/expert_gemm.cuh:
// expert_gemm_ring_kernel, what the bf16 arm's CudaOps::moe_gemm runs, and
// kernels/cuda/expert_fp4_gemm.cuh on the fragment layout, what the native arm's runs;
// llm.c dev/cuda style) at the Flash
// shapes (256 experts, top 6, hidden 4096, moe_intermediate 2048, NVFP4 by default), 1024
// and 2048 rows, experts picked uniformly or skewed (a few experts take most slots: tiles
// of 64 full, many tiles per expert). Weights and activations are staged 3 chunks ahead
// (P = 1; 1 at P = 3) by cp.async. Checked against a double-precision host reference on
// sampled (slot, row) outputs (the up projection's SwiGLU of w1 / w3 and the down
// projection, from the same staged inputs): exact products, only the f32 summation order
// differs. Bounds (rel_l2, max_norm): the fp4 / wgmma lines 1e-5 (tests/gpu/test_moe_twin.cpp's
// for the f32 arm, where no activation rounding follows); the ring lines the twin's for the
// bf16 arm at the clamp (kRingRelL2, kRingMaxNorm: MXFP4's dots are 100x the clamp). The
// kernel's bits against the decode kernel's are the twin test's (test_moe_twin.cpp
// "moe_gemm ... vs moe bitwise").
// Planes: P = 1 (bf16-exact activations: the bf16 arm's bf16 ones, or the native arm's
// e4m3 values the ring kernel ran before the fragment layout) and P = 3 (bf16 arm with f32
// activations).
// The fp4 lines (P = 1 cases): the fragment-layout kernel on the same experts relaid
// (cuda::FragExperts), its activations x and h by act_fp16_rows (§4.9: e4m3 values and
// per-128 scales; the reference takes their dequantized values, so again only the f32
// order differs, tolerance 1e-5), and its bits against the decode fp4 kernel's
// (launch_expert_fp4 on the decode tile list, in pieces of 1,024 rows): "=decode".
// The wgmma lines (a compute capability 9.0 device): the wgmma kernel
// (sm90a/expert_fp4_wgmma.cu) on the same cases, activations in K order, "fp4/wgmma" its
// speed-up over the fp4 line; its bits against decode are printed ("=decode", or "!=decode"
// with rel_l2 / max_norm against decode's outputs, which must be within 1e-5: wgmma's k16
// rounding is not tied to mma.sync's by PTX).
// The wgtma lines (a 9.0 device): the wgmma_tma kernel, the wgmma kernel's multiply on the
// mbarrier ring (bulk copies of the code units, no block barrier a chunk); the same bits as
// the wgmma line's required ("=wgmma"), "wgmma/wgtma" its speed-up over the wgmma line.
// Time: one launch of the projection's kernel (event-timed mean over reps), TFLOP/s of
// the slots' useful products (2 x slots x rows x K per projection) and TB/s of the used
// experts' weights read once (FP4 codes and scales: the bytes a perfect kernel reads).
// Success: every line says "ok" (within its bound) and "=again" (a second launch gives the
// same bits), every fp4 line "=decode", every wgmma and wgtma line "=decode" or "!=decode"
// within 1e-5, every wgtma line "=wgmma"; the exit status is 1 otherwise.
// usage: dsv4-dev-moe-prefill [reps] [mxfp4]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/cuda_check.h"
#include "base/scalar_formats.h"
#include "bench/dev/dev_bench.h"
#include "kernels/cuda/expert_fp4_gemm.cuh"
#include "kernels/cuda/expert_gemm.cuh"

namespace {

using namespace dsv4;
using namespace dsv4::cuda::prefill_moe;
using cuda::ExpertW;
using dev::closeness;
using dev::device_sms;
using cuda::Fp4W;

constexpr int kExperts = 256, kTop = 6, kHidden = 4096, kInter = 2048;
constexpr double kTolerance = 1e-5;
// The ring lines' (rel_l2, max_norm): test_moe_twin.cpp kArms' bf16 arm at the clamp ("bf16 arm, bf16 act",
// limit 10). MXFP4's e8m0 2^-3..2^4 put w.x near 1e3, 100x the clamp, so the clamped outputs carry the
// dots' f32 order error 100x enlarged (a plain f32 sum gives max_norm 3e-5 there, 3e-7 unclamped).
constexpr double kRingRelL2 = 3e-4, kRingMaxNorm = 3e-3;
constexpr int kSampleSlots = 24, kSampleRows = 48;  // host reference outputs per projection
constexpr float kLimit = 10.0f;                     // SwiGLU clamp (D16)

// Device bytes from a hash of (seed, index): the FP4 codes uniform; scale codes `lo` + h % span.
__global__ void fill_bytes_kernel(uint8_t* p, int64_t n, uint32_t seed, int lo, int span) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed ^ static_cast<uint32_t>(i >> 32) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    p[i] = static_cast<uint8_t>(span == 0 ? h : lo + static_cast<int>(h % static_cast<uint32_t>(span)));
  }
}

void fill_bytes(uint8_t* p, int64_t n, uint32_t seed, int lo = 0, int span = 0) {
  fill_bytes_kernel<<<1024, 256>>>(p, n, seed, lo, span);
  DSV4_CUDA_LAUNCH_CHECK();
}

using dev::device_alloc;
using dev::device_copy;
using dev::download;

// The 256 experts' projections in one allocation each for codes and scales.
struct Experts {
  bool nv = true;
  std::vector<ExpertW> host;  // device pointers
  ExpertW* table = nullptr;
  std::unique_ptr<cuda::FragExperts> frag;  // the same experts relaid (expert_fp4.cuh)
  int group() const { return nv ? 16 : 32; }
  static int64_t bytes(const Fp4W& w, int64_t rows) { return rows * (w.cols / 2) + rows * w.cols / w.group; }
};

Experts make_experts(bool nv) {
  Experts e;
  e.nv = nv;
  const int group = e.group();
  const int64_t per = int64_t{kInter} * kHidden;  // elements of each projection
  auto* packed = device_alloc<uint8_t>(static_cast<size_t>(kExperts) * 3 * per / 2);
  auto* scales = device_alloc<uint8_t>(static_cast<size_t>(kExperts) * 3 * per / group);
  fill_bytes(packed, int64_t{kExperts} * 3 * per / 2, 11);
  // Scales: e4m3 codes 0x28..0x47 (2^-2 .. 2^1.9) / e8m0 codes 124..131 (2^-3 .. 2^4).
  fill_bytes(scales, int64_t{kExperts} * 3 * per / group, 12, nv ? 0x28 : 124, nv ? 32 : 8);
  for (int id = 0; id < kExperts; ++id) {
    Fp4W w[3];
    for (int j = 0; j < 3; ++j) {
      const int64_t at = int64_t{id} * 3 + j;
      w[j].packed = packed + at * per / 2;
      w[j].scales = scales + at * per / group;
      w[j].scale_2 = nv ? 0.0123f : 1.0f;  // NVFP4 weight_scale_2 (native arm: any f32)
      w[j].cols = j < 2 ? kHidden : kInter;
      w[j].group = group;
      w[j].nv = nv;
    }
    e.host.push_back(ExpertW{w[0], w[1], w[2]});
  }
  e.table = device_copy(e.host);
  e.frag = std::make_unique<cuda::FragExperts>(e.host, kHidden, kInter, nullptr);
  return e;
}

// Row `r` of projection w dequantized (double: e2m1 x block scale x scale_2, exact).
std::vector<double> weight_row(const Fp4W& w, int64_t r) {
  const std::vector<uint8_t> codes = download(w.packed + r * (w.cols / 2), static_cast<size_t>(w.cols / 2));
  const std::vector<uint8_t> sc = download(w.scales + r * w.cols / w.group, static_cast<size_t>(w.cols / w.group));
  std::vector<double> out(static_cast<size_t>(w.cols));
  for (int64_t c = 0; c < w.cols; ++c) {
    const uint8_t code = sc[static_cast<size_t>(c / w.group)];
    const double s = w.nv ? e4m3_to_f32(code) : e8m0_to_f32(code);
    out[static_cast<size_t>(c)] = double(e2m1_to_f32(fp4_nibble(codes.data(), c))) * s * w.scale_2;
  }
  return out;
}

double dot(const std::vector<double>& w, const float* x) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += w[i] * x[i];
  return s;
}

double swiglu_ref(double g, double u, double w) {
  g = std::min(g, double(kLimit));
  u = std::clamp(u, -double(kLimit), double(kLimit));
  return w * (g / (1.0 + std::exp(-g))) * u;
}

// Each row's kTop distinct experts: uniform, or skewed (expert e drawn with weight
// 1 / (e + 1)^1.2: a handful take most of the chunk's slots).
std::vector<int32_t> pick_experts(int rows, bool skewed, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<double> weight(kExperts);
  for (int e = 0; e < kExperts; ++e) weight[e] = skewed ? std::pow(e + 1.0, -1.2) : 1.0;
  std::vector<int32_t> sel;
  for (int t = 0; t < rows; ++t) {
    std::vector<double> w = weight;
    for (int j = 0; j < kTop; ++j) {
      std::discrete_distribution<int> d(w.begin(), w.end());
      const int e = d(gen);
      sel.push_back(e);
      w[e] = 0;  // distinct
    }
  }
  return sel;
}

// One routing of `rows` rows at P planes: the staged inputs of both projections and the
// kernel's reports on each.
class Case {
 public:
  Case(const Experts& ex, int rows, bool skewed, int planes, int reps)
      : ex_(ex), rows_(rows), planes_(planes), reps_(reps), sms_(device_sms()) {
    DSV4_CUDA_CHECK(cudaGetDevice(&device_));
    sel_ = pick_experts(rows, skewed, 7 + rows + (skewed ? 1 : 0));
    slots_ = static_cast<int64_t>(sel_.size());
    tl_ = tile_list(sel_, kExperts, 0);
    tiles_ = device_copy(tl_.ints);
    std::vector<bool> used(kExperts);
    for (int32_t e : sel_) used[static_cast<size_t>(e)] = true;
    used_experts_ = static_cast<int>(std::count(used.begin(), used.end(), true));
    // x: bf16-exact values for P = 1 (what the native arm's e4m3 activations are), any f32 for P = 3.
    std::mt19937 gen(5 + rows);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    x_.resize(static_cast<size_t>(rows) * kHidden);
    for (float& v : x_) v = planes == 1 ? bf16_round(nd(gen)) : nd(gen);
    wt_.resize(static_cast<size_t>(slots_));
    for (size_t s = 0; s < wt_.size(); ++s) wt_[s] = 0.1f + 0.05f * static_cast<float>(s % kTop);
    std::printf("rows %d, %s experts, P %d: %d experts used, %lld tiles of 64 (%lld slots: %.1f%% of the tiles' columns)\n",
                rows, skewed ? "skewed" : "uniform", planes, used_experts_, static_cast<long long>(tl_.tiles),
                static_cast<long long>(slots_), 100.0 * slots_ / (tl_.tiles * kTileSlots));
  }

  // Runs both projections; false when a check fails.
  bool run() {
    float* x = device_copy(x_);
    float* wt = device_copy(wt_);
    float* h = device_alloc<float>(static_cast<size_t>(slots_) * kInter);
    float* y = device_alloc<float>(static_cast<size_t>(slots_) * kHidden);
    uint4* xb = device_alloc<uint4>(static_cast<size_t>(planes_) * rows_ * kHidden / kGroup);
    uint4* hb = device_alloc<uint4>(static_cast<size_t>(planes_) * slots_ * kInter / kGroup);
    bool ok = true;
    // Up: h = swiglu(w1 x, w3 x) x wt per slot.
    stage(x, int64_t{rows_} * kHidden / kGroup, xb);
    const GemmArgs up{ex_.table, tiles_, tiles_ + tl_.tiles, xb, int64_t{rows_} * kHidden / kGroup, kTop,
                      kInter, kHidden, h, wt, kLimit};
    std::vector<float> h_out;
    ok &= report<true>("ring", [&] { launch<true>(up); }, h, h_out, x_, kTop);
    // Down: from that h (the native arm re-quantizes it: here P = 1 rounds it to bf16 in
    // the planes; the reference takes the same rounded values).
    std::vector<float> h_in = h_out;
    if (planes_ == 1)
      for (float& v : h_in) v = bf16_round(v);
    float* h_dev = device_copy(h_in);
    stage(h_dev, slots_ * kInter / kGroup, hb);
    const GemmArgs down{ex_.table, tiles_, tiles_ + tl_.tiles, hb, slots_ * kInter / kGroup, 1, kHidden, kInter, y,
                        wt, kLimit};
    std::vector<float> y_out;
    ok &= report<false>("ring", [&] { launch<false>(down); }, y, y_out, h_in, 1);
    if (planes_ == 1) ok &= run_fp4(x, wt, h, y);
    for (void* p : {static_cast<void*>(x), static_cast<void*>(wt), static_cast<void*>(h), static_cast<void*>(y),
                    static_cast<void*>(xb), static_cast<void*>(hb), static_cast<void*>(h_dev)})
      DSV4_CUDA_CHECK(cudaFree(p));
    DSV4_CUDA_CHECK(cudaFree(tiles_));
    return ok;
  }

 private:
  void stage(const float* in, int64_t groups, uint4* planes) const {
    if (planes_ == 1)
      bf16_planes_kernel<1><<<cuda::blocks_for(groups, kThreads), kThreads>>>(in, groups, planes);
    else
      bf16_planes_kernel<3><<<cuda::blocks_for(groups, kThreads), kThreads>>>(in, groups, planes);
    DSV4_CUDA_LAUNCH_CHECK();
  }

  template <bool Up>
  void launch(const GemmArgs& a) const {
    const int64_t items = tl_.tiles * ((a.m + kItemRows<Up> - 1) / kItemRows<Up>);
    if (planes_ == 1)
      launch_expert_gemm<Up, 1>(a, items, sms_, nullptr);
    else
      launch_expert_gemm<Up, 3>(a, items, sms_, nullptr);
  }

  // The fp4 arm (P = 1 cases): x and h by act_fp16_rows, both projections on the relaid
  // experts, each against the reference (from the dequantized activations) and the decode
  // fp4 kernel's bits: the mma.sync kernel ("fp4") and, on a compute capability 9.0 device,
  // the wgmma kernel ("wgmma", activations in K order) and wgmma_tma ("wgtma", against the
  // wgmma line's bits too). h / y: the ring's buffers, reused.
  bool run_fp4(const float* x, const float* wt, float* h, float* y) {
    bool ok = run_fp4_kernel(cuda::Fp4GemmKernel::mma_sync, x, wt, h, y);
    if (cuda::fp4_wgmma_runs_on(device_)) {
      ok &= run_fp4_kernel(cuda::Fp4GemmKernel::wgmma, x, wt, h, y);
      ok &= run_fp4_kernel(cuda::Fp4GemmKernel::wgmma_tma, x, wt, h, y);
    } else {
      std::printf("  (no wgmma lines: the device is not compute capability 9.0)\n");
    }
    return ok;
  }

  // One kernel's up and down (its activation order: fp4_gemm_act_order); the decode fp4
  // kernel's outputs from the same inputs (up: x; down: this kernel's own h). The wgmma
  // kernel's outputs are kept for the wgtma lines (the down projection's inputs are then
  // the same h bit for bit when the up lines agree).
  bool run_fp4_kernel(cuda::Fp4GemmKernel kernel, const float* x, const float* wt, float* h, float* y) {
    const bool wg = kernel != cuda::Fp4GemmKernel::mma_sync;
    const char* arm = kernel == cuda::Fp4GemmKernel::wgmma ? "wgmma" : wg ? "wgtma" : "fp4";
    const cuda::ActOrder order = cuda::fp4_gemm_act_order(kernel);
    const int32_t* sel = device_copy(sel_);
    auto* xq = device_alloc<__half>(static_cast<size_t>(rows_) * kHidden);
    auto* xs = device_alloc<float>(static_cast<size_t>(rows_) * kHidden / kChunk);
    auto* hq = device_alloc<__half>(static_cast<size_t>(slots_) * kInter);
    auto* hs = device_alloc<float>(static_cast<size_t>(slots_) * kInter / kChunk);
    cuda::act_fp16_rows(x, rows_, kHidden, xq, xs, nullptr);  // the decode kernel's (fragment) order
    cuda::Fp4GemmArgs a{ex_.frag->table(), tiles_, tiles_ + tl_.tiles, nullptr, tl_.tiles, xq, xs, kTop, kInter,
                        kHidden,           h,      wt,                  kLimit};
    const std::vector<float> h_decode = decode_fp4(2, a, sel);
    const std::vector<float> x_ref = dequantized(xq, xs, rows_, kHidden);
    cuda::act_fp16_rows(x, rows_, kHidden, xq, xs, nullptr, order);  // the same values in the kernel's order
    std::vector<float> h_out, y_out;
    bool ok = report<true>(arm, [&] { cuda::launch_expert_fp4_gemm(true, ex_.nv, kernel, a, device_, nullptr); }, h,
                           h_out, x_ref, kTop, &h_decode, !wg);
    if (kernel == cuda::Fp4GemmKernel::wgmma) wgmma_out_[0] = h_out;
    cuda::act_fp16_rows(h, slots_, kInter, hq, hs, nullptr);  // from this kernel's own h (§4.23)
    a.act = hq;
    a.act_scale = hs;
    a.act_div = 1;
    a.m = kHidden;
    a.k = kInter;
    a.out = y;
    const std::vector<float> y_decode = decode_fp4(1, a, sel);
    const std::vector<float> h_ref = dequantized(hq, hs, slots_, kInter);
    cuda::act_fp16_rows(h, slots_, kInter, hq, hs, nullptr, order);
    ok &= report<false>(arm, [&] { cuda::launch_expert_fp4_gemm(false, ex_.nv, kernel, a, device_, nullptr); }, y,
                        y_out, h_ref, 1, &y_decode, !wg);
    if (kernel == cuda::Fp4GemmKernel::wgmma) wgmma_out_[1] = y_out;
    for (const void* p : {static_cast<const void*>(sel), static_cast<const void*>(xq), static_cast<const void*>(xs),
                          static_cast<const void*>(hq), static_cast<const void*>(hs)})
      DSV4_CUDA_CHECK(cudaFree(const_cast<void*>(p)));
    return ok;
  }

  // The decode fp4 kernel's outputs for a's projection (nw 2 up, 1 down) on the decode
  // tile list (group_slots), in pieces of 1,024 rows (its list's shared memory).
  std::vector<float> decode_fp4(int nw, const cuda::Fp4GemmArgs& a, const int32_t* sel) const {
    constexpr int64_t kPiece = int64_t{1024} * kTop;
    const int64_t tiles_max = cuda::max_tiles(kPiece, kExperts);
    const cuda::Tiles t{device_alloc<ExpertW>(static_cast<size_t>(tiles_max)), device_alloc<int32_t>(1),
                        device_alloc<int32_t>(static_cast<size_t>(tiles_max * cuda::kMmaCols))};
    float* out = device_alloc<float>(static_cast<size_t>(slots_ * a.m));
    for (int64_t s0 = 0; s0 < slots_; s0 += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, slots_ - s0));
      const int64_t row0 = s0 / a.act_div;  // the piece's first activation row (s0 a multiple of kTop)
      cuda::group_slots(sel + s0, n, ex_.table, kExperts, t, nullptr);
      const cuda::FragArgs f{cuda::MmaArgs{t, nullptr, a.act_div, a.m, a.k, out + s0 * a.m, a.wt + s0, a.limit},
                             sel + s0, a.experts, a.act + row0 * a.k, a.act_scale + row0 * (a.k / kChunk)};
      cuda::launch_expert_fp4(nw, ex_.nv, cuda::kFragRing, f, cuda::max_tiles(n, kExperts), device_, nullptr);
    }
    std::vector<float> got = download(out, static_cast<size_t>(slots_ * a.m));
    for (void* p : {static_cast<void*>(t.w), static_cast<void*>(t.count), static_cast<void*>(t.slot),
                    static_cast<void*>(out)})
      DSV4_CUDA_CHECK(cudaFree(p));
    return got;
  }

  // act_fp16_rows' values q s back in K order (expert_fp4.cuh: element 16 st + slot of a
  // chunk sits at 32 t + 4 st + 2 (slot / 8) + slot % 2, t = (slot % 8) / 2): exact.
  static std::vector<float> dequantized(const __half* q, const float* s, int64_t rows, int64_t K) {
    const std::vector<__half> qh = download(q, static_cast<size_t>(rows * K));
    const std::vector<float> sh = download(s, static_cast<size_t>(rows * K / kChunk));
    std::vector<float> out(qh.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < K / kChunk; ++c)
        for (int e = 0; e < kChunk; ++e) {
          const int st = e / 16, slot = e % 16, at = (slot % 8) / 2 * 32 + st * 4 + (slot / 8) * 2 + slot % 2;
          const size_t base = static_cast<size_t>(r * K + c * kChunk);
          out[base + e] = __half2float(qh[base + at]) * sh[static_cast<size_t>(r * (K / kChunk) + c)];
        }
    return out;
  }

  // Times launch() (the projection Up of `arm`), checks its outputs against the reference
  // on sampled outputs, a fresh launch against the timed ones bit for bit and, given
  // `decode`, against the decode fp4 kernel's bits (decode_exact: required; else reported,
  // and a difference held to kTolerance: the wgmma kernel, whose k16 rounding PTX does not
  // tie to mma.sync's); its outputs into `got`. The ratio printed: the ring kernel's time
  // over an fp4 line's, the fp4 (mma.sync) line's over a wgmma line's, the wgmma line's over
  // a wgtma line's (which must also give the wgmma line's bits: "=wgmma").
  template <bool Up, class Launch>
  bool report(const char* arm, Launch launch, float* out, std::vector<float>& got, const std::vector<float>& in,
              int act_div, const std::vector<float>* decode = nullptr, bool decode_exact = true) {
    const int64_t m = Up ? kInter : kHidden, k = Up ? kHidden : kInter;
    const size_t n = static_cast<size_t>(slots_ * m);
    DSV4_CUDA_CHECK(cudaMemset(out, 0xFF, n * sizeof(float)));  // NaN: an output never written fails
    const float us = dev::time_launches(launch, reps_, nullptr);
    got = download(out, n);
    const dev::Closeness c = closeness(reference<Up>(m, k, in, act_div), sampled(m, got));
    const double flops = 2.0 * double(slots_) * double(m) * double(k) * (Up ? 2 : 1);
    const Fp4W& w0 = ex_.host[0].w1;
    const Fp4W& w2 = ex_.host[0].w2;
    const double bytes = double(used_experts_) * (Up ? 2 * Experts::bytes(w0, kInter) : Experts::bytes(w2, kHidden));
    // The ring lines (no decode kernel to match) at the ring bound, the others at kTolerance.
    const bool in_bound = decode ? c.within(kTolerance) : c.within(kRingRelL2, kRingMaxNorm);
    bool ok = in_bound;
    DSV4_CUDA_CHECK(cudaMemset(out, 0xFF, n * sizeof(float)));
    launch();
    const bool same = std::memcmp(got.data(), download(out, n).data(), n * sizeof(float)) == 0;
    const bool as_decode = !decode || std::memcmp(got.data(), decode->data(), n * sizeof(float)) == 0;
    dev::Closeness vs_decode{};
    if (decode && !as_decode) vs_decode = closeness(*decode, got);
    ok &= same && (as_decode || (!decode_exact && vs_decode.within(kTolerance)));
    const bool wg = std::strcmp(arm, "wgmma") == 0, tma = std::strcmp(arm, "wgtma") == 0;
    const std::vector<float>& wgmma_got = wgmma_out_[Up ? 0 : 1];
    const bool as_wgmma = tma && wgmma_got.size() == n && std::memcmp(got.data(), wgmma_got.data(), n * sizeof(float)) == 0;
    if (tma) ok &= as_wgmma;
    float& ring = ring_us_[Up ? 0 : 1];
    float& fp4 = fp4_us_[Up ? 0 : 1];
    float& wgmma = wgmma_us_[Up ? 0 : 1];
    if (!decode) ring = us;
    else if (wg) wgmma = us;
    else if (!tma) fp4 = us;
    std::printf("  %-4s %-5s %9.1f us %7.1f TFLOP/s %5.2f TB/s  ref rel_l2 %.1e max_norm %.1e %s %s", Up ? "up" : "down",
                arm, us, flops / us / 1e6, bytes / us / 1e6, c.rel_l2, c.max_norm,
                in_bound ? "ok" : "OVER-TOLERANCE", same ? "=again" : "DIFFERS-FROM-AGAIN");
    if (decode && as_decode) std::printf(" =decode");
    if (decode && !as_decode)
      std::printf(" %s vs decode rel_l2 %.1e max_norm %.1e", decode_exact ? "DIFFERS-FROM-DECODE" : "!=decode",
                  vs_decode.rel_l2, vs_decode.max_norm);
    if (tma) std::printf(as_wgmma ? " =wgmma" : " DIFFERS-FROM-WGMMA");
    if (decode)
      std::printf(tma ? "  wgmma/wgtma %.2fx" : wg ? "  fp4/wgmma %.2fx" : "  ring/fp4 %.2fx",
                  (tma ? wgmma : wg ? fp4 : ring) / us);
    std::printf("\n");
    return ok;
  }

  // The sampled (slot, row) pairs: slots spread over the chunk, rows over the projection.
  std::vector<std::pair<int64_t, int64_t>> samples(int64_t m) const {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int i = 0; i < kSampleSlots; ++i)
      for (int j = 0; j < kSampleRows; ++j)
        out.emplace_back((slots_ - 1) * i / (kSampleSlots - 1), (m - 1) * ((j * 37) % kSampleRows) / (kSampleRows - 1));
    return out;
  }
  std::vector<double> sampled(int64_t m, const std::vector<float>& got) const {
    std::vector<double> out;
    for (const auto& [s, r] : samples(m)) out.push_back(got[static_cast<size_t>(s * m + r)]);
    return out;
  }
  template <bool Up>
  std::vector<double> reference(int64_t m, int64_t k, const std::vector<float>& in, int act_div) const {
    std::vector<double> out;
    for (const auto& [s, r] : samples(m)) {
      const ExpertW& e = ex_.host[static_cast<size_t>(sel_[static_cast<size_t>(s)])];
      const float* act = in.data() + (s / act_div) * k;
      if constexpr (Up)
        out.push_back(swiglu_ref(dot(weight_row(e.w1, r), act), dot(weight_row(e.w3, r), act), wt_[static_cast<size_t>(s)]));
      else
        out.push_back(dot(weight_row(e.w2, r), act));
    }
    return out;
  }

  const Experts& ex_;
  int rows_, planes_, reps_, sms_, device_ = 0;
  std::vector<int32_t> sel_;
  int64_t slots_ = 0;
  TileList tl_;
  int32_t* tiles_ = nullptr;
  int used_experts_ = 0;
  std::vector<float> x_, wt_;
  float ring_us_[2] = {};  // the ring kernel's last up / down time
  float fp4_us_[2] = {};   // the fp4 (mma.sync) kernel's
  float wgmma_us_[2] = {};  // the wgmma kernel's
  std::vector<float> wgmma_out_[2];  // the wgmma kernel's up / down outputs
};

int run(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  const bool mx = argc > 2 && std::string(argv[2]) == "mxfp4";
  if (reps < 1) {
    std::fprintf(stderr, "usage: dsv4-dev-moe-prefill [reps >= 1] [mxfp4]\n");
    return 2;
  }
  const Experts ex = make_experts(!mx);
  std::printf("dsv4-dev-moe-prefill: %s experts [%d x %d], %d of %d per row, %d SMs, %d reps\n", mx ? "MXFP4" : "NVFP4",
              kInter, kHidden, kTop, kExperts, device_sms(), reps);
  bool ok = true;
  for (int rows : {1024, 2048})
    for (bool skewed : {false, true}) ok &= Case(ex, rows, skewed, 1, reps).run();
  ok &= Case(ex, 1024, false, 3, reps).run();
  std::printf("%s\n", ok ? "all cases ok" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-moe-prefill", argc, argv, run); }
