// An Ops decorator that forwards every call to an inner backend. Debugging tools derive
// from it and override only the ops they observe (tests/gpu/tracing_ops.h records every
// op's output; the SwiGLU clamp probe re-runs moe), so the op list lives in one place.
// A decorated backend captures no step graph (run_step runs the body op by op).
#pragma once
#include "kernels/ops.h"

namespace dsv4 {

class ForwardingOps : public Ops {
 public:
  explicit ForwardingOps(Ops& inner) : in_(inner) {}
  Ops& inner() { return in_; }

  const char* name() const override { return in_.name(); }
  FBuf alloc(size_t n) override { return in_.alloc(n); }
  IBuf alloc_i32(size_t n) override { return in_.alloc_i32(n); }
  void fill(float* d, float v, size_t n) override { in_.fill(d, v, n); }
  void fill_i32(int32_t* d, int32_t v, size_t n) override { in_.fill_i32(d, v, n); }
  void copy(float* d, const float* s, size_t n) override { in_.copy(d, s, n); }
  void upload(float* d, const float* h, size_t n) override { in_.upload(d, h, n); }
  void download(float* h, const float* s, size_t n) override { in_.download(h, s, n); }
  void upload_i32(int32_t* d, const int32_t* h, size_t n) override { in_.upload_i32(d, h, n); }
  void download_i32(int32_t* h, const int32_t* s, size_t n) override { in_.download_i32(h, s, n); }
  void synchronize() override { in_.synchronize(); }
  void prepare(const TensorView& t) override { in_.prepare(t); }
  void prepare(const RopeTable& t) override { in_.prepare(t); }
  std::unique_ptr<WeightMemory> make_weight_memory() override { return in_.make_weight_memory(); }

  void add(float* y, const float* x, size_t n) override { in_.add(y, x, n); }
  void embed(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override {
    in_.embed(t, ids, s, hc, h);
  }
  void embed_dev(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override {
    in_.embed_dev(t, ids, s, hc, h);
  }
  void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps, float* y) override {
    in_.rmsnorm(x, w, rows, n, eps, y);
  }
  void head_rms(float* v, int vectors, int n, double eps) override { in_.head_rms(v, vectors, n, eps); }
  void rope(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
            bool inverse) override {
    in_.rope(v, rows, heads, dim, t, pos, inverse);
  }
  void rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
                bool inverse) override {
    in_.rope_dev(v, rows, heads, dim, t, pos, inverse);
  }
  void head_rms_rope_dev(float* v, int rows, int heads, int dim, double e, const RopeTable& t,
                         const int32_t* pos) override {
    in_.head_rms_rope_dev(v, rows, heads, dim, e, t, pos);
  }
  void rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                             const int32_t* pos) override {
    in_.rope_hadamard_fp4_dev(v, rows, heads, dim, t, pos);
  }
  void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant q) override {
    in_.kv_act_quant(v, rows, dim, rd, q);
  }
  void hadamard_fp4(float* v, int vectors, int dim, bool fp4) override {
    in_.hadamard_fp4(v, vectors, dim, fp4);
  }
  void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double ne, double he,
              int it, float* y, float* post, float* comb) override {
    in_.hc_pre(h, s, hc, hidden, p, ne, he, it, y, post, comb);
  }
  void hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
               int hc, int hidden, float* out) override {
    in_.hc_post(x, res, post, comb, s, hc, hidden, out);
  }
  void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w, double ne,
               double he, float* y) override {
    in_.hc_head(h, s, hc, hidden, w, ne, he, y);
  }
  void hc_mean(const float* h, int s, int hc, int hidden, float* out, int stride) override {
    in_.hc_mean(h, s, hc, hidden, out, stride);
  }
  void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override {
    in_.linear_fp8(w, x, rows, a, y);
  }
  void linear_bf16(const TensorView& w, const float* x, int rows, bool a, float* y) override {
    in_.linear_bf16(w, x, rows, a, y);
  }
  void linear_island(const TensorView& w, const float* x, int rows, float* y) override {
    in_.linear_island(w, x, rows, y);
  }
  void grouped_wo_a(const Fp8Linear& w, const float* o, int rows, int g, bool a, float* og) override {
    in_.grouped_wo_a(w, o, rows, g, a, og);
  }
  void linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override {
    in_.linear_fp8_gemm(w, x, rows, a, y);
  }
  void linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool a, float* y) override {
    in_.linear_bf16_gemm(w, x, rows, a, y);
  }
  void linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) override {
    in_.linear_island_gemm(w, x, rows, y);
  }
  void grouped_wo_a_gemm(const Fp8Linear& w, const float* o, int rows, int g, bool a,
                         float* og) override {
    in_.grouped_wo_a_gemm(w, o, rows, g, a, og);
  }
  void compress_blocks(const CompressorWeights& c, const float* kv, const float* sc, int nb,
                       const float* pkv, const float* psc, int fb, const RopeTable& r, double e,
                       const Numerics& num, float* out) override {
    in_.compress_blocks(c, kv, sc, nb, pkv, psc, fb, r, e, num, out);
  }
  void indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float ws,
                    const float* keys, const int32_t* nv, int width, int base, int32_t* idx,
                    int stride, int col0) override {
    in_.indexer_topk(q, w, rows, heads, dim, ws, keys, nv, width, base, idx, stride, col0);
  }
  void indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim, float ws,
                        const float* keys, const int32_t* nv, int n_cap, int width, int base,
                        int32_t* idx, int stride, int col0) override {
    in_.indexer_topk_dev(q, w, rows, heads, dim, ws, keys, nv, n_cap, width, base, idx, stride,
                         col0);
  }
  void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                      const int32_t* idx, int width, const TensorView& sink, float scale,
                      float* o) override {
    in_.sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
  }
  void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
             int ne, int k, float rs, int32_t* sel, float* wt) override {
    in_.route(b, x, rows, ids, hidden, ne, k, rs, sel, wt);
  }
  void route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                 int ne, int k, float rs, int32_t* sel, float* wt) override {
    in_.route_dev(b, x, rows, ids, hidden, ne, k, rs, sel, wt);
  }
  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float lim, const Numerics& num, float* out) override {
    in_.moe(b, x, rows, sel, wt, k, lim, num, out);
  }
  void moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                int k, float lim, const Numerics& num, float* out) override {
    in_.moe_gemm(b, x, rows, sel, wt, k, lim, num, out);
  }
  void finish_kv_at(float* kv, const TensorView& w, int dim, double e, const RopeTable& r,
                    const int32_t* pos, KvQuant v, float* ring, int slots) override {
    in_.finish_kv_at(kv, w, dim, e, r, pos, v, ring, slots);
  }
  void decode_index(const int32_t* pos, int ratio, int window, int tail, int32_t* idx,
                    int32_t* nv) override {
    in_.decode_index(pos, ratio, window, tail, idx, nv);
  }
  void compress_at(const CompressorWeights& c, const int32_t* pos, const float* kv, const float* sc,
                   float* pkv, float* psc, const RopeTable& r, double e, const Numerics& num,
                   float* store) override {
    in_.compress_at(c, pos, kv, sc, pkv, psc, r, e, num, store);
  }
  void argmax(const float* l, int rows, int64_t n, int32_t* out) override {
    in_.argmax(l, rows, n, out);
  }
  // A decorator observes (or synchronizes around) every op, so it runs the step's ops
  // itself: nothing is captured beneath it, and the inner backend's counts stay as they
  // are (kernels/ops.h run_step).
  void run_step(const StepKey&, const std::function<void()>& body) override { body(); }
  void on_line(int line) override { in_.on_line(line); }
  void join_lines() override { in_.join_lines(); }
  StepGraphCounts step_graph_counts() const override { return in_.step_graph_counts(); }

 private:
  Ops& in_;
};

}  // namespace dsv4
