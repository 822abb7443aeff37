// dsv4-dev-attention: sparse sink attention (MODEL.md §4.20 with D12) for a prefill's rows
// at the Flash shapes (64 heads x 512 dims) on 64, 1024 and 2048 rows, llm.c dev/cuda
// style. "decode" is the shipped kernel (CudaOps::sink_attention: split-KV f32 chains on
// CUDA cores), "tc" the tensor-core prefill kernel (kernels/cuda/attention_prefill.cu).
// Index patterns: "full" (width 640,
// every entry valid: window 128 + top-k 512) and "prefill" (a ratio-4 layer's prefill of
// `rows` tokens, §4.15 + §4.18: row t sees positions max(0, t-127)..t and compressed blocks
// j < (t+1)/4 of min(512, rows/4); the rest -1). Both kernels are validated against the
// CPU reference (kernels/cpu/attention.h) on 16 sampled rows at their twin tolerances
// (tests/gpu/test_attention_twin.cpp 1e-5, test_attention_prefill_twin.cpp 5e-5), tc
// against decode on every row (5e-5), and tc's sampled rows alone bitwise against the
// multi-row call (row independence). TFLOP/s counts the valid entries' work only:
// 4 x heads x dim per (row, valid entry) (Q K^T and P V, one multiply-add = 2 FLOP).
// usage: dsv4-dev-attention [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <vector>

#include "base/cuda_check.h"
#include "bench/dev/dev_bench.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/ops.h"

namespace {

using namespace dsv4;

constexpr int kHeads = 64, kDim = 512, kWindow = 128, kTopk = 512;
constexpr int kSampled = 16;
constexpr double kDecodeTolerance = 1e-5, kTcTolerance = 5e-5;

using dev::Closeness;
using dev::closeness;
using dev::device_copy;

// One problem's host and device data.
struct Problem {
  const char* pattern;
  int rows, width, n_kv;
  int64_t valid = 0;  // valid entries over all rows
  std::vector<float> q, kv, sink;
  std::vector<int32_t> idx;
  float *d_q = nullptr, *d_kv = nullptr, *d_sink = nullptr, *d_o = nullptr;
  int32_t* d_idx = nullptr;
  size_t o_size() const { return static_cast<size_t>(rows) * kHeads * kDim; }
};

Problem make_problem(const char* pattern, int rows, std::mt19937& gen) {
  Problem p{pattern, rows, 0, 0};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const bool full = std::strcmp(pattern, "full") == 0;
  const int tail = full ? kTopk : std::min(kTopk, rows / 4);
  p.width = kWindow + tail;
  p.n_kv = full ? kWindow + 4096 : rows + rows / 4;  // prefill: kv ++ compressed (§4.19)
  p.idx.assign(static_cast<size_t>(rows) * p.width, -1);
  for (int t = 0; t < rows; ++t) {
    int32_t* row = p.idx.data() + static_cast<size_t>(t) * p.width;
    if (full) {
      for (int k = 0; k < kWindow; ++k) row[k] = k;
      for (int k = 0; k < kTopk; ++k) row[kWindow + k] = kWindow + (k * 7 + t * 13) % 4096;  // distinct
    } else {
      const int first = std::max(0, t - kWindow + 1);
      for (int k = 0; k <= t - first; ++k) row[k] = first + k;
      for (int j = 0; j < std::min(tail, (t + 1) / 4); ++j) row[kWindow + j] = rows + j;
    }
    for (int k = 0; k < p.width; ++k) p.valid += row[k] >= 0;
  }
  p.q.resize(p.o_size());
  for (auto& v : p.q) v = normal(gen);
  p.kv.resize(static_cast<size_t>(p.n_kv) * kDim);
  for (auto& v : p.kv) v = normal(gen);
  for (int h = 0; h < kHeads; ++h) p.sink.push_back(2.0f * normal(gen));
  p.d_q = device_copy(p.q);
  p.d_kv = device_copy(p.kv);
  p.d_sink = device_copy(p.sink);
  p.d_idx = device_copy(p.idx);
  DSV4_CUDA_CHECK(cudaMalloc(&p.d_o, p.o_size() * sizeof(float)));
  return p;
}

void free_problem(Problem& p) {
  for (void* d : {static_cast<void*>(p.d_q), static_cast<void*>(p.d_kv), static_cast<void*>(p.d_sink),
                  static_cast<void*>(p.d_o), static_cast<void*>(p.d_idx)})
    DSV4_CUDA_CHECK(cudaFree(d));
}

std::vector<float> download(const float* d, size_t n) {
  std::vector<float> h(n);
  DSV4_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

// Mean wall time of `reps` launches after a warm-up, `sync` draining the launches' stream.
template <class Launch, class Sync>
double time_us(Launch launch, Sync sync, int reps) {
  launch();
  sync();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) launch();
  sync();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
}

class Bench {
 public:
  Bench(Problem& p, int reps) : p_(p), reps_(reps) {
    sink_.name = "attn_sink";
    sink_.dtype = DType::F32;
    sink_.shape = {kHeads};
    sink_.data = reinterpret_cast<const uint8_t*>(p.sink.data());
    sink_.nbytes = p.sink.size() * sizeof(float);
    sink_.storage = next_storage_id();
    for (int i = 0; i < kSampled; ++i) sampled_.push_back(static_cast<int>(int64_t{i} * (p.rows - 1) / (kSampled - 1)));
    // The CPU reference of the sampled rows.
    const size_t row_o = static_cast<size_t>(kHeads) * kDim;
    ref_.resize(sampled_.size() * row_o);
    for (size_t i = 0; i < sampled_.size(); ++i) {
      const int t = sampled_[i];
      cpu_sink_attention(p.q.data() + t * row_o, 1, kHeads, kDim, p.kv.data(), p.idx.data() + int64_t{t} * p.width,
                         p.width, sink_, scale(), ref_.data() + i * row_o);
    }
  }
  static float scale() { return 1.0f / std::sqrt(static_cast<float>(kDim)); }

  void decode(Ops& ops) {
    auto launch = [&] {
      ops.sink_attention(p_.d_q, p_.rows, kHeads, kDim, p_.d_kv, p_.d_idx, p_.width, sink_, scale(), p_.d_o);
    };
    const double us = time_us(launch, [&] { ops.synchronize(); }, reps_);
    decode_out_ = download(p_.d_o, p_.o_size());
    report("decode", us, decode_out_, kDecodeTolerance);
    std::printf("\n");
  }
  void tc() {
    auto launch = [&] { tc_launch(p_.d_q, p_.rows, p_.d_idx, p_.d_o); };
    const double us = time_us(launch, [] { DSV4_CUDA_CHECK(cudaStreamSynchronize(nullptr)); }, reps_);
    const std::vector<float> out = download(p_.d_o, p_.o_size());
    report("tc", us, out, kTcTolerance);
    const Closeness d = closeness(decode_out_.data(), out.data(), out.size());
    std::printf("  vs decode rel_l2 %.1e max_norm %.1e %s", d.rel_l2, d.max_norm,
                d.within(kTcTolerance) ? "ok" : "OVER-TOLERANCE");
    std::printf(" %s\n", sampled_rows_alone_match(out) ? "rows=single" : "ROWS-DIFFER-FROM-SINGLE");
  }

 private:
  void tc_launch(const float* q, int rows, const int32_t* idx, float* o) {
    cuda::sink_attention_prefill(q, rows, kHeads, kDim, p_.d_kv, idx, p_.width, p_.d_sink, false, scale(), o, nullptr);
  }
  void report(const char* kernel, double us, const std::vector<float>& out, double bound) const {
    const size_t row_o = static_cast<size_t>(kHeads) * kDim;
    std::vector<float> got(ref_.size());
    for (size_t i = 0; i < sampled_.size(); ++i)
      std::copy_n(out.data() + sampled_[i] * row_o, row_o, got.data() + i * row_o);
    const Closeness c = closeness(ref_.data(), got.data(), got.size());
    const double tflop = 4.0 * kHeads * kDim * static_cast<double>(p_.valid) / 1e12;
    std::printf("%-7s rows %5d width %3d %-6s %10.1f us %7.2f TFLOP/s  cpu rel_l2 %.1e max_norm %.1e %s", p_.pattern,
                p_.rows, p_.width, kernel, us, tflop / (us * 1e-6), c.rel_l2, c.max_norm,
                c.within(bound) ? "ok" : "OVER-TOLERANCE");
  }
  // Each sampled row launched alone into a scratch row, compared bit for bit.
  bool sampled_rows_alone_match(const std::vector<float>& all) {
    const size_t row_o = static_cast<size_t>(kHeads) * kDim;
    float* one = nullptr;
    DSV4_CUDA_CHECK(cudaMalloc(&one, row_o * sizeof(float)));
    bool ok = true;
    for (int t : sampled_) {
      tc_launch(p_.d_q + t * row_o, 1, p_.d_idx + int64_t{t} * p_.width, one);
      const std::vector<float> got = download(one, row_o);
      ok = ok && std::memcmp(got.data(), all.data() + t * row_o, row_o * sizeof(float)) == 0;
    }
    DSV4_CUDA_CHECK(cudaFree(one));
    return ok;
  }

  Problem& p_;
  int reps_;
  TensorView sink_;
  std::vector<int> sampled_;
  std::vector<float> ref_, decode_out_;
};

}  // namespace

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  std::unique_ptr<Ops> ops = make_cuda_ops(0);
  std::mt19937 gen(7);
  for (const char* pattern : {"full", "prefill"})
    for (int rows : {64, 1024, 2048}) {  // 64: near the adoption threshold
      Problem p = make_problem(pattern, rows, gen);
      Bench b(p, reps);
      b.decode(*ops);
      b.tc();
      free_problem(p);
    }
  return 0;
}

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-attention", argc, argv, run_all); }
