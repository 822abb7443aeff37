// The CPU reference backend (oracle arm): host memory, synchronous ops forwarding to the
// free functions of kernels/cpu/*.h, weights decoded once into a CpuWeightCache.
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/compressor.h"
#include "kernels/cpu/decode_step.h"
#include "kernels/cpu/hc.h"
#include "kernels/cpu/head.h"
#include "kernels/cpu/indexer.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/weight_cache.h"
#include "kernels/ops.h"

namespace dsv4 {

namespace {

template <class T>
DeviceBuffer<T> host_alloc(size_t n) {
  return DeviceBuffer<T>(new T[n](), n, [](void* p) { delete[] static_cast<T*>(p); });
}

class CpuOps final : public Ops {
 public:
  const char* name() const override { return "cpu"; }

  FBuf alloc(size_t n) override { return host_alloc<float>(n); }
  IBuf alloc_i32(size_t n) override { return host_alloc<int32_t>(n); }
  void fill(float* dst, float value, size_t n) override { std::fill_n(dst, n, value); }
  void fill_i32(int32_t* dst, int32_t value, size_t n) override { std::fill_n(dst, n, value); }
  void copy(float* dst, const float* src, size_t n) override { copy_n(dst, src, n); }
  void upload(float* dst, const float* host, size_t n) override { copy_n(dst, host, n); }
  void download(float* host, const float* src, size_t n) override { copy_n(host, src, n); }
  void upload_i32(int32_t* dst, const int32_t* host, size_t n) override { copy_n(dst, host, n); }
  void download_i32(int32_t* host, const int32_t* src, size_t n) override {
    copy_n(host, src, n);
  }
  void synchronize() override {}
  // Weights are host-resident already; the cache decodes them on first use.
  void prepare(const TensorView&) override {}
  void prepare(const RopeTable&) override {}
  std::unique_ptr<WeightMemory> make_weight_memory() override { return make_host_weight_memory(); }

  void add(float* y, const float* x, size_t n) override { cpu_add(y, x, n); }
  void embed(const TensorView& table, const int32_t* ids, int s, int hc, float* h) override {
    cpu_embed(table, ids, s, hc, h);
  }
  // Backend memory is host memory: the *_dev ops are their host twins.
  void embed_dev(const TensorView& table, const int32_t* ids, int s, int hc, float* h) override {
    cpu_embed(table, ids, s, hc, h);
  }
  void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps,
               float* y) override {
    cpu_rmsnorm(cache_, x, w, rows, n, eps, y);
  }
  void head_rms(float* v, int vectors, int n, double eps) override {
    cpu_head_rms(v, vectors, n, eps);
  }
  void rope(float* v, int rows, int heads, int dim, const RopeTable& t,
            const int32_t* positions, bool inverse) override {
    cpu_rope(v, rows, heads, dim, t, positions, inverse);
  }
  void rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                const int32_t* positions, bool inverse) override {
    cpu_rope(v, rows, heads, dim, t, positions, inverse);
  }
  void head_rms_rope(float* v, int rows, int heads, int dim, double eps, const RopeTable& t,
                     const int32_t* positions) override {
    cpu_head_rms(v, rows * heads, dim, eps);
    cpu_rope(v, rows, heads, dim, t, positions, false);
  }
  void head_rms_rope_dev(float* v, int rows, int heads, int dim, double eps, const RopeTable& t,
                         const int32_t* positions) override {
    head_rms_rope(v, rows, heads, dim, eps, t, positions);
  }
  void rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                             const int32_t* positions) override {
    cpu_rope(v, rows, heads, dim, t, positions, false);
    cpu_hadamard_fp4(v, rows * heads, dim, true);
  }
  void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant variant) override {
    cpu_kv_act_quant(v, rows, dim, rd, variant);
  }
  void finish_kv(float* kv, const TensorView& norm, int rows, int dim, double eps, const RopeTable& rope,
                 const int32_t* positions, KvQuant variant) override {
    cpu_finish_kv(cache_, kv, norm, rows, dim, eps, rope, positions, variant);
  }
  void hadamard_fp4(float* v, int vectors, int dim, bool fp4) override {
    cpu_hadamard_fp4(v, vectors, dim, fp4);
  }

  void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
              double hc_eps, int sinkhorn_iters, float* y, float* post, float* comb) override {
    cpu_hc_pre(cache_, h, s, hc, hidden, p, norm_eps, hc_eps, sinkhorn_iters, y, post, comb);
  }
  void hc_pre_norm(const float* h, int s, int hc, int hidden, const HcParams& p, double norm_eps,
                   double hc_eps, int sinkhorn_iters, const TensorView& norm, float* y, float* post,
                   float* comb, float* x) override {
    hc_pre(h, s, hc, hidden, p, norm_eps, hc_eps, sinkhorn_iters, y, post, comb);
    rmsnorm(y, norm, s, hidden, norm_eps, x);
  }
  void hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
               int hc, int hidden, float* out) override {
    cpu_hc_post(x, res, post, comb, s, hc, hidden, out);
  }
  void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w,
               double norm_eps, double hc_eps, float* y) override {
    cpu_hc_head(cache_, h, s, hc, hidden, w, norm_eps, hc_eps, y);
  }
  void hc_mean(const float* h, int s, int hc, int hidden, float* out, int out_stride) override {
    cpu_hc_mean(h, s, hc, hidden, out, out_stride);
  }

  void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                  float* y) override {
    cpu_linear_fp8(cache_, w, x, rows, act_bf16, y);
  }
  void linear_bf16(const TensorView& w, const float* x, int rows, bool act_bf16,
                   float* y) override {
    cpu_linear_bf16(cache_, w, x, rows, act_bf16, y);
  }
  void linear_island(const TensorView& w, const float* x, int rows, float* y) override {
    cpu_linear_island(cache_, w, x, rows, y);
  }
  void grouped_wo_a(const Fp8Linear& wo_a, const float* o, int rows, int groups, bool act_bf16,
                    float* og) override {
    cpu_grouped_wo_a(cache_, wo_a, o, rows, groups, act_bf16, og);
  }
  // The prefill GEMMs are the reference linears here (kernels/ops.h).
  void linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool act_bf16,
                       float* y) override {
    linear_fp8(w, x, rows, act_bf16, y);
  }
  void linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool act_bf16,
                        float* y) override {
    linear_bf16(w, x, rows, act_bf16, y);
  }
  void linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) override {
    linear_island(w, x, rows, y);
  }
  void grouped_wo_a_gemm(const Fp8Linear& wo_a, const float* o, int rows, int groups,
                         bool act_bf16, float* og) override {
    grouped_wo_a(wo_a, o, rows, groups, act_bf16, og);
  }

  void compress_blocks(const CompressorWeights& c, const float* kv, const float* score,
                       int n_blocks, const float* prev_kv, const float* prev_score,
                       int first_block, const RopeTable& rope, double norm_eps,
                       const Numerics& num, float* out) override {
    cpu_compress_blocks(cache_, c, kv, score, n_blocks, prev_kv, prev_score, first_block, rope,
                        norm_eps, num, out);
  }
  void indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float wscale,
                    const float* keys, const int32_t* n_visible, int width, int index_base,
                    int32_t* idx, int idx_stride, int col0) override {
    cpu_indexer_topk(q, w, rows, heads, dim, wscale, keys, n_visible, width, index_base, idx,
                     idx_stride, col0);
  }
  void indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim,
                        float wscale, const float* keys, const int32_t* n_visible, int n_cap,
                        int width, int index_base, int32_t* idx, int idx_stride,
                        int col0) override {
    for (int t = 0; t < rows; ++t)
      DSV4_CHECK(n_visible[t] <= n_cap, "indexer_topk_dev: row ", t, " sees ", n_visible[t],
                 " keys, more than n_cap ", n_cap);
    cpu_indexer_topk(q, w, rows, heads, dim, wscale, keys, n_visible, width, index_base, idx,
                     idx_stride, col0);
  }
  void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                      const int32_t* idx, int width, const TensorView& sink, float scale,
                      float* o) override {
    cpu_sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
  }
  void sink_attention_rope_dev(const float* q, int rows, int heads, int dim, const float* kv,
                               const int32_t* idx, int width, const TensorView& sink, float scale,
                               const RopeTable& t, const int32_t* positions, float* o) override {
    sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
    rope_dev(o, rows, heads, dim, t, positions, true);
  }
  void sink_attention_gemm(const float* q, int rows, int heads, int dim, const float* kv,
                           const int32_t* idx, int width, const TensorView& sink, float scale,
                           float* o) override {
    sink_attention(q, rows, heads, dim, kv, idx, width, sink, scale, o);
  }

  void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
             int n_experts, int k, float route_scale, int32_t* sel, float* wt) override {
    cpu_route(cache_, b, x, rows, ids, hidden, n_experts, k, route_scale, sel, wt);
  }
  void route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                 int hidden, int n_experts, int k, float route_scale, int32_t* sel,
                 float* wt) override {
    cpu_route(cache_, b, x, rows, ids, hidden, n_experts, k, route_scale, sel, wt);
  }
  void route_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* ids,
                  int hidden, int n_experts, int k, float route_scale, int32_t* sel,
                  float* wt) override {
    route(b, x, rows, ids, hidden, n_experts, k, route_scale, sel, wt);
  }
  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float swiglu_limit, const Numerics& num, float* out) override {
    cpu_moe(cache_, b, x, rows, sel, wt, k, swiglu_limit, num, out);
  }
  void moe_hc_post(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                   const float* wt, int k, float swiglu_limit, const Numerics& num, float* out,
                   const float* res, const float* post, const float* comb, int hc,
                   float* h) override {
    moe(b, x, rows, sel, wt, k, swiglu_limit, num, out);
    hc_post(out, res, post, comb, rows, hc, static_cast<int>(b.shared_w1.in()), h);
  }
  void moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel,
                const float* wt, int k, float swiglu_limit, const Numerics& num,
                float* out) override {
    moe(b, x, rows, sel, wt, k, swiglu_limit, num, out);
  }

  void finish_kv_at(float* kv, const TensorView& norm, int dim, double eps, const RopeTable& rope,
                    const int32_t* pos, KvQuant variant, float* ring, int slots) override {
    cpu_finish_kv_at(cache_, kv, norm, dim, eps, rope, pos, variant, ring, slots);
  }
  void decode_index(const int32_t* pos, int rows, int ratio, int window, int tail_width,
                    int trans_base, int32_t* idx, int32_t* n_visible) override {
    cpu_decode_index(pos, rows, ratio, window, tail_width, trans_base, idx, n_visible);
  }
  void compress_at(const CompressorWeights& c, const int32_t* pos, const float* row_kv,
                   const float* row_score, float* pend_kv, float* pend_score,
                   const RopeTable& rope, double norm_eps, const Numerics& num,
                   float* store) override {
    cpu_compress_at(cache_, c, pos, row_kv, row_score, pend_kv, pend_score, rope, norm_eps, num,
                    store);
  }

  void argmax(const float* logits, int rows, int64_t n, int32_t* out) override {
    cpu_argmax(logits, rows, n, out);
  }

  // Nothing to capture on the host: every step runs its ops.
  void run_step(const StepKey&, const std::function<void()>& body) override {
    body();
    ++steps_.plain;
  }
  StepGraphCounts step_graph_counts() const override { return steps_; }
  void on_line(int line) override { require_op_line(line); }  // ops run in the order issued
  void join_lines() override {}

 private:
  template <class T>
  static void copy_n(T* dst, const T* src, size_t n) {
    if (n) std::memcpy(dst, src, n * sizeof(T));
  }

  CpuWeightCache cache_;
  StepGraphCounts steps_;
};

}  // namespace

std::unique_ptr<Ops> make_cpu_ops() { return std::make_unique<CpuOps>(); }

}  // namespace dsv4
