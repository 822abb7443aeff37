// dsv4-dev-moe: the decode MoE's routed-expert kernels (kernels/cuda/moe_experts.cuh) in
// variants (llm.c dev/cuda style) at the Flash shapes: hidden 4096, inter 2048, 256
// experts, 6 a row, 1 / 2 / 4 / 6 / 8 rows (plain decode and verify rounds), MXFP4 and
// NVFP4, activations bf16-exact (P = 1 plane) and f32 (P = 3). "shipped" is
// expert_mma_kernel (moe.cu), which places the e2m1 codes' bits (expert_mma.cuh
// e2m1x8_to_bf16x2_placed); "lookup" decodes them by prmt lookups (its knob, moe_experts.cuh
// MmaKnobs; the other knobs measured at 3c8d2b5 lost and were dropped). Both feed the same
// products in the same K order, so lookup must equal the shipped output bit for bit
// ("=shipped"). Every variant is also checked against a host
// reference (f64 sums of the decoded weights, CHECKPOINT.md §3.5-§3.7; every 8th output
// row) at the twin test's f32-order bound, 1e-5 in rel_l2 and max_norm.
// At P = 1 the "fp4 v<N> R2" / "R3" / "R4" arms are the fragment-layout kernel
// (kernels/cuda/expert_fp4.cuh: weights relaid once, fp16 mma, scales after the mma),
// variant N (FragVariant: v0 lookup, v1 table, v2 paired: on weights relaid in its own
// code layout), with a cp.async ring of 2 / 3 / 4 slots a
// warp, on the same activations as §4.9 e4m3 values and block scales (act_fp16_rows,
// untimed: the shipped native path quantizes too). Their K order is their own, so against
// the shipped output they print the closeness ("vs shipped", ~1e-7), not bits; each checks
// its rows of the T-row call equal to the rows computed alone, bit for bit ("rows=alone";
// SPECDECODE.md §6.3 R-I3), and its output equal to v0's at ring 2, bit for bit ("=v0").
// The up projection (w1, w3 + SwiGLU) and the down one (w2) are timed apart, as the
// median of 7 batches of `reps` launches; each launch reads another set of experts (5
// disjoint sets of 48, 3 GB in all), so the weights come from HBM, not the 50 MB L2.
// TB/s counts the distinct experts' packed bytes and scales once per launch; "of 4.3" is
// the ratio to the H200's HBM bandwidth.
// usage: dsv4-dev-moe [reps]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "base/cuda_check.h"
#include "bench/dev/dev_bench.h"
#include "base/scalar_formats.h"
#include "kernels/cuda/expert_fp4.cuh"
#include "kernels/cuda/moe_experts.cuh"

namespace {

using namespace dsv4;
using dev::device_copy;

constexpr int kHidden = 4096, kInter = 2048, kExperts = 256, kTop = 6, kMaxRows = 8;
constexpr int kSets = 5;             // disjoint expert sets the timed launches rotate through
constexpr int kSetExperts = kMaxRows * kTop;
constexpr int kCheckStride = 8;      // host reference on output rows m % 8 == 3
constexpr double kTolerance = 1e-5;  // test_moe_twin.cpp: exact products, another f32 order
constexpr double kHbm = 4.3e12;
constexpr float kLimit = 10.0f;      // SwiGLU clamp (D16)

// The synthetic weights: byte i of stream (expert, projection, part) is a hash, so the
// host reference decodes the same bytes the device holds without a copy.
__host__ __device__ inline uint8_t hashed_byte(uint64_t stream, uint64_t i) {
  uint64_t z = stream * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint8_t>(z ^ (z >> 31));
}
__host__ __device__ inline uint64_t stream_of(int expert, int proj, bool scales) {
  return (uint64_t(expert) * 3 + proj) * 2 + scales;
}
// Scale codes of typical magnitude, no NaN: e8m0 2^-6 .. 2^1 (MXFP4), e4m3 0.25 .. 15 (NVFP4).
__host__ __device__ inline uint8_t scale_code(bool nv, uint8_t h) { return nv ? 0x28 + h % 0x30 : 121 + h % 8; }

__global__ void fill_kernel(uint8_t* p, int64_t n, uint64_t stream, int kind) {  // kind 0 packed, 1 mx, 2 nv
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint8_t h = hashed_byte(stream, i);
    p[i] = kind == 0 ? h : scale_code(kind == 2, h);
  }
}

struct Recipe {
  const char* name;
  bool nv;
  int group() const { return nv ? 16 : 32; }
};

// Projection j of an expert: 0 w1 [I, H], 1 w3 [I, H], 2 w2 [H, I].
int proj_rows(int j) { return j == 2 ? kHidden : kInter; }
int proj_cols(int j) { return j == 2 ? kInter : kHidden; }

// The device experts of one recipe.
struct Experts {
  Recipe r;
  std::vector<cuda::ExpertW> host;
  cuda::ExpertW* table = nullptr;
  std::vector<void*> owned;
  explicit Experts(Recipe recipe) : r(recipe), host(kExperts) {
    for (int e = 0; e < kExperts; ++e) {
      cuda::Fp4W w[3];
      for (int j = 0; j < 3; ++j) {
        const int64_t rows = proj_rows(j), cols = proj_cols(j);
        w[j].packed = alloc_filled(rows * cols / 2, stream_of(e, j, false), 0);
        w[j].scales = alloc_filled(rows * cols / r.group(), stream_of(e, j, true), r.nv ? 2 : 1);
        w[j].cols = cols;
        w[j].group = r.group();
        w[j].nv = r.nv;
      }
      host[e] = cuda::ExpertW{w[0], w[1], w[2]};
    }
    DSV4_CUDA_CHECK(cudaMalloc(&table, sizeof(cuda::ExpertW) * kExperts));
    owned.push_back(table);
    DSV4_CUDA_CHECK(cudaMemcpy(table, host.data(), sizeof(cuda::ExpertW) * kExperts, cudaMemcpyHostToDevice));
  }
  ~Experts() {
    for (void* p : owned) cudaFree(p);
  }
  Experts(const Experts&) = delete;
  Experts& operator=(const Experts&) = delete;
  const uint8_t* alloc_filled(int64_t n, uint64_t stream, int kind) {
    uint8_t* p = nullptr;
    DSV4_CUDA_CHECK(cudaMalloc(&p, n));
    owned.push_back(p);
    fill_kernel<<<1024, 256>>>(p, n, stream, kind);
    DSV4_CUDA_LAUNCH_CHECK();
    return p;
  }
  // W_j(r, c) of expert e, decoded on the host from the same hashed bytes (§3.5-§3.7;
  // weight_scale_2 is 1).
  double weight(int e, int j, int64_t row, int64_t c) const {
    const int64_t i = row * proj_cols(j) + c;
    const uint8_t b = hashed_byte(stream_of(e, j, false), i / 2);
    const uint8_t code = scale_code(r.nv, hashed_byte(stream_of(e, j, true), i / group()));
    return double(e2m1_to_f32(c % 2 ? b >> 4 : b & 0xF)) * (r.nv ? e4m3_to_f32(code) : e8m0_to_f32(code));
  }
  int group() const { return r.group(); }
};

// Set s's routing: row t's six experts (distinct; rows 0-3 share three, as a verify round
// of a repeated phrase would), all inside the set's 48 experts.
std::vector<int32_t> routing(int set) {
  std::vector<int32_t> sel;
  for (int t = 0; t < kMaxRows; ++t)
    for (int j = 0; j < kTop; ++j) {
      const int local = t < 4 && j < 3 ? j : 3 + (t * kTop + j) % (kSetExperts - 3);
      sel.push_back(set * kSetExperts + local);
    }
  return sel;
}

// One call's work list (the device grouping of moe.cu) for rows first .. first + rows - 1 of a set.
struct Work {
  cuda::Tiles tiles{};
  int32_t* sel = nullptr;
  int64_t max_tiles = 0;
  std::vector<int32_t> sel_host;
  void* owned[4] = {};
  Work(const Experts& x, int set, int rows, cudaStream_t s, int first = 0) : sel_host(routing(set)) {
    sel_host.erase(sel_host.begin(), sel_host.begin() + static_cast<size_t>(first) * kTop);
    sel_host.resize(static_cast<size_t>(rows) * kTop);
    const int slots = rows * kTop;
    max_tiles = cuda::max_tiles(slots, kExperts);
    DSV4_CUDA_CHECK(cudaMalloc(&owned[0], sizeof(cuda::ExpertW) * max_tiles));
    DSV4_CUDA_CHECK(cudaMalloc(&owned[1], sizeof(int32_t)));
    DSV4_CUDA_CHECK(cudaMalloc(&owned[2], sizeof(int32_t) * max_tiles * cuda::kMmaCols));
    DSV4_CUDA_CHECK(cudaMalloc(&owned[3], sizeof(int32_t) * slots));
    tiles = {static_cast<cuda::ExpertW*>(owned[0]), static_cast<int32_t*>(owned[1]), static_cast<int32_t*>(owned[2])};
    sel = static_cast<int32_t*>(owned[3]);
    DSV4_CUDA_CHECK(cudaMemcpy(sel, sel_host.data(), sizeof(int32_t) * slots, cudaMemcpyHostToDevice));
    cuda::group_slots(sel, slots, x.table, kExperts, tiles, s);
  }
  ~Work() {
    for (void* p : owned) cudaFree(p);
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  int distinct() const { return static_cast<int>(std::set<int32_t>(sel_host.begin(), sel_host.end()).size()); }
};

// Activations of the up (x [8, H]) and down (h [48, I]) kernels: normals / 32, so the
// projections' sums stay O(1) (inside the SwiGLU clamp); for P = 1 the §4.9 values of
// each 128-block (e4m3(v / s) s, s = pow2ceil(amax / 448): exact in one bf16 plane, and
// what act_fp16_rows reproduces exactly as e4m3 values and s), f32 for P = 3.
std::vector<float> activations(int64_t n, int planes, uint64_t stream) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    // Box-Muller on two hashed 16-bit uniforms.
    const double u1 = (hashed_byte(stream, 4 * i) * 256.0 + hashed_byte(stream, 4 * i + 1) + 1) / 65537.0;
    const double u2 = (hashed_byte(stream, 4 * i + 2) * 256.0 + hashed_byte(stream, 4 * i + 3)) / 65536.0;
    v[i] = static_cast<float>(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2) / 32);
  }
  constexpr int kBlock = 128;
  for (int64_t b = 0; planes == 1 && b < n; b += kBlock) {
    float amax = 0;
    for (int64_t i = b; i < b + kBlock; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float s = pow2ceil(amax / 448.0f);
    for (int64_t i = b; i < b + kBlock; ++i) v[i] = e4m3_round(v[i] / s) * s;
  }
  return v;
}

// The host reference of set 0's 48 slots on the checked output rows (m % kCheckStride ==
// 3), [slot][row / kCheckStride]: up (nw 2) swiglu(g, u) with the slot's routing weight
// (§4.23 steps 2-4 in f32, as cuda::swiglu), down (nw 1) the w2 product; f64 sums.
std::vector<float> reference(const Experts& x, int nw, const std::vector<float>& act, const std::vector<float>& wt) {
  const int64_t m = nw == 2 ? kInter : kHidden, k = nw == 2 ? kHidden : kInter;
  const std::vector<int32_t> sel = routing(0);
  std::vector<float> ref;
  for (size_t s = 0; s < sel.size(); ++s) {
    const float* a = act.data() + (nw == 2 ? s / kTop : s) * k;
    for (int64_t r = 3; r < m; r += kCheckStride) {
      double p[2] = {0, 0};
      for (int j = 0; j < nw; ++j)
        for (int64_t c = 0; c < k; ++c) p[j] += x.weight(sel[s], nw == 2 ? j : 2, r, c) * a[c];
      if (nw == 1) {
        ref.push_back(static_cast<float>(p[0]));
        continue;
      }
      const float g = std::min(static_cast<float>(p[0]), kLimit);
      const float u = std::clamp(static_cast<float>(p[1]), -kLimit, kLimit);
      ref.push_back(wt[s] * ((g * (1.0f / (1.0f + std::exp(-g)))) * u));
    }
  }
  return ref;
}

// got [slots, m] on the checked rows against the reference's first slots (the host
// reference holds every kCheckStride-th output row from row 3).
dev::Closeness closeness(const std::vector<float>& ref, const std::vector<float>& got, int64_t m) {
  const int64_t checked = m / kCheckStride, slots = static_cast<int64_t>(got.size()) / m;
  std::vector<float> sampled;
  sampled.reserve(slots * checked);
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t i = 0; i < checked; ++i) sampled.push_back(got[s * m + 3 + i * kCheckStride]);
  return dev::closeness(ref.data(), sampled.data(), sampled.size());  // the reference's first slots
}

float median_us(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `launch(set)` over batches of `reps` launches rotating through the sets.
template <class Launch>
float time_us(Launch launch, int reps, cudaStream_t s) {
  cudaEvent_t t0, t1;
  DSV4_CUDA_CHECK(cudaEventCreate(&t0));
  DSV4_CUDA_CHECK(cudaEventCreate(&t1));
  for (int set = 0; set < kSets; ++set) launch(set);  // warm-up
  std::vector<float> batches;
  for (int b = 0; b < 7; ++b) {
    DSV4_CUDA_CHECK(cudaEventRecord(t0, s));
    for (int i = 0; i < reps; ++i) launch(i % kSets);
    DSV4_CUDA_CHECK(cudaEventRecord(t1, s));
    DSV4_CUDA_CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    DSV4_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
    batches.push_back(ms * 1000.0f / reps);
  }
  DSV4_CUDA_CHECK(cudaEventDestroy(t0));
  DSV4_CUDA_CHECK(cudaEventDestroy(t1));
  return median_us(batches);
}

struct Variant {
  const char* name;
  cuda::ExpertKernel kernel;
};
// The shipped kernel, then its variants (moe.cu knobs_of).
constexpr Variant kVariants[] = {{"shipped", cuda::ExpertKernel::shipped}, {"lookup", cuda::ExpertKernel::lookup}};

// The fragment-layout kernel's variants (expert_fp4.cuh FragVariant), v0 first.
constexpr cuda::FragVariant kFragVariants[] = {cuda::FragVariant::lookup, cuda::FragVariant::table,
                                               cuda::FragVariant::paired};

// The fragment-layout arms' inputs at P = 1: the relaid experts in each FragCodes layout
// and the activations as act_fp16_rows gives them (e4m3 values in B order, block scales).
struct Fp4Inputs {
  const cuda::ExpertFrag* frags[2];  // [FragCodes]
  const __half* act;
  const float* act_scale;
};

// Reads back n floats of out (NaN-filled before `launch` ran, so an unwritten output fails).
template <class Launch>
std::vector<float> output_of(Launch launch, float* out, size_t n, cudaStream_t s) {
  DSV4_CUDA_CHECK(cudaMemsetAsync(out, 0xFF, n * sizeof(float), s));
  launch();
  std::vector<float> got(n);
  DSV4_CUDA_CHECK(cudaMemcpyAsync(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  DSV4_CUDA_CHECK(cudaStreamSynchronize(s));
  return got;
}

// The fragment-layout kernel at rings 2-4 on one projection: timed, against the host
// reference (the twin bound), against the shipped output (closeness: another K order), and
// each row of the call against the row alone, bit for bit. Returns false when a check failed.
bool run_fp4(const Experts& x, const std::vector<std::unique_ptr<Work>>& sets, int nw, int rows, const Fp4Inputs& in,
             const std::vector<float>& ref, const std::vector<float>& shipped, const float* wt, float* out, int reps,
             int device, cudaStream_t s) {
  const int64_t m = nw == 2 ? kInter : kHidden, k = nw == 2 ? kHidden : kInter;
  const int act_div = nw == 2 ? kTop : 1;
  const size_t n_out = static_cast<size_t>(rows) * kTop * m;
  const double bytes = double(sets[0]->distinct()) * nw * (m * k / 2 + m * k / x.group());
  // The call's arguments for work w whose first slot is slot0 of set 0's rows (its
  // activation rows and routing weights start there).
  auto args = [&](const Work& w, int slot0, cuda::FragVariant variant) {
    const int64_t act_row = slot0 / act_div;
    return cuda::FragArgs{cuda::MmaArgs{w.tiles, nullptr, act_div, m, k, out, wt ? wt + slot0 : nullptr,
                                        nw == 2 ? kLimit : 0.0f},
                          w.sel, in.frags[static_cast<int>(cuda::codes_of(variant))], in.act + act_row * k,
                          in.act_scale + act_row * (k / cuda::kKChunk)};
  };
  bool ok = true;
  std::vector<float> v0;  // the first arm's output, which every arm must equal
  for (const cuda::FragVariant variant : kFragVariants)
    for (int ring : {2, 3, 4}) {
      auto launch = [&](int set) {
        cuda::launch_expert_fp4(nw, x.r.nv, ring, args(*sets[set], 0, variant), sets[set]->max_tiles, device, s,
                                variant);
      };
      const float us = time_us(launch, reps, s);
      const std::vector<float> got = output_of([&] { launch(0); }, out, n_out, s);
      const dev::Closeness c = closeness(ref, got, m), v = dev::closeness(shipped, got);
      bool alone = true;
      for (int t = 0; t < rows; ++t) {
        const Work one(x, 0, 1, s, t);
        const std::vector<float> row = output_of(
            [&] {
              cuda::launch_expert_fp4(nw, x.r.nv, ring, args(one, t * kTop, variant), one.max_tiles, device, s, variant);
            },
            out, static_cast<size_t>(kTop) * m, s);
        alone = alone && std::memcmp(row.data(), got.data() + static_cast<size_t>(t) * kTop * m, row.size() * sizeof(float)) == 0;
      }
      if (v0.empty()) v0 = got;  // v0 R2 (the rings differ only in their copies' timing)
      const bool same = std::memcmp(v0.data(), got.data(), n_out * sizeof(float)) == 0;
      std::printf("%-4s %s P1 rows %d fp4 v%d R%d %8.2f us %5.2f TB/s %4.2f of 4.3  ref rel_l2 %.1e max_norm %.1e %s"
                  " vs shipped rel_l2 %.1e %s %s\n",
                  nw == 2 ? "up" : "down", x.r.name, rows, static_cast<int>(variant), ring, us, bytes / us / 1e6,
                  bytes / us / 1e6 / (kHbm / 1e12), c.rel_l2, c.max_norm, c.within(kTolerance) ? "ok" : "OVER-TOLERANCE",
                  v.rel_l2, alone ? "rows=alone" : "ROWS-DIFFER-FROM-ALONE", same ? "=v0" : "DIFFERS-FROM-V0");
      ok = ok && c.within(kTolerance) && v.within(kTolerance) && alone && same;
    }
  return ok;
}

// Every variant of one projection (nw 2 up, 1 down) at one recipe, plane count and row
// count, then the fragment-layout arms when fp4 is given; returns false when a check failed.
bool run_case(const Experts& x, const std::vector<std::unique_ptr<Work>>& sets, int nw, int planes, int rows,
              const float* act, const std::vector<float>& ref, const float* wt, float* out, int reps, int device,
              cudaStream_t s, const Fp4Inputs* fp4) {
  const int64_t m = nw == 2 ? kInter : kHidden, k = nw == 2 ? kHidden : kInter;
  const int act_div = nw == 2 ? kTop : 1;
  const size_t n_out = static_cast<size_t>(rows) * kTop * m;
  auto args = [&](int set) {
    return cuda::MmaArgs{sets[set]->tiles, act, act_div, m, k, out, wt, nw == 2 ? kLimit : 0.0f};
  };
  const int64_t items_max = sets[0]->max_tiles * (m / cuda::kMmaRows);
  const double bytes = double(sets[0]->distinct()) * nw * (m * k / 2 + m * k / x.group());
  std::vector<float> shipped;
  bool ok = true;
  for (const Variant& v : kVariants) {
    auto launch = [&](int set) { cuda::launch_expert_mma(v.kernel, nw, planes, args(set), items_max, device, s); };
    const float us = time_us(launch, reps, s);
    const std::vector<float> got = output_of([&] { launch(0); }, out, n_out, s);
    const dev::Closeness c = closeness(ref, got, m);
    std::printf("%-4s %s P%d rows %d %-9s %8.2f us %5.2f TB/s %4.2f of 4.3  ref rel_l2 %.1e max_norm %.1e %s",
                nw == 2 ? "up" : "down", x.r.name, planes, rows, v.name, us, bytes / us / 1e6, bytes / us / 1e6 / (kHbm / 1e12),
                c.rel_l2, c.max_norm, c.within(kTolerance) ? "ok" : "OVER-TOLERANCE");
    ok = ok && c.within(kTolerance);
    if (shipped.empty()) {
      shipped = got;
    } else {
      const bool same = std::memcmp(shipped.data(), got.data(), n_out * sizeof(float)) == 0;
      std::printf(" %s", same ? "=shipped" : "DIFFERS-FROM-SHIPPED");
      ok = ok && same;
    }
    std::printf("\n");
  }
  return fp4 ? run_fp4(x, sets, nw, rows, *fp4, ref, shipped, wt, out, reps, device, s) && ok : ok;
}

}  // namespace

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  if (reps < 1) throw std::runtime_error("reps must be >= 1");
  int device = 0;
  DSV4_CUDA_CHECK(cudaGetDevice(&device));
  cudaStream_t s;
  DSV4_CUDA_CHECK(cudaStreamCreate(&s));
  bool ok = true;
  for (const Recipe& r : {Recipe{"mxfp4", false}, Recipe{"nvfp4", true}}) {
    const Experts x(r);
    // the relayout at load, in both code layouts
    const cuda::FragExperts staggered(x.host, kHidden, kInter, s, cuda::FragCodes::staggered);
    const cuda::FragExperts paired(x.host, kHidden, kInter, s, cuda::FragCodes::paired);
    for (int planes : {1, 3}) {
      const std::vector<float> x_host = activations(int64_t{kMaxRows} * kHidden, planes, 11 + planes);
      const std::vector<float> h_host = activations(int64_t{kMaxRows} * kTop * kInter, planes, 21 + planes);
      std::vector<float> wt_host(kMaxRows * kTop);
      for (size_t i = 0; i < wt_host.size(); ++i) wt_host[i] = 0.1f + 0.05f * static_cast<float>(i % kTop);
      float* x_dev = device_copy(x_host);
      float* h_dev = device_copy(h_host);
      float* wt_dev = device_copy(wt_host);
      float* out = nullptr;
      DSV4_CUDA_CHECK(cudaMalloc(&out, sizeof(float) * kMaxRows * kTop * kHidden));
      const std::vector<float> up_ref = reference(x, 2, x_host, wt_host), down_ref = reference(x, 1, h_host, wt_host);
      // The fragment arms' activations (P = 1: §4.9 values, reproduced exactly).
      __half* xq = dev::device_alloc<__half>(x_host.size());
      __half* hq = dev::device_alloc<__half>(h_host.size());
      float* xs = dev::device_alloc<float>(x_host.size() / cuda::kKChunk);
      float* hs = dev::device_alloc<float>(h_host.size() / cuda::kKChunk);
      cuda::act_fp16_rows(x_dev, kMaxRows, kHidden, xq, xs, s);
      cuda::act_fp16_rows(h_dev, kMaxRows * kTop, kInter, hq, hs, s);
      const Fp4Inputs up_in{{staggered.table(), paired.table()}, xq, xs};
      const Fp4Inputs down_in{{staggered.table(), paired.table()}, hq, hs};
      for (int rows : {1, 2, 4, 6, 8}) {
        std::vector<std::unique_ptr<Work>> sets;
        for (int set = 0; set < kSets; ++set) sets.push_back(std::make_unique<Work>(x, set, rows, s));
        ok = run_case(x, sets, 2, planes, rows, x_dev, up_ref, wt_dev, out, reps, device, s,
                      planes == 1 ? &up_in : nullptr) && ok;
        ok = run_case(x, sets, 1, planes, rows, h_dev, down_ref, nullptr, out, reps, device, s,
                      planes == 1 ? &down_in : nullptr) && ok;
      }
      for (float* p : {x_dev, h_dev, wt_dev, out, xs, hs}) DSV4_CUDA_CHECK(cudaFree(p));
      for (__half* p : {xq, hq}) DSV4_CUDA_CHECK(cudaFree(p));
    }
  }
  std::printf("%s\n", ok ? "all variants within tolerance and equal to shipped; fp4 arms within tolerance, rows=alone, =v0"
                          : "SOME VARIANT FAILED A CHECK");
  return ok ? 0 : 1;
}

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-moe", argc, argv, run_all); }
