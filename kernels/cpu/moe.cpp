#include "kernels/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/parallel_rows.h"
#include "kernels/cpu/quant.h"
#include "model/codecs.h"
#include "base/error.h"

namespace dsv4 {
namespace {

constexpr int kFp8Block = 128;   // §4.9 activation block
constexpr int kFp4Block = 32;    // §4.23 FP4GEMM K-block

// §3.1 softplus with torch's threshold, f32.
float softplus(float z) { return z > 20.0f ? z : std::log1p(std::exp(z)); }
float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// §4.23 steps 2-4 on g, u [inter]: clamp (u both sides, g from above; limit <= 0 off),
// h = wt * (silu(g) * u), all f32.
void swiglu(const float* g, const float* u, int inter, float wt, float limit, float* h) {
  for (int i = 0; i < inter; ++i) {
    float gi = g[i], ui = u[i];
    if (limit > 0.0f) {
      gi = std::min(gi, limit);
      ui = std::clamp(ui, -limit, limit);
    }
    h[i] = wt * ((gi * sigmoid(gi)) * ui);
  }
}

// FP4GEMM (§4.23, D4) of exact weights w [out, in] (the per-32 e8m0 or per-16 e4m3 * s2
// block scales already applied to the e2m1 values) with e4m3 values a_q [in] and per-128
// scales a_s: y[n] = sum_b (sum_{k in 32-block b} a_q[k] * w[n,k]) * a_s[b/4], inner sums
// f32 in ascending k, outer f32 in ascending b. Every product a_q * w is exact in f32
// (<= 4 + 6 significant bits), so an NVFP4 32-block whose two 16-groups carry different
// scales needs no split: the per-16 scales sit inside the weight values. When a weight
// scale is a power of two (MXFP4, and NVFP4 recast by CHECKPOINT §3.8 rule 8) scaling the
// weights before the sum equals scaling the partial after it bit for bit, which is
// §4.23's "partial * activation scale * weight scale".
template <int B>
void fp4_outputs(const float* w, int in, const float* a_q, const float* a_s, float* y) {
  float acc[B] = {};  // B outputs in flight (as dot_outputs in linear.cpp), each in order
  for (int b = 0; b < in / kFp4Block; ++b) {
    float partial[B] = {};
    for (int k = b * kFp4Block; k < (b + 1) * kFp4Block; ++k)
      for (int j = 0; j < B; ++j) partial[j] += a_q[k] * w[static_cast<size_t>(j) * in + k];
    for (int j = 0; j < B; ++j) acc[j] += partial[j] * a_s[b * kFp4Block / kFp8Block];
  }
  for (int j = 0; j < B; ++j) y[j] = acc[j];
}

void fp4_gemm(const float* w, int out, int in, const float* a_q, const float* a_s, float* y) {
  parallel_rows(out, in, [&](int64_t n0, int64_t n1) {  // threads split the outputs n
    constexpr int kB = 8;
    int64_t n = n0;
    for (; n + kB <= n1; n += kB) fp4_outputs<kB>(w + n * in, in, a_q, a_s, y + n);
    for (; n < n1; ++n) fp4_outputs<1>(w + n * in, in, a_q, a_s, y + n);
  });
}

void record(SwigluTrace* trace, const std::vector<float>& g, const std::vector<float>& u,
            const std::vector<float>& h) {
  if (trace) *trace = SwigluTrace{g, u, h};
}

void check_expert_shapes(const ExpertWeights& e, int hidden, int inter, int id) {
  const bool ok = e.w1.rows == inter && e.w1.cols == hidden && e.w3.rows == inter &&
                  e.w3.cols == hidden && e.w2.rows == hidden && e.w2.cols == inter;
  if (!ok)
    throw Error(cat("moe: expert ", id, " (", e.w1.weight.name, ") projections disagree with [",
                    inter, ", ", hidden, "] / [", hidden, ", ", inter, "]"));
}

bool is_pow2(float v) {
  int e;
  return v > 0.0f && std::frexp(v, &e) == 0.5f;
}

}  // namespace

void cpu_route(CpuWeightCache& cache, const BlockWeights& b, const float* x, int rows,
               const int32_t* ids, int hidden, int n_experts, int k, float route_scale,
               int32_t* sel, float* wt) {
  if (b.gate_weight.shape != std::vector<int64_t>{n_experts, hidden})
    throw Error(cat("route: layer ", b.layer_id, " ", b.gate_weight.name, " must be [",
                    n_experts, ", ", hidden, "]"));
  if (k <= 0 || k > n_experts)
    throw Error(cat("route: layer ", b.layer_id, " experts per token ", k, " outside [1, ",
                    n_experts, "]"));
  const bool hash = !b.tid2eid.empty();
  if (!hash && !b.gate_bias)
    throw Error(cat("route: layer ", b.layer_id, " is score-routed but has no gate bias"));
  const int64_t vocab = hash ? static_cast<int64_t>(b.tid2eid.size()) / k : 0;
  DSV4_CHECK(!hash || vocab * k == static_cast<int64_t>(b.tid2eid.size()), "tid2eid size ",
             b.tid2eid.size(), " k ", k);
  std::vector<float> logits(static_cast<size_t>(rows) * n_experts);
  cpu_linear_island(cache, b.gate_weight, x, rows, logits.data());  // step 1
  const float* bias = hash ? nullptr : cache.widened(*b.gate_bias);
  std::vector<float> sc(n_experts), biased(n_experts);
  std::vector<int32_t> order(n_experts);
  for (int t = 0; t < rows; ++t) {
    for (int e = 0; e < n_experts; ++e)  // step 2
      sc[e] = std::sqrt(softplus(logits[static_cast<size_t>(t) * n_experts + e]));
    int32_t* s = sel + static_cast<size_t>(t) * k;
    if (hash) {  // step 3, hash layers: the stored tid2eid order
      if (ids[t] < 0 || ids[t] >= vocab)
        throw Error(cat("route: layer ", b.layer_id, " token id ", ids[t], " at row ", t,
                        " outside the tid2eid table of ", vocab, " rows"));
      std::copy_n(b.tid2eid.data() + static_cast<size_t>(ids[t]) * k, k, s);
    } else {  // step 3, score layers: (sc + bias desc, id asc) (D10)
      for (int e = 0; e < n_experts; ++e) biased[e] = sc[e] + bias[e];
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t c) {
        return biased[a] != biased[c] ? biased[a] > biased[c] : a < c;
      });
      std::copy_n(order.begin(), k, s);
    }
    float sum = 0.0f;  // step 4: unbiased scores, S in slot order
    for (int j = 0; j < k; ++j) sum += sc[s[j]];
    for (int j = 0; j < k; ++j) wt[static_cast<size_t>(t) * k + j] = (sc[s[j]] / sum) * route_scale;
  }
}

void cpu_act_quant_fp8_values(const float* x, int n, float* x_q, float* x_s) {
  std::vector<uint8_t> codes(n);
  cpu_act_quant_fp8(x, n, codes.data(), x_s);
  for (int i = 0; i < n; ++i) x_q[i] = e4m3_to_f32(codes[i]);
}

void cpu_expert_lbf16(const float* w1, const float* w3, const float* w2, int hidden,
                      int inter, const float* x, float wt, float swiglu_limit, bool act_bf16,
                      float* out, SwigluTrace* trace) {
  std::vector<float> g(inter), u(inter), h(inter);
  cpu_lbf16(w1, inter, hidden, x, hidden, 1, act_bf16, g.data(), inter);
  cpu_lbf16(w3, inter, hidden, x, hidden, 1, act_bf16, u.data(), inter);
  swiglu(g.data(), u.data(), inter, wt, swiglu_limit, h.data());
  cpu_lbf16(w2, hidden, inter, h.data(), inter, 1, act_bf16, out, hidden);
  record(trace, g, u, h);
}

void cpu_expert_native(const float* w1, const float* w3, const float* w2, int hidden,
                       int inter, const float* x_q, const float* x_s, float wt,
                       float swiglu_limit, float* out, SwigluTrace* trace) {
  DSV4_CHECK(hidden % kFp8Block == 0 && inter % kFp8Block == 0, "native arm needs multiples of ",
             kFp8Block, ": hidden ", hidden, " inter ", inter);
  std::vector<float> g(inter), u(inter), h(inter), h_q(inter), h_s(inter / kFp8Block);
  fp4_gemm(w1, inter, hidden, x_q, x_s, g.data());
  fp4_gemm(w3, inter, hidden, x_q, x_s, u.data());
  swiglu(g.data(), u.data(), inter, wt, swiglu_limit, h.data());
  cpu_act_quant_fp8_values(h.data(), inter, h_q.data(), h_s.data());  // after the wt multiply
  fp4_gemm(w2, hidden, inter, h_q.data(), h_s.data(), out);
  record(trace, g, u, h);
}

void cpu_moe(CpuWeightCache& cache, const BlockWeights& b, const float* x, int rows,
             const int32_t* sel, const float* wt, int k, float swiglu_limit,
             const Numerics& num, float* out) {
  const int hidden = static_cast<int>(b.shared_w1.in());
  const int shared_inter = static_cast<int>(b.shared_w1.out());
  const int n_experts = static_cast<int>(b.experts.size());
  const bool native = num.expert_arm == ExpertArm::native;
  const float* sw1 = cache.dense(b.shared_w1);
  const float* sw3 = cache.dense(b.shared_w3);
  const float* sw2 = cache.dense(b.shared_w2);
  // Serially, in row order (so a bad input fails as it always has): check every pick and
  // its expert; then decode the picked experts' weights (on threads) before the rows'
  // threads start, which only read them (the cache is not thread-safe).
  std::vector<char> picked(n_experts, 0);
  std::vector<const Fp4Linear*> projections;
  std::vector<int32_t> ids(k);
  int64_t max_inter = 0;
  for (int t = 0; t < rows; ++t) {
    for (int j = 0; j < k; ++j) {
      ids[j] = sel[static_cast<size_t>(t) * k + j];
      DSV4_CHECK(ids[j] >= 0 && ids[j] < n_experts, "row ", t, " expert ", ids[j]);
    }
    std::sort(ids.begin(), ids.end());  // the order the row evaluates them in
    for (const int32_t id : ids) {
      if (picked[id]) continue;
      picked[id] = 1;
      const ExpertWeights& e = b.experts[id];
      check_expert_shapes(e, hidden, static_cast<int>(e.w1.rows), id);
      if (!native && e.w1.recipe == ExpertRecipe::nvfp4 &&
          !(is_pow2(e.w1.scale_2) && is_pow2(e.w2.scale_2) && is_pow2(e.w3.scale_2)))
        throw Error(cat("moe: expert ", id, " (", e.w1.weight.name, ") has a weight_scale_2 that "
                        "is not a power of two; the bf16 expert arm cannot be exact (C4)"));
      projections.insert(projections.end(), {&e.w1, &e.w3, &e.w2});
      max_inter = std::max<int64_t>(max_inter, e.w1.rows);
    }
  }
  cache.decode_experts(projections);
  struct Decoded {
    const float *w1 = nullptr, *w3 = nullptr, *w2 = nullptr;
  };
  std::vector<Decoded> weights(n_experts);
  for (int id = 0; id < n_experts; ++id)
    if (picked[id]) {
      const ExpertWeights& e = b.experts[id];
      weights[id] = {cache.expert(e.w1), cache.expert(e.w3), cache.expert(e.w2)};
    }
  const int64_t row_cost = 3 * hidden * (k * max_inter + shared_inter);
  parallel_rows(rows, row_cost, [&](int64_t t0, int64_t t1) {  // threads split the rows
    std::vector<float> x_q(native ? hidden : 0), x_s(native ? hidden / kFp8Block : 0);
    std::vector<float> expert_out(hidden), shared_out(hidden);
    std::vector<std::pair<int32_t, float>> picks(k);
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + static_cast<size_t>(t) * hidden;
      float* yt = out + static_cast<size_t>(t) * hidden;
      for (int j = 0; j < k; ++j)
        picks[j] = {sel[static_cast<size_t>(t) * k + j], wt[static_cast<size_t>(t) * k + j]};
      std::sort(picks.begin(), picks.end());  // §4.23 step 6: ascending expert id
      if (native) cpu_act_quant_fp8_values(xt, hidden, x_q.data(), x_s.data());  // once per row
      std::fill(yt, yt + hidden, 0.0f);
      for (const auto& [id, w] : picks) {
        const Decoded& d = weights[id];
        const int inter = static_cast<int>(b.experts[id].w1.rows);
        if (native)
          cpu_expert_native(d.w1, d.w3, d.w2, hidden, inter, x_q.data(), x_s.data(), w,
                            swiglu_limit, expert_out.data());
        else
          cpu_expert_lbf16(d.w1, d.w3, d.w2, hidden, inter, xt, w, swiglu_limit,
                           num.act_bf16(), expert_out.data());
        for (int i = 0; i < hidden; ++i) yt[i] += expert_out[i];
      }
      // §4.24: the shared expert, unweighted (wt = 1 is exact), added last.
      cpu_expert_lbf16(sw1, sw3, sw2, hidden, shared_inter, xt, 1.0f, swiglu_limit,
                       num.act_bf16(), shared_out.data());
      for (int i = 0; i < hidden; ++i) yt[i] += shared_out[i];
    }
  });
}

}  // namespace dsv4
