// An Ops decorator (kernels/forwarding_ops.h) that writes every call down as one line:
// the op's name and every argument (pointers as addresses, weights by tensor name and
// address, rope tables by id), not the data. Two runs whose lines are equal issued the
// same op calls with the same arguments: what a replayed CUDA graph needs (issue 12).
#pragma once
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/forwarding_ops.h"

namespace dsv4::test {

class CallRecorder final : public ForwardingOps {
 public:
  explicit CallRecorder(Ops& inner) : ForwardingOps(inner) {}
  bool enabled = false;
  std::vector<std::string> calls;

  FBuf alloc(size_t n) override { log("alloc", n); return inner().alloc(n); }
  IBuf alloc_i32(size_t n) override { log("alloc_i32", n); return inner().alloc_i32(n); }
  void fill(float* d, float v, size_t n) override { log("fill", d, v, n); inner().fill(d, v, n); }
  void fill_i32(int32_t* d, int32_t v, size_t n) override {
    log("fill_i32", d, v, n);
    inner().fill_i32(d, v, n);
  }
  void copy(float* d, const float* s, size_t n) override { log("copy", d, s, n); inner().copy(d, s, n); }
  void upload(float* d, const float* h, size_t n) override { log("upload", d, h, n); inner().upload(d, h, n); }
  void download(float* h, const float* s, size_t n) override {
    log("download", h, s, n);
    inner().download(h, s, n);
  }
  void upload_i32(int32_t* d, const int32_t* h, size_t n) override {
    log("upload_i32", d, h, n);
    inner().upload_i32(d, h, n);
  }
  void download_i32(int32_t* h, const int32_t* s, size_t n) override {
    log("download_i32", h, s, n);
    inner().download_i32(h, s, n);
  }
  void synchronize() override { log("synchronize"); inner().synchronize(); }

  void add(float* y, const float* x, size_t n) override { log("add", y, x, n); inner().add(y, x, n); }
  void embed(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override {
    log("embed", t, ids, s, hc, h);
    inner().embed(t, ids, s, hc, h);
  }
  void embed_dev(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override {
    log("embed_dev", t, ids, s, hc, h);
    inner().embed_dev(t, ids, s, hc, h);
  }
  void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps, float* y) override {
    log("rmsnorm", x, w, rows, n, eps, y);
    inner().rmsnorm(x, w, rows, n, eps, y);
  }
  void head_rms(float* v, int vectors, int n, double eps) override {
    log("head_rms", v, vectors, n, eps);
    inner().head_rms(v, vectors, n, eps);
  }
  void rope(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
            bool inverse) override {
    log("rope", v, rows, heads, dim, t, pos, inverse);
    inner().rope(v, rows, heads, dim, t, pos, inverse);
  }
  void rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
                bool inverse) override {
    log("rope_dev", v, rows, heads, dim, t, pos, inverse);
    inner().rope_dev(v, rows, heads, dim, t, pos, inverse);
  }
  void head_rms_rope_dev(float* v, int rows, int heads, int dim, double e, const RopeTable& t,
                         const int32_t* pos) override {
    log("head_rms_rope_dev", v, rows, heads, dim, e, t, pos);
    inner().head_rms_rope_dev(v, rows, heads, dim, e, t, pos);
  }
  void rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                             const int32_t* pos) override {
    log("rope_hadamard_fp4_dev", v, rows, heads, dim, t, pos);
    inner().rope_hadamard_fp4_dev(v, rows, heads, dim, t, pos);
  }
  void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant q) override {
    log("kv_act_quant", v, rows, dim, rd, q);
    inner().kv_act_quant(v, rows, dim, rd, q);
  }
  void hadamard_fp4(float* v, int vectors, int dim, bool fp4) override {
    log("hadamard_fp4", v, vectors, dim, fp4);
    inner().hadamard_fp4(v, vectors, dim, fp4);
  }
  void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double ne, double he,
              int it, float* y, float* post, float* comb) override {
    log("hc_pre", h, s, hc, hidden, p.fn, ne, he, it, y, post, comb);
    inner().hc_pre(h, s, hc, hidden, p, ne, he, it, y, post, comb);
  }
  void hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
               int hc, int hidden, float* out) override {
    log("hc_post", x, res, post, comb, s, hc, hidden, out);
    inner().hc_post(x, res, post, comb, s, hc, hidden, out);
  }
  void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w, double ne,
               double he, float* y) override {
    log("hc_head", h, s, hc, hidden, w.hc_head_fn, ne, he, y);
    inner().hc_head(h, s, hc, hidden, w, ne, he, y);
  }
  void hc_mean(const float* h, int s, int hc, int hidden, float* out, int stride) override {
    log("hc_mean", h, s, hc, hidden, out, stride);
    inner().hc_mean(h, s, hc, hidden, out, stride);
  }
  void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override {
    log("linear_fp8", w.weight, x, rows, a, y);
    inner().linear_fp8(w, x, rows, a, y);
  }
  void linear_bf16(const TensorView& w, const float* x, int rows, bool a, float* y) override {
    log("linear_bf16", w, x, rows, a, y);
    inner().linear_bf16(w, x, rows, a, y);
  }
  void linear_island(const TensorView& w, const float* x, int rows, float* y) override {
    log("linear_island", w, x, rows, y);
    inner().linear_island(w, x, rows, y);
  }
  void grouped_wo_a(const Fp8Linear& w, const float* o, int rows, int g, bool a, float* og) override {
    log("grouped_wo_a", w.weight, o, rows, g, a, og);
    inner().grouped_wo_a(w, o, rows, g, a, og);
  }
  void compress_blocks(const CompressorWeights& c, const float* kv, const float* sc, int nb,
                       const float* pkv, const float* psc, int fb, const RopeTable& r, double e,
                       const Numerics& num, float* out) override {
    log("compress_blocks", c.wkv, kv, sc, nb, pkv, psc, fb, r, e, num, out);
    inner().compress_blocks(c, kv, sc, nb, pkv, psc, fb, r, e, num, out);
  }
  void indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float ws,
                    const float* keys, const int32_t* nv, int width, int base, int32_t* idx,
                    int stride, int col0) override {
    log("indexer_topk", q, w, rows, heads, dim, ws, keys, nv, width, base, idx, stride, col0);
    inner().indexer_topk(q, w, rows, heads, dim, ws, keys, nv, width, base, idx, stride, col0);
  }
  void indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim, float ws,
                        const float* keys, const int32_t* nv, int n_cap, int width, int base,
                        int32_t* idx, int stride, int col0) override {
    log("indexer_topk_dev", q, w, rows, heads, dim, ws, keys, nv, n_cap, width, base, idx, stride,
        col0);
    inner().indexer_topk_dev(q, w, rows, heads, dim, ws, keys, nv, n_cap, width, base, idx, stride,
                             col0);
  }
  void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                      const int32_t* idx, int width, const TensorView& sink, float scale,
                      float* o) override {
    log("sink_attention", q, rows, heads, dim, kv, idx, width, sink, scale, o);
    inner().sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
  }
  void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
             int ne, int k, float rs, int32_t* sel, float* wt) override {
    log("route", b.gate_weight, x, rows, ids, hidden, ne, k, rs, sel, wt);
    inner().route(b, x, rows, ids, hidden, ne, k, rs, sel, wt);
  }
  void route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                 int ne, int k, float rs, int32_t* sel, float* wt) override {
    log("route_dev", b.gate_weight, x, rows, ids, hidden, ne, k, rs, sel, wt);
    inner().route_dev(b, x, rows, ids, hidden, ne, k, rs, sel, wt);
  }
  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float lim, const Numerics& num, float* out) override {
    log("moe", b.gate_weight, x, rows, sel, wt, k, lim, num, out);
    inner().moe(b, x, rows, sel, wt, k, lim, num, out);
  }
  void finish_kv_at(float* kv, const TensorView& w, int dim, double e, const RopeTable& r,
                    const int32_t* pos, KvQuant v, float* ring, int slots) override {
    log("finish_kv_at", kv, w, dim, e, r, pos, v, ring, slots);
    inner().finish_kv_at(kv, w, dim, e, r, pos, v, ring, slots);
  }
  void decode_index(const int32_t* pos, int ratio, int window, int tail, int32_t* idx,
                    int32_t* nv) override {
    log("decode_index", pos, ratio, window, tail, idx, nv);
    inner().decode_index(pos, ratio, window, tail, idx, nv);
  }
  void compress_at(const CompressorWeights& c, const int32_t* pos, const float* kv, const float* sc,
                   float* pkv, float* psc, const RopeTable& r, double e, const Numerics& num,
                   float* store) override {
    log("compress_at", c.wkv, pos, kv, sc, pkv, psc, r, e, num, store);
    inner().compress_at(c, pos, kv, sc, pkv, psc, r, e, num, store);
  }
  void argmax(const float* l, int rows, int64_t n, int32_t* out) override {
    log("argmax", l, rows, n, out);
    inner().argmax(l, rows, n, out);
  }
  // The step's key, then its ops one by one (ForwardingOps: nothing is captured here).
  void run_step(const StepKey& k, const std::function<void()>& body) override {
    log("run_step", k.owner, k.rows, k.buffers[0], k.buffers[1], k.buffers[2]);
    body();
  }

 private:
  static void put(std::ostringstream& s, const TensorView& t) {
    s << t.name << '@' << static_cast<const void*>(t.data);
  }
  static void put(std::ostringstream& s, const RopeTable& t) { s << "rope#" << t.id; }
  static void put(std::ostringstream& s, const Numerics& n) {
    s << "numerics(" << static_cast<int>(n.kv_quant) << static_cast<int>(n.expert_arm)
      << static_cast<int>(n.dense_act) << static_cast<int>(n.indexer_quant) << ')';
  }
  template <class T>
  static void put(std::ostringstream& s, const T& v) {
    if constexpr (std::is_pointer_v<T>)
      s << static_cast<const void*>(v);
    else if constexpr (std::is_enum_v<T>)
      s << static_cast<int>(v);
    else
      s << v;
  }
  template <class... A>
  void log(const char* op, const A&... a) {
    if (!enabled) return;
    std::ostringstream s;
    s.precision(17);
    s << op;
    ((s << ' ', put(s, a)), ...);
    calls.push_back(s.str());
  }
};

}  // namespace dsv4::test
