// Independent check of how stage/ composes a block and the head (MODEL.md §5, §4.25): a
// naive f64 re-implementation of §4.1-§4.7 and §4.13-§4.25 written from the spec over the
// decoded weights only (model/codecs.h, TensorView::f32_at) — no Ops, no rope table, no
// index-law helper — compared on the tiny checkpoint with Layer::prefill's attention
// output (ws.a), post-attention hc state (ws.h_mid) and block output, and with
// trunk_head_logits, for a window-only hash layer, a ratio-4 hash layer (compressor +
// Lightning indexer) and a coarse ratio-16 score-routed layer.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/codecs.h"
#include "stage/head.h"
#include "stage/layer.h"
#include "stage_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

using Vec = std::vector<double>;

Vec widen(const TensorView& t) {
  Vec v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.f32_at(i);
  return v;
}

Vec widen(const Fp8Linear& l) {
  const std::vector<float> w = decode_fp8_linear(l);
  return Vec(w.begin(), w.end());
}

// y[n] = sum_k x[k] W[n, k], W [out, in] row-major, x at offset x0.
Vec matvec(const Vec& W, int64_t out, int64_t in, const double* x) {
  Vec y(out, 0.0);
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k) y[n] += W[n * in + k] * x[k];
  return y;
}

// §4.2 weighted RMSNorm (w empty: the unweighted per-head form of §4.3) over v[off, off+n).
void rms_norm(Vec& v, size_t off, size_t n, const Vec& w, double eps) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += v[off + i] * v[off + i];
  const double r = 1.0 / std::sqrt(ss / n + eps);
  for (size_t i = 0; i < n; ++i) v[off + i] = (w.empty() ? 1.0 : w[i]) * (v[off + i] * r);
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// §4.6 frequencies in f64: plain, or YaRN-blended (ratio > 0 layers).
Vec rope_freqs(const ModelConfig& c, bool yarn) {
  const int rd = c.qk_rope_head_dim;
  const double base = yarn ? c.compress_rope_theta : c.rope_theta;
  Vec f(rd / 2);
  for (int i = 0; i < rd / 2; ++i) f[i] = 1.0 / std::pow(base, 2.0 * i / rd);
  if (!yarn) return f;
  const YarnConfig& y = c.rope_scaling;
  auto cd = [&](double rot) {
    return rd * std::log(y.original_max_position_embeddings / (rot * 2 * M_PI)) /
           (2 * std::log(base));
  };
  const double low = std::max(std::floor(cd(y.beta_fast)), 0.0);
  double high = std::min(std::ceil(cd(y.beta_slow)), double(rd - 1));
  if (low == high) high += 0.001;
  for (int i = 0; i < rd / 2; ++i) {
    const double smooth = 1.0 - std::clamp((i - low) / (high - low), 0.0, 1.0);
    f[i] = f[i] / y.factor * (1 - smooth) + f[i] * smooth;
  }
  return f;
}

// §4.7: interleaved pairs of the LAST rd dims of v[off, off+len) at position p.
void rope(Vec& v, size_t off, size_t len, const Vec& freq, double p, bool inverse) {
  const size_t r0 = off + len - 2 * freq.size();
  for (size_t i = 0; i < freq.size(); ++i) {
    const double c = std::cos(p * freq[i]), s = (inverse ? -1 : 1) * std::sin(p * freq[i]);
    const double a = v[r0 + 2 * i], b = v[r0 + 2 * i + 1];
    v[r0 + 2 * i] = a * c - b * s;
    v[r0 + 2 * i + 1] = a * s + b * c;
  }
}

// §4.4 for one token: h [C*D] -> y [D], post [C], comb [C][C] (j source, k destination).
struct HcSplit {
  Vec y, post, comb;
};
HcSplit hc_pre(const ModelConfig& c, const HcParams& p, const double* h) {
  const int C = c.hc_mult, D = c.hidden_size;
  const Vec fn = widen(p.fn), base = widen(p.base), scale = widen(p.scale);
  double ss = 0.0;
  for (int k = 0; k < C * D; ++k) ss += h[k] * h[k];
  const double rs = 1.0 / std::sqrt(ss / (C * D) + c.rms_norm_eps);  // D5
  Vec mix = matvec(fn, (2 + C) * C, C * D, h);
  for (double& m : mix) m *= rs;
  const double eps = c.hc_eps;
  HcSplit o{Vec(D, 0.0), Vec(C), Vec(C * C)};
  Vec pre(C);
  for (int i = 0; i < C; ++i) {
    pre[i] = sigmoid(mix[i] * scale[0] + base[i]) + eps;
    o.post[i] = 2 * sigmoid(mix[C + i] * scale[1] + base[C + i]);
  }
  Vec& M = o.comb;
  for (int j = 0; j < C; ++j) {
    double mx = -INFINITY, sum = 0;
    for (int k = 0; k < C; ++k) {
      M[j * C + k] = mix[2 * C + j * C + k] * scale[2] + base[2 * C + j * C + k];
      mx = std::max(mx, M[j * C + k]);
    }
    for (int k = 0; k < C; ++k) sum += M[j * C + k] = std::exp(M[j * C + k] - mx);
    for (int k = 0; k < C; ++k) M[j * C + k] = M[j * C + k] / sum + eps;
  }
  auto norm = [&](bool rows) {
    for (int a = 0; a < C; ++a) {
      double sum = 0;
      for (int b = 0; b < C; ++b) sum += rows ? M[a * C + b] : M[b * C + a];
      for (int b = 0; b < C; ++b) (rows ? M[a * C + b] : M[b * C + a]) /= sum + eps;
    }
  };
  norm(false);
  for (int it = 1; it < c.hc_sinkhorn_iters; ++it) {
    norm(true);
    norm(false);
  }
  for (int i = 0; i < C; ++i)
    for (int d = 0; d < D; ++d) o.y[d] += pre[i] * h[i * D + d];
  return o;
}

// §4.16 prefill compressor over x [s, H] (KV / Z projections, pooling with ape, norm,
// rope at j*r); the quantizers are identities here (kv_quant clamp, indexer_quant none).
std::vector<Vec> compress(const ModelConfig& c, const CompressorWeights& w, const std::vector<Vec>& x,
                          const Vec& freq) {
  const int r = w.ratio, d = w.d, Lc = w.latent(), H = c.hidden_size;
  const Vec wkv = widen(w.wkv), wg = widen(w.wgate), ape = widen(w.ape), nw = widen(w.norm);
  std::vector<Vec> KV, Z;
  for (const Vec& xt : x) {
    KV.push_back(matvec(wkv, Lc, H, xt.data()));
    Z.push_back(matvec(wg, Lc, H, xt.data()));
  }
  std::vector<Vec> out;
  for (int j = 0; j < static_cast<int>(x.size()) / r; ++j) {
    Vec cj(d);
    for (int e = 0; e < d; ++e) {
      std::vector<std::pair<double, double>> ent;  // (logit, value)
      if (w.overlap) {
        for (int i = 0; i < r && j > 0; ++i)
          ent.push_back({Z[(j - 1) * r + i][e] + ape[i * Lc + e], KV[(j - 1) * r + i][e]});
        for (int i = 0; i < r; ++i)
          ent.push_back({Z[j * r + i][d + e] + ape[i * Lc + d + e], KV[j * r + i][d + e]});
      } else {
        for (int i = 0; i < r; ++i)
          ent.push_back({Z[j * r + i][e] + ape[i * Lc + e], KV[j * r + i][e]});
      }
      double mx = -INFINITY, den = 0, acc = 0;
      for (auto& [l, v] : ent) mx = std::max(mx, l);
      for (auto& [l, v] : ent) den += std::exp(l - mx);
      for (auto& [l, v] : ent) acc += std::exp(l - mx) / den * v;
      cj[e] = acc;
    }
    rms_norm(cj, 0, d, nw, c.rms_norm_eps);
    rope(cj, 0, d, freq, double(j) * r, false);
    out.push_back(cj);
  }
  return out;
}

// The attention sub-block of one layer over h [s][C*D]: attention output a [s][H] and
// the hc state after hc_post [s][C*D].
struct AttnOut {
  std::vector<Vec> a, h_mid;
};
AttnOut naive_attention(const ModelConfig& c, const BlockWeights& w, const std::vector<Vec>& h) {
  const int s = static_cast<int>(h.size()), H = c.hidden_size, C = c.hc_mult;
  const int nh = c.num_attention_heads, Dh = c.head_dim, Qr = c.q_lora_rank;
  const int W = c.sliding_window, r = w.ratio;
  const Vec freq = rope_freqs(c, r != 0);
  const Vec wq_a = widen(w.wq_a), wq_b = widen(w.wq_b), wkv = widen(w.wkv);
  const Vec qn = widen(w.q_norm), kvn = widen(w.kv_norm), an = widen(w.attn_norm);
  const Vec wo_a = widen(w.wo_a), wo_b = widen(w.wo_b), sink = widen(w.attn_sink);

  std::vector<HcSplit> split;
  std::vector<Vec> x, qr, q, src;  // src: window latents rows [0, s), then compressed blocks
  for (int t = 0; t < s; ++t) {
    split.push_back(hc_pre(c, w.hc_attn, h[t].data()));
    Vec xt = split[t].y;
    rms_norm(xt, 0, H, an, c.rms_norm_eps);
    Vec qrt = matvec(wq_a, Qr, H, xt.data());
    rms_norm(qrt, 0, Qr, qn, c.rms_norm_eps);
    Vec qt = matvec(wq_b, int64_t(nh) * Dh, Qr, qrt.data());
    for (int hd = 0; hd < nh; ++hd) {
      rms_norm(qt, size_t(hd) * Dh, Dh, {}, c.rms_norm_eps);  // §4.3
      rope(qt, size_t(hd) * Dh, Dh, freq, t, false);
    }
    Vec kv = matvec(wkv, Dh, H, xt.data());
    rms_norm(kv, 0, Dh, kvn, c.rms_norm_eps);
    rope(kv, 0, Dh, freq, t, false);
    x.push_back(xt);
    qr.push_back(qrt);
    q.push_back(qt);
    src.push_back(kv);
  }
  if (r > 0)
    for (Vec& b : compress(c, *w.compressor, x, freq)) src.push_back(b);

  // Visible KV-source rows per query t (§4.15, §4.17, §4.18, §4.19).
  std::vector<std::vector<int>> rows(s);
  std::vector<Vec> ikeys;
  if (r == 4) ikeys = compress(c, w.indexer->compressor, x, freq);
  for (int t = 0; t < s; ++t) {
    for (int p = std::max(0, t - W + 1); p <= t; ++p) rows[t].push_back(p);
    const int vis = r > 0 ? (t + 1) / r : 0;
    if (r > 0 && r != 4)
      for (int j = 0; j < vis; ++j) rows[t].push_back(s + j);
    if (r == 4 && vis > 0) {
      const int Ih = c.index_n_heads, Id = c.index_head_dim;
      Vec qi = matvec(widen(w.indexer->wq_b), int64_t(Ih) * Id, Qr, qr[t].data());
      for (int hd = 0; hd < Ih; ++hd) rope(qi, size_t(hd) * Id, Id, freq, t, false);
      const Vec wi = matvec(widen(w.indexer->weights_proj), Ih, H, x[t].data());
      const double wscale = 1.0 / std::sqrt(double(Id)) / std::sqrt(double(Ih));  // §1.2
      Vec score(vis, 0.0);
      for (int j = 0; j < vis; ++j)
        for (int hd = 0; hd < Ih; ++hd) {
          double dot = 0;
          for (int i = 0; i < Id; ++i) dot += qi[hd * Id + i] * ikeys[j][i];
          score[j] += wi[hd] * wscale * std::max(0.0, dot);
        }
      std::vector<int> order(vis);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
      for (int k = 0; k < std::min(c.index_topk, vis); ++k) rows[t].push_back(s + order[k]);
    }
  }

  AttnOut out;
  const double scale = 1.0 / std::sqrt(double(Dh));
  const int G = c.o_groups, Or = c.o_lora_rank, gw = nh * Dh / G;
  for (int t = 0; t < s; ++t) {
    Vec o(size_t(nh) * Dh, 0.0);
    for (int hd = 0; hd < nh; ++hd) {  // §4.20
      Vec l;
      for (int row : rows[t]) {
        double dot = 0;
        for (int i = 0; i < Dh; ++i) dot += q[t][hd * Dh + i] * src[row][i];
        l.push_back(scale * dot);
      }
      const double mx = std::max(*std::max_element(l.begin(), l.end()), sink[hd]);
      double den = std::exp(sink[hd] - mx);
      for (double v : l) den += std::exp(v - mx);
      for (size_t k = 0; k < l.size(); ++k)
        for (int i = 0; i < Dh; ++i) o[hd * Dh + i] += std::exp(l[k] - mx) / den * src[rows[t][k]][i];
      rope(o, size_t(hd) * Dh, Dh, freq, t, true);  // §4.21 step 1
    }
    Vec og(size_t(G) * Or, 0.0);
    for (int g = 0; g < G; ++g)
      for (int n = 0; n < Or; ++n)
        for (int u = 0; u < gw; ++u) og[g * Or + n] += o[g * gw + u] * wo_a[(int64_t(g) * Or + n) * gw + u];
    const Vec a = matvec(wo_b, H, int64_t(G) * Or, og.data());
    Vec hm(size_t(C) * H);  // §4.5
    for (int k = 0; k < C; ++k)
      for (int d = 0; d < H; ++d) {
        double acc = split[t].post[k] * a[d];
        for (int j = 0; j < C; ++j) acc += split[t].comb[j * C + k] * h[t][j * H + d];
        hm[k * H + d] = acc;
      }
    out.a.push_back(a);
    out.h_mid.push_back(hm);
  }
  return out;
}

// D16: hash routing by layer index, never by ratio.
bool layer_is_hash(const ModelConfig& c, const BlockWeights& w) {
  return w.layer_id < c.num_hash_layers;
}

// §4.22-§4.24 and §5 lines 6-10 over the post-attention state h_mid: the block output.
// Routed experts as exactly dequantized weights (expert_arm bf16 with dense_act f32).
std::vector<Vec> naive_ffn(const ModelConfig& c, const BlockWeights& w, const std::vector<Vec>& h_mid,
                           const std::vector<int32_t>& ids) {
  const int H = c.hidden_size, C = c.hc_mult, E = c.n_routed_experts, K = c.num_experts_per_tok;
  const double L = c.swiglu_limit;
  const Vec gate = widen(w.gate_weight), fn = widen(w.ffn_norm);
  const Vec bias = w.gate_bias ? widen(*w.gate_bias) : Vec(E, 0.0);
  auto expert = [&](const Fp4Linear* w1, const Fp4Linear* w3, const Fp4Linear* w2,
                    const Fp8Linear* s1, const Fp8Linear* s3, const Fp8Linear* s2, const Vec& x,
                    double wt, Vec& y) {
    const std::vector<float> d1 = w1 ? decode_fp4_linear(*w1) : decode_fp8_linear(*s1);
    const std::vector<float> d3 = w3 ? decode_fp4_linear(*w3) : decode_fp8_linear(*s3);
    const std::vector<float> d2 = w2 ? decode_fp4_linear(*w2) : decode_fp8_linear(*s2);
    const int64_t F = static_cast<int64_t>(d1.size()) / H;
    Vec hh(F);
    for (int64_t f = 0; f < F; ++f) {
      double g = 0, u = 0;
      for (int k = 0; k < H; ++k) {
        g += d1[f * H + k] * x[k];
        u += d3[f * H + k] * x[k];
      }
      g = std::min(g, L);  // §4.23 step 2: gate from above, up on both sides
      u = std::clamp(u, -L, L);
      hh[f] = wt * (g * sigmoid(g) * u);
    }
    for (int d = 0; d < H; ++d)
      for (int64_t f = 0; f < F; ++f) y[d] += d2[d * F + f] * hh[f];
  };
  std::vector<Vec> out;
  for (size_t t = 0; t < h_mid.size(); ++t) {
    const HcSplit sp = hc_pre(c, w.hc_ffn, h_mid[t].data());
    Vec x = sp.y;
    rms_norm(x, 0, H, fn, c.rms_norm_eps);
    const Vec logit = matvec(gate, E, H, x.data());
    Vec sc(E);
    for (int e = 0; e < E; ++e)
      sc[e] = std::sqrt(logit[e] > 20 ? logit[e] : std::log1p(std::exp(logit[e])));
    std::vector<int> sel;
    if (layer_is_hash(c, w)) {
      for (int k = 0; k < K; ++k) sel.push_back(w.tid2eid[size_t(ids[t]) * K + k]);
    } else {
      std::vector<int> order(E);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return sc[a] + bias[a] > sc[b] + bias[b]; });
      sel.assign(order.begin(), order.begin() + K);
    }
    double S = 0;
    for (int e : sel) S += sc[e];
    Vec m(H, 0.0);
    for (int e : sel) {
      const ExpertWeights& ew = w.experts[e];
      expert(&ew.w1, &ew.w3, &ew.w2, nullptr, nullptr, nullptr, x,
             sc[e] / S * c.routed_scaling_factor, m);
    }
    expert(nullptr, nullptr, nullptr, &w.shared_w1, &w.shared_w3, &w.shared_w2, x, 1.0, m);
    Vec ho(size_t(C) * H);
    for (int k = 0; k < C; ++k)
      for (int d = 0; d < H; ++d) {
        double acc = sp.post[k] * m[d];
        for (int j = 0; j < C; ++j) acc += sp.comb[j * C + k] * h_mid[t][j * H + d];
        ho[k * H + d] = acc;
      }
    out.push_back(ho);
  }
  return out;
}

// §4.25 for one row h [C*D]: logits [V].
Vec naive_head(const ModelConfig& c, const HeadWeights& w, const TensorView& head,
               const double* h) {
  const int C = c.hc_mult, H = c.hidden_size;
  const Vec fn = widen(w.hc_head_fn), base = widen(w.hc_head_base), nw = widen(w.norm);
  const double scale = w.hc_head_scale.f32_at(0);
  double ss = 0;
  for (int k = 0; k < C * H; ++k) ss += h[k] * h[k];
  const double rs = 1.0 / std::sqrt(ss / (C * H) + c.rms_norm_eps);
  const Vec mix = matvec(fn, C, int64_t(C) * H, h);
  Vec y(H, 0.0);
  for (int i = 0; i < C; ++i) {
    const double pre = sigmoid(mix[i] * rs * scale + base[i]) + c.hc_eps;
    for (int d = 0; d < H; ++d) y[d] += pre * h[i * H + d];
  }
  rms_norm(y, 0, H, nw, c.rms_norm_eps);
  return matvec(widen(head), c.vocab_size, H, y.data());
}

double rel_l2(const float* got, const Vec& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

struct Errors {
  double a = 0, h_mid = 0, h_out = 0, logits = 0;  // worst per-row relative L2
};

// Runs Layer::prefill on h, then the trunk head on its output, against the naive model.
Errors compare_layer(int layer_id, int s, bool embed_only) {
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  std::unique_ptr<Ops> ops = make_cpu_ops();
  Numerics num;  // no rounding simulation (MODEL.md numeric options): f32 vs f64 only
  num.dense_act = DenseAct::f32;
  num.indexer_quant = IndexerQuant::none;
  num.kv_quant = KvQuant::clamp;  // §4.8 ClampOnly is the identity map
  num.expert_arm = ExpertArm::bf16;  // exact dequantized expert weights
  const int64_t max_seq = 64;
  BlockWeights bw = ckpt.load_block(layer_id);
  const int r = bw.ratio;
  const RopeTable table = r == 0 ? make_plain_rope(c, max_seq) : make_yarn_rope(c, max_seq);
  ops->prepare(table);
  Layer layer(*ops, std::move(bw), c, table, max_seq, 0, 1, -1);
  WorkspaceSizes sz;
  sz.rows = s;
  sz.max_blocks = r > 0 ? s / r : 0;
  sz.index_width = c.sliding_window + (r == 4 ? c.index_topk : sz.max_blocks);
  if (r > 0) sz.cmp_latent = layer.weights().compressor->latent();
  if (r == 4) sz.idx_latent = layer.weights().indexer->compressor.latent();
  Workspace ws(*ops, c, sz);
  LayerContext ctx{*ops, c, num, ws, 0};

  // §4.1: h0 = embedding repeated over hc; other layers get per-stream seeded noise so
  // hc_pre / hc_post see distinct streams.
  const std::vector<int32_t> ids = random_tokens(s, c.vocab_size, 1234 + layer_id);
  const TensorView embed = ckpt.load_embed();
  const int H = c.hidden_size, C = c.hc_mult;
  std::mt19937 rng(99 + layer_id);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  std::vector<float> hf(static_cast<size_t>(s) * C * H);
  std::vector<Vec> h(s, Vec(size_t(C) * H));
  for (int t = 0; t < s; ++t)
    for (int k = 0; k < C; ++k)
      for (int d = 0; d < H; ++d) {
        const float e = embed.f32_at(int64_t(ids[t]) * H + d) + (embed_only ? 0.0f : noise(rng));
        hf[(size_t(t) * C + k) * H + d] = e;
        h[t][k * H + d] = e;
      }
  const AttnOut want = naive_attention(c, layer.weights(), h);
  const std::vector<Vec> want_out = naive_ffn(c, layer.weights(), want.h_mid, ids);
  layer.prefill(ctx, ids.data(), s, hf.data(), nullptr);
  Errors err;
  for (int t = 0; t < s; ++t) {
    err.a = std::max(err.a, rel_l2(ws.a.data() + size_t(t) * H, want.a[t]));
    err.h_mid = std::max(err.h_mid, rel_l2(ws.h_mid.data() + size_t(t) * C * H, want.h_mid[t]));
    err.h_out = std::max(err.h_out, rel_l2(hf.data() + size_t(t) * C * H, want_out[t]));
  }
  // §4.25 on the last row of the layer output (the engine's own h, so only the head differs).
  const HeadWeights head = ckpt.load_head();
  const TensorView head_matrix = ckpt.load_head_matrix();
  const float* last = hf.data() + size_t(s - 1) * C * H;
  std::vector<float> y(H), logits(c.vocab_size);
  trunk_head_logits(*ops, c, head, head_matrix, last, 1, y.data(), logits.data());
  err.logits = rel_l2(logits.data(), naive_head(c, head, head_matrix, Vec(last, last + C * H).data()));
  return err;
}

// f32 storage and f32 L-bf16 accumulation (hundreds of terms) against f64: a few 1e-7
// per op, well inside 1e-5 relative; a composition error moves rows by O(1e-2) or more.
constexpr double kTol = 1e-5;

}  // namespace

TEST_CASE("tiny-model blocks and head equal a naive f64 MODEL.md implementation") {
  struct Case {
    int layer, s;
    bool embed_only;
  };
  // layer 0: ratio 0, plain rope, hash-routed, 3 tokens straight from the embedding (§4.1);
  // layer 2: ratio 4 (overlap compressor + indexer), hash-routed, 40 tokens = 10 blocks >
  //          index_topk 8;
  // layer 3: ratio 16 (coarse), score-routed, 40 tokens = 2 blocks + 8 remainder rows,
  //          window 16.
  for (const Case k : {Case{0, 3, true}, Case{2, 40, false}, Case{3, 40, false}}) {
    CAPTURE(k.layer);
    const Errors e = compare_layer(k.layer, k.s, k.embed_only);
    MESSAGE("layer " << k.layer << ": rel L2 attention out " << e.a << ", h after attention "
                     << e.h_mid << ", block output " << e.h_out << ", head logits " << e.logits);
    CHECK(e.a < kTol);
    CHECK(e.h_mid < kTol);
    CHECK(e.h_out < kTol);
    CHECK(e.logits < kTol);
  }
}
