// CUDA vs CPU: hyper-connections (MODEL.md §4.4, §4.5, §4.25 steps 1-3, SPECDECODE §2.3).
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "base/cuda_check.h"
#include "kernels/cpu/hc.h"
#include "kernels/cuda/hc_pre_norm.cuh"
#include "kernels/cuda/hc_rows.cuh"
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

namespace {

constexpr int kHc = 4, kHidden = 256, kRows = 3;

struct Shape {
  int hidden, rows;
};
// A small case over two row tiles of the mix kernel (8 rows each), a prefill chunk's 300
// rows (each mix block walks several row tiles; the split's warps span many blocks), then
// Flash (hc 4, hidden 4096: fn [24, 16384]) as a decode row and a verify round.
constexpr Shape kShapes[] = {{kHidden, 11}, {kHidden, 300}, {4096, 1}, {4096, 5}};

// fn entries scaled so the mixes stay O(1) at every width (sigmoid / softmax not saturated).
float fn_sd(int hidden) { return 1.6f / std::sqrt(static_cast<float>(kHc * hidden)); }

// hc_pre's seeded parameters at width kHc * hidden (fn [m, width], base [m], scale [3]).
HcParams hc_params(Store& store, Rng& rng, int hidden) {
  const int m = (2 + kHc) * kHc;
  const int64_t width = int64_t{kHc} * hidden;
  HcParams p;
  p.fn = store.f32("hc_attn_fn", {m, width}, rng.normals(static_cast<size_t>(m * width), fn_sd(hidden)));
  p.base = store.f32("hc_attn_base", {m}, rng.normals(m, 0.5f));
  p.scale = store.f32("hc_attn_scale", {3}, {0.7f, 1.3f, 2.0f});
  return p;
}

// A case's backends, seeded generator and weight store, with h's rows of width kHc * hidden.
struct HcCase {
  Backends b;
  Rng rng;
  Store store;
  const int rows, hidden;
  const int64_t width;
  HcCase(uint64_t seed, int hidden_, int rows_)
      : rng(seed), rows(rows_), hidden(hidden_), width(int64_t{kHc} * hidden_) {}
};

}  // namespace

// Rows vs single rows: bit for bit below cuda::kHcRowTiledFrom rows (decode, verify); from
// there (the 300-row case, a prefill chunk) within the CPU bound, and row-independent.
TEST_CASE("hc_pre twin: f64 mixes, f64 Sinkhorn, f32 collapse; rows vs single rows") {
  for (const Shape& sh : kShapes) {
    HcCase c(21, sh.hidden, sh.rows);
    auto& [b, rng, store, rows, hidden, width] = c;
    const HcParams p = hc_params(store, rng, hidden);
    PairF h = put(b, rng.normals(static_cast<size_t>(rows * width)));
    PairF y = zeros(b, rows * hidden), post = zeros(b, rows * kHc), comb = zeros(b, rows * kHc * kHc);
    for (int s : {kCpu, kGpu})
      b.at(s).hc_pre(h[s], rows, kHc, hidden, p, 1e-6, 1e-6, 20, y[s], post[s], comb[s]);
    // Mixes and Sinkhorn in f64 on both sides; they differ only in the f64 dot's summation
    // order (<= ~2e-12 relative on a mix, the worst near zero, found by replaying the
    // kernel's order on the host) and exp's last bit, so pre / post / comb round to the same
    // f32 or one ulp apart (<= 1.2e-7 relative) and y moves by one pre ulp times |h|. Bound 1e-6.
    const std::string at = " hidden " + std::to_string(hidden) + " rows " + std::to_string(rows);
    check_close("hc_pre y" + at, get(b, y, kCpu), get(b, y, kGpu), 1e-6, 1e-6);
    check_close("hc_pre post" + at, get(b, post, kCpu), get(b, post, kGpu), 1e-6, 1e-6);
    check_close("hc_pre comb" + at, get(b, comb, kCpu), get(b, comb, kGpu), 1e-6, 1e-6);
    PairF y1 = zeros(b, y.n), post1 = zeros(b, post.n), comb1 = zeros(b, comb.n);
    for (int t = 0; t < rows; ++t)
      b.gpu->hc_pre(h[kGpu] + t * width, 1, kHc, hidden, p, 1e-6, 1e-6, 20, y1[kGpu] + t * hidden,
                    post1[kGpu] + t * kHc, comb1[kGpu] + t * kHc * kHc);
    const char* names[] = {"y", "post", "comb"};
    const PairF* rows_out[] = {&y, &post, &comb};
    const PairF* single[] = {&y1, &post1, &comb1};
    if (rows < cuda::kHcRowTiledFrom) {  // decode and verify rows: the single-row bits (R-I3)
      for (int i = 0; i < 3; ++i)
        check_bitwise(std::string("hc_pre ") + names[i] + " rows vs single rows" + at, get(b, *rows_out[i], kGpu),
                      get(b, *single[i], kGpu));
      continue;
    }
    // A prefill's rows: the tensor-core mix (HcKernels::dmma_pairs), its f64 sums in another order
    // than a single row's, so within the CPU bound above of the single rows; and each row's
    // bits its own: the rows from the 3rd as one call equal theirs of the whole call.
    constexpr int kShift = 3;
    const int n = rows - kShift;
    PairF y3 = zeros(b, static_cast<size_t>(n) * hidden), post3 = zeros(b, n * kHc), comb3 = zeros(b, n * kHc * kHc);
    b.gpu->hc_pre(h[kGpu] + kShift * width, n, kHc, hidden, p, 1e-6, 1e-6, 20, y3[kGpu], post3[kGpu], comb3[kGpu]);
    const PairF* shifted[] = {&y3, &post3, &comb3};
    const size_t per_row[] = {static_cast<size_t>(hidden), kHc, kHc * kHc};
    for (int i = 0; i < 3; ++i) {
      check_close(std::string("hc_pre ") + names[i] + " rows vs single rows" + at, get(b, *single[i], kGpu),
                  get(b, *rows_out[i], kGpu), 1e-6, 1e-6);
      const std::vector<float> all = get(b, *rows_out[i], kGpu);
      check_bitwise(std::string("hc_pre ") + names[i] + " rows from 3 vs rows" + at,
                    std::vector<float>(all.begin() + kShift * per_row[i], all.end()), get(b, *shifted[i], kGpu));
    }
  }
}

// hc_pre_norm (issue 12): on CUDA the bits of hc_pre then rmsnorm, in one launch up to 4
// rows (hc_pre_norm.cu: the last-block kernel at 1 row, a cluster kernel at 2-4 on sm_90)
// and by the two ops past that (5 rows); a repeated call the same bits (the last-block ticket is back
// at 0 after each launch, as a replayed step graph needs); rows vs single rows; against the
// CPU at hc_pre's bound.
TEST_CASE("hc_pre_norm twin: hc_pre then rmsnorm as one op, bit for bit; rows vs single rows") {
  // 70 rows: a device step's rows past kHcRowTiledFrom keep the shipped mix (the rows vs single
  // rows check: R-I3 at any count), where hc_pre takes the prefill's dmma mix (not compared).
  constexpr Shape kNormShapes[] = {{kHidden, 3}, {4096, 1}, {4096, 2}, {4096, 3}, {4096, 4}, {4096, 5}, {kHidden, 70}};
  for (const Shape& sh : kNormShapes) {
    HcCase c(25, sh.hidden, sh.rows);
    auto& [b, rng, store, rows, hidden, width] = c;
    const HcParams p = hc_params(store, rng, hidden);
    std::vector<float> wv = rng.normals(static_cast<size_t>(hidden), 0.5f);
    const TensorView norm = store.bf16("attn_norm.weight", {hidden}, wv);
    PairF h = put(b, rng.normals(static_cast<size_t>(rows * width)));
    auto outputs = [&] {
      return std::array<PairF, 4>{zeros(b, rows * hidden), zeros(b, rows * kHc), zeros(b, rows * kHc * kHc),
                                  zeros(b, rows * hidden)};
    };
    auto [y, post, comb, x] = outputs();
    for (int s : {kCpu, kGpu})
      b.at(s).hc_pre_norm(h[s], rows, kHc, hidden, p, 1e-6, 1e-6, 20, norm, y[s], post[s], comb[s], x[s]);
    auto [cy, cpost, ccomb, cx] = outputs();  // the two ops on CUDA
    b.gpu->hc_pre(h[kGpu], rows, kHc, hidden, p, 1e-6, 1e-6, 20, cy[kGpu], cpost[kGpu], ccomb[kGpu]);
    b.gpu->rmsnorm(cy[kGpu], norm, rows, hidden, 1e-6, cx[kGpu]);
    const std::string at = " hidden " + std::to_string(hidden) + " rows " + std::to_string(rows);
    const char* names[] = {"y", "post", "comb", "x"};
    const PairF* fused[] = {&y, &post, &comb, &x};
    const PairF* chain[] = {&cy, &cpost, &ccomb, &cx};
    for (int i = 0; i < 4 && rows < cuda::kHcRowTiledFrom; ++i)
      check_bitwise(std::string("hc_pre_norm ") + names[i] + " vs hc_pre, rmsnorm" + at, get(b, *chain[i], kGpu),
                    get(b, *fused[i], kGpu));
    // hc_pre's bound (its twin above) on y, post, comb; x is y normed (~1e-7 relative more,
    // the rmsnorm twin's): bound 2e-6.
    for (int i = 0; i < 4; ++i)
      check_close(std::string("hc_pre_norm ") + names[i] + at, get(b, *fused[i], kCpu), get(b, *fused[i], kGpu),
                  i == 3 ? 2e-6 : 1e-6, i == 3 ? 2e-6 : 1e-6);
    auto [ry, rpost, rcomb, rx] = outputs();  // a repeated call
    b.gpu->hc_pre_norm(h[kGpu], rows, kHc, hidden, p, 1e-6, 1e-6, 20, norm, ry[kGpu], rpost[kGpu], rcomb[kGpu],
                       rx[kGpu]);
    check_bitwise("hc_pre_norm x repeated call" + at, get(b, x, kGpu), get(b, rx, kGpu));
    auto [y1, post1, comb1, x1] = outputs();
    for (int t = 0; t < rows; ++t)
      b.gpu->hc_pre_norm(h[kGpu] + t * width, 1, kHc, hidden, p, 1e-6, 1e-6, 20, norm, y1[kGpu] + t * hidden,
                         post1[kGpu] + t * kHc, comb1[kGpu] + t * kHc * kHc, x1[kGpu] + t * hidden);
    const PairF* single[] = {&y1, &post1, &comb1, &x1};
    for (int i = 0; i < 4; ++i)
      check_bitwise(std::string("hc_pre_norm ") + names[i] + " rows vs single rows" + at, get(b, *fused[i], kGpu),
                    get(b, *single[i], kGpu));
  }
}

// Each fused kernel (cuda::HcNormKernel, whichever CudaOps::hc_pre_norm runs) called
// directly: y, x the bits of hc_pre then rmsnorm on CUDA at 1..4 rows, the ticket back at 0.
// Hidden 256 (8 slices: one cluster of 8, two of 4), 102 (4 slices: cluster4 only; its
// blocks 2 and 3 have no rmsnorm column: warp partials 0 as the op's idle threads) and Flash.
TEST_CASE("hc_pre_norm twin kernels: last_block, cluster4, cluster8 each hc_pre then rmsnorm, bit for bit") {
  const cuda::HcNormKernel kernels[] = {cuda::HcNormKernel::last_block, cuda::HcNormKernel::cluster4,
                                        cuda::HcNormKernel::cluster8};
  const char* kernel_names[] = {"last_block", "cluster4", "cluster8"};
  for (int n_hidden : {kHidden, 102, 4096, 8192})  // 8192: the last block in two passes
    for (int n_rows = 1; n_rows <= 4; ++n_rows) {
      HcCase c(26, n_hidden, n_rows);
      auto& [b, rng, store, rows, hidden, width] = c;
      const int m = (2 + kHc) * kHc;
      const HcParams p = hc_params(store, rng, hidden);
      std::vector<float> wv = rng.normals(static_cast<size_t>(hidden), 0.5f);
      const TensorView norm = store.bf16("attn_norm.weight", {hidden}, wv);  // wv: the stored values
      auto stored = [](const TensorView& t) {  // an f32 tensor's values (data may be unaligned)
        std::vector<float> v(static_cast<size_t>(t.numel()));
        std::memcpy(v.data(), t.data, v.size() * sizeof(float));
        return v;
      };
      const PairF fn = put(b, stored(p.fn)), base = put(b, stored(p.base)), scale = put(b, stored(p.scale));
      const PairF w = put(b, wv), h = put(b, rng.normals(static_cast<size_t>(rows * width)));
      PairF cy = zeros(b, rows * hidden), cx = zeros(b, rows * hidden), post = zeros(b, rows * kHc),
            comb = zeros(b, rows * kHc * kHc);
      b.gpu->hc_pre(h[kGpu], rows, kHc, hidden, p, 1e-6, 1e-6, 20, cy[kGpu], post[kGpu], comb[kGpu]);
      b.gpu->rmsnorm(cy[kGpu], norm, rows, hidden, 1e-6, cx[kGpu]);
      const std::string at = " hidden " + std::to_string(hidden) + " rows " + std::to_string(rows);
      for (int k = 0; k < 3; ++k) {
        if (!cuda::hc_pre_norm_takes(kernels[k], rows, kHc, hidden, m)) {
          MESSAGE((std::string(kernel_names[k]) + " does not take" + at));
          continue;
        }
        PairF y = zeros(b, rows * hidden), x = zeros(b, rows * hidden);
        unsigned* ticket = nullptr;
        double* part = nullptr;
        DSV4_CUDA_CHECK(cudaMalloc(&ticket, sizeof(unsigned)));
        DSV4_CUDA_CHECK(cudaMemset(ticket, 0, sizeof(unsigned)));
        DSV4_CUDA_CHECK(cudaMalloc(&part, cuda::hc_part_count(rows, width, m) * sizeof(double)));
        b.gpu->synchronize();
        for (int call = 0; call < 2; ++call)  // a second call: the ticket was reset
          cuda::hc_pre_norm_fused(kernels[k],
                                  cuda::HcPreNormArgs{h[kGpu], rows, kHc, hidden, m, {fn[kGpu], false},
                                                      {scale[kGpu], false}, {base[kGpu], false}, {w[kGpu], false},
                                                      1e-6, 1e-6, ticket, part, y[kGpu], x[kGpu]},
                                  nullptr);
        DSV4_CUDA_CHECK(cudaDeviceSynchronize());
        unsigned left = 1;
        DSV4_CUDA_CHECK(cudaMemcpy(&left, ticket, sizeof(unsigned), cudaMemcpyDeviceToHost));
        CHECK_MESSAGE(left == 0, (std::string(kernel_names[k]) + " ticket not reset" + at));
        const std::string what = std::string(" by ") + kernel_names[k] + " vs hc_pre, rmsnorm" + at;
        check_bitwise("hc_pre_norm y" + what, get(b, cy, kGpu), get(b, y, kGpu));
        check_bitwise("hc_pre_norm x" + what, get(b, cx, kGpu), get(b, x, kGpu));
        DSV4_CUDA_CHECK(cudaFree(ticket));
        DSV4_CUDA_CHECK(cudaFree(part));
      }
    }
}

// The small case, then Flash (hidden 4096) as a decode row, a verify round and a prefill's
// 1,024 rows (issue 13: from 64 rows CudaOps::hc_post runs hc_rows.cu's kernel, 16-byte
// accesses), and 70 rows of hidden 102 (that kernel one column a thread), rows vs single
// rows (the shipped kernel).
TEST_CASE("hc_post twin: post x + comb^T res (bit-exact); rows vs single rows") {
  constexpr Shape kPostShapes[] = {{kHidden, kRows}, {4096, 1}, {4096, 5}, {4096, 1024}, {102, 70}};
  for (const Shape& sh : kPostShapes) {
    Backends b;
    Rng rng(22);
    const int rows = sh.rows, hidden = sh.hidden;
    const size_t n_x = static_cast<size_t>(rows) * hidden, n_res = n_x * kHc;
    PairF x = put(b, rng.normals(n_x)), res = put(b, rng.normals(n_res));
    PairF post = put(b, rng.normals(rows * kHc)), comb = put(b, rng.normals(rows * kHc * kHc));
    PairF out = zeros(b, n_res), out1 = zeros(b, n_res);
    for (int s : {kCpu, kGpu}) b.at(s).hc_post(x[s], res[s], post[s], comb[s], rows, kHc, hidden, out[s]);
    // Same f32 operations in the same order: exact.
    const std::string at = " hidden " + std::to_string(hidden) + " rows " + std::to_string(rows);
    check_close("hc_post" + at, get(b, out, kCpu), get(b, out, kGpu), 0, 0);
    for (int t = 0; t < rows; ++t)
      b.gpu->hc_post(x[kGpu] + t * hidden, res[kGpu] + static_cast<size_t>(t) * kHc * hidden,
                     post[kGpu] + t * kHc, comb[kGpu] + t * kHc * kHc, 1, kHc, hidden,
                     out1[kGpu] + static_cast<size_t>(t) * kHc * hidden);
    check_bitwise("hc_post rows vs single rows" + at, get(b, out, kGpu), get(b, out1, kGpu));
  }
}

TEST_CASE("hc_head twin; rows vs single rows") {
  for (const Shape& sh : kShapes) {
    HcCase c(23, sh.hidden, sh.rows);
    auto& [b, rng, store, rows, hidden, width] = c;
    HeadWeights w;
    w.hc_head_fn = store.f32("hc_head_fn", {kHc, width}, rng.normals(static_cast<size_t>(kHc * width), fn_sd(hidden)));
    w.hc_head_base = store.f32("hc_head_base", {kHc}, rng.normals(kHc, 0.5f));
    w.hc_head_scale = store.f32("hc_head_scale", {1}, {0.8f});
    PairF h = put(b, rng.normals(static_cast<size_t>(rows * width)));
    PairF y = zeros(b, rows * hidden), y1 = zeros(b, rows * hidden);
    for (int s : {kCpu, kGpu}) b.at(s).hc_head(h[s], rows, kHc, hidden, w, 1e-6, 1e-6, y[s]);
    // f64 mixes on both sides through the f64 sigmoid: pre equal or one f32 ulp apart (as
    // hc_pre). Bound 1e-6.
    const std::string at = " hidden " + std::to_string(hidden) + " rows " + std::to_string(rows);
    check_close("hc_head" + at, get(b, y, kCpu), get(b, y, kGpu), 1e-6, 1e-6);
    for (int t = 0; t < rows; ++t)
      b.gpu->hc_head(h[kGpu] + t * width, 1, kHc, hidden, w, 1e-6, 1e-6, y1[kGpu] + t * hidden);
    check_bitwise("hc_head rows vs single rows" + at, get(b, y, kGpu), get(b, y1, kGpu));
  }
}

TEST_CASE("hc_mean twin (bit-exact)") {
  Backends b;
  Rng rng(24);
  PairF h = put(b, rng.normals(kRows * kHc * kHidden));
  const int stride = kHidden + 16;
  PairF mean = zeros(b, kRows * stride);
  for (int s : {kCpu, kGpu}) b.at(s).hc_mean(h[s], kRows, kHc, kHidden, mean[s], stride);
  // f64 sum of 4 floats, one rounding, on both: exact.
  check_close("hc_mean", get(b, mean, kCpu), get(b, mean, kGpu), 0, 0);
}

namespace {

// Device doubles (the mix partials), freed at scope exit.
struct DeviceDoubles {
  double* p = nullptr;
  size_t n;
  explicit DeviceDoubles(size_t count) : n(count) { REQUIRE(cudaMalloc(&p, n * sizeof(double)) == cudaSuccess); }
  DeviceDoubles(const DeviceDoubles&) = delete;
  ~DeviceDoubles() { cudaFree(p); }
  std::vector<double> get(size_t offset, size_t count) const {
    std::vector<double> host(count);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(host.data(), p + offset, count * sizeof(double), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
};

struct RowsCase {
  int hc, hidden, rows;
};

// A RowsCase's seeded hc_pre problem on both backends (f32 fn [m, width], base, scale, h
// [rows, width]) and the CPU's y.
struct RowsProblem {
  Backends b;
  Rng rng{25};
  Store store;
  const int hc, hidden, rows, m;
  const int64_t width;
  const size_t n_part, row_part;  // doubles of the mix partials: all rows, one row
  const std::vector<float> fn, base, scale{0.7f, 1.3f, 2.0f}, h_host;
  HcParams p;
  PairF h, fn_d, base_d, scale_d, y_cpu;
  explicit RowsProblem(const RowsCase& c)
      : hc(c.hc), hidden(c.hidden), rows(c.rows), m((2 + hc) * hc), width(int64_t{hc} * hidden),
        n_part(cuda::hc_part_count(rows, width, m)), row_part(n_part / rows),
        fn(rng.normals(static_cast<size_t>(m * width), 1.6f / std::sqrt(float(width)))), base(rng.normals(m, 0.5f)),
        h_host(rng.normals(static_cast<size_t>(rows * width))) {
    p.fn = store.f32("hc_attn_fn", {m, width}, fn);
    p.base = store.f32("hc_attn_base", {m}, base);
    p.scale = store.f32("hc_attn_scale", {3}, scale);
    h = put(b, h_host), fn_d = put(b, fn), base_d = put(b, base), scale_d = put(b, scale);
    y_cpu = zeros(b, rows * hidden);
    PairF post = zeros(b, rows * hc), comb = zeros(b, rows * hc * hc);
    b.cpu->hc_pre(h[kCpu], rows, hc, hidden, p, 1e-6, 1e-6, 20, y_cpu[kCpu], post[kCpu], comb[kCpu]);
  }
  std::string at() const {
    return " hc " + std::to_string(hc) + " hidden " + std::to_string(hidden) + " rows " + std::to_string(rows);
  }
  // The mix partials of rows [t0, t0 + n) by `kernels` into part (a device buffer).
  void mix(cuda::HcKernels kernels, int t0, int n, double* part) const {
    cuda::hc_mix_partials(kernels, h[kGpu] + t0 * width, n, width, fn_d[kGpu], false, m, part, nullptr);
  }
  void collapse(cuda::HcKernels kernels, const double* part, float* y) const {
    cuda::hc_collapse(kernels, h[kGpu], part, rows, hc, hidden, m, 1e-6, scale_d[kGpu], base_d[kGpu], false, 1e-6, y,
                      nullptr);
  }
};

}  // namespace

// The row-tiled kernels (kernels/cuda/hc_rows.cu; row_tiled and row_quads, whose mix takes
// two and four rows a thread) keep the shipped per-row f64 order, so
// their mix partials and y must equal the shipped kernels' bit for bit at any row count
// (odd counts: partial 64-row tiles; 300: several tiles a slice), and every row alone
// equal its row of the multi-row call. Cases: Flash's hc 4 x 4096 (fn [24, 16384], one
// grid.z block of 24 mixes), a width that is no multiple of the 128-column slice (hidden
// 100: the last slice is 16 columns plus zeros), hc 8 (m = 80: four grid.z blocks, the
// last one 8 mixes), and hidden 102 (the collapse one column a thread, not four). y also against the CPU at hc_pre's bound (1e-6, reasons above).
TEST_CASE("hc row-tiled kernels: mix partials and y bit for bit the shipped ones; y vs the CPU") {
  constexpr RowsCase kCases[] = {{4, 4096, 1},  {4, 4096, 3}, {4, 4096, 37},
                                 {4, 4096, 300}, {4, 100, 37}, {8, 512, 37}, {4, 102, 37}};
  for (const RowsCase& c : kCases) {
    RowsProblem pb(c);
    const int rows = pb.rows;
    const size_t n_part = pb.n_part, row_part = pb.row_part;
    constexpr int kSets = 3;
    const cuda::HcKernels kernels[kSets] = {cuda::HcKernels::shipped, cuda::HcKernels::row_tiled,
                                            cuda::HcKernels::row_quads};
    const char* names[kSets] = {"shipped", "row-tiled", "row-quads"};
    DeviceDoubles part[kSets] = {DeviceDoubles(n_part), DeviceDoubles(n_part), DeviceDoubles(n_part)};
    Backends& b = pb.b;
    PairF ys[kSets] = {zeros(b, rows * pb.hidden), zeros(b, rows * pb.hidden), zeros(b, rows * pb.hidden)};
    b.gpu->synchronize();
    for (int k = 0; k < kSets; ++k) {
      pb.mix(kernels[k], 0, rows, part[k].p);
      pb.collapse(kernels[k], part[k].p, ys[k][kGpu]);
    }
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // our launches ran on the default stream
    const std::string at = pb.at();
    const std::vector<double> shipped = part[0].get(0, n_part);
    const std::vector<float> y_shipped = get(b, ys[0], kGpu);
    DeviceDoubles one(row_part);
    for (int k = 1; k < kSets; ++k) {
      const std::string name = names[k];
      const std::vector<double> tiled = part[k].get(0, n_part);
      check_bitwise(name + " mix partials vs shipped" + at, shipped, tiled);
      check_bitwise(name + " y vs shipped" + at, y_shipped, get(b, ys[k], kGpu));
      check_close(name + " y vs cpu" + at, get(b, pb.y_cpu, kCpu), get(b, ys[k], kGpu), 1e-6, 1e-6);
      for (int t : {0, rows / 2, rows - 1}) {
        pb.mix(kernels[k], t, 1, one.p);
        const std::vector<double> row(tiled.begin() + t * row_part, tiled.begin() + (t + 1) * row_part);
        check_bitwise(name + " mix partials, row " + std::to_string(t) + " alone" + at, row, one.get(0, row_part));
      }
    }
  }
}

// HcKernels::dmma (kernels/cuda/hc_dmma.cu: the mix on the f64 tensor cores, what
// CudaOps::hc_pre runs from kHcRowTiledFrom rows) sums the same exact f64 products in
// another fixed order, so it is held to bounds, not to the shipped bits:
// - every partial against the CPU's (cpu_hc_mix_partials: each slice's columns ascending)
//   within 1e-13 of the largest |partial| of its sum (cpu_hc_partials_gap). A slice's 128
//   terms take <= 127 roundings of <= 2^-53 of the slice's sum of |terms|, at most ~2x the
//   largest |partial| with these seeds (the sum of squares': 1x): <= ~3e-14 an order, so
//   <= ~6e-14 between two; a lost or misplaced 4-column chunk moves a partial by ~1e-2.
// - y against the CPU's hc_pre at hc_pre's bound (1e-6, its twin above: the mixes ~1e-15
//   apart move a pre by one f32 ulp at most).
// - row independence (R-I3's per-row half: a prefill row's bits must not depend on the rows
//   beside it): a row alone (its 8-row mma tile padded with zeros), and every row of a call
//   started 3 rows later (each row at another place of its mma tile, among other rows), bit
//   for bit its row of the whole call.
// - dmma_pairs (two slices a block): every partial bit for bit dmma's.
// Cases: Flash's 1,024 prefill rows (hc 4 x 4096: 16 row tiles of 64, each block walking 3-4)
// and 37 (partial tiles), hidden 100 (the last slice 16 columns), hc 8 (m = 80: four grid.z
// blocks, the last one 8 mixes) and hc 1 x 101 (width 101: the kernel's one-float loads).
TEST_CASE("hc dmma mix partials: partials and y vs the CPU within bounds; a row's bits its own") {
  constexpr RowsCase kCases[] = {{4, 4096, 1024}, {4, 4096, 37}, {4, 100, 37}, {8, 512, 37}, {1, 101, 37}};
  constexpr double kPartialBound = 1e-13;
  for (const RowsCase& c : kCases) {
    RowsProblem pb(c);
    constexpr int kShift = 3;  // rows
    const int rows = pb.rows;
    const size_t n_part = pb.n_part, row_part = pb.row_part;
    DeviceDoubles part(n_part), pairs(n_part), shifted(n_part - kShift * row_part), one(row_part);
    PairF y = zeros(pb.b, rows * pb.hidden);
    pb.b.gpu->synchronize();
    pb.mix(cuda::HcKernels::dmma, 0, rows, part.p);
    pb.collapse(cuda::HcKernels::dmma, part.p, y[kGpu]);
    pb.mix(cuda::HcKernels::dmma, kShift, rows - kShift, shifted.p);
    pb.mix(cuda::HcKernels::dmma_pairs, 0, rows, pairs.p);
    const std::string at = pb.at();
    const std::vector<double> got = part.get(0, n_part);
    std::vector<double> ref(n_part);
    cpu_hc_mix_partials(pb.h_host.data(), rows, pb.width, pb.fn.data(), pb.m, ref.data());
    const double gap = cpu_hc_partials_gap(ref.data(), got.data(), rows, pb.width, pb.m);
    MESSAGE("dmma mix partials vs cpu" << at << ": gap " << gap << " bound " << kPartialBound);
    CHECK(gap <= kPartialBound);
    check_close("dmma y vs cpu" + at, get(pb.b, pb.y_cpu, kCpu), get(pb.b, y, kGpu), 1e-6, 1e-6);
    check_bitwise("dmma_pairs mix partials vs dmma" + at, got, pairs.get(0, n_part));
    check_bitwise("dmma mix partials, rows from " + std::to_string(kShift) + at,
                  std::vector<double>(got.begin() + kShift * row_part, got.end()), shifted.get(0, shifted.n));
    for (int t : {0, 5, rows / 2 + 1, rows - 1}) {
      pb.mix(cuda::HcKernels::dmma, t, 1, one.p);
      const std::vector<double> row(got.begin() + t * row_part, got.begin() + (t + 1) * row_part);
      check_bitwise("dmma mix partials, row " + std::to_string(t) + " alone" + at, row, one.get(0, row_part));
    }
  }
}

}  // namespace dsv4::twin
