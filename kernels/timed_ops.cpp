// The op profiler of kernels/timed_ops.h.
#include "kernels/timed_ops.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace dsv4 {

std::string weight_class(const std::string& tensor_name) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (begin <= tensor_name.size()) {
    const size_t dot = std::min(tensor_name.find('.', begin), tensor_name.size());
    parts.push_back(tensor_name.substr(begin, dot - begin));
    begin = dot + 1;
  }
  auto numeric = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (numeric(p) || (p == "layers" && i == 0) || (p == "weight" && i + 1 == parts.size()))
      continue;
    out += (out.empty() ? "" : ".") + p;
  }
  return out.empty() ? tensor_name : out;
}

std::vector<TimedOps::Row> TimedOps::rows() const {
  std::vector<Row> out;
  for (const auto& [op, s] : sums_) out.push_back(Row{op, s.calls, s.ms});
  std::stable_sort(out.begin(), out.end(),
                   [](const Row& a, const Row& b) { return a.total_ms > b.total_ms; });
  return out;
}

std::string TimedOps::table() const {
  const std::vector<Row> all = rows();
  double total = 0;
  size_t width = 2;  // "op"
  for (const Row& r : all) {
    total += r.total_ms;
    width = std::max(width, r.op.size());
  }
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  auto line = [&](const std::string& op, int64_t calls, double ms) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%10lld %12.3f %10.4f %6.1f%%\n", static_cast<long long>(calls),
                  ms, ms / steps, total > 0 ? 100.0 * ms / total : 0.0);
    return op + std::string(width - op.size() + 1, ' ') + buf;
  };
  std::string out = "op" + std::string(width - 1, ' ') +
                    "     calls     total ms    ms/step  share\n";
  int64_t calls = 0;
  for (const Row& r : all) {
    out += line(r.op, r.calls, r.total_ms);
    calls += r.calls;
  }
  out += line("total", calls, total);
  return out;
}

void TimedOps::fill(float* d, float v, size_t n) {
  timed("fill", [&] { inner().fill(d, v, n); });
}
void TimedOps::fill_i32(int32_t* d, int32_t v, size_t n) {
  timed("fill_i32", [&] { inner().fill_i32(d, v, n); });
}
void TimedOps::copy(float* d, const float* s, size_t n) {
  timed("copy", [&] { inner().copy(d, s, n); });
}
void TimedOps::upload(float* d, const float* h, size_t n) {
  timed("upload", [&] { inner().upload(d, h, n); });
}
void TimedOps::download(float* h, const float* s, size_t n) {
  timed("download", [&] { inner().download(h, s, n); });
}
void TimedOps::upload_i32(int32_t* d, const int32_t* h, size_t n) {
  timed("upload_i32", [&] { inner().upload_i32(d, h, n); });
}
void TimedOps::download_i32(int32_t* h, const int32_t* s, size_t n) {
  timed("download_i32", [&] { inner().download_i32(h, s, n); });
}
void TimedOps::add(float* y, const float* x, size_t n) {
  timed("add", [&] { inner().add(y, x, n); });
}
void TimedOps::embed(const TensorView& t, const int32_t* ids, int s, int hc, float* h) {
  timed("embed", [&] { inner().embed(t, ids, s, hc, h); });
}
void TimedOps::embed_dev(const TensorView& t, const int32_t* ids, int s, int hc, float* h) {
  timed("embed_dev", [&] { inner().embed_dev(t, ids, s, hc, h); });
}
void TimedOps::rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps, float* y) {
  timed("rmsnorm", [&] { inner().rmsnorm(x, w, rows, n, eps, y); });
}
void TimedOps::head_rms(float* v, int vectors, int n, double eps) {
  timed("head_rms", [&] { inner().head_rms(v, vectors, n, eps); });
}
void TimedOps::rope(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
                    bool inverse) {
  timed("rope", [&] { inner().rope(v, rows, heads, dim, t, pos, inverse); });
}
void TimedOps::rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                        const int32_t* pos, bool inverse) {
  timed("rope_dev", [&] { inner().rope_dev(v, rows, heads, dim, t, pos, inverse); });
}
void TimedOps::head_rms_rope_dev(float* v, int rows, int heads, int dim, double e,
                                 const RopeTable& t, const int32_t* pos) {
  timed("head_rms_rope_dev", [&] { inner().head_rms_rope_dev(v, rows, heads, dim, e, t, pos); });
}
void TimedOps::rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                                     const int32_t* pos) {
  timed("rope_hadamard_fp4_dev", [&] { inner().rope_hadamard_fp4_dev(v, rows, heads, dim, t, pos); });
}
void TimedOps::kv_act_quant(float* v, int rows, int dim, int rd, KvQuant q) {
  timed("kv_act_quant", [&] { inner().kv_act_quant(v, rows, dim, rd, q); });
}
void TimedOps::hadamard_fp4(float* v, int vectors, int dim, bool fp4) {
  timed("hadamard_fp4", [&] { inner().hadamard_fp4(v, vectors, dim, fp4); });
}
void TimedOps::hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double ne,
                      double he, int it, float* y, float* post, float* comb) {
  timed("hc_pre", [&] { inner().hc_pre(h, s, hc, hidden, p, ne, he, it, y, post, comb); });
}
void TimedOps::hc_post(const float* x, const float* res, const float* post, const float* comb,
                       int s, int hc, int hidden, float* out) {
  timed("hc_post", [&] { inner().hc_post(x, res, post, comb, s, hc, hidden, out); });
}
void TimedOps::hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w, double ne,
                       double he, float* y) {
  timed("hc_head", [&] { inner().hc_head(h, s, hc, hidden, w, ne, he, y); });
}
void TimedOps::hc_mean(const float* h, int s, int hc, int hidden, float* out, int stride) {
  timed("hc_mean", [&] { inner().hc_mean(h, s, hc, hidden, out, stride); });
}
void TimedOps::linear_fp8(const Fp8Linear& w, const float* x, int rows, bool a, float* y) {
  timed("linear_fp8 " + weight_class(w.weight.name), [&] { inner().linear_fp8(w, x, rows, a, y); });
}
void TimedOps::linear_bf16(const TensorView& w, const float* x, int rows, bool a, float* y) {
  timed("linear_bf16 " + weight_class(w.name), [&] { inner().linear_bf16(w, x, rows, a, y); });
}
void TimedOps::linear_island(const TensorView& w, const float* x, int rows, float* y) {
  timed("linear_island " + weight_class(w.name), [&] { inner().linear_island(w, x, rows, y); });
}
void TimedOps::grouped_wo_a(const Fp8Linear& w, const float* o, int rows, int g, bool a,
                            float* og) {
  timed("grouped_wo_a " + weight_class(w.weight.name),
        [&] { inner().grouped_wo_a(w, o, rows, g, a, og); });
}
void TimedOps::linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool a, float* y) {
  timed("linear_fp8_gemm " + weight_class(w.weight.name),
        [&] { inner().linear_fp8_gemm(w, x, rows, a, y); });
}
void TimedOps::linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool a, float* y) {
  timed("linear_bf16_gemm " + weight_class(w.name), [&] { inner().linear_bf16_gemm(w, x, rows, a, y); });
}
void TimedOps::linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) {
  timed("linear_island_gemm " + weight_class(w.name), [&] { inner().linear_island_gemm(w, x, rows, y); });
}
void TimedOps::grouped_wo_a_gemm(const Fp8Linear& w, const float* o, int rows, int g, bool a,
                                 float* og) {
  timed("grouped_wo_a_gemm " + weight_class(w.weight.name),
        [&] { inner().grouped_wo_a_gemm(w, o, rows, g, a, og); });
}
void TimedOps::compress_blocks(const CompressorWeights& c, const float* kv, const float* sc, int nb,
                               const float* pkv, const float* psc, int fb, const RopeTable& r,
                               double e, const Numerics& num, float* out) {
  timed("compress_blocks", [&] { inner().compress_blocks(c, kv, sc, nb, pkv, psc, fb, r, e, num, out); });
}
void TimedOps::indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float ws,
                            const float* keys, const int32_t* nv, int width, int base,
                            int32_t* idx, int stride, int col0) {
  timed("indexer_topk", [&] {
    inner().indexer_topk(q, w, rows, heads, dim, ws, keys, nv, width, base, idx, stride, col0);
  });
}
void TimedOps::indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim,
                                float ws, const float* keys, const int32_t* nv, int n_cap,
                                int width, int base, int32_t* idx, int stride, int col0) {
  timed("indexer_topk_dev", [&] {
    inner().indexer_topk_dev(q, w, rows, heads, dim, ws, keys, nv, n_cap, width, base, idx, stride,
                             col0);
  });
}
void TimedOps::sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                              const int32_t* idx, int width, const TensorView& sink, float scale,
                              float* o) {
  timed("sink_attention",
        [&] { inner().sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o); });
}
void TimedOps::route(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                     int hidden, int ne, int k, float rs, int32_t* sel, float* wt) {
  timed("route", [&] { inner().route(b, x, rows, ids, hidden, ne, k, rs, sel, wt); });
}
void TimedOps::route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                         int hidden, int ne, int k, float rs, int32_t* sel, float* wt) {
  timed("route_dev", [&] { inner().route_dev(b, x, rows, ids, hidden, ne, k, rs, sel, wt); });
}
void TimedOps::moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                   const float* wt, int k, float lim, const Numerics& num, float* out) {
  timed("moe", [&] { inner().moe(b, x, rows, sel, wt, k, lim, num, out); });
}
void TimedOps::moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                        const float* wt, int k, float lim, const Numerics& num, float* out) {
  timed("moe_gemm", [&] { inner().moe_gemm(b, x, rows, sel, wt, k, lim, num, out); });
}
void TimedOps::finish_kv_at(float* kv, const TensorView& w, int dim, double e, const RopeTable& r,
                            const int32_t* pos, KvQuant v, float* ring, int slots) {
  timed("finish_kv_at", [&] { inner().finish_kv_at(kv, w, dim, e, r, pos, v, ring, slots); });
}
void TimedOps::decode_index(const int32_t* pos, int ratio, int window, int tail, int32_t* idx,
                            int32_t* nv) {
  timed("decode_index", [&] { inner().decode_index(pos, ratio, window, tail, idx, nv); });
}
void TimedOps::compress_at(const CompressorWeights& c, const int32_t* pos, const float* kv,
                           const float* sc, float* pkv, float* psc, const RopeTable& r, double e,
                           const Numerics& num, float* store) {
  timed("compress_at", [&] { inner().compress_at(c, pos, kv, sc, pkv, psc, r, e, num, store); });
}
void TimedOps::argmax(const float* l, int rows, int64_t n, int32_t* out) {
  timed("argmax", [&] { inner().argmax(l, rows, n, out); });
}

}  // namespace dsv4
