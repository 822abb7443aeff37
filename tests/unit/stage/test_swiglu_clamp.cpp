// CHECKPOINT.md §6.2 coverage of the SwiGLU clamp (MODEL.md §4.23 step 2): over a
// 128-token run of the tiny model some routed expert's g or u pre-activation passes
// +-swiglu_limit, so the clamp changes the MoE output. Observed through an Ops decorator
// on the CPU backend (host memory), which re-runs every moe call without the clamp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "model/codecs.h"
#include "stage_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// Forwards every op to the CPU backend; moe() also measures the routed pre-activations.
class ClampProbe : public Ops {
 public:
  explicit ClampProbe(Ops& base) : b_(base) {}
  double max_g = 0, max_u = 0;  // largest |g|, |u| of a selected routed expert (f64 dot of f32 x)
  int calls = 0, calls_changed = 0;

  const char* name() const override { return b_.name(); }
  FBuf alloc(size_t n) override { return b_.alloc(n); }
  IBuf alloc_i32(size_t n) override { return b_.alloc_i32(n); }
  void fill(float* d, float v, size_t n) override { b_.fill(d, v, n); }
  void fill_i32(int32_t* d, int32_t v, size_t n) override { b_.fill_i32(d, v, n); }
  void copy(float* d, const float* s, size_t n) override { b_.copy(d, s, n); }
  void upload(float* d, const float* s, size_t n) override { b_.upload(d, s, n); }
  void download(float* d, const float* s, size_t n) override { b_.download(d, s, n); }
  void upload_i32(int32_t* d, const int32_t* s, size_t n) override { b_.upload_i32(d, s, n); }
  void download_i32(int32_t* d, const int32_t* s, size_t n) override { b_.download_i32(d, s, n); }
  void synchronize() override { b_.synchronize(); }
  void prepare(const TensorView& t) override { b_.prepare(t); }
  void prepare(const RopeTable& t) override { b_.prepare(t); }
  void add(float* y, const float* x, size_t n) override { b_.add(y, x, n); }
  void embed(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override {
    b_.embed(t, ids, s, hc, h);
  }
  void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps, float* y) override {
    b_.rmsnorm(x, w, rows, n, eps, y);
  }
  void head_rms(float* v, int vectors, int n, double eps) override { b_.head_rms(v, vectors, n, eps); }
  void rope(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
            bool inverse) override {
    b_.rope(v, rows, heads, dim, t, pos, inverse);
  }
  void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant q) override {
    b_.kv_act_quant(v, rows, dim, rd, q);
  }
  void hadamard_fp4(float* v, int vectors, int dim, bool fp4) override {
    b_.hadamard_fp4(v, vectors, dim, fp4);
  }
  void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double ne,
              double he, int it, float* y, float* post, float* comb) override {
    b_.hc_pre(h, s, hc, hidden, p, ne, he, it, y, post, comb);
  }
  void hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
               int hc, int hidden, float* out) override {
    b_.hc_post(x, res, post, comb, s, hc, hidden, out);
  }
  void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w, double ne,
               double he, float* y) override {
    b_.hc_head(h, s, hc, hidden, w, ne, he, y);
  }
  void hc_mean(const float* h, int s, int hc, int hidden, float* out, int stride) override {
    b_.hc_mean(h, s, hc, hidden, out, stride);
  }
  void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override {
    b_.linear_fp8(w, x, rows, a, y);
  }
  void linear_bf16(const TensorView& w, const float* x, int rows, bool a, float* y) override {
    b_.linear_bf16(w, x, rows, a, y);
  }
  void linear_island(const TensorView& w, const float* x, int rows, float* y) override {
    b_.linear_island(w, x, rows, y);
  }
  void grouped_wo_a(const Fp8Linear& w, const float* o, int rows, int g, bool a, float* og) override {
    b_.grouped_wo_a(w, o, rows, g, a, og);
  }
  void compress_blocks(const CompressorWeights& c, const float* kv, const float* sc, int nb,
                       const float* pkv, const float* psc, int fb, const RopeTable& r,
                       double eps, const Numerics& num, float* out) override {
    b_.compress_blocks(c, kv, sc, nb, pkv, psc, fb, r, eps, num, out);
  }
  void indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float ws,
                    const float* keys, const int32_t* nv, int width, int base, int32_t* idx,
                    int stride, int col0) override {
    b_.indexer_topk(q, w, rows, heads, dim, ws, keys, nv, width, base, idx, stride, col0);
  }
  void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                      const int32_t* idx, int width, const TensorView& sink, float scale,
                      float* o) override {
    b_.sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
  }
  void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
             int ne, int k, float scale, int32_t* sel, float* wt) override {
    b_.route(b, x, rows, ids, hidden, ne, k, scale, sel, wt);
  }
  void argmax(const float* logits, int rows, int64_t n, int32_t* out) override {
    b_.argmax(logits, rows, n, out);
  }

  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float limit, const Numerics& num, float* out) override {
    b_.moe(b, x, rows, sel, wt, k, limit, num, out);
    const int hidden = static_cast<int>(b.gate_weight.dim(1));
    std::vector<float> unclamped(static_cast<size_t>(rows) * hidden);
    b_.moe(b, x, rows, sel, wt, k, 0.0f, num, unclamped.data());
    ++calls;
    if (!same_bits(out, unclamped.data(), unclamped.size())) ++calls_changed;
    for (int t = 0; t < rows; ++t)
      for (int s = 0; s < k; ++s) {
        const ExpertWeights& e = b.experts.at(static_cast<size_t>(sel[t * k + s]));
        max_g = std::max(max_g, max_abs_row(decoded(e.w1), x + t * hidden, e.w1));
        max_u = std::max(max_u, max_abs_row(decoded(e.w3), x + t * hidden, e.w3));
      }
  }

 private:
  const std::vector<float>& decoded(const Fp4Linear& w) {
    auto it = cache_.find(w.weight.data);
    if (it == cache_.end()) it = cache_.emplace(w.weight.data, decode_fp4_linear(w)).first;
    return it->second;
  }
  static double max_abs_row(const std::vector<float>& w, const float* x, const Fp4Linear& l) {
    double m = 0;
    for (int64_t n = 0; n < l.rows; ++n) {
      double acc = 0;
      for (int64_t c = 0; c < l.cols; ++c) acc += static_cast<double>(x[c]) * w[n * l.cols + c];
      m = std::max(m, std::abs(acc));
    }
    return m;
  }

  Ops& b_;
  std::map<const uint8_t*, std::vector<float>> cache_;
};

}  // namespace

TEST_CASE("swiglu clamp is exercised: some routed g or u passes +-swiglu_limit in 128 tokens") {
  Checkpoint ckpt(tiny_dir());
  auto cpu = make_cpu_ops();
  ClampProbe probe(*cpu);
  const ModelConfig& c = ckpt.config();
  const std::vector<int32_t> ids = random_tokens(128, c.vocab_size, 5150);
  Pipeline run(ckpt, probe, {{0, 7}}, 128, false);
  run.prefill({ids.begin(), ids.begin() + 64});
  for (int p = 64; p < 128; ++p) run.decode(ids[p]);
  MESSAGE("max |g| = " << probe.max_g << ", max |u| = " << probe.max_u << " (limit "
                       << c.swiglu_limit << "); moe calls changed by the clamp: "
                       << probe.calls_changed << " of " << probe.calls);
  CHECK(std::max(probe.max_g, probe.max_u) > c.swiglu_limit);
  CHECK(probe.calls_changed > 0);
}
