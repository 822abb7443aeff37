// dsv4-dev-gemv: the FP8 GEMV fast path of kernels/cuda/linear.cuh in numbered variants
// (outputs per warp set NO x chunks ahead U x minimum resident blocks B, llm.c dev/cuda
// style) at the Flash decode shapes, one row: validate (every variant bitwise equal to the
// shipped one — NO, U and B change which loads are in flight, never a row's arithmetic),
// then time with CUDA events. Variant P is a candidate: persistent warp sets (a grid of
// resident blocks walking the output sets) that issue the next chunk group's loads —
// of the same set or of the next one — before using the current, so loads stay in flight
// through the decode, the butterfly and the split combine (ncu: the shipped kernel holds
// 16 warps per SM at 119 registers and loads only between its reductions).
// usage: dsv4-dev-gemv [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

#include "base/cuda_check.h"
#include "kernels/cuda/linear.cuh"

namespace {

using namespace dsv4;

struct Shape {
  const char* name;
  int64_t out, in;
};

// Variant P: the shipped kernel's per-(output, chunk) arithmetic and combine order, R = 1,
// with persistent warp sets and a one-group-ahead prefetch across sets.
template <class C, int NO, int U, int MinBlocks>
__global__ void __launch_bounds__(cuda::kGemvThreads, MinBlocks)
gemv_persist_kernel(C w, cuda::GemvArgs a) {
  constexpr int kVec = C::kVec, kWarp = cuda::kWarp;
  __shared__ float part[cuda::kGemvWarps][NO];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int splits = a.splits, sets = cuda::kGemvWarps / splits;
  const int set = warp / splits, split = warp % splits;
  const int64_t total = (a.n_out + NO - 1) / NO, step = int64_t{gridDim.x} * sets;
  const int64_t chunks = a.k_in / kVec, stride = int64_t{kWarp} * splits, first = split * kWarp + lane;
  const float* x = a.x;
  uint4 next[U][NO];
  auto load = [&](int64_t n0, int64_t base) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int o = 0; o < NO; ++o)
        if (n0 + o < a.n_out && base + u * stride < chunks) next[u][o] = w.raw(n0 + o, (base + u * stride) * kVec);
  };
  int64_t sb = int64_t{blockIdx.x} * sets;
  load((sb + set) * NO, first);
  for (; sb < total; sb += step) {  // block-uniform
    const int64_t n0 = (sb + set) * NO;
    float acc[NO];
#pragma unroll
    for (int o = 0; o < NO; ++o) acc[o] = 0.0f;
    for (int64_t base = first; base < chunks; base += stride * U) {
      uint4 raw[U][NO];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int o = 0; o < NO; ++o) raw[u][o] = next[u][o];
      if (base + stride * U < chunks) load(n0, base + stride * U);
      else load(n0 + step * NO, first);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c0 = (base + u * stride) * kVec;
        if (base + u * stride >= chunks) break;
        float xs[kVec];
        cuda::load_x(x + c0, a.act_bf16, xs);
#pragma unroll
        for (int o = 0; o < NO; ++o) {
          if (n0 + o >= a.n_out) continue;
          float wv[kVec];
          w.decode(raw[u][o], wv);
          const float ws = w.scale(n0 + o, c0);
          float lo = 0.0f, hi = 0.0f;
#pragma unroll
          for (int i = 0; i < kVec / 2; ++i) {
            lo = fmaf(xs[i], wv[i], lo);
            hi = fmaf(xs[kVec / 2 + i], wv[kVec / 2 + i], hi);
          }
          acc[o] = fmaf(lo + hi, ws, acc[o]);
        }
      }
    }
#pragma unroll
    for (int o = 0; o < NO; ++o) {
      const float v = cuda::warp_sum(acc[o]);
      if (lane == 0) part[warp][o] = v;
    }
    __syncthreads();
    if (split == 0 && lane < NO && n0 + lane < a.n_out) {
      float s = part[warp][lane];
      for (int j = 1; j < splits; ++j) s += part[warp + j][lane];
      a.y[n0 + lane] = s;
    }
    __syncthreads();  // part is read before the next set writes it
  }
}

template <int NO, int U, int B>
void launch_persist(const cuda::Fp8Chunks& c, const cuda::GemvArgs& a, cudaStream_t s) {
  int sms = 0, per_sm = 0;
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, gemv_persist_kernel<cuda::Fp8Chunks, NO, U, B>, cuda::kGemvThreads, 0));
  const int64_t sets = (a.n_out + NO - 1) / NO, per_block = cuda::kGemvWarps / a.splits;
  const int64_t need = (sets + per_block - 1) / per_block;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(need, int64_t{sms} * per_sm));
  gemv_persist_kernel<cuda::Fp8Chunks, NO, U, B><<<grid, cuda::kGemvThreads, 0, s>>>(c, a);
  DSV4_CUDA_LAUNCH_CHECK();
}

template <class Launch>
float time_launches(Launch launch, int reps, cudaStream_t s) {
  launch();  // warm-up
  cudaEvent_t t0, t1;
  DSV4_CUDA_CHECK(cudaEventCreate(&t0));
  DSV4_CUDA_CHECK(cudaEventCreate(&t1));
  DSV4_CUDA_CHECK(cudaEventRecord(t0, s));
  for (int i = 0; i < reps; ++i) launch();
  DSV4_CUDA_CHECK(cudaEventRecord(t1, s));
  DSV4_CUDA_CHECK(cudaEventSynchronize(t1));
  float ms = 0;
  DSV4_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
  DSV4_CUDA_CHECK(cudaEventDestroy(t0));
  DSV4_CUDA_CHECK(cudaEventDestroy(t1));
  return ms * 1000.0f / reps;
}

template <int NO, int U, int B = 1>
float run(const cuda::Fp8Chunks& c, cuda::GemvArgs a, int reps, cudaStream_t s) {
  a.splits = cuda::gemv_splits(a.n_out, a.k_in / cuda::Fp8Chunks::kVec);
  return time_launches([&] { cuda::launch_gemv_chunks<cuda::Fp8Chunks, NO, U, B>(c, a, 1, s); }, reps, s);
}

template <int NO, int U, int B>
float run_persist(const cuda::Fp8Chunks& c, cuda::GemvArgs a, int reps, cudaStream_t s) {
  a.splits = cuda::gemv_splits(a.n_out, a.k_in / cuda::Fp8Chunks::kVec);
  return time_launches([&] { launch_persist<NO, U, B>(c, a, s); }, reps, s);
}

}  // namespace

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  const Shape shapes[] = {{"wq_a", 1024, 4096}, {"wq_b", 32768, 1024}, {"wkv", 512, 4096},
                          {"wo_b", 4096, 8192}, {"shared_w1", 2048, 4096}, {"shared_w2", 4096, 2048}};
  cudaStream_t s;
  DSV4_CUDA_CHECK(cudaStreamCreate(&s));
  std::mt19937 gen(7);
  for (const Shape& sh : shapes) {
    std::vector<uint8_t> codes(sh.out * sh.in), scales(((sh.out + 127) / 128) * ((sh.in + 127) / 128));
    for (auto& b : codes) {
      b = static_cast<uint8_t>(gen());
      if ((b & 0x7F) == 0x7F) b ^= 1;  // no NaN codes
    }
    for (auto& b : scales) b = static_cast<uint8_t>(118 + gen() % 3);
    std::vector<float> x(sh.in);
    for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(gen);
    uint8_t *d_codes, *d_scales;
    float *d_x, *d_y;
    DSV4_CUDA_CHECK(cudaMalloc(&d_codes, codes.size()));
    DSV4_CUDA_CHECK(cudaMalloc(&d_scales, scales.size()));
    DSV4_CUDA_CHECK(cudaMalloc(&d_x, x.size() * 4));
    DSV4_CUDA_CHECK(cudaMalloc(&d_y, sh.out * 4));
    DSV4_CUDA_CHECK(cudaMemcpy(d_codes, codes.data(), codes.size(), cudaMemcpyHostToDevice));
    DSV4_CUDA_CHECK(cudaMemcpy(d_scales, scales.data(), scales.size(), cudaMemcpyHostToDevice));
    DSV4_CUDA_CHECK(cudaMemcpy(d_x, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    cuda::Fp8Chunks c;
    c.w = cuda::Fp8W{d_codes, d_scales, sh.in, (sh.in + 127) / 128};
    cuda::GemvArgs a;
    a.x = d_x;
    a.x_stride = sh.in;
    a.y = d_y;
    a.y_stride = sh.out;
    a.k_in = sh.in;
    a.n_out = sh.out;
    a.rows = 1;
    a.act_bf16 = true;
    const double mb = (codes.size() + scales.size()) / 1e6;
    std::vector<float> ref(sh.out), got(sh.out);
    run<cuda::kGemvOutputs, cuda::kGemvAhead>(c, a, 1, s);
    DSV4_CUDA_CHECK(cudaMemcpy(ref.data(), d_y, sh.out * 4, cudaMemcpyDeviceToHost));
    auto report = [&](const char* v, float us) {
      DSV4_CUDA_CHECK(cudaMemcpy(got.data(), d_y, sh.out * 4, cudaMemcpyDeviceToHost));
      const bool same = std::memcmp(ref.data(), got.data(), ref.size() * 4) == 0;
      std::printf("%-10s [%6lld, %5lld] %-8s splits %d %8.2f us %6.2f TB/s %s\n", sh.name,
                  static_cast<long long>(sh.out), static_cast<long long>(sh.in), v,
                  cuda::gemv_splits(sh.out, sh.in / 16), us, mb / us, same ? "bitwise-equal" : "DIFFERS");
    };
    report("NO1 U2", run<1, 2>(c, a, reps, s));
    report("NO1 U4", run<1, 4>(c, a, reps, s));
    report("NO1 U8", run<1, 8>(c, a, reps, s));
    report("NO2 U2", run<2, 2>(c, a, reps, s));
    report("NO2 U4", run<2, 4>(c, a, reps, s));
    report("NO4 U2", run<4, 2>(c, a, reps, s));
    report("NO4 U4", run<4, 4>(c, a, reps, s));
    report("NO2U2B3", run<2, 2, 3>(c, a, reps, s));
    report("NO2U2B4", run<2, 2, 4>(c, a, reps, s));
    report("NO2U4B3", run<2, 4, 3>(c, a, reps, s));
    report("P NO2U1", run_persist<2, 1, 2>(c, a, reps, s));
    report("P NO2U2", run_persist<2, 2, 2>(c, a, reps, s));
    report("P21 B3", run_persist<2, 1, 3>(c, a, reps, s));
    report("P22 B3", run_persist<2, 2, 3>(c, a, reps, s));
    report("P41 B2", run_persist<4, 1, 2>(c, a, reps, s));
    report("P12 B4", run_persist<1, 2, 4>(c, a, reps, s));
    DSV4_CUDA_CHECK(cudaFree(d_codes));
    DSV4_CUDA_CHECK(cudaFree(d_scales));
    DSV4_CUDA_CHECK(cudaFree(d_x));
    DSV4_CUDA_CHECK(cudaFree(d_y));
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run_all(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4-dev-gemv: %s\n", e.what());
    return 1;
  }
}
