// dsv4-dev-prefill-fused: a prefill's q and kv finishing (issue 13) on 1,024 and 2,048 rows at
// the Flash shapes (q: 64 heads x 512, kv: 512, rope 64), llm.c dev/cuda style, through
// CudaOps as the prefill calls it (host positions, each op staging them). "shipped" is the
// op chain the prefill ran — head_rms then rope (q); rmsnorm, rope, kv_act_quant (kv) —
// and "fused" its one op (Ops::head_rms_rope, Ops::finish_kv), compared bit for bit with
// it. Times: the mean per call of reps back-to-back calls over one synchronized span (what
// the prefill profile's per-op sums see); GB/s counts the rows read and written once.
// usage: dsv4-dev-prefill-fused [reps]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "bench/dev/dev_bench.h"
#include "kernels/ops.h"
#include "kernels/rope_table.h"

namespace {

using namespace dsv4;

constexpr int kHeads = 64, kDim = 512, kRopeDim = 64, kPositions = 70000;
constexpr double kEps = 1e-6;

std::vector<float> normals(std::mt19937& gen, size_t n, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// The shipped chain and the fused op on the same input: times, bits, one report line.
bool compare(Ops& ops, const char* what, int rows, size_t n, const std::vector<float>& v0, int reps,
             const std::function<void(float*)>& shipped, const std::function<void(float*)>& fused) {
  FBuf a = ops.alloc(n), b = ops.alloc(n), work = ops.alloc(n);
  ops.upload(a.data(), v0.data(), n);
  ops.upload(b.data(), v0.data(), n);
  shipped(a.data());
  fused(b.data());
  std::vector<float> ra(n), rb(n);
  ops.download(ra.data(), a.data(), n);
  ops.download(rb.data(), b.data(), n);
  const bool bits = std::memcmp(ra.data(), rb.data(), n * sizeof(float)) == 0;
  ops.upload(work.data(), v0.data(), n);  // timed in place: normed rows stay finite
  const double us_s = dev::time_op(ops, [&] { shipped(work.data()); }, reps);
  const double us_f = dev::time_op(ops, [&] { fused(work.data()); }, reps);
  const double gb = 2.0 * 4.0 * static_cast<double>(n) / 1e3;  // read + write, GB/s at us
  std::printf("rows %5d %-3s shipped %8.1f us %6.0f GB/s  fused %8.1f us %6.0f GB/s  x%.2f  %s\n", rows, what, us_s,
              gb / us_s, us_f, gb / us_f, us_s / us_f, bits ? "bits=shipped" : "BITS-DIFFER-FROM-SHIPPED");
  return bits;
}

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  std::unique_ptr<Ops> ops_ptr = make_cuda_ops(0, false);
  Ops& ops = *ops_ptr;
  std::mt19937 gen(13);
  const RopeTable rope = make_rope_table(10000.0, kRopeDim, kPositions, nullptr);
  ops.prepare(rope);
  const std::vector<float> norm_w = normals(gen, kDim, 0.5f);
  TensorView norm{"attn.kv_norm.weight", DType::F32, {kDim}, reinterpret_cast<const uint8_t*>(norm_w.data()),
                  norm_w.size() * sizeof(float), next_storage_id()};
  ops.prepare(norm);
  std::printf("dsv4-dev-prefill-fused on %d SMs: q %d heads x %d, kv %d, rope %d\n", dev::device_sms(), kHeads, kDim,
              kDim, kRopeDim);
  bool all_ok = true;
  for (int rows : {1024, 2048}) {
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = r;  // a prompt from position 0
    const size_t nq = static_cast<size_t>(rows) * kHeads * kDim, nkv = static_cast<size_t>(rows) * kDim;
    all_ok = compare(ops, "q", rows, nq, normals(gen, nq, 2.0f), reps,
                     [&](float* v) {
                       ops.head_rms(v, rows * kHeads, kDim, kEps);
                       ops.rope(v, rows, kHeads, kDim, rope, pos.data(), false);
                     },
                     [&](float* v) { ops.head_rms_rope(v, rows, kHeads, kDim, kEps, rope, pos.data()); }) &&
             all_ok;
    for (KvQuant variant : {KvQuant::clamp, KvQuant::e4m3})
      all_ok = compare(ops, variant == KvQuant::e4m3 ? "kv8" : "kv", rows, nkv, normals(gen, nkv, 3.0f), reps,
                       [&](float* v) {
                         ops.rmsnorm(v, norm, rows, kDim, kEps, v);
                         ops.rope(v, rows, 1, kDim, rope, pos.data(), false);
                         ops.kv_act_quant(v, rows, kDim, kRopeDim, variant);
                       },
                       [&](float* v) { ops.finish_kv(v, norm, rows, kDim, kEps, rope, pos.data(), variant); }) &&
               all_ok;
  }
  std::printf("%s\n", all_ok ? "all ok" : "FAILED");
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-prefill-fused", argc, argv, run_all); }
