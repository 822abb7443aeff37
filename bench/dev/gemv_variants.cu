// dsv4-dev-gemv: the FP8 GEMV fast path of kernels/cuda/linear.cuh in numbered variants
// (outputs per warp set NO x chunks ahead U x minimum resident blocks B, llm.c dev/cuda
// style) at the Flash decode shapes: validate (every variant bitwise equal to the
// shipped one — NO, U and B change which loads are in flight, never a row's arithmetic),
// then time with CUDA events. Variants P are the persistent kernel (linear.cuh,
// gemv_persist_kernel: resident blocks walk the output sets and load the next chunk group
// before using the current; R rows share a weight load) at other R / NO / U / B, at 1, 2, 4
// and 8 rows, each validated against the chunk kernel at the same rows; shipped: see
// launch_gemv_persist_rows.
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

// The multiprocessors of the current device (gemv_splits fills the machine).
int device_sms() {
  int device = 0, sms = 0;
  DSV4_CUDA_CHECK(cudaGetDevice(&device));
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
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
  a.splits = cuda::gemv_splits(a.n_out, a.k_in / cuda::Fp8Chunks::kVec, device_sms());
  return time_launches([&] { cuda::launch_gemv_chunks<cuda::Fp8Chunks, NO, U, B>(c, a, 1, s); }, reps, s);
}

template <int R, int NO, int U, int B>
float run_persist(const cuda::Fp8Chunks& c, cuda::GemvArgs a, int reps, cudaStream_t s) {
  const int sms = device_sms();
  a.splits = cuda::gemv_splits(a.n_out, a.k_in / cuda::Fp8Chunks::kVec, sms);
  return time_launches([&] { cuda::launch_gemv_persist<cuda::Fp8Chunks, R, NO, U, B>(c, a, 1, sms, s); }, reps, s);
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
    constexpr int kMaxRows = 8;
    std::vector<float> x(sh.in * kMaxRows);
    for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(gen);
    uint8_t *d_codes, *d_scales;
    float *d_x, *d_y;
    DSV4_CUDA_CHECK(cudaMalloc(&d_codes, codes.size()));
    DSV4_CUDA_CHECK(cudaMalloc(&d_scales, scales.size()));
    DSV4_CUDA_CHECK(cudaMalloc(&d_x, x.size() * 4));
    DSV4_CUDA_CHECK(cudaMalloc(&d_y, sh.out * kMaxRows * 4));
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
    a.act_bf16 = true;
    const double mb = (codes.size() + scales.size()) / 1e6;
    for (int rows : {1, 2, 4, 8}) {
      a.rows = rows;
      const size_t n = static_cast<size_t>(sh.out) * rows;
      std::vector<float> ref(n), got(n);
      run<cuda::kGemvOutputs, cuda::kGemvAhead>(c, a, 1, s);  // the chunk kernel: the reference bits
      DSV4_CUDA_CHECK(cudaMemcpy(ref.data(), d_y, n * 4, cudaMemcpyDeviceToHost));
      auto report = [&](const char* v, float us) {
        DSV4_CUDA_CHECK(cudaMemcpy(got.data(), d_y, n * 4, cudaMemcpyDeviceToHost));
        const bool same = std::memcmp(ref.data(), got.data(), n * 4) == 0;
        std::printf("%-10s [%6lld, %5lld] rows %d %-8s splits %d %8.2f us %6.2f TB/s %s\n", sh.name,
                    static_cast<long long>(sh.out), static_cast<long long>(sh.in), rows, v,
                    cuda::gemv_splits(sh.out, sh.in / 16, device_sms()), us, mb / us, same ? "bitwise-equal" : "DIFFERS");
      };
      report("NO2 U2", run<2, 2>(c, a, reps, s));
      if (rows == 1) {
        report("NO1 U2", run<1, 2>(c, a, reps, s));
        report("NO4 U2", run<4, 2>(c, a, reps, s));
        report("P41 B2", run_persist<1, 4, 1, 2>(c, a, reps, s));
        report("P81 B2", run_persist<1, 8, 1, 2>(c, a, reps, s));
        report("P82 B1", run_persist<1, 8, 2, 1>(c, a, reps, s));
        report("P161 B1", run_persist<1, 16, 1, 1>(c, a, reps, s));
      } else if (rows == 2) {
        report("P2x4 B2", run_persist<2, 4, 1, 2>(c, a, reps, s));
        report("P2x8 B1", run_persist<2, 8, 1, 1>(c, a, reps, s));
        report("P2x2 B2", run_persist<2, 2, 1, 2>(c, a, reps, s));
      } else if (rows == 4) {
        report("P4x4 B1", run_persist<4, 4, 1, 1>(c, a, reps, s));
        report("P4x2 B2", run_persist<4, 2, 1, 2>(c, a, reps, s));
        report("P4x8 B1", run_persist<4, 8, 1, 1>(c, a, reps, s));
      } else {
        report("P8x2 B1", run_persist<8, 2, 1, 1>(c, a, reps, s));
        report("P8x4 B1", run_persist<8, 4, 1, 1>(c, a, reps, s));
      }
    }
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
