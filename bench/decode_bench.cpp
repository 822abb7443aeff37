// dsv4-bench-decode: batch-1 decode and verify rounds of the whole model on one device
// against the bandwidth floor (issue 11). Weights are generated in place (`weights:
// synthetic`); by default the trunk layers of one kind share one layer's tensors so all
// 43 Flash layers, the head and the drafter fit one H200 — every layer still streams its
// own >= 220 MB per step through a 50 MB L2, so the sharing cannot be served from cache.
// A context of P positions is reached by filling every cache with generated content
// (Stage::fill_for_benchmark), not by a prefill. A step is what rank 0 waits for: the
// layers, the head and the argmax back on the host; ms per step is the median of
// --steps timed steps after --warmup. A plain step runs as one captured CUDA graph per
// stage (Ops::run_step, issue 12) unless --no-cuda-graphs; the op profile runs its steps
// op by op (every op synchronized, no graph). The path measured is printed and recorded.
// Kernels launch with Programmatic Dependent Launch unless --no-cuda-pdl (kernels/cuda/
// launch.cuh): two runs, with and without, A/B it (the same bits either way).
// --prefill-lens adds the prefill rows (issue 13, bench/prefill_rows.h): time to first
// token of generated prompts, tokens/s and TFLOP/s.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/profiler_range.h"
#include "kernels/timed_ops.h"
#include "launcher/tool_args.h"
#include "model/checkpoint.h"
#include "base/error.h"
#include "bench/int_list.h"
#include "bench/json_file.h"
#include "bench/knockout.h"
#include "kernels/step_knockout.h"
#include "bench/prefill_rows.h"
#include "bench/timing.h"
#include "bench/scripted_rounds.h"
#include "model/presets.h"
#include "model/step_bytes.h"
#include "stage/drafter.h"
#include "stage/replay_drafter.h"
#include "stage/stage.h"

namespace {

using namespace dsv4;
using Clock = std::chrono::steady_clock;

constexpr double kFloorTBs = 4.3;  // CHECKPOINT.md §5.4, decision C11: measured copy bandwidth
// Dense bf16 x bf16 -> f32 tensor-core rate of the H200 (issue 13: "about 790 TFLOP/s", a
// measured cuBLASLt GEMM); a constant, not measured here, so a CPU run has the same scale.
constexpr double kBf16PeakTflops = 790;

struct Row {
  std::string kind;      // plain | verify
  int64_t context = 0;   // position of the first row
  int rows = 1;
  double ms = 0, ms_min = 0, ms_max = 0;
  uint64_t weight_bytes = 0, context_bytes = 0;
  double plain_ms = 0;   // verify: the plain step at the same context
};

Row finish(Row r, const std::vector<double>& ms) {
  r.ms = median(ms);
  r.ms_min = *std::min_element(ms.begin(), ms.end());
  r.ms_max = *std::max_element(ms.begin(), ms.end());
  return r;
}

int run(int argc, char** argv) {
  cxxopts::Options opts("dsv4-bench-decode",
                        "Batch-1 decode and verify rounds of the whole model on one device, with "
                        "weights generated in place, against the bandwidth floor (bench/README.md).\n"
                        "Example: dsv4-bench-decode --json out.json");
  opts.add_options()
      ("backend", "cuda | cpu", cxxopts::value<std::string>()->default_value("cuda"))
      ("preset", "tiny | flash", cxxopts::value<std::string>()->default_value("flash"))
      ("trunk-layers", "flash only: trunk layers 0..N-1, no drafter and no verify rows (0: all 43 + DSpark)",
       cxxopts::value<int>()->default_value("0"))
      ("experts", "trunk expert recipe nvfp4 | mxfp4", cxxopts::value<std::string>()->default_value("nvfp4"))
      ("seed", "weights seed", cxxopts::value<uint64_t>()->default_value("1"))
      ("share-layers", "layers of one kind share tensors (needed to fit all of Flash on one GPU)",
       cxxopts::value<bool>()->default_value("true"))
      ("contexts", "plain-decode positions", cxxopts::value<std::string>()->default_value("128,4096,32768,65536"))
      ("verify-context", "position of the verify rounds", cxxopts::value<int64_t>()->default_value("4096"))
      ("verify-rows", "verify round sizes T", cxxopts::value<std::string>()->default_value("1,2,3,4,5,6"))
      ("accept-lens", "speculative rounds at these mean acceptance lengths (tokens per round, e.g. "
                      "2.8,3.5,5.7): the DSpark drafter proposes, T = B + 1 rows are verified and round k "
                      "commits floor((k+1)X) - floor(kX) tokens; prints ms per generated token and the "
                      "speed-up over plain decode at --verify-context (issue 15)",
       cxxopts::value<std::string>()->default_value(""))
      ("steps", "timed steps per row (median)", cxxopts::value<int>()->default_value("20"))
      ("warmup", "untimed steps first", cxxopts::value<int>()->default_value("3"))
      ("profile-context", "also an op-by-op profile of plain steps at this position (kernels/timed_ops.h; "
                          "synchronizes around every op, so it is a separate pass); 0: none",
       cxxopts::value<int64_t>()->default_value("4096"))
      ("no-cuda-graphs", "run every plain step op by op instead of as a captured CUDA graph (to compare)")
      ("no-cuda-pdl", "launch each kernel after the previous one has ended, without Programmatic Dependent "
                      "Launch (to compare; the run config's cuda_pdl: false)")
      ("knockout", "after the plain rows, at the last --contexts position: the step re-timed with each "
                   "kernel's nodes disabled in the step graph, one kernel at a time (what each costs on the "
                   "critical path; needs the cuda backend with graphs; bench/README.md)")
      ("knockout-skip", "kernels --knockout leaves on (comma-separated names as it prints them)",
       cxxopts::value<std::string>()->default_value(""))
      ("profiler-steps", "after the plain rows, N more plain steps at the last --contexts position inside "
                         "a profiler range (cudaProfilerStart/Stop), for `ncu --profile-from-start off` "
                         "(bench/README.md); 0: none", cxxopts::value<int>()->default_value("0"))
      ("prefill-lens", "also time to first token of prompts of these lengths, e.g. 1024,8192,65536 "
                       "(bench/README.md); default none", cxxopts::value<std::string>()->default_value(""))
      ("prefill-chunk", "rows of one prefill operation (the config key prefill_chunk)",
       cxxopts::value<int64_t>()->default_value("2048"))
      ("prefill-runs", "timed prefills per prompt length (median)", cxxopts::value<int>()->default_value("3"))
      ("prefill-warmup", "untimed prefills first", cxxopts::value<int>()->default_value("1"))
      ("prefill-profile-len", "also an op profile of one prefill of N tokens (-1: the shortest of "
                              "--prefill-lens; 0: none)", cxxopts::value<int64_t>()->default_value("-1"))
      ("peak-tflops", "the bf16 tensor-core rate achieved TFLOP/s is set against",
       cxxopts::value<double>()->default_value(cat(kBf16PeakTflops)))
      ("json", "write the rows to FILE (bench/README.md schema)", cxxopts::value<std::string>())
      ("label", "free text recorded in the JSON (commit, machine)", cxxopts::value<std::string>()->default_value(""))
      ("h,help", "show this help");
  const std::optional<cxxopts::ParseResult> parsed = parse_tool_args(opts, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  const int steps = args["steps"].as<int>(), warmup = args["warmup"].as<int>();
  const int profiler_steps = args["profiler-steps"].as<int>();
  if (steps < 1 || warmup < 0 || profiler_steps < 0)
    throw Error("--steps must be >= 1, --warmup >= 0 and --profiler-steps >= 0");
  const std::vector<int64_t> contexts = int_list(args["contexts"].as<std::string>(), "--contexts", 1);
  const std::vector<int64_t> verify_rows = int_list(args["verify-rows"].as<std::string>(), "--verify-rows", 1);
  const int64_t verify_ctx = args["verify-context"].as<int64_t>();
  std::vector<int64_t> accept_milli;  // X * 1000 per --accept-lens entry
  {
    std::stringstream list(args["accept-lens"].as<std::string>());
    for (std::string item; std::getline(list, item, ',');)
      accept_milli.push_back(parse_accept_len_milli(item, "--accept-lens"));
  }
  const int64_t profile_ctx = args["profile-context"].as<int64_t>();
  PrefillBenchOptions pre;
  if (!args["prefill-lens"].as<std::string>().empty())
    pre.lens = int_list(args["prefill-lens"].as<std::string>(), "--prefill-lens", 1);
  pre.chunk = args["prefill-chunk"].as<int64_t>();
  pre.runs = args["prefill-runs"].as<int>();
  pre.warmup = args["prefill-warmup"].as<int>();
  pre.profile_len = args["prefill-profile-len"].as<int64_t>();
  pre.peak_tflops = args["peak-tflops"].as<double>();
  if (pre.chunk < 1 || pre.runs < 1 || pre.warmup < 0 || pre.profile_len < -1 || !(pre.peak_tflops > 0))
    throw Error("--prefill-chunk and --prefill-runs must be >= 1, --prefill-warmup >= 0, "
                "--prefill-profile-len >= -1 and --peak-tflops > 0");
  if (pre.profile_len == -1)
    pre.profile_len = pre.lens.empty() ? 0 : *std::min_element(pre.lens.begin(), pre.lens.end());

  const ModelConfig cfg = preset_by_name(args["preset"].as<std::string>(), args["trunk-layers"].as<int>());
  SyntheticOptions so;
  so.seed = args["seed"].as<uint64_t>();
  so.trunk_experts = expert_recipe_by_name(args["experts"].as<std::string>());
  so.share_layers_by_kind = args["share-layers"].as<bool>();
  const std::string backend = args["backend"].as<std::string>();
  if (backend != "cuda" && backend != "cpu") throw Error(cat("--backend: '", backend, "' (cuda or cpu)"));
  const bool graphs = backend == "cuda" && !args.count("no-cuda-graphs");
  const bool pdl = backend == "cuda" && !args.count("no-cuda-pdl");
  std::unique_ptr<Ops> ops = backend == "cuda" ? make_cuda_ops(0, graphs, pdl) : make_cpu_ops();
  Checkpoint ckpt(cfg, so);
  ckpt.attach_weight_memory(ops->make_weight_memory());
  const bool verify = cfg.dspark.present;
  const int tmax = verify ? cfg.dspark.block_size + 1 : 0;
  for (int64_t t : verify_rows)
    if (verify && t > tmax) throw Error(cat("--verify-rows: T = ", t, " exceeds block_size + 1 = ", tmax));

  const int64_t max_pos =
      std::max({*std::max_element(contexts.begin(), contexts.end()), verify_ctx, profile_ctx});
  const int64_t max_seq = std::min<int64_t>(max_pos + (warmup + steps + 1) * std::max<int>(tmax, 1) + 8,
                                            cfg.max_position_embeddings);
  StageSpec spec;
  spec.layers = {0, cfg.num_hidden_layers};
  spec.max_seq = max_seq;
  spec.max_prompt = std::max(tmax, 1);

  const uint64_t free_at_start = ckpt.weight_memory()->free_bytes();
  const auto t_load = Clock::now();
  std::fprintf(stderr, "dsv4-bench-decode: %s, %d trunk layers, generating weights in %s%s ...\n",
               cfg.source.c_str(), cfg.num_hidden_layers, ckpt.weight_memory()->name().c_str(),
               so.share_layers_by_kind ? " (layers of one kind shared)" : "");
  auto plain = std::make_unique<Stage>(ckpt, *ops, spec);
  std::unique_ptr<Stage> spec_stage;
  if (verify) {
    StageSpec s = spec;
    s.drafter = true;
    spec_stage = std::make_unique<Stage>(ckpt, *ops, s);
  }
  ops->synchronize();
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  const uint64_t generated = ckpt.weight_memory()->bytes(), free_after = ckpt.weight_memory()->free_bytes();
  std::printf("weights: %.2f GB generated in %.1f s; plain stage resident (weights as read + caches) %.2f GB; "
              "%.2f GB free after load\n",
              generated / 1e9, load_s, plain->resident_bytes() / 1e9, free_after / 1e9);

  const auto by_class = step_weight_bytes(cfg, so.trunk_experts);
  uint64_t weight_bytes = 0;
  for (const auto& [cls, b] : by_class) weight_bytes += b;
  uint64_t smallest_layer = UINT64_MAX;
  {
    CensusOptions co;
    co.trunk_experts = so.trunk_experts;
    const auto census = tensor_census(cfg, co);
    for (int l = 0; l < cfg.num_hidden_layers; ++l) {
      uint64_t b = 0;
      for (const CensusEntry& e : census)
        if (e.layer_id == l) b += step_read_bytes(e, cfg);
      smallest_layer = std::min(smallest_layer, b);
    }
  }
  std::printf("step weight bytes %llu (%.3f ms at %.1f TB/s); the smallest layer reads %.0f MB per step\n",
              static_cast<unsigned long long>(weight_bytes), weight_bytes / (kFloorTBs * 1e9), kFloorTBs,
              smallest_layer / 1e6);

  const int64_t V = cfg.vocab_size;
  const size_t hrow = static_cast<size_t>(cfg.hc_mult) * cfg.hidden_size;
  const int rows_cap = std::max(tmax, 1);
  FBuf h = ops->alloc(rows_cap * hrow), logits = ops->alloc(rows_cap * V);
  FBuf taps = ops->alloc(verify ? rows_cap * cfg.dspark.target_layer_ids.size() * cfg.hidden_size : 1);
  std::vector<int32_t> next(static_cast<size_t>(rows_cap), 17);
  auto valid = [&](int32_t t) { return t >= 0 && t < V ? t : 17; };
  // One plain step as rank 0 waits for it: the layers and the head (one graph), the
  // argmax on the host.
  auto plain_step = [&](Stage& stage, Ops& o) {
    stage.decode(valid(next[0]), h.data(), nullptr, logits.data());
    o.argmax(logits.data(), 1, V, next.data());
  };

  std::vector<Row> rows;
  std::map<int64_t, double> plain_ms;
  for (int64_t p : contexts) {
    plain->fill_for_benchmark(p, 0xC0FFEEu + p);
    const auto ms = time_steps(warmup, steps, [&] { plain_step(*plain, *ops); });
    Row r;
    r.kind = "plain";
    r.context = p;
    r.weight_bytes = weight_bytes;
    r.context_bytes = step_context_bytes(cfg, p).total();
    rows.push_back(finish(r, ms));
    plain_ms[p] = rows.back().ms;
    std::fprintf(stderr, "plain @ %lld: %.3f ms\n", static_cast<long long>(p), rows.back().ms);
  }
  if (profiler_steps > 0) {  // the stage still holds the last context's fill, graph warm
    ops->synchronize();
    profiler_start();
    for (int i = 0; i < profiler_steps; ++i) plain_step(*plain, *ops);
    ops->synchronize();
    profiler_stop();
  }
  // Which path the plain rows measured (a context's fill may move memory: its warm-up
  // steps then re-capture the graph before the timed ones replay it).
  const StepGraphCounts path = ops->step_graph_counts();
  const std::string plain_path =
      path.replays > 0 ? "cuda graph (captured once per stage, replayed)" : "op by op (no graph)";
  std::printf("plain steps: %s; %lld replayed, %lld captured, %lld run op by op; kernels launched %s\n",
              plain_path.c_str(), static_cast<long long>(path.replays), static_cast<long long>(path.captures),
              static_cast<long long>(path.plain), pdl ? "with PDL" : "without PDL");
  Knockout knockout;
  const int64_t knockout_ctx = contexts.back();
  if (args.count("knockout")) {
    const std::vector<std::string> skip = split_kernel_names(args["knockout-skip"].as<std::string>());
    knockout = knock_out_kernels(*ops, warmup, steps, skip,
                                 [&] { plain->fill_for_benchmark(knockout_ctx, 0xC0FFEEu + knockout_ctx); },
                                 [&] { plain_step(*plain, *ops); });
    print_knockout(knockout, knockout_ctx);
  }
  if (verify) {
    if (!plain_ms.count(verify_ctx)) {
      plain->fill_for_benchmark(verify_ctx, 0xC0FFEEu + verify_ctx);
      plain_ms[verify_ctx] = median(time_steps(warmup, steps, [&] { plain_step(*plain, *ops); }));
    }
    const StepGraphCounts before = ops->step_graph_counts();
    for (int64_t t : verify_rows) {
      spec_stage->fill_for_benchmark(verify_ctx, 0xBEEFu + t);
      std::vector<int32_t> ids(static_cast<size_t>(t));
      const auto ms = time_steps(warmup, steps, [&] {
        for (int64_t i = 0; i < t; ++i) ids[i] = valid(next[i % rows_cap] + static_cast<int32_t>(i)) % V;
        spec_stage->verify(ids, h.data(), taps.data());
        spec_stage->head_logits(h.data(), static_cast<int>(t), logits.data());
        ops->argmax(logits.data(), static_cast<int>(t), V, next.data());
        spec_stage->commit(static_cast<int>(t));
      });
      Row r;
      r.kind = "verify";
      r.context = verify_ctx;
      r.rows = static_cast<int>(t);
      r.weight_bytes = weight_bytes;  // dense once; the experts of T rows: see bench/README.md
      r.context_bytes = step_context_bytes(cfg, verify_ctx).total() * static_cast<uint64_t>(t);
      r.plain_ms = plain_ms[verify_ctx];
      rows.push_back(finish(r, ms));
      std::fprintf(stderr, "verify T=%lld @ %lld: %.3f ms\n", static_cast<long long>(t),
                   static_cast<long long>(verify_ctx), rows.back().ms);
    }
    // Which path the verify rows measured: a round of T rows is a step of its own (one
    // graph per T, replayed once captured; a refill may move memory, as for the plain rows).
    const StepGraphCounts all = ops->step_graph_counts();
    std::printf("verify rounds: %lld replayed, %lld captured, %lld run op by op\n",
                static_cast<long long>(all.replays - before.replays),
                static_cast<long long>(all.captures - before.captures),
                static_cast<long long>(all.plain - before.plain));
  }

  std::vector<ScriptedRounds> spec_rows;
  if (verify && !accept_milli.empty()) {
    DsparkDrafter drafter(ckpt, *ops, spec.numerics, max_seq);
    const int64_t tap_width = static_cast<int64_t>(cfg.dspark.target_layer_ids.size()) * cfg.hidden_size;
    const int64_t primed = std::min<int64_t>(cfg.sliding_window, verify_ctx);
    FBuf prime_taps = ops->alloc(static_cast<size_t>(primed * tap_width));  // synthetic: zeros
    for (int64_t x : accept_milli) {
      spec_stage->fill_for_benchmark(verify_ctx, 0x5EEDu + x);
      drafter.prime(prime_taps.data(), verify_ctx);
      spec_rows.push_back(time_scripted_rounds(*spec_stage, drafter, *ops, x, warmup, steps, V, h.data(),
                                               logits.data(), taps.data()));
      std::fprintf(stderr, "spec X=%.3f @ %lld: %.3f ms per token\n", x / 1000.0,
                   static_cast<long long>(verify_ctx), spec_rows.back().ms_per_token());
    }
  }

  if (profile_ctx > 0) {
    TimedOps timed(*ops);
    timed.set_active(false);  // the set-up (weights made resident, caches filled) is not a step
    Stage profiled(ckpt, timed, spec);
    profiled.fill_for_benchmark(profile_ctx, 0xFACEu);
    for (int i = 0; i < warmup + steps; ++i) {
      timed.set_active(i >= warmup);
      plain_step(profiled, timed);
      if (i >= warmup) timed.count_step();
    }
    std::printf("op profile of plain steps at context %lld (every op synchronized, op by op: no "
                "CUDA graph):\n%s\n",
                static_cast<long long>(profile_ctx), timed.table().c_str());
  }

  // The prefill rows run on a stage of their own; the decode stages go first, so peak_mem
  // is what the prefill needs (the weights stay: they live in the checkpoint's memory).
  plain.reset();
  spec_stage.reset();
  std::vector<PrefillRow> prefill;
  if (!pre.lens.empty()) prefill = run_prefill_rows(ckpt, *ops, pre, free_at_start);
  if (pre.profile_len > 0)
    std::printf("op profile of one prefill of %lld tokens in chunks of %lld (every op synchronized):\n%s\n",
                static_cast<long long>(pre.profile_len), static_cast<long long>(pre.chunk),
                prefill_profile(ckpt, *ops, pre).c_str());

  std::printf("%-7s %8s %4s %10s %10s %10s %14s %14s %8s %10s %9s\n", "kind", "context", "T", "ms/step",
              "min", "max", "weight_bytes", "context_bytes", "TB/s", "x_floor4.3", "x_plain");
  nlohmann::ordered_json out;
  out["tool"] = "dsv4-bench-decode";
  out["label"] = args["label"].as<std::string>();
  out["backend"] = backend;
  out["plain_path"] = path.replays > 0 ? "cuda_graph" : "ops";
  out["plain_steps_replayed"] = path.replays;
  out["pdl"] = pdl;
  out["model"] = cfg.source;
  out["experts"] = args["experts"].as<std::string>();
  out["shared_layers"] = so.share_layers_by_kind;
  out["generated_bytes"] = generated;
  out["load_s"] = load_s;
  out["free_bytes_after_load"] = free_after;
  out["smallest_layer_step_bytes"] = smallest_layer;
  out["weight_bytes_by_class"] = nlohmann::ordered_json::object();
  for (const auto& [cls, b] : by_class) out["weight_bytes_by_class"][byte_class_name(cls)] = b;
  out["rows"] = nlohmann::ordered_json::array();
  for (const Row& r : rows) {
    const uint64_t bytes = r.weight_bytes + r.context_bytes;
    const double floor_ms = bytes / (kFloorTBs * 1e9);
    const double tbs = bytes / (r.ms * 1e9);
    std::printf("%-7s %8lld %4d %10.3f %10.3f %10.3f %14llu %14llu %8.3f %10.2f %9s\n", r.kind.c_str(),
                static_cast<long long>(r.context), r.rows, r.ms, r.ms_min, r.ms_max,
                static_cast<unsigned long long>(r.weight_bytes), static_cast<unsigned long long>(r.context_bytes),
                tbs, r.ms / floor_ms, r.kind == "verify" ? cat(r.ms / r.plain_ms).substr(0, 5).c_str() : "-");
    nlohmann::ordered_json j;
    j["kind"] = r.kind;
    j["trunk_layers"] = cfg.num_hidden_layers;
    j["context"] = r.context;
    j["rows"] = r.rows;
    j["ms_per_step"] = r.ms;
    j["ms_min"] = r.ms_min;
    j["ms_max"] = r.ms_max;
    j["steps"] = steps;
    j["step_bytes"] = bytes;
    j["weight_bytes"] = r.weight_bytes;
    j["context_bytes"] = r.context_bytes;
    j["achieved_tb_s"] = tbs;
    j["ratio_at_4_3"] = r.ms / floor_ms;
    if (r.kind == "verify") j["ratio_to_plain"] = r.ms / r.plain_ms;
    out["rows"].push_back(j);
  }
  if (!prefill.empty()) print_prefill_rows(prefill, pre.peak_tflops);
  for (const PrefillRow& r : prefill)
    out["rows"].push_back(prefill_row_json(r, cfg.num_hidden_layers, pre.runs, pre.peak_tflops));
  if (!spec_rows.empty()) {
    std::printf("\n%-7s %8s %4s %10s %8s %12s %14s %8s\n", "kind", "context", "T", "accept_len", "rounds",
                "tokens/round", "ms/token", "speedup");
    out["spec_rows"] = nlohmann::ordered_json::array();
    for (const ScriptedRounds& r : spec_rows) {
      const double speedup = plain_ms[verify_ctx] / r.ms_per_token();
      std::printf("%-7s %8lld %4d %10.3f %8d %12.3f %14.3f %8.2f\n", "spec", static_cast<long long>(verify_ctx),
                  tmax, r.accept_len_milli / 1000.0, r.rounds, r.tokens_per_round(), r.ms_per_token(), speedup);
      nlohmann::ordered_json j;
      j["kind"] = "spec";
      j["trunk_layers"] = cfg.num_hidden_layers;
      j["context"] = verify_ctx;
      j["rows"] = tmax;
      j["accept_len"] = r.accept_len_milli / 1000.0;
      j["rounds"] = r.rounds;
      j["tokens_per_round"] = r.tokens_per_round();
      j["ms_per_token"] = r.ms_per_token();
      j["plain_ms_per_step"] = plain_ms[verify_ctx];
      j["speedup"] = speedup;
      out["spec_rows"].push_back(j);
    }
  }
  if (!knockout.rows.empty()) out["knockout"] = knockout_json(knockout, knockout_ctx);
  if (args.count("json")) {
    const std::string path = args["json"].as<std::string>();
    write_json_file(path, out);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dsv4::tool_main("dsv4-bench-decode", run, argc, argv); }
