// dsv4-dev-prefill-gemm: the parts of a prefill GEMM (kernels/cuda/gemm_prefill.cu) at the
// Flash grouped wo_a (MODEL.md §4.21: 8 groups of [1024, 4096] FP8, o [rows, 32768] f32)
// on 1,024 rows, llm.c dev/cuda style: the FP8 -> bf16 weight conversion and the f32 ->
// bf16 activation split, each by both kernels (cuda::ConvertKernel: `elements` one value
// a thread, `chunks` 16 codes / 4 floats a thread), bit for bit against a host transcription
// of the same arithmetic (base/scalar_formats.h), then the whole op (CudaOps::
// grouped_wo_a_gemm, one and three activation planes) and what is left of it for cuBLASLt
// once the shipped conversions are taken away. GB/s counts the bytes each kernel must move
// once (read + write); TFLOP/s the GEMM's 2 x rows x 8192 x 4096 per plane.
// usage: dsv4-dev-prefill-gemm [reps]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/cuda_check.h"
#include "base/scalar_formats.h"
#include "bench/dev/dev_bench.h"
#include "kernels/cuda/prefill_convert.cuh"
#include "kernels/ops.h"

namespace {

using namespace dsv4;
using dev::device_alloc;
using dev::device_copy;
using dev::download;
using dev::time_op;

constexpr int kGroups = 8, kRank = 1024, kCols = 4096, kRows = 1024;  // Or, nh * D / G
constexpr int64_t kOut = int64_t{kGroups} * kRank, kIn = int64_t{kGroups} * kCols;

const char* name_of(cuda::ConvertKernel k) { return k == cuda::ConvertKernel::chunks ? "chunks" : "elements"; }

uint16_t bf16_bits(float v) { return static_cast<uint16_t>(f32_bits(bf16_round(v)) >> 16); }

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  std::mt19937 gen(13);
  cudaStream_t stream = nullptr;
  DSV4_CUDA_CHECK(cudaStreamCreate(&stream));
  bool ok = true;

  // wo_a: random finite e4m3 codes, e8m0 scales around 2^-9 (tests/gpu/twin_harness.h).
  std::vector<uint8_t> codes(static_cast<size_t>(kOut * kCols)), scales((kOut / 128) * (kCols / 128));
  for (uint8_t& c : codes) {
    do c = static_cast<uint8_t>(gen() & 0xFF);
    while ((c & 0x7F) == 0x7F);
  }
  for (uint8_t& s : scales) s = static_cast<uint8_t>(127 - 9 + static_cast<int>(gen() % 3) - 1);
  std::vector<uint16_t> want_w(codes.size());
  for (int64_t r = 0; r < kOut; ++r)
    for (int64_t c = 0; c < kCols; ++c)
      want_w[r * kCols + c] = bf16_bits(e4m3_to_f32(codes[r * kCols + c]) * e8m0_to_f32(scales[(r / 128) * (kCols / 128) + c / 128]));
  const uint8_t* d_codes = device_copy(codes);
  const uint8_t* d_scales = device_copy(scales);
  uint16_t* d_wb = device_alloc<uint16_t>(codes.size());
  double convert_us = 0;
  for (cuda::ConvertKernel k : {cuda::ConvertKernel::elements, cuda::ConvertKernel::chunks}) {
    DSV4_CUDA_CHECK(cudaMemset(d_wb, 0xFF, codes.size() * 2));
    const float us = dev::time_launches([&] { cuda::fp8_to_bf16(k, d_codes, d_scales, kOut, kCols, d_wb, stream); }, reps, stream);
    const bool bits = download(d_wb, codes.size()) == want_w;
    ok = ok && bits;
    convert_us = us;  // the shipped kernel (chunks) last
    std::printf("convert wo_a fp8 -> bf16   %-8s %9.1f us %7.0f GB/s  %s\n", name_of(k), us,
                codes.size() * 3.0 / (us * 1e3), bits ? "bits=host" : "BITS-DIFFER-FROM-HOST");
  }

  // o [rows, 32768]: normal values, split into 1 and 3 planes.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> o(static_cast<size_t>(kRows) * kIn);
  for (float& v : o) v = normal(gen);
  const float* d_o = device_copy(o);
  uint16_t* d_planes = device_alloc<uint16_t>(3 * o.size());
  double split_us[4] = {};
  for (int terms : {1, 3}) {
    std::vector<uint16_t> want(terms * o.size());
    for (size_t i = 0; i < o.size(); ++i) {
      float rest = o[i];
      for (int t = 0; t < terms; ++t) {
        const float b = bf16_round(rest);
        want[t * o.size() + i] = static_cast<uint16_t>(f32_bits(b) >> 16);
        rest -= b;
      }
    }
    for (cuda::ConvertKernel k : {cuda::ConvertKernel::elements, cuda::ConvertKernel::chunks}) {
      DSV4_CUDA_CHECK(cudaMemset(d_planes, 0xFF, 3 * o.size() * 2));
      const float us = dev::time_launches(
          [&] { cuda::split_bf16(k, d_o, static_cast<int64_t>(o.size()), terms, d_planes, stream); }, reps,
          stream);
      const bool bits = download(d_planes, want.size()) == want;
      ok = ok && bits;
      split_us[terms] = us;
      std::printf("split o f32 -> %d bf16 plane%s %-8s %9.1f us %7.0f GB/s  %s\n", terms, terms == 1 ? " " : "s", name_of(k),
                  us, o.size() * (4.0 + 2.0 * terms) / (us * 1e3), bits ? "bits=host" : "BITS-DIFFER-FROM-HOST");
    }
  }

  // The whole op through CudaOps, and cuBLASLt's share: the op minus the shipped conversions.
  std::unique_ptr<Ops> ops = make_cuda_ops(0);
  Fp8Linear wo_a;
  wo_a.weight.name = "wo_a.weight";
  wo_a.weight.dtype = DType::F8_E4M3;
  wo_a.weight.shape = {kOut, kCols};
  wo_a.weight.data = codes.data();
  wo_a.weight.nbytes = codes.size();
  wo_a.weight.storage = next_storage_id();
  wo_a.scale.name = "wo_a.scale";
  wo_a.scale.dtype = DType::F8_E8M0;
  wo_a.scale.shape = {kOut / 128, kCols / 128};
  wo_a.scale.data = scales.data();
  wo_a.scale.nbytes = scales.size();
  wo_a.scale.storage = next_storage_id();
  ops->prepare(wo_a.weight);
  ops->prepare(wo_a.scale);
  FBuf x = ops->alloc(o.size()), og = ops->alloc(static_cast<size_t>(kRows) * kOut);
  ops->upload(x.data(), o.data(), o.size());
  for (int terms : {1, 3}) {
    const double us = time_op(*ops, [&] { ops->grouped_wo_a_gemm(wo_a, x.data(), kRows, kGroups, terms == 1, og.data()); },
                              reps);
    const double gemm_us = us - convert_us - split_us[terms];
    std::printf("grouped_wo_a_gemm %d plane%s  %9.1f us; less the conversions: cuBLASLt %7.1f us %6.0f TFLOP/s\n", terms,
                terms == 1 ? " " : "s", us, gemm_us, 2.0 * kRows * kOut * kCols * terms / (gemm_us * 1e6));
  }

  for (const void* p : {static_cast<const void*>(d_codes), static_cast<const void*>(d_scales),
                        static_cast<const void*>(d_wb), static_cast<const void*>(d_o),
                        static_cast<const void*>(d_planes)})
    DSV4_CUDA_CHECK(cudaFree(const_cast<void*>(p)));
  DSV4_CUDA_CHECK(cudaStreamDestroy(stream));
  std::printf("%s\n", ok ? "all ok" : "FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-prefill-gemm", argc, argv, run_all); }
