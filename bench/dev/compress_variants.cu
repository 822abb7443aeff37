// dsv4-dev-compress: a prefill's compress_blocks calls (MODEL.md §4.16 steps 3-6) at the Flash
// shapes for 1,024 and 2,048 tokens, llm.c dev/cuda style, through CudaOps by kernel
// (cuda::CompressKernel, compress_kernel.h): "shipped" the one-pass kernel, "split" the
// pooling over (row, 32-dim chunk) warps, one dim a thread, then the finishing launch;
// compared bit for bit.
// Calls: the ratio-128 attention compressor (d 512: 8 / 16 blocks, 128 entries each), the
// ratio-4 one (d 512, overlapping: 256 / 512 blocks of 8 entries) and the ratio-4 indexer's
// (d 128, Hadamard + FP4). Times: mean per call over reps synchronized calls (dev::time_op).
// usage: dsv4-dev-compress [reps]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "bench/dev/dev_bench.h"
#include "kernels/cuda/compress_kernel.h"
#include "kernels/ops.h"
#include "kernels/rope_table.h"

namespace {

using namespace dsv4;

// One compressor's weights on the host (views the backend makes resident).
struct Compressor {
  std::vector<float> ape, norm;
  CompressorWeights w;
  Compressor(int ratio, int d, bool rotate, std::mt19937& gen) {
    w.ratio = ratio;
    w.overlap = ratio == 4;
    w.rotate = rotate;
    w.d = d;
    const int lc = static_cast<int>(w.latent());
    std::normal_distribution<float> normal(0.0f, 0.5f);
    ape.resize(static_cast<size_t>(ratio) * lc);
    norm.resize(static_cast<size_t>(d));
    for (auto* v : {&ape, &norm})
      for (float& x : *v) x = normal(gen);
    w.ape = view("compressor.ape", {ratio, lc}, ape);
    w.norm = view("compressor.norm", {d}, norm);
  }
  static TensorView view(const char* name, std::vector<int64_t> shape, const std::vector<float>& v) {
    return TensorView{name, DType::F32, std::move(shape), reinterpret_cast<const uint8_t*>(v.data()),
                      v.size() * sizeof(float), next_storage_id()};
  }
};

bool compare(Ops& ops, const char* what, const Compressor& c, int tokens, const RopeTable& rope, int reps,
             std::mt19937& gen) {
  const int n_blocks = tokens / c.w.ratio, lc = static_cast<int>(c.w.latent());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> raw(static_cast<size_t>(tokens) * lc);
  for (float& x : raw) x = normal(gen);
  FBuf kv = ops.alloc(raw.size()), score = ops.alloc(raw.size());
  ops.upload(kv.data(), raw.data(), raw.size());
  for (float& x : raw) x = 2.0f * normal(gen);
  ops.upload(score.data(), raw.data(), raw.size());
  const size_t n_out = static_cast<size_t>(n_blocks) * c.w.d;
  Numerics num;  // kv_quant clamp, indexer_quant fp4: the engine's defaults
  double us[2];
  std::vector<float> got[2];
  const cuda::CompressKernel kernels[2] = {cuda::CompressKernel::one_pass, cuda::CompressKernel::pool_then_finish};
  for (int k = 0; k < 2; ++k) {
    FBuf out = ops.alloc(n_out);
    auto call = [&] {
      cuda::compress_blocks_with(ops, kernels[k], c.w, kv.data(), score.data(), n_blocks, nullptr, nullptr, 0, rope,
                                 1e-6, num, out.data());
    };
    us[k] = dev::time_op(ops, call, reps);
    got[k].resize(n_out);
    ops.download(got[k].data(), out.data(), n_out);
  }
  const bool bits = std::memcmp(got[0].data(), got[1].data(), n_out * sizeof(float)) == 0;
  std::printf("tokens %5d %-22s blocks %4d  shipped %8.1f us  split %8.1f us  x%.2f  %s\n", tokens, what, n_blocks,
              us[0], us[1], us[0] / us[1], bits ? "bits=shipped" : "BITS-DIFFER-FROM-SHIPPED");
  return bits;
}

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  std::unique_ptr<Ops> ops = make_cuda_ops(0, false);
  std::mt19937 gen(17);
  const RopeTable rope = make_rope_table(160000.0, 64, 4096, nullptr);
  ops->prepare(rope);
  const Compressor r128(128, 512, false, gen), r4(4, 512, false, gen), index(4, 128, true, gen);
  std::printf("dsv4-dev-compress on %d SMs\n", dev::device_sms());
  bool all_ok = true;
  for (int tokens : {1024, 2048}) {
    all_ok = compare(*ops, "attention r128 d512", r128, tokens, rope, reps, gen) && all_ok;
    all_ok = compare(*ops, "attention r4 d512", r4, tokens, rope, reps, gen) && all_ok;
    all_ok = compare(*ops, "indexer r4 d128 fp4", index, tokens, rope, reps, gen) && all_ok;
  }
  std::printf("%s\n", all_ok ? "all ok" : "FAILED");
  return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-compress", argc, argv, run_all); }
