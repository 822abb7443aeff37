// dsv4-bench-ops: the decode step's ops one at a time at the model's shapes (issue 12's
// micro-benchmark; llm.c dev/cuda spirit: the twin tests validate, this times), and the
// prefill forms of the linears and the router (issue 13: the *_gemm ops, "gemm" in the
// case names, timed without a weight-stream floor: meant for --rows 1024, the rows of a
// prefill chunk). Weights
// are one layer of each kind generated in place (flash: layers 0..3 = kinds A, A, B, D);
// activations are seeded random values. Each case runs --reps back-to-back calls after a
// warmup and reports the mean per call over one synchronized span (what a step without a
// graph sees: the GPU time, or the launch time when that is larger). Weight-streaming
// cases also print TB/s and the ratio to the bandwidth floor of the bytes they read.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "bench/int_list.h"
#include "bench/json_file.h"
#include "kernels/ops.h"
#include "kernels/rope_table.h"
#include "launcher/tool_args.h"
#include "model/checkpoint.h"
#include "model/presets.h"

namespace {

using namespace dsv4;
using Clock = std::chrono::steady_clock;

constexpr double kFloorTBs = 4.3;  // CHECKPOINT.md §5.4, decision C11

struct Case {
  std::string name;
  int rows = 1;
  uint64_t weight_bytes = 0;  // streamed weight bytes per call (0: not a weight stream)
  double us = 0;
};

uint64_t bytes_of(const Fp8Linear& w) { return w.weight.nbytes + w.scale.nbytes; }
uint64_t bytes_of(const Fp4Linear& w) { return w.weight.nbytes + w.scale.nbytes; }

class Bench {
 public:
  Bench(Ops& ops, int warmup, int reps) : ops_(ops), warmup_(warmup), reps_(reps) {}

  // Backend buffer of n seeded normal values (sd).
  FBuf random(size_t n, float sd = 1.0f) {
    std::normal_distribution<float> dist(0.0f, sd);
    std::vector<float> host(n);
    for (float& v : host) v = dist(gen_);
    FBuf b = ops_.alloc(n);
    ops_.upload(b.data(), host.data(), n);
    return b;
  }
  IBuf ints(const std::vector<int32_t>& host) {
    IBuf b = ops_.alloc_i32(host.size());
    ops_.upload_i32(b.data(), host.data(), host.size());
    return b;
  }

  void time(std::string name, int rows, uint64_t weight_bytes, const std::function<void()>& call) {
    for (int i = 0; i < warmup_; ++i) call();
    ops_.synchronize();
    const auto t0 = Clock::now();
    for (int i = 0; i < reps_; ++i) call();
    ops_.synchronize();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps_;
    cases_.push_back(Case{std::move(name), rows, weight_bytes, us});
    const Case& c = cases_.back();
    std::printf("%-34s rows %2d %10.1f us", c.name.c_str(), rows, us);
    if (weight_bytes > 0) {
      const double floor_us = weight_bytes / (kFloorTBs * 1e6);
      std::printf("  %8.1f MB  %5.2f TB/s  %6.2fx floor", weight_bytes / 1e6, weight_bytes / (us * 1e6),
                  us / floor_us);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  const std::vector<Case>& cases() const { return cases_; }

 private:
  Ops& ops_;
  int warmup_, reps_;
  std::mt19937_64 gen_{12};
  std::vector<Case> cases_;
};

// Every op of a decode step at the config's shapes, for `rows` rows.
void bench_layer_ops(Bench& b, Ops& ops, const ModelConfig& c, const BlockWeights& w,
                     const RopeTable& rope, int rows, const Numerics& num) {
  const int H = c.hidden_size, hc = c.hc_mult, nh = c.num_attention_heads, D = c.head_dim;
  const bool act = num.act_bf16();
  const std::string tag = cat("L", w.layer_id, " ");
  FBuf h = b.random(static_cast<size_t>(rows) * hc * H);
  FBuf x = b.random(static_cast<size_t>(rows) * H, 0.5f);
  FBuf y = ops.alloc(static_cast<size_t>(rows) * H), post = ops.alloc(rows * hc),
       comb = ops.alloc(rows * hc * hc), out = ops.alloc(static_cast<size_t>(rows) * hc * H);
  b.time(tag + "hc_pre", rows, 0, [&] {
    ops.hc_pre(h.data(), rows, hc, H, w.hc_attn, c.rms_norm_eps, c.hc_eps, c.hc_sinkhorn_iters, y.data(),
               post.data(), comb.data());
  });
  b.time(tag + "hc_post", rows, 0, [&] {
    ops.hc_post(x.data(), h.data(), post.data(), comb.data(), rows, hc, H, out.data());
  });
  b.time(tag + "rmsnorm", rows, 0, [&] { ops.rmsnorm(x.data(), w.attn_norm, rows, H, c.rms_norm_eps, y.data()); });

  auto linear = [&](const char* what, const Fp8Linear& l) {
    FBuf in = b.random(static_cast<size_t>(rows) * l.in(), 0.5f), o = ops.alloc(static_cast<size_t>(rows) * l.out());
    b.time(tag + what, rows, bytes_of(l), [&] { ops.linear_fp8(l, in.data(), rows, act, o.data()); });
    b.time(tag + what + " gemm", rows, 0, [&] { ops.linear_fp8_gemm(l, in.data(), rows, act, o.data()); });
  };
  linear("wq_a", w.wq_a);
  linear("wq_b", w.wq_b);
  linear("wkv", w.wkv);
  linear("wo_b", w.wo_b);
  {
    FBuf o = b.random(static_cast<size_t>(rows) * nh * D, 0.5f), og = ops.alloc(static_cast<size_t>(rows) * w.wo_a.out());
    b.time(tag + "grouped_wo_a", rows, bytes_of(w.wo_a),
           [&] { ops.grouped_wo_a(w.wo_a, o.data(), rows, c.o_groups, act, og.data()); });
    b.time(tag + "grouped_wo_a_gemm", rows, 0,
           [&] { ops.grouped_wo_a_gemm(w.wo_a, o.data(), rows, c.o_groups, act, og.data()); });
  }
  {
    FBuf q = b.random(static_cast<size_t>(rows) * nh * D, 0.1f);
    std::vector<int32_t> pos(static_cast<size_t>(rows));
    for (int r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = 4000 + r;
    b.time(tag + "rope q", rows, 0, [&] { ops.rope(q.data(), rows, nh, D, rope, pos.data(), false); });
    IBuf dpos = b.ints(pos);
    b.time(tag + "head_rms_rope q", rows, 0,
           [&] { ops.head_rms_rope_dev(q.data(), rows, nh, D, c.rms_norm_eps, rope, dpos.data()); });
    // Sink attention over window + top-k entries of a 4096-row kv cache (D12).
    const int width = c.sliding_window + c.index_topk, n_kv = 4096;
    FBuf kv = b.random(static_cast<size_t>(n_kv) * D, 0.3f), o = ops.alloc(static_cast<size_t>(rows) * nh * D);
    std::vector<int32_t> idx(static_cast<size_t>(rows) * width);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>((i * 37) % n_kv);
    IBuf ix = b.ints(idx);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    b.time(tag + cat("sink_attention w", width), rows, 0, [&] {
      ops.sink_attention(q.data(), rows, nh, D, kv.data(), ix.data(), width, w.attn_sink, scale, o.data());
    });
  }
  if (w.indexer) {
    const int ih = c.index_n_heads, id = c.index_head_dim;
    FBuf qi = b.random(static_cast<size_t>(rows) * ih * id, 0.3f), wi = b.random(static_cast<size_t>(rows) * ih);
    for (int n_keys : {1024, 16384}) {
      FBuf keys = b.random(static_cast<size_t>(n_keys) * id, 0.3f);
      IBuf idx = ops.alloc_i32(static_cast<size_t>(rows) * c.index_topk);
      const std::vector<int32_t> visible(static_cast<size_t>(rows), n_keys);
      b.time(tag + cat("indexer_topk n", n_keys), rows, 0, [&] {
        ops.indexer_topk(qi.data(), wi.data(), rows, ih, id, 0.01f, keys.data(), visible.data(), c.index_topk,
                         0, idx.data(), c.index_topk, 0);
      });
    }
  }
  const int k = c.num_experts_per_tok;
  IBuf sel = ops.alloc_i32(static_cast<size_t>(rows) * k);
  FBuf wt = ops.alloc(static_cast<size_t>(rows) * k);
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) ids[static_cast<size_t>(r)] = 100 + 7 * r;
  b.time(tag + "route", rows, w.gate_weight.nbytes, [&] {
    ops.route(w, x.data(), rows, ids.data(), H, c.n_routed_experts, k, static_cast<float>(c.routed_scaling_factor),
              sel.data(), wt.data());
  });
  // The prefill's router: its gate logits alone, then the whole op (the difference is the
  // ranking kernel).
  FBuf logits = ops.alloc(static_cast<size_t>(rows) * c.n_routed_experts);
  b.time(tag + "route_gemm logits", rows, 0,
         [&] { ops.linear_island_gemm(w.gate_weight, x.data(), rows, logits.data()); });
  b.time(tag + "route_gemm", rows, 0, [&] {
    ops.route_gemm(w, x.data(), rows, ids.data(), H, c.n_routed_experts, k,
                   static_cast<float>(c.routed_scaling_factor), sel.data(), wt.data());
  });
  // Distinct experts per row, different rows overlapping in part (a verify round's mix).
  std::vector<int32_t> picks(static_cast<size_t>(rows) * k);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < k; ++j) picks[static_cast<size_t>(r * k + j)] = (r * 3 + j * 41) % c.n_routed_experts;
  IBuf fixed_sel = b.ints(picks);
  FBuf fixed_wt = b.random(static_cast<size_t>(rows) * k, 0.2f);
  std::vector<int32_t> distinct(picks);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const uint64_t expert_bytes =
      distinct.size() * (bytes_of(w.experts[0].w1) + bytes_of(w.experts[0].w2) + bytes_of(w.experts[0].w3)) +
      bytes_of(w.shared_w1) + bytes_of(w.shared_w2) + bytes_of(w.shared_w3);
  FBuf moe_out = ops.alloc(static_cast<size_t>(rows) * H);
  b.time(tag + "moe", rows, expert_bytes, [&] {
    ops.moe(w, x.data(), rows, fixed_sel.data(), fixed_wt.data(), k, static_cast<float>(c.swiglu_limit), num,
            moe_out.data());
  });
}

int run(int argc, char** argv) {
  cxxopts::Options opts("dsv4-bench-ops",
                        "The decode step's ops one at a time at the model's shapes, weights generated in "
                        "place (bench/README.md).\nExample: dsv4-bench-ops --rows 1,4 --json ops.json");
  opts.add_options()
      ("backend", "cuda | cpu", cxxopts::value<std::string>()->default_value("cuda"))
      ("preset", "tiny | flash", cxxopts::value<std::string>()->default_value("flash"))
      ("layers", "comma list of trunk layers to time (flash 2 = kind B with the indexer, 3 = kind D)",
       cxxopts::value<std::string>()->default_value("2,3"))
      ("rows", "comma list of row counts", cxxopts::value<std::string>()->default_value("1,4"))
      ("reps", "timed calls per case", cxxopts::value<int>()->default_value("50"))
      ("warmup", "untimed calls first", cxxopts::value<int>()->default_value("3"))
      ("json", "write the cases to FILE", cxxopts::value<std::string>())
      ("label", "free text recorded in the JSON (commit, machine)", cxxopts::value<std::string>()->default_value(""))
      ("h,help", "show this help");
  const std::optional<cxxopts::ParseResult> parsed = parse_tool_args(opts, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  const int reps = args["reps"].as<int>(), warmup = args["warmup"].as<int>();
  if (reps < 1 || warmup < 0) throw Error("--reps must be >= 1 and --warmup >= 0");
  const std::vector<int64_t> layers = int_list(args["layers"].as<std::string>(), "--layers", 0);
  const std::vector<int64_t> row_counts = int_list(args["rows"].as<std::string>(), "--rows", 1);
  const std::string preset = args["preset"].as<std::string>();
  int trunk = 0;
  for (int64_t l : layers) trunk = std::max(trunk, static_cast<int>(l) + 1);
  const ModelConfig cfg = preset_by_name(preset, preset == "flash" ? trunk : 0);
  for (int64_t l : layers)
    if (l >= cfg.num_hidden_layers) throw Error(cat("--layers: ", l, " >= ", cfg.num_hidden_layers, " trunk layers"));
  const std::string backend = args["backend"].as<std::string>();
  if (backend != "cuda" && backend != "cpu") throw Error(cat("--backend: '", backend, "' (cuda or cpu)"));
  std::unique_ptr<Ops> ops = backend == "cuda" ? make_cuda_ops(0) : make_cpu_ops();
  SyntheticOptions so;
  Checkpoint ckpt(cfg, so);
  ckpt.attach_weight_memory(ops->make_weight_memory());
  const RopeTable rope = make_yarn_rope(cfg, 8192);
  ops->prepare(rope);
  const Numerics num;  // the defaults a run uses
  Bench bench(*ops, warmup, reps);
  {  // the per-op floor of a step without a graph: one launch that does nothing measurable
    FBuf one = ops->alloc(1);
    bench.time("launch floor (fill of 1 float)", 1, 0, [&] { ops->fill(one.data(), 0.0f, 1); });
  }
  for (int64_t l : layers) {
    const BlockWeights w = ckpt.load_block(static_cast<int>(l));
    for (int64_t rows : row_counts) bench_layer_ops(bench, *ops, cfg, w, rope, static_cast<int>(rows), num);
  }
  if (args.count("json")) {
    nlohmann::ordered_json j;
    j["tool"] = "dsv4-bench-ops";
    j["label"] = args["label"].as<std::string>();
    j["backend"] = backend;
    j["preset"] = preset;
    j["floor_tb_s"] = kFloorTBs;
    for (const Case& c : bench.cases())
      j["cases"].push_back({{"name", c.name}, {"rows", c.rows}, {"us", c.us}, {"weight_bytes", c.weight_bytes}});
    const std::string path = args["json"].as<std::string>();
    write_json_file(path, j);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::tool_main("dsv4-bench-ops", run, argc, argv); }
