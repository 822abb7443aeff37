// The CUDA backend against the CPU reference on the whole tiny model (ARCHITECTURE.md
// law 5, MODEL.md D15): the hc-state after every layer and the logits within relative
// L2 1e-3, greedy tokens equal except at recorded near-ties (top-1/top-2 margin < 0.5);
// and split invariance on the GPU (law 1): one 7-layer stage and seven 1-layer stages
// give bit-identical logits. The prompt's rows run through the prefill GEMMs
// (kernels/ops.h *_gemm, issue 13; each within ~1e-6 of its CPU twin,
// test_gemm_prefill_twin.cpp) and the decode rows through the row-independent GEMVs, so
// the same bounds are law 2's check that decode after a tensor-core prefill keeps to the
// CPU reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <vector>

#include "kernels/ops.h"
#include "model/checkpoint.h"
#include "stage/stage.h"
#include "tests/gpu/tracing_ops.h"
#include "tests/unit/stage/stage_harness.h"

namespace dsv4 {
namespace {

constexpr double kLayerRelL2 = 1e-3;   // D15: f32 serving arm vs f64 oracle, per layer
constexpr double kNearTieMargin = 0.5; // D15: a greedy mismatch must be a near-tie
constexpr int kPrompt = 24, kSteps = 64;
constexpr int64_t kMaxSeq = kPrompt + kSteps + 8;

// One backend's chain of single-layer stages (rank l of L holds layer l).
struct Chain {
  Ops& ops;
  const ModelConfig& c;
  std::vector<std::unique_ptr<Stage>> stages;
  FBuf h, logits;
  Chain(Checkpoint& ckpt, Ops& o, const std::vector<LayerRange>& ranges, Numerics num = {})
      : ops(o), c(ckpt.config()) {
    for (size_t r = 0; r < ranges.size(); ++r) {
      StageSpec s = test::stage_spec(static_cast<int>(r), static_cast<int>(ranges.size()),
                                     ranges[r], kMaxSeq, false);
      s.max_prompt = kPrompt;
      s.numerics = num;
      stages.push_back(std::make_unique<Stage>(ckpt, ops, s));
    }
    h = ops.alloc(static_cast<size_t>(kPrompt) * c.hc_mult * c.hidden_size);
    logits = ops.alloc(static_cast<size_t>(kPrompt) * c.vocab_size);
  }
  std::vector<float> host_h(int rows) {
    std::vector<float> out(static_cast<size_t>(rows) * c.hc_mult * c.hidden_size);
    ops.synchronize();
    ops.download(out.data(), h.data(), out.size());
    return out;
  }
  std::vector<float> host_logits(int rows) {
    stages.back()->head_logits(h.data(), rows, logits.data());
    std::vector<float> out(static_cast<size_t>(rows) * c.vocab_size);
    ops.synchronize();
    ops.download(out.data(), logits.data(), out.size());
    return out;
  }
};

// Largest per-row relative L2 error of `got` against `ref` (rows of width n).
double max_row_rel_l2(const std::vector<float>& ref, const std::vector<float>& got, size_t n) {
  double worst = 0;
  for (size_t r = 0; r * n < ref.size(); ++r) {
    double num = 0, den = 0;
    for (size_t i = r * n; i < (r + 1) * n; ++i) {
      const double d = static_cast<double>(got[i]) - ref[i];
      num += d * d;
      den += static_cast<double>(ref[i]) * ref[i];
    }
    worst = std::max(worst, std::sqrt(num / std::max(den, 1e-30)));
  }
  return worst;
}

int argmax_of(const float* row, int64_t n) {
  return static_cast<int>(std::max_element(row, row + n) - row);
}

// top-1 minus top-2 of a logits row.
double margin_of(const float* row, int64_t n) {
  std::vector<float> v(row, row + n);
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
  return static_cast<double>(v[0]) - v[1];
}

std::vector<LayerRange> single_layers(int L) {
  std::vector<LayerRange> r;
  for (int l = 0; l < L; ++l) r.push_back({l, l + 1});
  return r;
}

}  // namespace

// Relative L2 of a whole hc-state (all rows together).
double rel_l2(const std::vector<float>& ref, const std::vector<float>& got) {
  return max_row_rel_l2(ref, got, ref.size());
}

struct Agreement {
  std::vector<double> layer_whole, layer_row;  // per layer: whole-state and worst-row rel L2
  double logits_row = 0;
  int mismatches = 0, near_ties = 0;
};

// Prefill kPrompt random tokens, then kSteps decode steps teacher-forced by the CPU's
// greedy tokens; both backends run seven single-layer stages.
Agreement measure_agreement(const Numerics& num, const char* label) {
  Checkpoint ckpt(test::tiny_dir());
  const ModelConfig& c = ckpt.config();
  auto cpu_ops = make_cpu_ops();
  auto gpu_ops = make_cuda_ops(0);
  const auto ranges = single_layers(c.num_hidden_layers);
  Chain cpu(ckpt, *cpu_ops, ranges, num), gpu(ckpt, *gpu_ops, ranges, num);
  const size_t row_width = static_cast<size_t>(c.hc_mult) * c.hidden_size;
  Agreement a;
  a.layer_whole.assign(ranges.size(), 0.0);
  a.layer_row.assign(ranges.size(), 0.0);
  auto run_layers = [&](auto&& step, int rows) {
    for (size_t l = 0; l < ranges.size(); ++l) {
      step(*cpu.stages[l], cpu.h.data());
      step(*gpu.stages[l], gpu.h.data());
      const auto hc = cpu.host_h(rows), hg = gpu.host_h(rows);
      a.layer_whole[l] = std::max(a.layer_whole[l], rel_l2(hc, hg));
      a.layer_row[l] = std::max(a.layer_row[l], max_row_rel_l2(hc, hg, row_width));
    }
  };
  auto compare_argmax = [&](const float* rc, const float* rg, int pos) {
    const int ac = argmax_of(rc, c.vocab_size), ag = argmax_of(rg, c.vocab_size);
    if (ac == ag) return;
    ++a.mismatches;
    const double m = margin_of(rc, c.vocab_size);
    MESSAGE(std::string(label) << ": greedy mismatch at position " << pos << ": cpu " << ac << " gpu " << ag
                  << ", cpu top-1/top-2 margin " << m);
    if (m < kNearTieMargin) ++a.near_ties;
  };

  const auto prompt = test::random_tokens(kPrompt, c.vocab_size, 7);
  run_layers([&](Stage& s, float* h) { s.prefill(prompt, h, nullptr); }, kPrompt);
  const auto lc = cpu.host_logits(kPrompt), lg = gpu.host_logits(kPrompt);
  a.logits_row = max_row_rel_l2(lc, lg, static_cast<size_t>(c.vocab_size));
  const size_t last = static_cast<size_t>(kPrompt - 1) * c.vocab_size;
  compare_argmax(lc.data() + last, lg.data() + last, kPrompt - 1);
  int32_t token = argmax_of(lc.data() + last, c.vocab_size);
  for (int step = 0; step < kSteps; ++step) {
    run_layers([&](Stage& s, float* h) { s.decode(token, h, nullptr); }, 1);
    const auto rc = cpu.host_logits(1), rg = gpu.host_logits(1);
    a.logits_row = std::max(a.logits_row, max_row_rel_l2(rc, rg, static_cast<size_t>(c.vocab_size)));
    compare_argmax(rc.data(), rg.data(), kPrompt + step);
    token = argmax_of(rc.data(), c.vocab_size);
  }
  for (size_t l = 0; l < ranges.size(); ++l)
    MESSAGE(std::string(label) << ": layer " << l << ": hc-state relative L2 " << a.layer_whole[l]
                  << " (worst row " << a.layer_row[l] << ")");
  MESSAGE(std::string(label) << ": logits worst-row relative L2 " << a.logits_row << "; greedy mismatches "
                << a.mismatches << " of " << kSteps + 1 << " positions, near-ties " << a.near_ties);
  return a;
}

TEST_CASE("CUDA matches the CPU reference layer by layer without quantization simulation (law 5, D15)") {
  // expert_arm bf16, dense_act f32, indexer_quant none, kv_quant clamp: no activation
  // rounding, so only f32 vs f64 accumulation separates the backends (~1e-6 per op).
  Numerics exact;
  exact.expert_arm = ExpertArm::bf16;
  exact.dense_act = DenseAct::f32;
  exact.indexer_quant = IndexerQuant::none;
  const Agreement a = measure_agreement(exact, "no quantization simulation");
  for (double e : a.layer_whole) CHECK(e <= kLayerRelL2);
  CHECK(a.mismatches == a.near_ties);
}

TEST_CASE("CUDA matches the CPU reference on greedy tokens with the default numerics (law 5, D15)") {
  // The default arms fake-quantize activations (e4m3 per 128, FP4, bf16): a 1e-7
  // difference that lands on a rounding boundary moves one element by a whole
  // quantization step, and a routing / top-k decision can flip; on the tiny model's
  // random weights these flips dominate the per-layer error (recorded in
  // docs/gpu-runs.md). The greedy law holds: every mismatch is a near-tie.
  const Agreement a = measure_agreement(Numerics{}, "default numerics");
  CHECK(a.mismatches == a.near_ties);
}

TEST_CASE("CUDA: one 7-layer stage and seven 1-layer stages give identical logits (law 1)") {
  Checkpoint ckpt(test::tiny_dir());
  const ModelConfig& c = ckpt.config();
  auto gpu_ops = make_cuda_ops(0);
  Chain whole(ckpt, *gpu_ops, {{0, c.num_hidden_layers}});
  Chain split(ckpt, *gpu_ops, single_layers(c.num_hidden_layers));
  const auto prompt = test::random_tokens(kPrompt, c.vocab_size, 11);
  for (auto* chain : {&whole, &split})
    for (auto& s : chain->stages) s->prefill(prompt, chain->h.data(), nullptr);
  auto a = whole.host_logits(kPrompt), b = split.host_logits(kPrompt);
  CHECK(test::same_bits(a.data(), b.data(), a.size()));
  int32_t token = argmax_of(a.data() + static_cast<size_t>(kPrompt - 1) * c.vocab_size,
                            c.vocab_size);
  for (int step = 0; step < 16; ++step) {
    for (auto* chain : {&whole, &split})
      for (auto& s : chain->stages) s->decode(token, chain->h.data(), nullptr);
    a = whole.host_logits(1);
    b = split.host_logits(1);
    REQUIRE(test::same_bits(a.data(), b.data(), a.size()));
    token = argmax_of(a.data(), c.vocab_size);
  }
}

TEST_CASE("CUDA vs CPU op by op through the tiny model: where the hc-state error grows") {
  // Diagnostic for law 5: both backends run the same prefill + decode steps; every op's
  // output is compared and the ops whose relative L2 jumps are listed in order.
  Checkpoint ckpt(test::tiny_dir());
  const ModelConfig& c = ckpt.config();
  auto cpu_inner = make_cpu_ops();
  auto gpu_inner = make_cuda_ops(0);
  test::TracingOps cpu_ops(*cpu_inner), gpu_ops(*gpu_inner);
  const auto ranges = single_layers(c.num_hidden_layers);
  Chain cpu(ckpt, cpu_ops, ranges), gpu(ckpt, gpu_ops, ranges);
  const auto prompt = test::random_tokens(kPrompt, c.vocab_size, 7);
  for (size_t l = 0; l < ranges.size(); ++l) {
    cpu.stages[l]->prefill(prompt, cpu.h.data(), nullptr);
    gpu.stages[l]->prefill(prompt, gpu.h.data(), nullptr);
  }
  for (int step = 0; step < 4; ++step)
    for (size_t l = 0; l < ranges.size(); ++l) {
      cpu.stages[l]->decode(prompt[step], cpu.h.data(), nullptr);
      gpu.stages[l]->decode(prompt[step], gpu.h.data(), nullptr);
    }
  REQUIRE(cpu_ops.trace.size() == gpu_ops.trace.size());
  double prev = 0;
  int reported = 0;
  for (size_t i = 0; i < cpu_ops.trace.size() && reported < 40; ++i) {
    const auto& a = cpu_ops.trace[i];
    const auto& b = gpu_ops.trace[i];
    REQUIRE(a.op == b.op);
    double num = 0, den = 0;
    size_t differing = 0;
    for (size_t k = 0; k < a.values.size(); ++k) {
      const double d = b.values[k] - a.values[k];
      num += d * d;
      den += a.values[k] * a.values[k];
      differing += (a.values[k] != b.values[k]) ? 1 : 0;
    }
    const double rel = std::sqrt(num / std::max(den, 1e-30));
    if ((a.integral && differing > 0) || rel > std::max(1e-5, 10 * prev)) {
      MESSAGE("op #" << i << " " << a.op << ": relative L2 " << rel << ", " << differing << " of "
                     << a.values.size() << " values differ");
      if (reported == 0 && i >= 2) {  // the first jump: which rows, and what routing fed it
        const size_t width = static_cast<size_t>(c.hidden_size);
        for (size_t r = 0; r * width < a.values.size(); ++r) {
          double rn = 0, rd = 0;
          for (size_t k = r * width; k < (r + 1) * width && k < a.values.size(); ++k) {
            rn += (b.values[k] - a.values[k]) * (b.values[k] - a.values[k]);
            rd += a.values[k] * a.values[k];
          }
          if (rn > 0) MESSAGE("  row " << r << ": relative L2 " << std::sqrt(rn / std::max(rd, 1e-30)));
        }
        for (size_t j = i; j-- > 0 && j + 6 > i;) {
          std::ostringstream os;
          for (size_t k = 0; k < std::min<size_t>(cpu_ops.trace[j].values.size(), 48); ++k)
            os << cpu_ops.trace[j].values[k] << "/" << gpu_ops.trace[j].values[k] << " ";
          MESSAGE("  before: op #" << j << " " << cpu_ops.trace[j].op << ": " << os.str());
        }
      }
      ++reported;
    }
    if (!a.integral) prev = std::max(prev, rel);
  }
  MESSAGE("largest op-level relative L2 seen: " << prev);
}

}  // namespace dsv4
