// A debugging decorator of the op interface (kernels/forwarding_ops.h): records each
// op's output (downloaded to the host) in order, so two backends running the same model
// logic can be compared op by op and the first op that diverges found.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "kernels/forwarding_ops.h"

namespace dsv4::test {

struct TraceEntry {
  std::string op;
  std::vector<double> values;  // floats, or int outputs widened
  bool integral = false;
};

class TracingOps final : public ForwardingOps {
 public:
  explicit TracingOps(Ops& inner) : ForwardingOps(inner) {}
  std::vector<TraceEntry> trace;
  bool enabled = true;

  void add(float* y, const float* x, size_t n) override { inner().add(y, x, n); rec("add", y, n); }
  void embed(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override {
    inner().embed(t, ids, s, hc, h);
    rec("embed", h, static_cast<size_t>(s) * hc * t.dim(1));
  }
  void embed_dev(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override {
    inner().embed_dev(t, ids, s, hc, h);
    rec("embed", h, static_cast<size_t>(s) * hc * t.dim(1));
  }
  void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps, float* y) override {
    inner().rmsnorm(x, w, rows, n, eps, y);
    rec("rmsnorm " + w.name, y, static_cast<size_t>(rows) * n);
  }
  void head_rms(float* v, int vectors, int n, double eps) override {
    inner().head_rms(v, vectors, n, eps);
    rec("head_rms", v, static_cast<size_t>(vectors) * n);
  }
  void rope(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
            bool inverse) override {
    inner().rope(v, rows, heads, dim, t, pos, inverse);
    rec(inverse ? "inverse rope" : "rope", v, static_cast<size_t>(rows) * heads * dim);
  }
  void rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
                bool inverse) override {
    inner().rope_dev(v, rows, heads, dim, t, pos, inverse);
    rec(inverse ? "inverse rope" : "rope", v, static_cast<size_t>(rows) * heads * dim);
  }
  void head_rms_rope_dev(float* v, int rows, int heads, int dim, double e, const RopeTable& t,
                         const int32_t* pos) override {
    inner().head_rms_rope_dev(v, rows, heads, dim, e, t, pos);
    rec("head_rms rope", v, static_cast<size_t>(rows) * heads * dim);
  }
  void rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                             const int32_t* pos) override {
    inner().rope_hadamard_fp4_dev(v, rows, heads, dim, t, pos);
    rec("rope hadamard_fp4", v, static_cast<size_t>(rows) * heads * dim);
  }
  void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant q) override {
    inner().kv_act_quant(v, rows, dim, rd, q);
    rec("kv_act_quant", v, static_cast<size_t>(rows) * dim);
  }
  void hadamard_fp4(float* v, int vectors, int dim, bool fp4) override {
    inner().hadamard_fp4(v, vectors, dim, fp4);
    rec("hadamard_fp4", v, static_cast<size_t>(vectors) * dim);
  }
  void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double ne, double he,
              int it, float* y, float* post, float* comb) override {
    inner().hc_pre(h, s, hc, hidden, p, ne, he, it, y, post, comb);
    rec("hc_pre y " + p.fn.name, y, static_cast<size_t>(s) * hidden);
    rec("hc_pre post", post, static_cast<size_t>(s) * hc);
    rec("hc_pre comb", comb, static_cast<size_t>(s) * hc * hc);
  }
  void hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
               int hc, int hidden, float* out) override {
    inner().hc_post(x, res, post, comb, s, hc, hidden, out);
    rec("hc_post", out, static_cast<size_t>(s) * hc * hidden);
  }
  void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w, double ne,
               double he, float* y) override {
    inner().hc_head(h, s, hc, hidden, w, ne, he, y);
    rec("hc_head", y, static_cast<size_t>(s) * hidden);
  }
  void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override {
    inner().linear_fp8(w, x, rows, a, y);
    rec("linear_fp8 " + w.weight.name, y, static_cast<size_t>(rows) * w.out());
  }
  void linear_bf16(const TensorView& w, const float* x, int rows, bool a, float* y) override {
    inner().linear_bf16(w, x, rows, a, y);
    rec("linear_bf16 " + w.name, y, static_cast<size_t>(rows) * w.dim(0));
  }
  void linear_island(const TensorView& w, const float* x, int rows, float* y) override {
    inner().linear_island(w, x, rows, y);
    rec("linear_island " + w.name, y, static_cast<size_t>(rows) * w.dim(0));
  }
  void grouped_wo_a(const Fp8Linear& w, const float* o, int rows, int g, bool a, float* og) override {
    inner().grouped_wo_a(w, o, rows, g, a, og);
    rec("grouped_wo_a", og, static_cast<size_t>(rows) * w.out());
  }
  void linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override {
    inner().linear_fp8_gemm(w, x, rows, a, y);
    rec("linear_fp8_gemm " + w.weight.name, y, static_cast<size_t>(rows) * w.out());
  }
  void linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool a, float* y) override {
    inner().linear_bf16_gemm(w, x, rows, a, y);
    rec("linear_bf16_gemm " + w.name, y, static_cast<size_t>(rows) * w.dim(0));
  }
  void linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) override {
    inner().linear_island_gemm(w, x, rows, y);
    rec("linear_island_gemm " + w.name, y, static_cast<size_t>(rows) * w.dim(0));
  }
  void grouped_wo_a_gemm(const Fp8Linear& w, const float* o, int rows, int g, bool a,
                         float* og) override {
    inner().grouped_wo_a_gemm(w, o, rows, g, a, og);
    rec("grouped_wo_a_gemm", og, static_cast<size_t>(rows) * w.out());
  }
  void compress_blocks(const CompressorWeights& c, const float* kv, const float* sc, int nb,
                       const float* pkv, const float* psc, int fb, const RopeTable& r, double e,
                       const Numerics& num, float* out) override {
    inner().compress_blocks(c, kv, sc, nb, pkv, psc, fb, r, e, num, out);
    rec("compress_blocks " + c.wkv.name, out, static_cast<size_t>(nb) * c.d);
  }
  void indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float ws,
                    const float* keys, const int32_t* nv, int width, int base, int32_t* idx,
                    int stride, int col0) override {
    inner().indexer_topk(q, w, rows, heads, dim, ws, keys, nv, width, base, idx, stride, col0);
    reci("indexer_topk", idx, static_cast<size_t>(rows) * stride);
  }
  void indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim, float ws,
                        const float* keys, const int32_t* nv, int n_cap, int width, int base,
                        int32_t* idx, int stride, int col0) override {
    inner().indexer_topk_dev(q, w, rows, heads, dim, ws, keys, nv, n_cap, width, base, idx, stride,
                             col0);
    reci("indexer_topk", idx, static_cast<size_t>(rows) * stride);
  }
  void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                      const int32_t* idx, int width, const TensorView& sink, float scale,
                      float* o) override {
    inner().sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
    reci("attention index", idx, static_cast<size_t>(rows) * width);
    rec("sink_attention", o, static_cast<size_t>(rows) * heads * dim);
  }
  void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
             int ne, int k, float rs, int32_t* sel, float* wt) override {
    inner().route(b, x, rows, ids, hidden, ne, k, rs, sel, wt);
    reci("route sel", sel, static_cast<size_t>(rows) * k);
    rec("route wt", wt, static_cast<size_t>(rows) * k);
  }
  void route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                 int ne, int k, float rs, int32_t* sel, float* wt) override {
    inner().route_dev(b, x, rows, ids, hidden, ne, k, rs, sel, wt);
    reci("route sel", sel, static_cast<size_t>(rows) * k);
    rec("route wt", wt, static_cast<size_t>(rows) * k);
  }
  // The device-step ops: the row they wrote, found from the step position.
  void finish_kv_at(float* kv, const TensorView& w, int dim, double e, const RopeTable& r,
                    const int32_t* pos, KvQuant v, float* ring, int slots) override {
    inner().finish_kv_at(kv, w, dim, e, r, pos, v, ring, slots);
    rec("finish_kv_at", kv, static_cast<size_t>(dim));
  }
  void decode_index(const int32_t* pos, int ratio, int window, int tail, int32_t* idx,
                    int32_t* nv) override {
    inner().decode_index(pos, ratio, window, tail, idx, nv);
    reci("decode_index", idx, static_cast<size_t>(window) + tail);
    if (nv) reci("decode_index n_visible", nv, 1);
  }
  void compress_at(const CompressorWeights& c, const int32_t* pos, const float* kv, const float* sc,
                   float* pkv, float* psc, const RopeTable& r, double e, const Numerics& num,
                   float* store) override {
    inner().compress_at(c, pos, kv, sc, pkv, psc, r, e, num, store);
    const int64_t p = position(pos);
    if ((p + 1) % c.ratio == 0) rec("compress_at " + c.wkv.name, store + p / c.ratio * c.d, c.d);
  }
  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float lim, const Numerics& num, float* out) override {
    inner().moe(b, x, rows, sel, wt, k, lim, num, out);
    rec("moe", out, static_cast<size_t>(rows) * b.wq_a.in());
  }
  void moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                int k, float lim, const Numerics& num, float* out) override {
    inner().moe_gemm(b, x, rows, sel, wt, k, lim, num, out);
    rec("moe_gemm", out, static_cast<size_t>(rows) * b.wq_a.in());
  }

 private:
  void rec(const std::string& op, const float* p, size_t n) {
    if (!enabled) return;
    std::vector<float> host(n);
    inner().download(host.data(), p, n);
    trace.push_back({op, std::vector<double>(host.begin(), host.end()), false});
  }
  int64_t position(const int32_t* pos) {
    int32_t p = 0;
    inner().download_i32(&p, pos, 1);
    return p;
  }
  void reci(const std::string& op, const int32_t* p, size_t n) {
    if (!enabled) return;
    std::vector<int32_t> host(n);
    inner().download_i32(host.data(), p, n);
    trace.push_back({op, std::vector<double>(host.begin(), host.end()), true});
  }
};

}  // namespace dsv4::test
