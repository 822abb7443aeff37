// dsv4-dev-fp8-mma: what the next decode expert kernel needs to know of Hopper's FP8
// mma.sync (PTX ISA "mma.m16n8k32" / "mma.m16n8k16", .e4m3 x .e4m3 -> .f32) before it
// decodes e2m1 to e4m3 (exact: every e2m1 value is an e4m3 value) instead of bf16:
// 1. Alignment: D = C + A B with one product P = 2^e (or C = 2^e) and another p = 2^-f:
//    the widest span e + f at which p still reaches D is the bits the accumulation keeps
//    (an exact f32 sum keeps p down to 2^-23 of P; DeepSeek-V3 reports ~14 bits for
//    Hopper's FP8 GEMM accumulation).
// 2. Sums of 32 exact products of the decode's kind (e2m1 weights x e4m3 activations,
//    random signs) in one m16n8k32, and the same values (bf16-exact) through two bf16
//    m16n8k16 chained (the shipped kernel's path), each against the f64 sum: max
//    |D - exact| / sum |p| over many tiles. The twin tolerance of the MoE is 1e-5 rel L2.
// 3. Issue cost: mma a second per SM with 8 independent accumulators a warp, one wave of
//    resident blocks, for bf16 m16n8k16, e4m3 m16n8k16 and e4m3 m16n8k32 (K per mma 16, 16, 32).
// usage: dsv4-dev-fp8-mma
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

#include "base/cuda_check.h"
#include "bench/dev/dev_bench.h"
#include "kernels/cuda/mma_bf16.cuh"

namespace {

using namespace dsv4;

constexpr int kM = 16, kN = 8, kK = 32;  // one m16n8k32 tile
constexpr int kTiles = 4096;              // random tiles of test 2

// d += A B (m16n8k32, e4m3): lane (g, t) holds A row g cols 4t..4t+3 (a0), row g + 8
// (a1), then cols 16 + 4t.. (a2, a3); B col g rows 4t..4t+3 (b0), 16 + 4t.. (b1); D as
// the bf16 mma's (mma_bf16.cuh). Byte i of a register is the element of col / row + i.
__device__ inline void mma_k32_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// d += A B (m16n8k16, e4m3): a0 row g cols 4t.., a1 row g + 8; b0 col g rows 4t...
__device__ inline void mma_k16_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

__device__ inline uint32_t bytes4(const uint8_t* p) {
  return p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// One warp a tile: A [16][32], B [32][8] as e4m3 codes (B column-major: B[n][k]), C [16][8];
// out_fp8 = C + A B by one m16n8k32; out_bf16 = C + A B by two bf16 m16n8k16 (k 0-15,
// then 16-31; the codes converted exactly).
__global__ void tile_kernel(const uint8_t* a, const uint8_t* b, const float* c, float* out_fp8, float* out_bf16) {
  const int tile = blockIdx.x, lane = threadIdx.x, g = lane / 4, t = lane % 4;
  const uint8_t* A = a + tile * kM * kK;
  const uint8_t* B = b + tile * kN * kK;
  const float* C = c + tile * kM * kN;
  float d[4], e[4];
  for (int i = 0; i < 4; ++i) d[i] = e[i] = C[(g + 8 * (i / 2)) * kN + 2 * t + i % 2];
  const uint32_t fa[4] = {bytes4(A + g * kK + 4 * t), bytes4(A + (g + 8) * kK + 4 * t),
                          bytes4(A + g * kK + 16 + 4 * t), bytes4(A + (g + 8) * kK + 16 + 4 * t)};
  mma_k32_e4m3(d, fa, bytes4(B + g * kK + 4 * t), bytes4(B + g * kK + 16 + 4 * t));
  // bf16 m16n8k16: a[0] row g k {2t, 2t+1}, a[1] row g + 8, a[2] row g k {2t+8, 2t+9}, a[3]
  // row g + 8; b0 col g k {2t, 2t+1}, b1 k {2t+8, 2t+9}.
  auto bf = [](uint8_t code) { return float(*reinterpret_cast<const __nv_fp8_e4m3*>(&code)); };
  auto pair = [&](const uint8_t* p) { return cuda::bf16x2_bits(__floats2bfloat162_rn(bf(p[0]), bf(p[1]))); };
  for (int s = 0; s < 2; ++s) {
    const int k0 = 16 * s;
    const uint32_t fb[4] = {pair(A + g * kK + k0 + 2 * t), pair(A + (g + 8) * kK + k0 + 2 * t),
                            pair(A + g * kK + k0 + 2 * t + 8), pair(A + (g + 8) * kK + k0 + 2 * t + 8)};
    cuda::mma_m16n8k16_bf16(e, fb, pair(B + g * kK + k0 + 2 * t), pair(B + g * kK + k0 + 2 * t + 8));
  }
  for (int i = 0; i < 4; ++i) {
    const int at = tile * kM * kN + (g + 8 * (i / 2)) * kN + 2 * t + i % 2;
    out_fp8[at] = d[i];
    out_bf16[at] = e[i];
  }
}

// Issue rate: each warp chains 8 independent accumulators through `iters` rounds.
// kind 0: bf16 m16n8k16, 1: e4m3 m16n8k16, 2: e4m3 m16n8k32.
template <int kKind>
__global__ void rate_kernel(int iters, uint32_t seed, float* sink) {
  float acc[8][4] = {};
  const uint32_t r = seed ^ threadIdx.x;  // operands the compiler cannot fold
  const uint32_t a[4] = {r, r * 3u, r * 5u, r * 7u};
#pragma unroll 1
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (kKind == 0)
        cuda::mma_m16n8k16_bf16(acc[j], a, r + j, r - j);
      else if constexpr (kKind == 1)
        mma_k16_e4m3(acc[j], a[0], a[1], r + j);
      else
        mma_k32_e4m3(acc[j], a, r + j, r - j);
    }
  float s = 0;
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 4; ++i) s += acc[j][i];
  if (s == 1.2345f) *sink = s;  // keeps the chains alive
}

// e4m3 code of v (v an e4m3 value: exact).
uint8_t e4m3(float v) {
  const __nv_fp8_e4m3 q(v);
  return *reinterpret_cast<const uint8_t*>(&q);
}

struct TileSet {
  std::vector<uint8_t> a, b;  // [tiles][16][32], [tiles][8][32]
  std::vector<float> c;       // [tiles][16][8]
  explicit TileSet(int tiles) : a(size_t(tiles) * kM * kK, 0), b(size_t(tiles) * kN * kK, 0), c(size_t(tiles) * kM * kN, 0) {}
  int tiles() const { return static_cast<int>(c.size() / (kM * kN)); }
};

struct Outputs {
  std::vector<float> fp8, bf16;
};

Outputs run_tiles(const TileSet& s) {
  uint8_t *a, *b;
  float *c, *o8, *o16;
  DSV4_CUDA_CHECK(cudaMalloc(&a, s.a.size()));
  DSV4_CUDA_CHECK(cudaMalloc(&b, s.b.size()));
  DSV4_CUDA_CHECK(cudaMalloc(&c, s.c.size() * 4));
  DSV4_CUDA_CHECK(cudaMalloc(&o8, s.c.size() * 4));
  DSV4_CUDA_CHECK(cudaMalloc(&o16, s.c.size() * 4));
  DSV4_CUDA_CHECK(cudaMemcpy(a, s.a.data(), s.a.size(), cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaMemcpy(b, s.b.data(), s.b.size(), cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaMemcpy(c, s.c.data(), s.c.size() * 4, cudaMemcpyHostToDevice));
  tile_kernel<<<s.tiles(), 32>>>(a, b, c, o8, o16);
  DSV4_CUDA_LAUNCH_CHECK();
  Outputs o{std::vector<float>(s.c.size()), std::vector<float>(s.c.size())};
  DSV4_CUDA_CHECK(cudaMemcpy(o.fp8.data(), o8, s.c.size() * 4, cudaMemcpyDeviceToHost));
  DSV4_CUDA_CHECK(cudaMemcpy(o.bf16.data(), o16, s.c.size() * 4, cudaMemcpyDeviceToHost));
  for (void* p : {static_cast<void*>(a), static_cast<void*>(b), static_cast<void*>(c), static_cast<void*>(o8),
                  static_cast<void*>(o16)})
    DSV4_CUDA_CHECK(cudaFree(p));
  return o;
}

// f64 value of D[m][n] of tile `tile`.
double exact(const TileSet& s, int tile, int m, int n) {
  double v = s.c[(size_t(tile) * kM + m) * kN + n];
  for (int k = 0; k < kK; ++k) {
    const uint8_t ca = s.a[(size_t(tile) * kM + m) * kK + k], cb = s.b[(size_t(tile) * kN + n) * kK + k];
    v += double(float(*reinterpret_cast<const __nv_fp8_e4m3*>(&ca))) *
         double(float(*reinterpret_cast<const __nv_fp8_e4m3*>(&cb)));
  }
  return v;
}

// Test 1: tile e (0 .. 34) puts a big term 2^big and a small product 2^-small with big +
// small = e into D[0][0], as two products (C = 0) or C = 2^big and one product; prints
// the widest span at which D still holds the small term exactly.
void alignment() {
  for (bool in_c : {false, true}) {
    constexpr int kSpans = 35;  // small >= 2^-18 = 2^-9 x 2^-9 (e4m3 subnormals)
    TileSet s(kSpans);
    for (int e = 0; e < kSpans; ++e) {
      // big = 2^(e / 2 rounded up, <= 16), as a product 2^8 x 2^8 at most; small = 2^-(e - big).
      const int big = std::min((e + 1) / 2, 16), small = e - big;
      if (in_c) {
        s.c[size_t(e) * kM * kN] = std::ldexp(1.0f, big);
      } else {
        s.a[size_t(e) * kM * kK] = e4m3(std::ldexp(1.0f, big / 2));
        s.b[size_t(e) * kN * kK] = e4m3(std::ldexp(1.0f, big - big / 2));
      }
      s.a[size_t(e) * kM * kK + 1] = e4m3(std::ldexp(1.0f, -(small / 2)));
      s.b[size_t(e) * kN * kK + 1] = e4m3(std::ldexp(1.0f, -(small - small / 2)));
    }
    const Outputs o = run_tiles(s);
    int kept_fp8 = -1, kept_bf16 = -1;
    std::printf("alignment, big term %s: span e = log2(big / small) -> D - big (in units of small), fp8 k32 | bf16 k16\n",
                in_c ? "in C" : "a product");
    for (int e = 0; e < kSpans; ++e) {
      const double ref = exact(s, e, 0, 0);
      const int big = std::min((e + 1) / 2, 16), small_exp = -(e - big);
      const double bigv = std::ldexp(1.0, big), smallv = std::ldexp(1.0, small_exp);
      if (std::fabs(std::ldexp(1.0, big) + smallv - ref) > 0) throw std::runtime_error("alignment: bad inputs");
      const double f8 = (o.fp8[size_t(e) * kM * kN] - bigv) / smallv, f16 = (o.bf16[size_t(e) * kM * kN] - bigv) / smallv;
      if (f8 == 1.0 && kept_fp8 == e - 1) kept_fp8 = e;
      if (f16 == 1.0 && kept_bf16 == e - 1) kept_bf16 = e;
      std::printf("  e %2d: %10.4g | %10.4g\n", e, f8, f16);
    }
    std::printf("  the small term is exact up to span %d (fp8 k32) and %d (bf16 k16); an exact f32 add: 23\n",
                kept_fp8, kept_bf16);
  }
}

// Test 2: random tiles of the decode's kind: A e2m1 values (0 .. 6, random sign), B e4m3
// activations of one 128-block (|x| <= 448, 2^-9 and up), C = 0. Max |D - exact| / sum
// |p| and the share of outputs equal to the f64 sum rounded to f32.
void random_sums() {
  std::mt19937 gen(7);
  const float e2m1[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  TileSet s(kTiles);
  for (uint8_t& v : s.a) v = e4m3((gen() & 1 ? -1.0f : 1.0f) * e2m1[gen() % 8]);
  std::normal_distribution<float> normal(0.0f, 64.0f);
  for (uint8_t& v : s.b) v = e4m3(std::clamp(normal(gen), -448.0f, 448.0f));  // rounds to e4m3
  const Outputs o = run_tiles(s);
  double worst8 = 0, worst16 = 0;
  size_t equal8 = 0, equal16 = 0, n = 0;
  for (int tile = 0; tile < kTiles; ++tile)
    for (int m = 0; m < kM; ++m)
      for (int c = 0; c < kN; ++c) {
        double mag = 0;
        for (int k = 0; k < kK; ++k) {
          const uint8_t ca = s.a[(size_t(tile) * kM + m) * kK + k], cb = s.b[(size_t(tile) * kN + c) * kK + k];
          mag += std::fabs(double(float(*reinterpret_cast<const __nv_fp8_e4m3*>(&ca))) *
                           double(float(*reinterpret_cast<const __nv_fp8_e4m3*>(&cb))));
        }
        const double ref = exact(s, tile, m, c);
        const size_t at = (size_t(tile) * kM + m) * kN + c;
        if (mag > 0) {
          worst8 = std::max(worst8, std::fabs(o.fp8[at] - ref) / mag);
          worst16 = std::max(worst16, std::fabs(o.bf16[at] - ref) / mag);
        }
        equal8 += o.fp8[at] == static_cast<float>(ref);
        equal16 += o.bf16[at] == static_cast<float>(ref);
        ++n;
      }
  std::printf("random e2m1 x e4m3 sums of 32 (%zu outputs): max |D - exact| / sum|p|: fp8 k32 %.2e, bf16 2 x k16 %.2e; "
              "equal to f32(exact): fp8 %.4f, bf16 %.4f\n",
              n, worst8, worst16, double(equal8) / n, double(equal16) / n);
}

// Test 3: mma a second per SM.
void rates() {
  const int sms = dev::device_sms(), iters = 4096;
  float* sink = nullptr;
  DSV4_CUDA_CHECK(cudaMalloc(&sink, sizeof(float)));
  const char* names[] = {"bf16 m16n8k16", "e4m3 m16n8k16", "e4m3 m16n8k32"};
  const int ks[] = {16, 16, 32};
  void (*kernels[])(int, uint32_t, float*) = {rate_kernel<0>, rate_kernel<1>, rate_kernel<2>};
  for (int kind = 0; kind < 3; ++kind) {
    constexpr int kBlockWarps = 8;
    int per_sm = 0;  // one wave: the resident blocks of every SM
    DSV4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels[kind], 32 * kBlockWarps, 0));
    auto launch = [&] {
      kernels[kind]<<<sms * per_sm, 32 * kBlockWarps>>>(iters, 12345u, sink);
      DSV4_CUDA_LAUNCH_CHECK();
    };
    const float us = dev::time_launches(launch, 5, 0);
    const double rate = double(per_sm) * kBlockWarps * iters * 8 / (us * 1e-6);
    std::printf("%s (%d warps an SM): %.3g mma/s per SM (warp-level), %.3g K x 128 outputs/s per SM, %.2f ns per "
                "mma per SM\n",
                names[kind], per_sm * kBlockWarps, rate, rate * ks[kind], 1e9 / rate);
  }
  DSV4_CUDA_CHECK(cudaFree(sink));
}

int run(int, char**) {
  alignment();
  random_sums();
  rates();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-fp8-mma", argc, argv, run); }
