// CUDA vs CPU: the prefill GEMMs (kernels/ops.h *_gemm, kernels/cuda/gemm_prefill.cu) on
// the CPU reference linears, at odd sizes and Flash shapes, both activation arms, and
// run-to-run bit equality (the algorithm is fixed per shape).
//
// Tolerance, both arms: the GEMM multiplies the same exact values as the reference (the
// weight dequantized exactly to bf16; x rounded to bf16, or split exactly into three bf16
// terms for f32 activations) and accumulates in f32 in another order, so the outputs
// differ by summation rounding only: about sqrt(k) 2^-24 relative, ~1e-6 at k = 16384.
// Bound 1e-5, the GEMV twins' bound (test_linear_twin.cpp). A lost term of the f32 split
// (2^-8 relative of x per missing term) would show as ~1e-3 and fail.
#include <cuda_runtime.h>

#include "base/scalar_formats.h"
#include "kernels/cuda/prefill_convert.cuh"
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

namespace {

// y = op(x) on both backends, compared; on the GPU a second call gives the same bits.
template <class F>
void check_gemm(Backends& b, const std::string& what, const PairF& x, size_t out_n, F op) {
  PairF y = zeros(b, out_n), again = zeros(b, out_n);
  for (int s : {kCpu, kGpu}) op(b.at(s), x[s], y[s]);
  check_close(what, get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
  op(*b.gpu, x[kGpu], again[kGpu]);
  check_bitwise(what + " run to run", get(b, y, kGpu), get(b, again, kGpu));
}

void check_fp8(Backends& b, Store& store, Rng& rng, int64_t out, int64_t in, int rows) {
  const Fp8Linear w = store.fp8("wq_a", out, in, rng);
  PairF x = put(b, rng.normals(static_cast<size_t>(rows) * in));
  for (bool act : {true, false})
    check_gemm(b, cat("linear_fp8_gemm [", out, ", ", in, "] x ", rows, act ? " bf16 act" : " f32 act"), x,
               static_cast<size_t>(rows) * out,
               [&](Ops& o, const float* xp, float* yp) { o.linear_fp8_gemm(w, xp, rows, act, yp); });
}

void check_wo_a(Backends& b, Store& store, Rng& rng, int groups, int o_rank, int cols, int rows) {
  const Fp8Linear w = store.fp8("wo_a", static_cast<int64_t>(groups) * o_rank, cols, rng);
  PairF o = put(b, rng.normals(static_cast<size_t>(rows) * groups * cols));
  for (bool act : {true, false})
    check_gemm(b, cat("grouped_wo_a_gemm G ", groups, " Or ", o_rank, " cols ", cols, " x ", rows,
                      act ? " bf16 act" : " f32 act"),
               o, static_cast<size_t>(rows) * groups * o_rank,
               [&](Ops& op, const float* xp, float* yp) { op.grouped_wo_a_gemm(w, xp, rows, groups, act, yp); });
}

// Device copy of a host vector, freed at scope end; get() reads it back.
template <class T>
struct DeviceCopy {
  T* p = nullptr;
  size_t n;
  explicit DeviceCopy(const std::vector<T>& host) : n(host.size()) {
    REQUIRE(cudaMalloc(&p, n * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  ~DeviceCopy() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> host(n);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemcpy(host.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
};

const char* kernel_name(cuda::ConvertKernel k) { return k == cuda::ConvertKernel::chunks ? "chunks" : "elements"; }

}  // namespace

// The conversions before cuBLASLt (kernels/cuda/prefill_convert.cuh), each kernel against
// a host transcription (base/scalar_formats.h), bit for bit: the FP8 weight's bf16 values
// (exact: e4m3 x e8m0 has 4 significant bits) over the whole e8m0 range the codes reach
// finitely, subnormal products included, on whole 16-byte chunks with partial 128-blocks
// (both kernels) and on an odd width (the one-value kernel); the activation's 1 and 3
// planes over 2^+-40, on a length of whole float4s (both) and an odd one.
TEST_CASE("prefill GEMM conversions: both kernels give the host's bits") {
  Rng rng(46);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{200, 272}, {197, 131}}) {
    std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
    for (uint8_t& c : codes) {
      do c = static_cast<uint8_t>(rng.uniform_int(0, 255));
      while ((c & 0x7F) == 0x7F);  // not NaN
    }
    const int64_t scale_cols = (cols + 127) / 128;
    std::vector<uint8_t> scales(static_cast<size_t>((rows + 127) / 128 * scale_cols));
    for (uint8_t& s : scales) s = static_cast<uint8_t>(rng.uniform_int(0, 246));  // 2^-127 .. 2^119: 448 x 2^119 < f32 max
    std::vector<uint16_t> want(codes.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float v = e4m3_to_f32(codes[r * cols + c]) * e8m0_to_f32(scales[(r / 128) * scale_cols + c / 128]);
        want[r * cols + c] = static_cast<uint16_t>(f32_bits(bf16_round(v)) >> 16);
      }
    DeviceCopy<uint8_t> d_codes(codes), d_scales(scales);
    DeviceCopy<uint16_t> out(std::vector<uint16_t>(codes.size(), 0xFFFF));
    const cuda::ConvertKernel shipped = cuda::fp8_convert_kernel_for(d_codes.p, cols, out.p);
    CHECK((shipped == cuda::ConvertKernel::chunks) == (cols % 16 == 0));
    for (cuda::ConvertKernel k : {cuda::ConvertKernel::elements, shipped}) {
      cuda::fp8_to_bf16(k, d_codes.p, d_scales.p, rows, cols, out.p, nullptr);
      INFO("fp8 -> bf16 [" << rows << ", " << cols << "] " << kernel_name(k));
      CHECK(out.get() == want);
    }
  }
  for (int64_t n : {4000, 4001}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = std::ldexp(rng.normal(), rng.uniform_int(-40, 40));
    DeviceCopy<float> d_x(x);
    for (int terms : {1, 3}) {
      std::vector<uint16_t> want(static_cast<size_t>(terms * n));
      for (int64_t i = 0; i < n; ++i) {
        float rest = x[i];
        for (int t = 0; t < terms; ++t) {
          const float b = bf16_round(rest);
          want[t * n + i] = static_cast<uint16_t>(f32_bits(b) >> 16);
          rest -= b;
        }
      }
      DeviceCopy<uint16_t> out(std::vector<uint16_t>(want.size(), 0xFFFF));
      const cuda::ConvertKernel shipped = cuda::split_kernel_for(d_x.p, n, out.p);
      CHECK((shipped == cuda::ConvertKernel::chunks) == (n % 4 == 0));
      for (cuda::ConvertKernel k : {cuda::ConvertKernel::elements, shipped}) {
        cuda::split_bf16(k, d_x.p, n, terms, out.p, nullptr);
        INFO("split " << n << " into " << terms << " planes, " << kernel_name(k));
        CHECK(out.get() == want);
      }
    }
  }
}

TEST_CASE("linear_fp8_gemm twin: partial 128-blocks, odd sizes, 1 and many rows") {
  Backends b;
  Rng rng(41);
  Store store;
  check_fp8(b, store, rng, 200, 136, 1);
  check_fp8(b, store, rng, 200, 136, 7);
  check_fp8(b, store, rng, 197, 131, 33);  // odd strides: cuBLASLt at 2-byte alignment, or the GEMV
  check_fp8(b, store, rng, 256, 512, 300);
}

TEST_CASE("linear_bf16_gemm twin: BF16 and bf16-exact F32 weights") {
  Backends b;
  Rng rng(42);
  Store store;
  const int64_t out = 64, in = 4096;  // Flash indexer weights_proj
  std::vector<float> wv = rng.normals(out * in, 0.1f);
  const TensorView wb = store.bf16("weights_proj", {out, in}, wv);  // wv: the stored values
  const TensorView wf = store.f32("weights_proj_f32", {out, in}, wv);
  const int rows = 129;
  PairF x = put(b, rng.normals(static_cast<size_t>(rows) * in));
  for (const TensorView* w : {&wb, &wf})
    for (bool act : {true, false})
      check_gemm(b, cat("linear_bf16_gemm ", w->name, act ? " bf16 act" : " f32 act"), x,
                 static_cast<size_t>(rows) * out,
                 [&](Ops& o, const float* xp, float* yp) { o.linear_bf16_gemm(*w, xp, rows, act, yp); });
}

// The island GEMM against the CPU's f64-accumulated island (one more rounding per output:
// the f32 sums), within the same 1e-5: a BF16 weight by the GEMM, an F32-stored one (C12)
// by the island GEMV.
TEST_CASE("linear_island_gemm twin: the compressors' raw projections, BF16 and F32-stored") {
  Backends b;
  Rng rng(45);
  Store store;
  const int64_t in = 4096;
  for (const auto& [out, rows] : {std::pair<int64_t, int>{1024, 300}, {256, 37}}) {  // wkv r = 4, indexer
    std::vector<float> wv = rng.normals(out * in, 0.05f);
    const TensorView wb = store.bf16(cat("compressor.wkv_", out), {out, in}, wv);
    const TensorView wf = store.f32(cat("compressor.wkv_f32_", out), {out, in}, wv);
    PairF x = put(b, rng.normals(static_cast<size_t>(rows) * in));
    for (const TensorView* w : {&wb, &wf})
      check_gemm(b, cat("linear_island_gemm ", w->name, " x ", rows), x, static_cast<size_t>(rows) * out,
                 [&](Ops& o, const float* xp, float* yp) { o.linear_island_gemm(*w, xp, rows, yp); });
  }
}

TEST_CASE("grouped_wo_a_gemm twin: group g uses rows [g*Or, (g+1)*Or) on its own columns") {
  Backends b;
  Rng rng(43);
  Store store;
  check_wo_a(b, store, rng, 4, 128, 256, 1);
  check_wo_a(b, store, rng, 4, 128, 256, 37);
}

TEST_CASE("prefill GEMM twins at Flash shapes") {
  Backends b;
  Rng rng(44);
  Store store;
  check_fp8(b, store, rng, 512, 4096, 300);    // wkv, > 256 rows
  check_fp8(b, store, rng, 32768, 1024, 40);   // wq_b
  check_fp8(b, store, rng, 4096, 2048, 64);    // shared expert w2
  check_wo_a(b, store, rng, 8, 1024, 4096, 40);  // wo_a: G = 8, Or = 1024, nh*D/G = 4096
}

}  // namespace dsv4::twin
