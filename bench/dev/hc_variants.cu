// dsv4-dev-hc: hc_pre's mix partials and collapse (MODEL.md §4.4 steps 1-3) at the Flash
// shapes (hc 4, hidden 4096: h rows of 16,384, fn [24, 16384]) on 1, 8, 1024 and 2048 rows,
// llm.c dev/cuda style. "shipped" is hc.cu's kernels (what CudaOps::hc_pre runs below 64
// rows), "tiled" hc_rows.cu's row-tiled ones (cuda::HcKernels::row_tiled; their collapse is
// what it runs from 64), "quads" the same with the mix four rows a thread (row_quads; its
// line also gives the mix's speed-up over tiled), and from 64 rows "dmma" (the mix on the
// f64 tensor cores, cuda::HcKernels::dmma, what CudaOps::hc_pre runs from 64 rows: the f64
// sums in another order, so held to kDmmaBound of the
// shipped partials and the CPU's mixes, not to their bits) and "dmma2" (dmma_pairs: its
// bits, two slices a block, a 16-byte store per two partials). Each is timed alone (mix, collapse), the
// tiled outputs compared bit for bit with the shipped ones (every partial, every y), and
// both checked on 8 sampled rows against the CPU oracle (kernels/cpu/hc.h): the mixes
// from the partials (summed on the host) within 1e-11 of max |mix| (f64 sums of 16,384
// products in two orders: ~1e-14), y within the twin test's 1e-6. The whole op at the
// model's shapes: dsv4-bench-ops --rows 1024 (hc_pre, its split on the side stream).
// GFLOP/s counts the mix's multiply-adds (2 x 25 x 16,384 a row); GB/s h's bytes once (the
// partials it writes, 25 x 128 doubles a row, are 0.4x more).
// hc_post (§4.5) from 64 rows: hc_rows.cu's kernel (cuda::hc_post_rows, what CudaOps::hc_post
// runs there) timed and compared bit for bit with cpu_hc_post (the shipped kernel's bits:
// both are the CPU's f32 operations; the shipped one's time: dsv4-bench-ops hc_post); GB/s
// counts x, res and out once (the floor: 144 MB at 1,024 rows, ~33 us at 4.3 TB/s).
// hc_pre_norm's fused kernels (issue 12, hc_pre_norm.cuh) at 1, 2 and 4 rows: "last_block"
// (the one-block tail) is the reference, "cluster4" / "cluster8" (the tail on a thread-block
// cluster) are compared with it bit for bit (y, x and every partial); each timed as plain
// back-to-back launches ("us") and as a CUDA graph of 20 launches with the PDL attribute
// ("graph+pdl": the step graph's setting, the next launch loading its weights while this one
// runs), its ticket checked back at 0 after both; "clusters resident" is how many of the
// grid's clusters the device holds at once (fewer than the grid's: the mix runs in two waves).
// usage: dsv4-dev-hc [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "bench/dev/dev_bench.h"
#include "base/scalar_formats.h"
#include "kernels/cpu/hc.h"
#include "kernels/cuda/hc_pre_norm.cuh"
#include "kernels/cuda/hc_rows.cuh"
#include "kernels/cuda/launch.cuh"

namespace {

using namespace dsv4;
using dev::device_alloc;
using dev::device_copy;
using dev::download;

constexpr int kHc = 4, kHidden = 4096, kMixes = (2 + kHc) * kHc, kSampled = 8, kIters = 20;
constexpr int64_t kWidth = int64_t{kHc} * kHidden;
constexpr double kNormEps = 1e-6, kHcEps = 1e-6, kMixBound = 1e-11, kYBound = 1e-6;
// HcKernels::dmma's bound on its mixes (against the CPU) and partials (against shipped),
// relative to the largest |value| of each sum. The products are exact in f64 on every side;
// only the f64 summation orders differ. A slice's 128 terms take <= 127 roundings of
// <= 2^-53 of the slice's sum of |terms|, which is ~1-2x its largest |partial| here (h
// N(0,1), fn N(0, 1.6^2 / width)): <= ~3e-14 an order, 6e-14 between two. The mixes (16,384
// terms, the CPU's one running sum) measured ~1.3-1.9e-14 for the shipped order. 1e-13:
// above both; a real fault (a lost chunk, a wrong column) moves a sum by ~|h fn| ~ 1e-2.
constexpr double kDmmaBound = 1e-13;
constexpr int kGraphLinks = 20;  // hc_pre_norm launches in its timed graph

// The weights and one problem's rows, on the host and the device.
struct Problem {
  int rows;
  std::vector<float> h, fn, base, scale{0.7f, 1.3f, 2.0f};
  float *d_h, *d_fn, *d_base, *d_scale;
  Problem(int n, std::mt19937& gen) : rows(n) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    h.resize(static_cast<size_t>(rows) * kWidth);
    for (float& v : h) v = normal(gen);
    fn.resize(static_cast<size_t>(kMixes) * kWidth);
    for (float& v : fn) v = normal(gen) * 1.6f / std::sqrt(static_cast<float>(kWidth));  // mixes O(1)
    for (int j = 0; j < kMixes; ++j) base.push_back(0.5f * normal(gen));
    d_h = device_copy(h);
    d_fn = device_copy(fn);
    d_base = device_copy(base);
    d_scale = device_copy(scale);
  }
  ~Problem() {
    for (float* d : {d_h, d_fn, d_base, d_scale}) DSV4_CUDA_CHECK(cudaFree(d));
  }
};

// One kernel set's outputs and times.
struct Run {
  std::vector<double> part;
  std::vector<float> y;
  float mix_us = 0, collapse_us = 0;
};

Run run(cuda::HcKernels kernels, const Problem& p, int reps, cudaStream_t s) {
  const size_t n_part = cuda::hc_part_count(p.rows, kWidth, kMixes);
  double* part = device_alloc<double>(n_part);
  float* y = device_alloc<float>(static_cast<size_t>(p.rows) * kHidden);
  Run r;
  r.mix_us = dev::time_launches(
      [&] { cuda::hc_mix_partials(kernels, p.d_h, p.rows, kWidth, p.d_fn, false, kMixes, part, s); }, reps, s);
  r.collapse_us = dev::time_launches(
      [&] {
        cuda::hc_collapse(kernels, p.d_h, part, p.rows, kHc, kHidden, kMixes, kNormEps, p.d_scale, p.d_base, false,
                          kHcEps, y, s);
      },
      reps, s);
  DSV4_CUDA_CHECK(cudaStreamSynchronize(s));
  r.part = download(part, n_part);
  r.y = download(y, static_cast<size_t>(p.rows) * kHidden);
  DSV4_CUDA_CHECK(cudaFree(part));
  DSV4_CUDA_CHECK(cudaFree(y));
  return r;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Worst mix error (over max |mix|, a row at a time) and y's closeness on the sampled rows,
// against cpu_hc_mixes / cpu_hc_split / cpu_hc_collapse.
struct Check {
  double mix = 0;
  dev::Closeness y;
};
Check check_cpu(const Problem& p, const Run& r) {
  const int64_t slices = (kWidth + 127) / 128;
  Check c;
  std::vector<float> y_ref, y_got;
  for (int i = 0; i < kSampled; ++i) {
    const int t = static_cast<int>(int64_t{i} * (p.rows - 1) / std::max(1, kSampled - 1));
    const float* ht = p.h.data() + t * kWidth;
    double ref[kMixes], raw[kMixes + 1];
    cpu_hc_mixes(ht, kWidth, p.fn.data(), kMixes, kNormEps, ref);
    for (int j = 0; j <= kMixes; ++j) {
      raw[j] = 0;
      for (int64_t s = 0; s < slices; ++s) raw[j] += r.part[(t * (kMixes + 1) + j) * slices + s];
    }
    const double rs = 1.0 / std::sqrt(raw[kMixes] / static_cast<double>(kWidth) + kNormEps);
    double err = 0, top = 0;
    for (int j = 0; j < kMixes; ++j) {
      err = std::max(err, std::fabs(raw[j] * rs - ref[j]));
      top = std::max(top, std::fabs(ref[j]));
    }
    c.mix = std::max(c.mix, err / top);
    float pre[kHc], post[kHc], comb[kHc * kHc], y[kHidden];
    cpu_hc_split(ref, kHc, p.scale.data(), p.base.data(), kHcEps, kIters, pre, post, comb);
    cpu_hc_collapse(ht, pre, kHc, kHidden, y);
    y_ref.insert(y_ref.end(), y, y + kHidden);
    y_got.insert(y_got.end(), r.y.begin() + t * kHidden, r.y.begin() + (t + 1) * kHidden);
  }
  c.y = dev::closeness(y_ref, y_got);
  return c;
}

void report(const char* name, const Problem& p, const Run& r, const Check& c, double mix_bound = kMixBound) {
  const double flop = 2.0 * p.rows * (kMixes + 1) * kWidth, bytes = 4.0 * p.rows * kWidth;
  std::printf("rows %5d %-7s mix %9.1f us %7.1f GFLOP/s %6.0f GB/s  collapse %8.1f us  total %9.1f us  "
              "cpu: mix %.1e %s y rel_l2 %.1e max_norm %.1e %s\n",
              p.rows, name, r.mix_us, flop / (r.mix_us * 1e3), bytes / (r.mix_us * 1e3), r.collapse_us,
              r.mix_us + r.collapse_us, c.mix, c.mix <= mix_bound ? "ok" : "OVER-TOLERANCE", c.y.rel_l2,
              c.y.max_norm, c.y.within(kYBound) ? "ok" : "OVER-TOLERANCE");
}

// HcKernels::dmma and dmma_pairs (the f64 tensor cores; tolerance-bound, hc_rows.cuh)
// against the shipped kernels: each line (mixes against the CPU within kDmmaBound), every
// partial within kDmmaBound of shipped's (cpu_hc_partials_gap: per sum, of its largest
// |partial|), y within kYBound of shipped's (a mix ~1e-16 apart can move a pre by one f32
// ulp, rarely); dmma_pairs' partials and y bit for bit dmma's.
bool run_dmma(const Problem& p, const Run& shipped, float quads_mix_us, int reps, cudaStream_t s) {
  bool ok = true;
  Run first;
  for (auto [kernels, name] : {std::pair{cuda::HcKernels::dmma, "dmma"}, std::pair{cuda::HcKernels::dmma_pairs, "dmma2"}}) {
    Run r = run(kernels, p, reps, s);
    const Check c = check_cpu(p, r);
    report(name, p, r, c, kDmmaBound);
    const double gap = cpu_hc_partials_gap(shipped.part.data(), r.part.data(), p.rows, kWidth, kMixes);
    const dev::Closeness y = dev::closeness(shipped.y, r.y);
    const bool same = kernels == cuda::HcKernels::dmma || (same_bits(first.part, r.part) && same_bits(first.y, r.y));
    std::printf("  %s: mix x%.2f (x%.2f quads) partials vs shipped %.1e %s y vs shipped rel_l2 %.1e max_norm %.1e "
                "%s%s%s\n",
                name, shipped.mix_us / r.mix_us, quads_mix_us / r.mix_us, gap,
                gap <= kDmmaBound ? "ok" : "OVER-TOLERANCE", y.rel_l2, y.max_norm,
                y.within(kYBound) ? "ok" : "OVER-TOLERANCE", same_bits(shipped.y, r.y) ? " (y bits=shipped)" : "",
                kernels == cuda::HcKernels::dmma ? "" : same ? " bits=dmma" : " BITS-DIFFER-FROM-DMMA");
    ok = ok && c.mix <= kDmmaBound && c.y.within(kYBound) && gap <= kDmmaBound && y.within(kYBound) && same;
    if (kernels == cuda::HcKernels::dmma) first = std::move(r);
  }
  return ok;
}

// hc_post_rows on p's rows (res = h, x and post / comb seeded), against cpu_hc_post.
bool run_post(const Problem& p, int reps, cudaStream_t s, std::mt19937& gen) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(p.rows) * kHidden), post(p.rows * kHc), comb(p.rows * kHc * kHc);
  for (auto* v : {&x, &post, &comb})
    for (float& e : *v) e = normal(gen);
  float *d_x = device_copy(x), *d_post = device_copy(post), *d_comb = device_copy(comb);
  const size_t n_out = static_cast<size_t>(p.rows) * kWidth;
  float* d_out = device_alloc<float>(n_out);
  const float us = dev::time_launches(
      [&] { cuda::hc_post_rows(d_x, p.d_h, d_post, d_comb, p.rows, kHc, kHidden, d_out, s); }, reps, s);
  DSV4_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> got = download(d_out, n_out);
  std::vector<float> ref(n_out);
  cpu_hc_post(x.data(), p.h.data(), post.data(), comb.data(), p.rows, kHc, kHidden, ref.data());
  const bool bits = same_bits(ref, got);
  std::printf("rows %5d post    %9.1f us %6.0f GB/s  %s\n", p.rows, us, 4.0 * (2 * n_out + x.size()) / (us * 1e3),
              bits ? "bits=cpu" : "BITS-DIFFER-FROM-CPU");
  for (float* d : {d_x, d_post, d_comb, d_out}) DSV4_CUDA_CHECK(cudaFree(d));
  return bits;
}

// hc_pre_norm by one fused kernel on p's rows (norm: bf16 [kHidden] on the device).
struct NormRun {
  std::vector<double> part;
  std::vector<float> y, x;
  float us = 0, graph_us = 0;
  bool ticket_reset = false;
};
NormRun run_norm(cuda::HcNormKernel kernel, const Problem& p, const uint16_t* norm, int reps, cudaStream_t s) {
  const size_t n_part = cuda::hc_part_count(p.rows, kWidth, kMixes), n_y = static_cast<size_t>(p.rows) * kHidden;
  double* part = device_alloc<double>(n_part);
  float *y = device_alloc<float>(n_y), *x = device_alloc<float>(n_y);
  unsigned* ticket = device_alloc<unsigned>(1);
  DSV4_CUDA_CHECK(cudaMemset(ticket, 0, sizeof(unsigned)));
  const cuda::HcPreNormArgs a{p.d_h,       p.rows,   kHc,  kHidden, kMixes, {p.d_fn, false}, {p.d_scale, false},
                              {p.d_base, false}, {norm, true}, kNormEps, kHcEps, ticket, part, y, x};
  const auto launch = [&] { cuda::hc_pre_norm_fused(kernel, a, s); };
  NormRun r;
  r.us = dev::time_launches(launch, reps, s);
  cuda::set_pdl(true);
  r.graph_us = dev::time_graph(launch, kGraphLinks, reps, s);
  cuda::set_pdl(false);
  DSV4_CUDA_CHECK(cudaStreamSynchronize(s));
  r.part = download(part, n_part);
  r.y = download(y, n_y);
  r.x = download(x, n_y);
  r.ticket_reset = download(ticket, 1)[0] == 0;
  for (void* d : {static_cast<void*>(part), static_cast<void*>(y), static_cast<void*>(x), static_cast<void*>(ticket)})
    DSV4_CUDA_CHECK(cudaFree(d));
  return r;
}

// The fused kernels at 1, 2 and 4 rows, each against last_block (what CudaOps::hc_pre_norm
// ran before the cluster kernels; the twin test holds it to hc_pre then rmsnorm).
bool run_pre_norm(int reps, cudaStream_t s, std::mt19937& gen) {
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<uint16_t> norm(kHidden);
  for (uint16_t& w : norm) w = static_cast<uint16_t>(f32_bits(bf16_round(normal(gen))) >> 16);
  uint16_t* d_norm = device_copy(norm);
  bool ok = true;
  for (int rows : {1, 2, 4}) {
    const Problem p(rows, gen);
    const NormRun ref = run_norm(cuda::HcNormKernel::last_block, p, d_norm, reps, s);
    std::printf("rows %5d pre_norm last_block %7.1f us  graph+pdl %7.1f us  =shipped%s\n", rows, ref.us, ref.graph_us,
                ref.ticket_reset ? "" : " TICKET-NOT-RESET");
    ok = ok && ref.ticket_reset;
    struct Variant {
      cuda::HcNormKernel kernel;
      const char* name;
      int cluster;
    };
    for (const Variant& v : {Variant{cuda::HcNormKernel::cluster4, "cluster4", 4},
                             Variant{cuda::HcNormKernel::cluster8, "cluster8", 8}}) {
      const auto [kernel, name, cluster] = v;
      if (!cuda::hc_pre_norm_takes(kernel, rows, kHc, kHidden, kMixes)) {
        std::printf("rows %5d pre_norm %-10s does not take the shape (no clusters on this device?)\n", rows, name);
        ok = false;
        continue;
      }
      const int resident = cuda::hc_pre_norm_resident_clusters(kernel, rows, kHc, kHidden, kMixes);
      const NormRun r = run_norm(kernel, p, d_norm, reps, s);
      const bool bits = same_bits(ref.part, r.part) && same_bits(ref.y, r.y) && same_bits(ref.x, r.x);
      std::printf("rows %5d pre_norm %-10s %7.1f us  graph+pdl %7.1f us  x%.2f (graph+pdl x%.2f) %s%s  "
                  "(%d clusters resident, grid %lld)\n",
                  rows, name, r.us, r.graph_us, ref.us / r.us, ref.graph_us / r.graph_us,
                  bits ? "bits=shipped" : "BITS-DIFFER-FROM-SHIPPED", r.ticket_reset ? "" : " TICKET-NOT-RESET",
                  resident, static_cast<long long>(kWidth / 128 / cluster));
      ok = ok && bits && r.ticket_reset;
    }
  }
  DSV4_CUDA_CHECK(cudaFree(d_norm));
  return ok;
}

}  // namespace

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  cudaStream_t s = nullptr;
  DSV4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::mt19937 gen(11);
  std::printf("dsv4-dev-hc on %d SMs: hc %d hidden %d (width %lld), %d mixes + the sum of squares\n",
              dev::device_sms(), kHc, kHidden, static_cast<long long>(kWidth), kMixes);
  bool all_ok = true;
  for (int rows : {1, 8, 1024, 2048}) {
    const Problem p(rows, gen);
    const Run shipped = run(cuda::HcKernels::shipped, p, reps, s);
    const Check cs = check_cpu(p, shipped);
    report("shipped", p, shipped, cs);
    all_ok = all_ok && cs.mix <= kMixBound && cs.y.within(kYBound);
    float tiled_mix_us = 0;
    float quads_mix_us = 0;
    for (auto [kernels, name] : {std::pair{cuda::HcKernels::row_tiled, "tiled"}, std::pair{cuda::HcKernels::row_quads, "quads"}}) {
      const Run tiled = run(kernels, p, reps, s);
      const Check ct = check_cpu(p, tiled);
      report(name, p, tiled, ct);
      const bool bits = same_bits(shipped.part, tiled.part) && same_bits(shipped.y, tiled.y);
      if (kernels == cuda::HcKernels::row_tiled) tiled_mix_us = tiled.mix_us;
      std::printf("  %s: mix x%.2f (x%.2f tiled) collapse x%.2f %s\n", name, shipped.mix_us / tiled.mix_us,
                  tiled_mix_us / tiled.mix_us, shipped.collapse_us / tiled.collapse_us,
                  bits ? "bits=shipped" : "BITS-DIFFER-FROM-SHIPPED");
      all_ok = all_ok && bits && ct.mix <= kMixBound && ct.y.within(kYBound);
      if (kernels == cuda::HcKernels::row_quads) quads_mix_us = tiled.mix_us;
    }
    if (rows >= 64) {  // a prefill's rows (CudaOps: kHcRowTiledFrom)
      all_ok = run_dmma(p, shipped, quads_mix_us, reps, s) && all_ok;
      all_ok = run_post(p, reps, s, gen) && all_ok;
    }
  }
  all_ok = run_pre_norm(reps, s, gen) && all_ok;
  DSV4_CUDA_CHECK(cudaStreamDestroy(s));
  std::printf("%s\n", all_ok ? "all ok" : "FAILED");
  return all_ok ? 0 : 1;
}

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-hc", argc, argv, run_all); }
