// An op profiler for any backend (launcher flag --profile-ops): a ForwardingOps decorator
// that, while active, brackets every op with synchronize() and accumulates wall time and
// call counts per op name. Linears are keyed by op and weight class ("linear_fp8
// attn.wq_b"); memory management (alloc, prepare, synchronize) is forwarded untimed.
// The synchronizations change no result: the ops and their order are the inner backend's.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/forwarding_ops.h"

namespace dsv4 {

// The weight class of a tensor name: numeric components, a "layers" prefix and a final
// "weight" dropped ("layers.3.attn.wq_b.weight" -> "attn.wq_b").
std::string weight_class(const std::string& tensor_name);

class TimedOps : public ForwardingOps {
 public:
  struct Row {
    std::string op;       // op name, or "op weight_class" for linears
    int64_t calls = 0;
    double total_ms = 0;
  };

  explicit TimedOps(Ops& inner) : ForwardingOps(inner) {}

  // Only ops issued while active are timed (the launcher times decode steps only).
  void set_active(bool on) { active_ = on; }
  bool active() const { return active_; }
  // One timed step ended (the per-step column of the table divides by this count).
  void count_step() { ++steps_; }
  int64_t steps() const { return steps_; }

  // Accumulated rows, largest total first (ties by name).
  std::vector<Row> rows() const;
  // The table: op, calls, total ms, ms per step, share of the timed total.
  std::string table() const;

  void fill(float* d, float v, size_t n) override;
  void fill_i32(int32_t* d, int32_t v, size_t n) override;
  void copy(float* d, const float* s, size_t n) override;
  void upload(float* d, const float* h, size_t n) override;
  void download(float* h, const float* s, size_t n) override;
  void upload_i32(int32_t* d, const int32_t* h, size_t n) override;
  void download_i32(int32_t* h, const int32_t* s, size_t n) override;

  void add(float* y, const float* x, size_t n) override;
  void embed(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override;
  void embed_dev(const TensorView& t, const int32_t* ids, int s, int hc, float* h) override;
  void rmsnorm(const float* x, const TensorView& w, int rows, int n, double eps, float* y) override;
  void head_rms(float* v, int vectors, int n, double eps) override;
  void rope(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
            bool inverse) override;
  void rope_dev(float* v, int rows, int heads, int dim, const RopeTable& t, const int32_t* pos,
                bool inverse) override;
  void head_rms_rope_dev(float* v, int rows, int heads, int dim, double e, const RopeTable& t,
                         const int32_t* pos) override;
  void rope_hadamard_fp4_dev(float* v, int rows, int heads, int dim, const RopeTable& t,
                             const int32_t* pos) override;
  void kv_act_quant(float* v, int rows, int dim, int rd, KvQuant q) override;
  void hadamard_fp4(float* v, int vectors, int dim, bool fp4) override;
  void hc_pre(const float* h, int s, int hc, int hidden, const HcParams& p, double ne, double he,
              int it, float* y, float* post, float* comb) override;
  void hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
               int hc, int hidden, float* out) override;
  void hc_head(const float* h, int s, int hc, int hidden, const HeadWeights& w, double ne,
               double he, float* y) override;
  void hc_mean(const float* h, int s, int hc, int hidden, float* out, int stride) override;
  void linear_fp8(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override;
  void linear_bf16(const TensorView& w, const float* x, int rows, bool a, float* y) override;
  void linear_island(const TensorView& w, const float* x, int rows, float* y) override;
  void grouped_wo_a(const Fp8Linear& w, const float* o, int rows, int g, bool a, float* og) override;
  void linear_fp8_gemm(const Fp8Linear& w, const float* x, int rows, bool a, float* y) override;
  void linear_bf16_gemm(const TensorView& w, const float* x, int rows, bool a, float* y) override;
  void linear_island_gemm(const TensorView& w, const float* x, int rows, float* y) override;
  void grouped_wo_a_gemm(const Fp8Linear& w, const float* o, int rows, int g, bool a,
                         float* og) override;
  void compress_blocks(const CompressorWeights& c, const float* kv, const float* sc, int nb,
                       const float* pkv, const float* psc, int fb, const RopeTable& r, double e,
                       const Numerics& num, float* out) override;
  void indexer_topk(const float* q, const float* w, int rows, int heads, int dim, float ws,
                    const float* keys, const int32_t* nv, int width, int base, int32_t* idx,
                    int stride, int col0) override;
  void indexer_topk_dev(const float* q, const float* w, int rows, int heads, int dim, float ws,
                        const float* keys, const int32_t* nv, int n_cap, int width, int base,
                        int32_t* idx, int stride, int col0) override;
  void sink_attention(const float* q, int rows, int heads, int dim, const float* kv,
                      const int32_t* idx, int width, const TensorView& sink, float scale,
                      float* o) override;
  void route(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
             int ne, int k, float rs, int32_t* sel, float* wt) override;
  void route_dev(const BlockWeights& b, const float* x, int rows, const int32_t* ids, int hidden,
                 int ne, int k, float rs, int32_t* sel, float* wt) override;
  void moe(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
           int k, float lim, const Numerics& num, float* out) override;
  void moe_gemm(const BlockWeights& b, const float* x, int rows, const int32_t* sel, const float* wt,
                int k, float lim, const Numerics& num, float* out) override;
  void finish_kv_at(float* kv, const TensorView& w, int dim, double e, const RopeTable& r,
                    const int32_t* pos, KvQuant v, float* ring, int slots) override;
  void decode_index(const int32_t* pos, int ratio, int window, int tail, int32_t* idx,
                    int32_t* nv) override;
  void compress_at(const CompressorWeights& c, const int32_t* pos, const float* kv, const float* sc,
                   float* pkv, float* psc, const RopeTable& r, double e, const Numerics& num,
                   float* store) override;
  void argmax(const float* l, int rows, int64_t n, int32_t* out) override;

 private:
  struct Sum {
    int64_t calls = 0;
    double ms = 0;
  };
  // Runs f; while active, between synchronizations, and adds its time to `key`.
  template <class F>
  void timed(const std::string& key, F&& f) {
    if (!active_) {
      f();
      return;
    }
    inner().synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    inner().synchronize();
    const std::chrono::duration<double, std::milli> dt = std::chrono::steady_clock::now() - t0;
    Sum& s = sums_[key];
    ++s.calls;
    s.ms += dt.count();
  }

  bool active_ = true;
  int64_t steps_ = 0;
  std::map<std::string, Sum> sums_;
};

}  // namespace dsv4
