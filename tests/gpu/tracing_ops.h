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

class TracingOps final : public OpDecorator<TracingOps> {
 public:
  explicit TracingOps(Ops& inner) : OpDecorator(inner) {}
  std::vector<TraceEntry> trace;
  bool enabled = true;

 private:
  friend class OpDecorator<TracingOps>;
  // Runs the op, then records what the record() overload of its tag names. An op
  // without one (a transfer, hc_mean, the head's argmax) records nothing, and so would an
  // overload whose parameters do not take the op's arguments: test_tracing_ops.cpp
  // (tests/unit/stage) checks the records on the CPU backend.
  template <class O, class Run, class... A>
  decltype(auto) around(O op, Run&& run, const A&... a) {
    if constexpr (requires { record(op, a...); }) {
      run();
      record(op, a...);
    } else {
      return run();
    }
  }

  // ---- what each op records: its outputs, sized by its arguments ----
  void record(OpTag<"add">, float* y, const float*, size_t n) { rec("add", y, n); }
  template <OneOf<OpTag<"embed">, OpTag<"embed_dev">> O>
  void record(O, const TensorView& t, const int32_t*, int s, int hc, float* h) {
    rec("embed", h, static_cast<size_t>(s) * hc * t.dim(1));
  }
  void record(OpTag<"rmsnorm">, const float*, const TensorView& w, int rows, int n, double,
              float* y) {
    rec("rmsnorm " + w.name, y, static_cast<size_t>(rows) * n);
  }
  void record(OpTag<"head_rms">, float* v, int vectors, int n, double) {
    rec("head_rms", v, static_cast<size_t>(vectors) * n);
  }
  template <OneOf<OpTag<"rope">, OpTag<"rope_dev">> O>
  void record(O, float* v, int rows, int heads, int dim, const RopeTable&, const int32_t*,
              bool inverse) {
    rec(inverse ? "inverse rope" : "rope", v, static_cast<size_t>(rows) * heads * dim);
  }
  template <OneOf<OpTag<"head_rms_rope">, OpTag<"head_rms_rope_dev">> O>
  void record(O, float* v, int rows, int heads, int dim, double, const RopeTable&, const int32_t*) {
    rec("head_rms rope", v, static_cast<size_t>(rows) * heads * dim);
  }
  void record(OpTag<"rope_hadamard_fp4_dev">, float* v, int rows, int heads, int dim, const RopeTable&,
              const int32_t*) {
    rec("rope hadamard_fp4", v, static_cast<size_t>(rows) * heads * dim);
  }
  void record(OpTag<"kv_act_quant">, float* v, int rows, int dim, int, KvQuant) {
    rec("kv_act_quant", v, static_cast<size_t>(rows) * dim);
  }
  void record(OpTag<"finish_kv">, float* kv, const TensorView&, int rows, int dim, double, const RopeTable&,
              const int32_t*, KvQuant) {
    rec("finish_kv", kv, static_cast<size_t>(rows) * dim);
  }
  void record(OpTag<"hadamard_fp4">, float* v, int vectors, int dim, bool) {
    rec("hadamard_fp4", v, static_cast<size_t>(vectors) * dim);
  }
  void record(OpTag<"hc_pre">, const float*, int s, int hc, int hidden, const HcParams& p,
              double, double, int, float* y, float* post, float* comb) {
    rec("hc_pre y " + p.fn.name, y, static_cast<size_t>(s) * hidden);
    rec("hc_pre post", post, static_cast<size_t>(s) * hc);
    rec("hc_pre comb", comb, static_cast<size_t>(s) * hc * hc);
  }
  // The fused ops record what the ops they replace record, in their order, so a trace
  // reads the same either way.
  void record(OpTag<"hc_pre_norm">, const float* h, int s, int hc, int hidden, const HcParams& p, double eps,
              double hc_eps, int iters, const TensorView& norm, float* y, float* post, float* comb, float* x) {
    record(OpTag<"hc_pre">{}, h, s, hc, hidden, p, eps, hc_eps, iters, y, post, comb);
    record(OpTag<"rmsnorm">{}, y, norm, s, hidden, eps, x);
  }
  void record(OpTag<"hc_post">, const float*, const float*, const float*, const float*, int s,
              int hc, int hidden, float* out) {
    rec("hc_post", out, static_cast<size_t>(s) * hc * hidden);
  }
  void record(OpTag<"hc_head">, const float*, int s, int, int hidden, const HeadWeights&, double,
              double, float* y) {
    rec("hc_head", y, static_cast<size_t>(s) * hidden);
  }
  // Linears: "op weight-name" (the grouped wo_a by op alone), y [rows, out].
  template <OneOf<OpTag<"linear_fp8">, OpTag<"linear_fp8_gemm">> O>
  void record(O, const Fp8Linear& w, const float*, int rows, bool, float* y) {
    rec(std::string(O::name) + " " + w.weight.name, y, static_cast<size_t>(rows) * w.out());
  }
  template <OneOf<OpTag<"linear_bf16">, OpTag<"linear_bf16_gemm">> O>
  void record(O, const TensorView& w, const float*, int rows, bool, float* y) {
    rec(std::string(O::name) + " " + w.name, y, static_cast<size_t>(rows) * w.dim(0));
  }
  template <OneOf<OpTag<"linear_island">, OpTag<"linear_island_gemm">> O>
  void record(O, const TensorView& w, const float*, int rows, float* y) {
    rec(std::string(O::name) + " " + w.name, y, static_cast<size_t>(rows) * w.dim(0));
  }
  template <OneOf<OpTag<"grouped_wo_a">, OpTag<"grouped_wo_a_gemm">> O>
  void record(O, const Fp8Linear& w, const float*, int rows, int, bool, float* og) {
    rec(std::string(O::name), og, static_cast<size_t>(rows) * w.out());
  }
  void record(OpTag<"compress_blocks">, const CompressorWeights& c, const float*, const float*,
              int nb, const float*, const float*, int, const RopeTable&, double, const Numerics&,
              float* out) {
    rec("compress_blocks " + c.wkv.name, out, static_cast<size_t>(nb) * c.d);
  }
  void record(OpTag<"indexer_topk">, const float*, const float*, int rows, int, int, float,
              const float*, const int32_t*, int, int, int32_t* idx, int stride, int) {
    reci("indexer_topk", idx, static_cast<size_t>(rows) * stride);
  }
  void record(OpTag<"indexer_topk_dev">, const float*, const float*, int rows, int, int, float,
              const float*, const int32_t*, int, int, int, int32_t* idx, int stride, int) {
    reci("indexer_topk", idx, static_cast<size_t>(rows) * stride);
  }
  template <OneOf<OpTag<"sink_attention">, OpTag<"sink_attention_gemm">> O>
  void record(O, const float*, int rows, int heads, int dim, const float*, const int32_t* idx, int width,
              const TensorView&, float, float* o) {
    reci("attention index", idx, static_cast<size_t>(rows) * width);
    rec(std::string(O::name), o, static_cast<size_t>(rows) * heads * dim);
  }
  void record(OpTag<"sink_attention_rope_dev">, const float* q, int rows, int heads, int dim, const float* kv,
              const int32_t* idx, int width, const TensorView& sink, float scale, const RopeTable& t,
              const int32_t* positions, float* o) {
    record(OpTag<"sink_attention">{}, q, rows, heads, dim, kv, idx, width, sink, scale, o);
    record(OpTag<"rope_dev">{}, o, rows, heads, dim, t, positions, true);
  }
  template <OneOf<OpTag<"route">, OpTag<"route_dev">, OpTag<"route_gemm">> O>
  void record(O, const BlockWeights&, const float*, int rows, const int32_t*, int, int, int k,
              float, int32_t* sel, float* wt) {
    reci("route sel", sel, static_cast<size_t>(rows) * k);
    rec("route wt", wt, static_cast<size_t>(rows) * k);
  }
  template <OneOf<OpTag<"moe">, OpTag<"moe_gemm">> O>
  void record(O, const BlockWeights& b, const float*, int rows, const int32_t*, const float*, int,
              float, const Numerics&, float* out) {
    rec(std::string(O::name), out, static_cast<size_t>(rows) * b.wq_a.in());
  }
  void record(OpTag<"moe_hc_post">, const BlockWeights& b, const float* x, int rows, const int32_t* sel,
              const float* wt, int k, float limit, const Numerics& num, float* out, const float* res,
              const float* post, const float* comb, int hc, float* h) {
    record(OpTag<"moe">{}, b, x, rows, sel, wt, k, limit, num, out);
    record(OpTag<"hc_post">{}, out, res, post, comb, rows, hc, static_cast<int>(b.wq_a.in()), h);
  }
  // The device-step ops: the row they wrote, found from the step position.
  void record(OpTag<"finish_kv_at">, float* kv, const TensorView&, int dim, double, const RopeTable&,
              const int32_t*, KvQuant, float*, int) {
    rec("finish_kv_at", kv, static_cast<size_t>(dim));
  }
  void record(OpTag<"decode_index">, const int32_t*, int rows, int, int window, int tail, int, int32_t* idx,
              int32_t* nv) {
    reci("decode_index", idx, static_cast<size_t>(rows) * (window + tail));
    if (nv) reci("decode_index n_visible", nv, static_cast<size_t>(rows));
  }
  void record(OpTag<"compress_at">, const CompressorWeights& c, const int32_t* pos, const float*,
              const float*, float*, float*, const RopeTable&, double, const Numerics&, float* store) {
    const int64_t p = position(pos);
    if ((p + 1) % c.ratio == 0) rec("compress_at " + c.wkv.name, store + p / c.ratio * c.d, c.d);
  }

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
