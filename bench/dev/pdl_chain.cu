// dsv4-dev-pdl: what Programmatic Dependent Launch (kernels/cuda/launch.cuh) saves at kernel
// boundaries, llm.c dev/cuda style. A chain of `links` dependent GEMVs — link i computes
// x_i = W_i x_{i-1} over its own bf16 matrix W_i [K, K] (K 2048: 8 MB, K 4096: 32 MB; every
// link streams its own matrix, so nothing is served from the 50 MB L2; K 256: 128 KB, a link
// of almost no work, whose time is a dependent kernel's latency in the graph — what each of
// a decode step's ~20 small kernels a layer costs on its critical path) — is captured into a
// CUDA graph and replayed three ways:
//   off           plain launches: each link starts after the previous one has ended;
//   pdl           the PDL attribute, the link waits (griddepcontrol.wait) before it loads
//                 anything, then releases its dependents: the next link's blocks are
//                 scheduled while this one runs, so launch and block scheduling overlap;
//   pdl+prefetch  as pdl, but each lane loads its whole slice of W_i into registers BEFORE
//                 the wait (weights are never written by the chain), so the first DRAM
//                 round trip overlaps the previous link too — what the engine's GEMVs do.
// Checked: every x_i of the three modes bit for bit equal (each output buffer is filled
// with NaN first, so a link that read its input early would show), and 8 sampled links
// against a host f64 reference from the device's own x_{i-1} (within 1e-5: f32 sums of K
// products, ~1e-7). Prints us per link, the weight stream's TB/s and the ratio to 4.3 TB/s.
//
// Then the L2 prefetch groups (issue 12: a decode layer's big FP8 GEMVs follow runs of
// small latency-bound kernels that leave HBM idle): a group is `gaps` K 256 links and one
// K 4096 link (32 MB, its own matrix per group, so only a prefetch can put it in L2), all
// pdl+prefetch, in one graph of `groups` groups, timed three ways:
//   none    no L2 prefetch;
//   early   a prefetch node (cp.async.bulk.prefetch.L2 over the big link's matrix before
//           its griddepcontrol.wait, then the wait and the release: one more link) first
//           in the group, so HBM streams the matrix while the gap links run;
//   late    the same node right before the big link (it overlaps one link only);
//   side    the node on a second stream forked before the gaps, joined after the big link;
//   side read  as side, with a kernel that reads the matrix (ordinary loads) instead;
// plus `gaps only` (the group without its big link), so big = group - gaps only is the big
// link's cost. Each big link's output is checked against the host, all modes bitwise equal.
// Last, the read rate of a plain streaming kernel over 32 MB - 1 GB (what 'the floor' can be).
// usage: dsv4-dev-pdl [links (200)] [reps (20)]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/cuda_check.h"
#include "base/scalar_formats.h"
#include "bench/dev/dev_bench.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/launch.cuh"

namespace {

using namespace dsv4;

constexpr int kThreads = 256, kWarps = kThreads / cuda::kWarp;  // a warp per output row
constexpr int kSampled = 8;
constexpr double kBound = 1e-5, kFloorTBs = 4.3;
constexpr int kL2Groups = 24;  // 24 x 32 MB: far beyond the 50 MB L2

enum class Mode { off, pdl, pdl_prefetch };
const char* mode_name(Mode m) { return m == Mode::off ? "off" : m == Mode::pdl ? "pdl" : "pdl+prefetch"; }

// W [rows, K] bf16 from a hash of (matrix, element): uniform codes of variance ~1/K, so
// |x_i| stays O(1) along the chain.
__global__ void fill_weights_kernel(uint16_t* w, int64_t n, uint32_t seed, float amp) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    const float u = static_cast<float>(h >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
    w[i] = static_cast<uint16_t>(__float_as_uint(u * amp) >> 16);  // bf16 by truncation
  }
}

// y[r] = sum_k W[r, k] x[k]: warp r of the grid; lane l takes the 16-byte chunks l, l + 32,
// ... of its row (kChunks of them), sums them in order, then the fixed butterfly.
template <int K, bool kPrefetch>
__global__ void __launch_bounds__(kThreads) link_kernel(const uint16_t* w, const float* x, float* y) {
  constexpr int kChunks = K / 8 / cuda::kWarp;
  const int lane = threadIdx.x % cuda::kWarp;
  const int64_t r = int64_t{blockIdx.x} * kWarps + threadIdx.x / cuda::kWarp;
  const uint4* row = reinterpret_cast<const uint4*>(w + r * K);
  // Both modes put all kChunks loads in flight before the first use, so they differ only in
  // where the wait stands: ptxas keeps loads above a griddepcontrol.wait, so pdl mode issues
  // a second one (it returns at once) after its loads, where an empty asm would not hold.
  uint4 q[kChunks];
  auto load = [&] {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) q[j] = row[lane + j * cuda::kWarp];
  };
  if (kPrefetch) load();
  cuda::pdl_wait();
  cuda::pdl_launch_dependents();
  if (!kPrefetch) {
    load();
    cuda::pdl_wait();
  }
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const float4* xs = reinterpret_cast<const float4*>(x + (lane + j * cuda::kWarp) * 8);
    const float4 a = xs[0], b = xs[1];
    const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    const uint32_t words[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
#pragma unroll
    for (int i = 0; i < 8; ++i)
      acc = fmaf(bf16_to_f32(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2)))), xv[i], acc);
  }
  acc = cuda::warp_sum(acc);
  if (lane == 0) y[r] = acc;
}

struct Chain {
  int k, links;
  uint16_t* w;  // [links][K][K]
  float* x;     // [links + 1][K]: x_0 the input, x_i link i's output
  size_t matrix() const { return size_t(k) * k; }
};

template <int K>
void launch_link(Mode m, const Chain& c, int i, cudaStream_t s) {
  const uint16_t* w = c.w + size_t(i) * c.matrix();
  const float* in = c.x + size_t(i) * K;
  float* out = c.x + size_t(i + 1) * K;
  cuda::set_pdl(m != Mode::off);
  if (m == Mode::pdl_prefetch) cuda::launch(link_kernel<K, true>, K / kWarps, kThreads, 0, s, w, in, out);
  else cuda::launch(link_kernel<K, false>, K / kWarps, kThreads, 0, s, w, in, out);
}

// The chain as one graph, captured with mode m's launches.
cudaGraphExec_t capture(Mode m, const Chain& c, cudaStream_t s) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  DSV4_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < c.links; ++i) {
    if (c.k == 256) launch_link<256>(m, c, i, s);
    else if (c.k == 2048) launch_link<2048>(m, c, i, s);
    else launch_link<4096>(m, c, i, s);
  }
  DSV4_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  DSV4_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  DSV4_CUDA_CHECK(cudaGraphDestroy(g));
  cuda::set_pdl(false);
  return e;
}

// Every x_i after one replay whose outputs started as NaN.
std::vector<float> outputs(cudaGraphExec_t e, const Chain& c, cudaStream_t s) {
  const size_t n = size_t(c.links) * c.k;
  DSV4_CUDA_CHECK(cudaMemsetAsync(c.x + c.k, 0xFF, n * sizeof(float), s));
  DSV4_CUDA_CHECK(cudaGraphLaunch(e, s));
  DSV4_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> all = dev::download(c.x, n + c.k);
  return std::vector<float>(all.begin() + c.k, all.end());
}

// Link i against the host: f64 sums of the device's W_i and x_{i-1}.
dev::Closeness check_link(const Chain& c, int i, const std::vector<float>& x) {
  std::vector<uint16_t> w(c.matrix());
  DSV4_CUDA_CHECK(cudaMemcpy(w.data(), c.w + size_t(i) * c.matrix(), w.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> in = i == 0 ? dev::download(c.x, c.k) : std::vector<float>(x.begin() + size_t(i - 1) * c.k,
                                                                                 x.begin() + size_t(i) * c.k);
  std::vector<double> ref(c.k);
  for (int r = 0; r < c.k; ++r) {
    double s = 0;
    for (int j = 0; j < c.k; ++j) s += double(bf16_to_f32(w[size_t(r) * c.k + j])) * in[j];
    ref[r] = s;
  }
  return dev::closeness(ref.data(), x.data() + size_t(i) * c.k, c.k);
}

bool run_size(int k, int links, int reps, cudaStream_t s) {
  Chain c{k, links, dev::device_alloc<uint16_t>(size_t(links) * k * k), dev::device_alloc<float>(size_t(links + 1) * k)};
  for (int i = 0; i < links; ++i)
    fill_weights_kernel<<<1024, kThreads, 0, s>>>(c.w + size_t(i) * c.matrix(), int64_t(c.matrix()),
                                                  0x5EEDu + 7919u * i, std::sqrt(3.0f / k));
  DSV4_CUDA_CHECK(cudaGetLastError());
  std::vector<float> x0(k);
  for (int j = 0; j < k; ++j) x0[j] = std::sin(0.37f * j) + 0.25f;
  DSV4_CUDA_CHECK(cudaMemcpy(c.x, x0.data(), k * sizeof(float), cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaDeviceSynchronize());

  const double bytes = double(c.matrix()) * 2;
  bool ok = true;
  std::vector<float> first;
  for (Mode m : {Mode::off, Mode::pdl, Mode::pdl_prefetch}) {
    cudaGraphExec_t e = capture(m, c, s);
    const std::vector<float> x = outputs(e, c, s);
    bool same = true;
    if (first.empty()) first = x;
    else same = std::memcmp(first.data(), x.data(), x.size() * sizeof(float)) == 0;
    double worst = 0;
    for (int t = 0; t < kSampled; ++t) {
      const dev::Closeness d = check_link(c, t * (links - 1) / (kSampled - 1), x);
      worst = std::max({worst, d.rel_l2, d.max_norm});
    }
    const float us = dev::time_launches([&] { DSV4_CUDA_CHECK(cudaGraphLaunch(e, s)); }, reps, s) / links;
    const double tbs = bytes / (us * 1e-6) / 1e12;
    const bool pass = same && worst <= kBound;
    ok = ok && pass;
    std::printf("K %4d (%4.1f MB) %-13s %8.2f us/link %6.2f TB/s %5.2fx floor  bitwise=%s host=%.1e %s\n", k,
                bytes / 1e6, mode_name(m), us, tbs, us / (bytes / (kFloorTBs * 1e12) * 1e6), same ? "yes" : "NO",
                worst, pass ? "ok" : "FAIL");
    DSV4_CUDA_CHECK(cudaGraphExecDestroy(e));
  }
  DSV4_CUDA_CHECK(cudaFree(c.w));
  DSV4_CUDA_CHECK(cudaFree(c.x));
  return ok;
}

// ---- L2 prefetch groups ----

constexpr int kPrefetchThreads = 32;
constexpr int64_t kPrefetchPiece = 8 << 10;  // bytes per cp.async.bulk.prefetch.L2: a thread one piece

// Issues L2 prefetches of [p, p + bytes) (16-byte aligned, a multiple of 16), one piece a
// thread, the grid spread over every SM: an SM's bulk-copy unit works through its queue at
// well below HBM's rate (call 1: 512 pieces of 64 KiB from 4 blocks took ~50 us for 32 MB).
// It releases its dependents first (their own waits still wait for this grid, which waits
// for its primary: the chain's transitivity holds) and reads nothing a kernel writes.
__global__ void __launch_bounds__(kPrefetchThreads) prefetch_l2_kernel(const uint8_t* p, int64_t bytes) {
  cuda::pdl_launch_dependents();
  const int64_t o = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kPrefetchPiece;
  if (o < bytes) {
    const uint32_t n = static_cast<uint32_t>(bytes - o < kPrefetchPiece ? bytes - o : kPrefetchPiece);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p + o), "r"(n) : "memory");
#endif
  }
  cuda::pdl_wait();
}

// The side_read placement's node: reads every 16-byte chunk of [p, p + bytes) through the
// ordinary load path (L2 allocating), so the lines are in L2 whether or not a bulk prefetch
// would have put them there; the xor of the chunks goes to *sink only if it is a value no
// weight fill makes (never), which keeps the loads alive.
constexpr int kReadThreads = 256, kReadBlocks = 264;
__global__ void __launch_bounds__(kReadThreads) read_l2_kernel(const uint4* p, int64_t chunks, uint32_t* sink) {
  uint32_t x = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < chunks; i += int64_t{gridDim.x} * blockDim.x) {
    const uint4 v = p[i];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x7FC0FFEEu) *sink = x;
}

enum class Place { none, early, late, side, side_read, gaps_only };
const char* place_name(Place p) {
  return p == Place::none    ? "none"
         : p == Place::early ? "early"
         : p == Place::late  ? "late"
         : p == Place::side  ? "side"
         : p == Place::side_read ? "side read"
                             : "gaps only";
}

struct Groups {
  int gaps, groups;
  uint16_t* small;  // [gaps][256][256], shared by the groups (L2-resident: latency links)
  uint16_t* big;    // [groups][4096][4096]
  float* x_small;   // [256] input of every gap link
  float* y_small;   // [gaps * groups][256]
  float* x_big;     // [4096]
  float* y_big;     // [groups][4096]
  uint32_t* sink;   // read_l2_kernel's never-taken store
  static constexpr size_t kBigMatrix = size_t{4096} * 4096, kSmallMatrix = size_t{256} * 256;
};

void launch_prefetch(const uint16_t* w, cudaStream_t s) {
  const int64_t bytes = int64_t(Groups::kBigMatrix) * 2;
  const int grid = static_cast<int>((bytes / kPrefetchPiece + kPrefetchThreads - 1) / kPrefetchThreads);
  cuda::launch(prefetch_l2_kernel, grid, kPrefetchThreads, 0, s, reinterpret_cast<const uint8_t*>(w), bytes);
}

// side: the prefetch node on a second stream forked before the gaps (a full dependency on
// the previous group's big link) and joined after this group's big link.
cudaGraphExec_t capture_groups(Place place, const Groups& c, cudaStream_t s) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t fork = nullptr, done = nullptr;
  DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  cuda::set_pdl(true);
  DSV4_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < c.groups; ++i) {
    const uint16_t* big = c.big + size_t(i) * Groups::kBigMatrix;
    if (place == Place::early) launch_prefetch(big, s);
    if (place == Place::side || place == Place::side_read) {
      DSV4_CUDA_CHECK(cudaEventRecord(fork, s));
      DSV4_CUDA_CHECK(cudaStreamWaitEvent(side, fork, 0));
      if (place == Place::side) launch_prefetch(big, side);
      else
        read_l2_kernel<<<kReadBlocks, kReadThreads, 0, side>>>(reinterpret_cast<const uint4*>(big),
                                                                int64_t(Groups::kBigMatrix) * 2 / 16, c.sink);
      DSV4_CUDA_CHECK(cudaEventRecord(done, side));
    }
    for (int j = 0; j < c.gaps; ++j)
      cuda::launch(link_kernel<256, true>, 256 / kWarps, kThreads, 0, s, c.small + size_t(j) * Groups::kSmallMatrix,
                   c.x_small, c.y_small + size_t(i * c.gaps + j) * 256);
    if (place == Place::gaps_only) continue;
    if (place == Place::late) launch_prefetch(big, s);
    cuda::launch(link_kernel<4096, true>, 4096 / kWarps, kThreads, 0, s, big, c.x_big, c.y_big + size_t(i) * 4096);
    if (place == Place::side || place == Place::side_read) DSV4_CUDA_CHECK(cudaStreamWaitEvent(s, done, 0));
  }
  DSV4_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  DSV4_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  DSV4_CUDA_CHECK(cudaGraphDestroy(g));
  cuda::set_pdl(false);
  DSV4_CUDA_CHECK(cudaEventDestroy(fork));
  DSV4_CUDA_CHECK(cudaEventDestroy(done));
  DSV4_CUDA_CHECK(cudaStreamDestroy(side));
  return e;
}

// Big link i's output against a host f64 sum of its matrix and x_big.
double check_big(const Groups& c, int i, const std::vector<float>& y, const std::vector<float>& x) {
  std::vector<uint16_t> w(Groups::kBigMatrix);
  DSV4_CUDA_CHECK(cudaMemcpy(w.data(), c.big + size_t(i) * Groups::kBigMatrix, w.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<double> ref(4096);
  for (int r = 0; r < 4096; ++r) {
    double acc = 0;
    for (int j = 0; j < 4096; ++j) acc += double(bf16_to_f32(w[size_t(r) * 4096 + j])) * x[j];
    ref[r] = acc;
  }
  const dev::Closeness d = dev::closeness(ref.data(), y.data() + size_t(i) * 4096, 4096);
  return std::max(d.rel_l2, d.max_norm);
}

bool run_groups(int gaps, int groups, int reps, cudaStream_t s) {
  Groups c{gaps, groups, dev::device_alloc<uint16_t>(size_t(gaps) * Groups::kSmallMatrix),
           dev::device_alloc<uint16_t>(size_t(groups) * Groups::kBigMatrix), dev::device_alloc<float>(256),
           dev::device_alloc<float>(size_t(gaps) * groups * 256), dev::device_alloc<float>(4096),
           dev::device_alloc<float>(size_t(groups) * 4096), dev::device_alloc<uint32_t>(1)};
  for (int j = 0; j < gaps; ++j)
    fill_weights_kernel<<<64, kThreads, 0, s>>>(c.small + size_t(j) * Groups::kSmallMatrix,
                                                int64_t(Groups::kSmallMatrix), 0xA11u + 31u * j, std::sqrt(3.0f / 256));
  for (int i = 0; i < groups; ++i)
    fill_weights_kernel<<<1024, kThreads, 0, s>>>(c.big + size_t(i) * Groups::kBigMatrix, int64_t(Groups::kBigMatrix),
                                                  0xB16u + 7919u * i, std::sqrt(3.0f / 4096));
  DSV4_CUDA_CHECK(cudaGetLastError());
  std::vector<float> xs(256), xb(4096);
  for (int j = 0; j < 256; ++j) xs[j] = std::cos(0.11f * j);
  for (int j = 0; j < 4096; ++j) xb[j] = std::sin(0.37f * j) + 0.25f;
  DSV4_CUDA_CHECK(cudaMemcpy(c.x_small, xs.data(), xs.size() * 4, cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaMemcpy(c.x_big, xb.data(), xb.size() * 4, cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaDeviceSynchronize());

  bool ok = true;
  float gaps_us = 0;
  std::vector<float> first;
  for (Place p : {Place::gaps_only, Place::none, Place::early, Place::late, Place::side, Place::side_read}) {
    cudaGraphExec_t e = capture_groups(p, c, s);
    DSV4_CUDA_CHECK(cudaMemsetAsync(c.y_big, 0xFF, size_t(groups) * 4096 * 4, s));
    DSV4_CUDA_CHECK(cudaGraphLaunch(e, s));
    DSV4_CUDA_CHECK(cudaStreamSynchronize(s));
    const float us = dev::time_launches([&] { DSV4_CUDA_CHECK(cudaGraphLaunch(e, s)); }, reps, s) / groups;
    DSV4_CUDA_CHECK(cudaGraphExecDestroy(e));
    if (p == Place::gaps_only) {
      gaps_us = us;
      std::printf("gaps %2d  %-9s %8.2f us/group\n", gaps, place_name(p), us);
      continue;
    }
    const std::vector<float> y = dev::download(c.y_big, size_t(groups) * 4096);
    bool same = true;
    if (first.empty()) first = y;
    else same = std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0;
    double worst = 0;
    for (int t = 0; t < 3; ++t) worst = std::max(worst, check_big(c, t * (groups - 1) / 2, y, xb));
    const double big_us = us - gaps_us, tbs = double(Groups::kBigMatrix) * 2 / (big_us * 1e-6) / 1e12;
    const bool pass = same && worst <= kBound;
    ok = ok && pass;
    std::printf("gaps %2d  %-9s %8.2f us/group  big link %6.2f us (%5.2f TB/s)  bitwise=%s host=%.1e %s\n", gaps,
                place_name(p), us, big_us, tbs, same ? "yes" : "NO", worst, pass ? "ok" : "FAIL");
  }
  for (void* q : {(void*)c.small, (void*)c.big, (void*)c.x_small, (void*)c.y_small, (void*)c.x_big, (void*)c.y_big, (void*)c.sink})
    DSV4_CUDA_CHECK(cudaFree(q));
  return ok;
}

// The read rate a plain streaming kernel reaches (the floor's 4.3 TB/s is an assumption):
// read_l2_kernel over `bytes` at rotating offsets of a 4 GiB buffer (so L2 holds none of
// it), blocks x 256 threads, timed one launch after another (no graph).
void stream_rates(int reps, cudaStream_t s) {
  const int64_t total = int64_t{4} << 30;
  uint8_t* buf = dev::device_alloc<uint8_t>(size_t(total));
  uint32_t* sink = dev::device_alloc<uint32_t>(1);
  DSV4_CUDA_CHECK(cudaMemsetAsync(buf, 1, size_t(total), s));
  for (int64_t bytes : {int64_t{32} << 20, int64_t{256} << 20, int64_t{1} << 30})
    for (int blocks : {kReadBlocks, 4 * kReadBlocks}) {
      const int64_t slots = total / bytes;
      int i = 0;
      const float us = dev::time_launches([&] {
        read_l2_kernel<<<blocks, kReadThreads, 0, s>>>(reinterpret_cast<const uint4*>(buf + (i++ % slots) * bytes),
                                                        bytes / 16, sink);
      }, reps, s);
      std::printf("stream read %5lld MB  %4d blocks  %9.2f us  %5.2f TB/s\n", static_cast<long long>(bytes >> 20),
                  blocks, us, double(bytes) / (us * 1e-6) / 1e12);
    }
  DSV4_CUDA_CHECK(cudaFree(buf));
  DSV4_CUDA_CHECK(cudaFree(sink));
}

int run(int argc, char** argv) {
  const int links = argc > 1 ? std::atoi(argv[1]) : 200, reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (links < kSampled || reps < 1) {
    std::fprintf(stderr, "usage: dsv4-dev-pdl [links >= %d] [reps >= 1]\n", kSampled);
    return 2;
  }
  cudaStream_t s;
  DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("dsv4-dev-pdl: %d dependent GEMV links per graph, %d replays, %d SMs\n", links, reps, dev::device_sms());
  bool ok = true;
  for (int k : {256, 2048, 4096}) ok = run_size(k, links, reps, s) && ok;
  std::printf("L2 prefetch groups: %d groups of K 256 gap links + one 32 MB link\n", kL2Groups);
  for (int gaps : {2, 4, 8, 16}) ok = run_groups(gaps, kL2Groups, reps, s) && ok;
  stream_rates(reps, s);
  DSV4_CUDA_CHECK(cudaStreamDestroy(s));
  std::printf("%s\n", ok ? "all modes bitwise equal and within the host bound" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-pdl", argc, argv, run); }
