#include "kernels/cpu/hc.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/norm.h"
#include "base/error.h"

namespace dsv4 {

namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// pre gate of §4.4 / §4.25: sigma(mix * scale + base) + hc_eps, rounded to f32.
float pre_gate(double mix, double scale, double base, double hc_eps) {
  return static_cast<float>(sigmoid(mix * scale + base) + hc_eps);
}

void require_numel(const TensorView& t, int64_t n, const char* what) {
  if (t.numel() != n)
    throw Error(cat(what, ": tensor '", t.name, "' has ", t.numel(), " elements, expected ", n));
}

// Sinkhorn normalizations of M [hc, hc] (§4.4): eps is added to every row / column sum.
void normalize_rows(std::vector<double>& m, int hc, double eps) {
  for (int j = 0; j < hc; ++j) {
    double sum = 0.0;
    for (int k = 0; k < hc; ++k) sum += m[j * hc + k];
    for (int k = 0; k < hc; ++k) m[j * hc + k] /= sum + eps;
  }
}

void normalize_cols(std::vector<double>& m, int hc, double eps) {
  for (int k = 0; k < hc; ++k) {
    double sum = 0.0;
    for (int j = 0; j < hc; ++j) sum += m[j * hc + k];
    for (int j = 0; j < hc; ++j) m[j * hc + k] /= sum + eps;
  }
}

}  // namespace

void cpu_hc_mixes(const float* h_flat, int64_t width, const float* fn, int m, double norm_eps,
                  double* mix) {
  const double rs = cpu_inv_rms(h_flat, width, norm_eps);
  for (int j = 0; j < m; ++j) {
    const float* row = fn + j * width;
    double raw = 0.0;
    for (int64_t k = 0; k < width; ++k) raw += static_cast<double>(h_flat[k]) * row[k];
    mix[j] = raw * rs;
  }
}

void cpu_hc_mix_partials(const float* h, int64_t rows, int64_t width, const float* fn, int m, double* part) {
  constexpr int64_t kSlice = 128;
  const int64_t slices = (width + kSlice - 1) / kSlice;
  for (int64_t t = 0; t < rows; ++t) {
    const float* ht = h + t * width;
    for (int j = 0; j <= m; ++j) {
      const float* w = j < m ? fn + j * width : ht;
      for (int64_t s = 0; s < slices; ++s) {
        double sum = 0.0;
        for (int64_t k = s * kSlice; k < std::min(width, (s + 1) * kSlice); ++k)
          sum += static_cast<double>(ht[k]) * w[k];
        part[(t * (m + 1) + j) * slices + s] = sum;
      }
    }
  }
}

double cpu_hc_partials_gap(const double* ref, const double* got, int64_t rows, int64_t width, int m) {
  const int64_t slices = (width + 127) / 128;
  double worst = 0.0;
  for (int j = 0; j <= m; ++j) {
    double gap = 0.0, top = 0.0;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t s = 0; s < slices; ++s) {
        const int64_t i = (t * (m + 1) + j) * slices + s;
        const double e = std::fabs(got[i] - ref[i]);
        if (!(e <= gap)) gap = std::isnan(e) ? INFINITY : e;
        top = std::max(top, std::fabs(ref[i]));
      }
    worst = std::max(worst, top > 0 ? gap / top : gap);
  }
  return worst;
}

void cpu_hc_split(const double* mix, int hc, const float* scale, const float* base,
                  double hc_eps, int sinkhorn_iters, float* pre, float* post, float* comb) {
  DSV4_CHECK(sinkhorn_iters >= 1, "sinkhorn_iters=", sinkhorn_iters);
  for (int c = 0; c < hc; ++c) {
    pre[c] = pre_gate(mix[c], scale[0], base[c], hc_eps);
    post[c] = static_cast<float>(2.0 * sigmoid(mix[hc + c] * scale[1] + base[hc + c]));
  }
  // Row softmax plus eps on the output, then a column normalization (§4.4).
  std::vector<double> m(static_cast<size_t>(hc) * hc);  // [hc, hc], j source, k destination
  const int z0 = 2 * hc;
  for (int j = 0; j < hc; ++j) {
    double zmax = -INFINITY;
    for (int k = 0; k < hc; ++k) {
      m[j * hc + k] = mix[z0 + j * hc + k] * scale[2] + base[z0 + j * hc + k];
      zmax = std::max(zmax, m[j * hc + k]);
    }
    double sum = 0.0;
    for (int k = 0; k < hc; ++k) {
      m[j * hc + k] = std::exp(m[j * hc + k] - zmax);
      sum += m[j * hc + k];
    }
    for (int k = 0; k < hc; ++k) m[j * hc + k] = m[j * hc + k] / sum + hc_eps;
  }
  normalize_cols(m, hc, hc_eps);
  for (int it = 1; it < sinkhorn_iters; ++it) {
    normalize_rows(m, hc, hc_eps);
    normalize_cols(m, hc, hc_eps);
  }
  for (int i = 0; i < hc * hc; ++i) comb[i] = static_cast<float>(m[i]);
}

void cpu_hc_collapse(const float* h, const float* pre, int hc, int hidden, float* y) {
  for (int d = 0; d < hidden; ++d) {
    float acc = 0.0f;
    for (int c = 0; c < hc; ++c) acc += pre[c] * h[static_cast<int64_t>(c) * hidden + d];
    y[d] = acc;
  }
}

void cpu_hc_pre(CpuWeightCache& cache, const float* h, int s, int hc, int hidden,
                const HcParams& p, double norm_eps, double hc_eps, int sinkhorn_iters,
                float* y, float* post, float* comb) {
  const int m = (2 + hc) * hc;
  const int64_t width = static_cast<int64_t>(hc) * hidden;
  require_numel(p.fn, m * width, "hc_pre fn");
  require_numel(p.base, m, "hc_pre base");
  require_numel(p.scale, 3, "hc_pre scale");
  const float* fn = cache.widened(p.fn);  // [m, hc*hidden]
  const float* base = cache.widened(p.base);
  const float* scale = cache.widened(p.scale);
  std::vector<double> mix(static_cast<size_t>(m));
  std::vector<float> pre(static_cast<size_t>(hc));
  for (int t = 0; t < s; ++t) {
    const float* ht = h + t * width;
    cpu_hc_mixes(ht, width, fn, m, norm_eps, mix.data());
    cpu_hc_split(mix.data(), hc, scale, base, hc_eps, sinkhorn_iters, pre.data(),
                 post + t * hc, comb + t * hc * hc);
    cpu_hc_collapse(ht, pre.data(), hc, hidden, y + static_cast<int64_t>(t) * hidden);
  }
}

void cpu_hc_post(const float* x, const float* res, const float* post, const float* comb, int s,
                 int hc, int hidden, float* out) {
  for (int t = 0; t < s; ++t) {
    const float* rt = res + static_cast<int64_t>(t) * hc * hidden;  // [hc, hidden]
    const float* ct = comb + t * hc * hc;                           // [hc, hc]
    for (int k = 0; k < hc; ++k) {
      float* ok = out + (static_cast<int64_t>(t) * hc + k) * hidden;
      for (int d = 0; d < hidden; ++d) {
        float acc = post[t * hc + k] * x[static_cast<int64_t>(t) * hidden + d];
        for (int j = 0; j < hc; ++j) acc += ct[j * hc + k] * rt[static_cast<int64_t>(j) * hidden + d];
        ok[d] = acc;
      }
    }
  }
}

void cpu_hc_head(CpuWeightCache& cache, const float* h, int s, int hc, int hidden,
                 const HeadWeights& w, double norm_eps, double hc_eps, float* y) {
  const int64_t width = static_cast<int64_t>(hc) * hidden;
  require_numel(w.hc_head_fn, hc * width, "hc_head fn");
  require_numel(w.hc_head_base, hc, "hc_head base");
  require_numel(w.hc_head_scale, 1, "hc_head scale");
  const float* fn = cache.widened(w.hc_head_fn);  // [hc, hc*hidden]
  const float* base = cache.widened(w.hc_head_base);
  const double scale = cache.widened(w.hc_head_scale)[0];
  std::vector<double> mixh(static_cast<size_t>(hc));
  std::vector<float> pre(static_cast<size_t>(hc));
  for (int t = 0; t < s; ++t) {
    const float* ht = h + t * width;
    cpu_hc_mixes(ht, width, fn, hc, norm_eps, mixh.data());
    for (int c = 0; c < hc; ++c)
      pre[c] = pre_gate(mixh[c], scale, base[c], hc_eps);
    cpu_hc_collapse(ht, pre.data(), hc, hidden, y + static_cast<int64_t>(t) * hidden);
  }
}

void cpu_hc_mean(const float* h, int s, int hc, int hidden, float* out, int out_stride) {
  for (int t = 0; t < s; ++t) {
    for (int d = 0; d < hidden; ++d) {
      double sum = 0.0;
      for (int c = 0; c < hc; ++c) sum += h[(static_cast<int64_t>(t) * hc + c) * hidden + d];
      out[static_cast<int64_t>(t) * out_stride + d] = static_cast<float>(sum / hc);
    }
  }
}

}  // namespace dsv4
