#include "kernels/cpu/linear.h"

#include <vector>

#include "base/scalar_formats.h"
#include "base/error.h"
#include "kernels/cpu/parallel_rows.h"

namespace dsv4 {

namespace {

// y[j] = sum_k a[k] * w[j*in + k] for j < B, each in Acc accumulating in ascending k from
// zero: B independent chains in flight hide the add latency, and every output sees exactly
// the operations of the one-output loop (no -ffast-math, no contraction: CMakeLists.txt).
template <int B, class Acc>
void dot_outputs(const float* a, const float* w, int64_t in, Acc* y) {
  Acc acc[B] = {};
  for (int64_t k = 0; k < in; ++k)
    for (int j = 0; j < B; ++j) acc[j] += static_cast<Acc>(a[k]) * static_cast<Acc>(w[j * in + k]);
  for (int j = 0; j < B; ++j) y[j] = acc[j];
}

// Outputs [n0, n1) of one activation row a against w [out, in]: 8 at a time, then singly.
template <class Acc>
void dot_range(const float* a, const float* w, int64_t in, int64_t n0, int64_t n1, float* y) {
  constexpr int kB = 8;
  Acc acc[kB];
  int64_t n = n0;
  for (; n + kB <= n1; n += kB) {
    dot_outputs<kB>(a, w + n * in, in, acc);
    for (int j = 0; j < kB; ++j) y[n + j] = static_cast<float>(acc[j]);
  }
  for (; n < n1; ++n) {
    dot_outputs<1>(a, w + n * in, in, acc);
    y[n] = static_cast<float>(acc[0]);
  }
}

void require_matrix(const TensorView& w, const char* what) {
  if (w.shape.size() != 2)
    throw Error(cat(what, ": tensor '", w.name, "' must be 2-D [out, in], has rank ",
                    w.shape.size()));
}

}  // namespace

void cpu_lbf16(const float* w, int64_t out, int64_t in, const float* x, int64_t x_stride,
               int rows, bool act_bf16, float* y, int64_t y_stride) {
  // Threads split the outputs n; each range rounds the activation rows itself.
  parallel_rows(out, rows * in, [&](int64_t n0, int64_t n1) {
    std::vector<float> a(static_cast<size_t>(in));  // the activation operand of one row
    for (int r = 0; r < rows; ++r) {
      const float* xr = x + r * x_stride;
      for (int64_t k = 0; k < in; ++k) a[k] = act_bf16 ? bf16_round(xr[k]) : xr[k];
      dot_range<float>(a.data(), w, in, n0, n1, y + r * y_stride);
    }
  });
}

void cpu_grouped_lbf16(const float* wa, int64_t o_rank, int64_t in, const float* o, int rows,
                       int groups, bool act_bf16, float* og) {
  for (int g = 0; g < groups; ++g)
    cpu_lbf16(wa + g * o_rank * in, o_rank, in, o + g * in, groups * in, rows, act_bf16,
              og + g * o_rank, groups * o_rank);
}

void cpu_linear_fp8(CpuWeightCache& cache, const Fp8Linear& w, const float* x, int rows,
                    bool act_bf16, float* y) {
  require_matrix(w.weight, "linear_fp8");
  cpu_lbf16(cache.dense(w), w.out(), w.in(), x, w.in(), rows, act_bf16, y, w.out());
}

void cpu_linear_bf16(CpuWeightCache& cache, const TensorView& w, const float* x, int rows,
                     bool act_bf16, float* y) {
  require_matrix(w, "linear_bf16");
  cpu_lbf16(cache.widened(w), w.dim(0), w.dim(1), x, w.dim(1), rows, act_bf16, y, w.dim(0));
}

void cpu_linear_island(CpuWeightCache& cache, const TensorView& w, const float* x, int rows,
                       float* y) {
  require_matrix(w, "linear_island");
  const int64_t out = w.dim(0), in = w.dim(1);
  const float* wf = cache.widened(w);  // [out, in], decoded before the threads start
  parallel_rows(out, rows * in, [&](int64_t n0, int64_t n1) {
    for (int r = 0; r < rows; ++r) dot_range<double>(x + r * in, wf, in, n0, n1, y + r * out);
  });
}

void cpu_grouped_wo_a(CpuWeightCache& cache, const Fp8Linear& wo_a, const float* o, int rows,
                      int groups, bool act_bf16, float* og) {
  require_matrix(wo_a.weight, "grouped_wo_a");
  if (groups <= 0 || wo_a.out() % groups != 0)
    throw Error(cat("grouped_wo_a: tensor '", wo_a.weight.name, "' has ", wo_a.out(),
                    " rows, not divisible into ", groups, " groups"));
  cpu_grouped_lbf16(cache.dense(wo_a), wo_a.out() / groups, wo_a.in(), o, rows, groups,
                    act_bf16, og);
}

}  // namespace dsv4
