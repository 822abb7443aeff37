// dsv4-dev-gemv: the FP8 GEMV of kernels/cuda/gemv_tc.cuh (tensor cores) and linear.cuh
// (CUDA cores) in variants (llm.c dev/cuda style) at the Flash decode shapes, 1, 2, 4 and 8
// rows. TC is the shipped tensor-core launch (launch_gemv_tc_auto: splits, runs ahead U and
// blocks per SM B from the shape), TC U1 B2 / U2 B1 the kernel at fixed U / B, TCnoL1 the
// shipped launch with L1::no_allocate weight loads: they change which loads are in flight,
// never a row's arithmetic, so each must be bitwise equal to TC. TC s/2 and s*2 halve /
// double the warps per tile (another K partition). Every variant is validated against the
// CPU reference (kernels/cpu/linear.h cpu_lbf16) at the twin tolerance of
// tests/gpu/test_linear_twin.cpp, and the tensor-core ones row by row against the same row
// alone (R-I3). FMA are the CUDA-core kernels (the chunk kernel NO2 U2 and the persistent
// kernel at the R / NO of launch_gemv_persist_rows), for comparison.
// The ring variants (gemv_tc_ring.cuh: the shipped splits and arithmetic, the weights
// streamed through a per-warp cp.async ring in shared memory, S - 1 items in flight per
// warp) must be bitwise equal to TC: 1-4 "ring S B" (S stages, B blocks per SM at
// launch_bounds: 4 = fewer registers, more warps), 5-7 "ringX S B" (x staged with the
// weights: the 8 rows' x reads leave L1's 32 lines per load instruction), 8 "ring auto"
// the launch by row count that linear.cuh would take (launch_gemv_tc_ring_auto).
// Each line prints TB/s (weights + scales / time) and its fraction of the H200's 4.3 TB/s.
// usage: dsv4-dev-gemv [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <vector>

#include "base/cuda_check.h"
#include "base/scalar_formats.h"
#include "bench/dev/dev_bench.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/gemv_tc_ring.cuh"
#include "kernels/cuda/linear.cuh"

namespace {

using namespace dsv4;

constexpr int kMaxRows = 8;
constexpr double kTolerance = 1e-5;  // rel_l2 and max_norm, as test_linear_twin.cpp
constexpr double kPeakTBs = 4.3;     // H200 HBM3e peak, the floor's bandwidth

struct Shape {
  const char* name;
  int64_t out, in;  // per group
  int groups;       // grouped wo_a (§4.21): group g reads x columns [g*in, (g+1)*in)
};

using dev::closeness;
using dev::device_sms;
using dev::time_launches;

// One shape's device buffers and problem; y [kMaxRows, groups * out].
struct Problem {
  Shape sh;
  cuda::Fp8W w;
  cuda::GemvArgs a;
  std::vector<float> ref;  // CPU reference y for kMaxRows rows
  size_t y_size() const { return static_cast<size_t>(kMaxRows) * sh.groups * sh.out; }
};

// What a variant's output is checked against besides the CPU reference.
enum class Checks {
  cpu,          // the CPU reference only (the CUDA-core kernels: another K order)
  rows,         // + each row against that row alone (a tensor-core K order of its own)
  rows_shipped  // + bitwise against the shipped tensor-core variant (same arithmetic)
};

class Bench {
 public:
  Bench(const Problem& p, cudaStream_t s, int reps) : p_(p), s_(s), reps_(reps), sms_(device_sms()) {}

  // Launches variant `launch` on `rows` rows and reports its time and checks.
  template <class Launch>
  void report(const char* variant, int rows, Launch launch, Checks checks) {
    cuda::GemvArgs a = p_.a;
    a.rows = rows;
    const float us = time_launches([&] { launch(a); }, reps_, s_);
    const std::vector<float> got = result(rows);
    std::vector<float> ref(p_.ref.begin(), p_.ref.begin() + got.size());
    const dev::Closeness c = closeness(ref, got);
    const double mb = (p_.sh.groups * p_.sh.out * p_.sh.in * (1.0 + 1.0 / 16384)) / 1e6;
    std::printf("%-10s [%6lld, %5lld] x%d rows %d %-11s %8.2f us %6.2f TB/s %4.2f of peak  cpu rel_l2 %.1e max_norm %.1e %s",
                p_.sh.name, static_cast<long long>(p_.sh.out), static_cast<long long>(p_.sh.in), p_.sh.groups,
                rows, variant, us, mb / us, mb / us / kPeakTBs, c.rel_l2, c.max_norm,
                c.within(kTolerance) ? "ok" : "OVER-TOLERANCE");
    if (checks == Checks::rows_shipped) {
      if (shipped_.empty()) shipped_ = got;
      else std::printf(" %s", same(shipped_, got) ? "=shipped" : "DIFFERS-FROM-SHIPPED");
    }
    if (checks != Checks::cpu)
      std::printf(" %s", rows_match_single(a, launch, got) ? "rows=single" : "ROWS-DIFFER-FROM-SINGLE");
    std::printf("\n");
  }
  // Call first for each row count with the shipped TC variant.
  void reset() { shipped_.clear(); }
  int sms() const { return sms_; }

 private:
  std::vector<float> result(int rows) const {
    std::vector<float> y(static_cast<size_t>(rows) * p_.sh.groups * p_.sh.out);
    DSV4_CUDA_CHECK(cudaMemcpy(y.data(), p_.a.y, y.size() * 4, cudaMemcpyDeviceToHost));
    return y;
  }
  static bool same(const std::vector<float>& x, const std::vector<float>& y) {
    return std::memcmp(x.data(), y.data(), x.size() * 4) == 0;
  }
  // Each row of `all` against the same launch on that row alone.
  template <class Launch>
  bool rows_match_single(const cuda::GemvArgs& a, Launch launch, const std::vector<float>& all) const {
    const size_t width = static_cast<size_t>(p_.sh.groups) * p_.sh.out;
    bool ok = true;
    for (int r = 0; r < a.rows; ++r) {
      cuda::GemvArgs one = a;
      one.rows = 1;
      one.x = a.x + r * a.x_stride;
      launch(one);
      std::vector<float> y(width);
      DSV4_CUDA_CHECK(cudaMemcpy(y.data(), a.y, width * 4, cudaMemcpyDeviceToHost));
      ok = ok && std::memcmp(y.data(), all.data() + r * width, width * 4) == 0;
    }
    return ok;
  }

  const Problem& p_;
  cudaStream_t s_;
  int reps_, sms_;
  std::vector<float> shipped_;
};

// Random FP8 codes (no NaN) and scales around 2^-9, x ~ N(0, 1); the CPU reference on the
// dequantized weight (L-bf16, bf16-rounded x).
Problem make_problem(const Shape& sh, std::mt19937& gen) {
  const int64_t rows_w = sh.groups * sh.out;
  const int64_t scale_cols = (sh.in + 127) / 128;
  std::vector<uint8_t> codes(rows_w * sh.in), scales(((rows_w + 127) / 128) * scale_cols);
  for (auto& b : codes) {
    b = static_cast<uint8_t>(gen());
    if ((b & 0x7F) == 0x7F) b ^= 1;
  }
  for (auto& b : scales) b = static_cast<uint8_t>(118 + gen() % 3);
  const int64_t x_width = sh.groups * sh.in;
  std::vector<float> x(x_width * kMaxRows);
  for (auto& v : x) v = std::normal_distribution<float>(0.0f, 1.0f)(gen);
  std::vector<float> dense(codes.size());
  for (int64_t r = 0; r < rows_w; ++r)
    for (int64_t c = 0; c < sh.in; ++c)
      dense[r * sh.in + c] = e4m3_to_f32(codes[r * sh.in + c]) * e8m0_to_f32(scales[(r / 128) * scale_cols + c / 128]);
  Problem p{sh, {}, {}, {}};
  p.ref.resize(p.y_size());
  cpu_grouped_lbf16(dense.data(), sh.out, sh.in, x.data(), kMaxRows, sh.groups, true, p.ref.data());
  uint8_t *d_codes, *d_scales;
  float *d_x, *d_y;
  DSV4_CUDA_CHECK(cudaMalloc(&d_codes, codes.size()));
  DSV4_CUDA_CHECK(cudaMalloc(&d_scales, scales.size()));
  DSV4_CUDA_CHECK(cudaMalloc(&d_x, x.size() * 4));
  DSV4_CUDA_CHECK(cudaMalloc(&d_y, p.y_size() * 4));
  DSV4_CUDA_CHECK(cudaMemcpy(d_codes, codes.data(), codes.size(), cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaMemcpy(d_scales, scales.data(), scales.size(), cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaMemcpy(d_x, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  p.w = cuda::Fp8W{d_codes, d_scales, sh.in, scale_cols};
  p.a.x = d_x;
  p.a.x_stride = x_width;
  p.a.x_group = sh.in;
  p.a.y = d_y;
  p.a.y_stride = sh.groups * sh.out;
  p.a.y_group = sh.out;
  p.a.w_group = sh.out;
  p.a.k_in = sh.in;
  p.a.n_out = sh.out;
  p.a.act_bf16 = true;
  return p;
}

void free_problem(const Problem& p) {
  DSV4_CUDA_CHECK(cudaFree(const_cast<uint8_t*>(p.w.codes)));
  DSV4_CUDA_CHECK(cudaFree(const_cast<uint8_t*>(p.w.scales)));
  DSV4_CUDA_CHECK(cudaFree(const_cast<float*>(p.a.x)));
  DSV4_CUDA_CHECK(cudaFree(p.a.y));
}

int tc_splits(const Problem& p, int sms) {
  return cuda::gemv_tc_splits((p.sh.out + cuda::kTcRows - 1) / cuda::kTcRows * p.sh.groups, p.sh.in / cuda::kTcK,
                              sms);
}

// The shipped decoder with its weight loads marked L1::no_allocate, so the streamed weights
// do not evict the x rows every warp re-reads (PTX ISA "ld", eviction priority): does x's
// traffic make 8 rows cost twice one row?
struct TcFp8RunNoL1 : cuda::TcFp8Run {
  __device__ static uint4 stream_load(const void* p) {
    uint4 q;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(q.x), "=r"(q.y), "=r"(q.z), "=r"(q.w)
        : "l"(p));
    return q;
  }
  __device__ void load(int64_t r, int64_t k0, uint4 (&q)[kLoads]) const {
    q[0] = stream_load(run(r, k0));
    q[1] = stream_load(run(r, k0) + 16);
  }
};

// The shipped launch (splits, U and B from the shape) with decoder C.
template <class C = cuda::TcFp8Run>
auto tc_shipped(const Problem& p, int sms, cudaStream_t s) {
  return [&p, sms, s](cuda::GemvArgs a) {
    C c;
    c.w = p.w;
    cuda::launch_gemv_tc_auto<C, 1>(c, a, p.sh.groups, sms, s);
  };
}

// The kernel at U runs ahead, B blocks per SM, the shipped splits x split_scale.
template <int U, int B>
auto tc(const Problem& p, int sms, cudaStream_t s, double split_scale = 1.0) {
  return [&p, sms, s, split_scale](cuda::GemvArgs a) {
    a.splits = std::clamp(static_cast<int>(tc_splits(p, sms) * split_scale), 1, cuda::kGemvWarps);
    cuda::launch_gemv_tc<cuda::TcFp8Run, 1, U, B>(cuda::TcFp8Run{p.w}, a, p.sh.groups, sms, s);
  };
}

// The ring kernel (gemv_tc_ring.cuh) at S stages, x staged or not, B blocks per SM, the
// shipped splits.
template <int S, bool StageX, int B>
auto ring(const Problem& p, int sms, cudaStream_t s) {
  return [&p, sms, s](cuda::GemvArgs a) {
    a.splits = tc_splits(p, sms);
    cuda::launch_gemv_tc_ring<cuda::TcFp8Run, 1, S, StageX, B>(cuda::TcFp8Run{p.w}, a, p.sh.groups, sms, s);
  };
}

}  // namespace

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 200;
  // The 33.6 MB matrices first (most of the dense bytes), then the 8 MiB ones, then the small.
  const Shape shapes[] = {{"wo_b", 4096, 8192, 1},      {"wq_b", 32768, 1024, 1},     {"wo_a", 1024, 4096, 8},
                          {"shared_w1", 2048, 4096, 1}, {"shared_w2", 4096, 2048, 1}, {"idx_wq_b", 8192, 1024, 1},
                          {"wq_a", 1024, 4096, 1},      {"wkv", 512, 4096, 1}};
  cudaStream_t s;
  DSV4_CUDA_CHECK(cudaStreamCreate(&s));
  std::mt19937 gen(7);
  for (const Shape& sh : shapes) {
    const Problem p = make_problem(sh, gen);
    Bench b(p, s, reps);
    const int sms = b.sms();
    const cuda::Fp8Chunks c{p.w};
    const int groups = sh.groups;
    const int64_t chunks = groups * sh.out * (sh.in / cuda::Fp8Chunks::kVec);
    auto fma_split = [&](cuda::GemvArgs& a) { a.splits = cuda::gemv_splits(a.n_out * groups, a.k_in / 16, sms); };
    std::printf("%s: tensor-core splits %d (x0.5 / x2 variants: TC s/2, TC s*2)\n", sh.name, tc_splits(p, sms));
    for (int rows : {1, 2, 4, 8}) {
      b.reset();
      b.report("TC", rows, tc_shipped(p, sms, s), Checks::rows_shipped);
      b.report("TC U1 B2", rows, tc<1, 2>(p, sms, s), Checks::rows_shipped);
      b.report("TC U2 B1", rows, tc<2, 1>(p, sms, s), Checks::rows_shipped);
      b.report("TCnoL1", rows, tc_shipped<TcFp8RunNoL1>(p, sms, s), Checks::rows_shipped);
      b.report("TC s/2", rows, tc<1, 2>(p, sms, s, 0.5), Checks::rows);
      b.report("TC s*2", rows, tc<1, 2>(p, sms, s, 2.0), Checks::rows);
      b.report("1 ring3 B2", rows, ring<3, false, 2>(p, sms, s), Checks::rows_shipped);
      b.report("2 ring4 B2", rows, ring<4, false, 2>(p, sms, s), Checks::rows_shipped);
      b.report("3 ring6 B2", rows, ring<6, false, 2>(p, sms, s), Checks::rows_shipped);
      b.report("4 ring3 B4", rows, ring<3, false, 4>(p, sms, s), Checks::rows_shipped);
      b.report("5 ringX2 B2", rows, ring<2, true, 2>(p, sms, s), Checks::rows_shipped);
      b.report("6 ringX3 B1", rows, ring<3, true, 1>(p, sms, s), Checks::rows_shipped);
      b.report("7 ringX4 B2", rows, ring<4, true, 2>(p, sms, s), Checks::rows_shipped);
      b.report("8 ring auto", rows, [&](cuda::GemvArgs a) {
        cuda::launch_gemv_tc_ring_auto<cuda::TcFp8Run, 1>(cuda::TcFp8Run{p.w}, a, p.sh.groups, sms, s);
      }, Checks::rows_shipped);
      b.report("FMA chunk", rows, [&](cuda::GemvArgs a) {
        fma_split(a);
        cuda::launch_gemv_chunks(c, a, groups, s);
      }, Checks::cpu);
      if (chunks >= cuda::kPersistMinChunks)
        b.report("FMA pers", rows, [&](cuda::GemvArgs a) {
          fma_split(a);
          cuda::launch_gemv_persist_rows(c, a, groups, chunks, sms, s);
        }, Checks::cpu);
    }
    free_problem(p);
  }
  return 0;
}

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-gemv", argc, argv, run_all); }
