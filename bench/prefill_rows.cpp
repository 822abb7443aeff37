#include "bench/prefill_rows.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "bench/prefill_flops.h"
#include "bench/timing.h"
#include "kernels/timed_ops.h"
#include "stage/stage.h"

namespace dsv4 {
namespace {

StageSpec prefill_spec(const ModelConfig& cfg, const PrefillBenchOptions& o, int64_t longest) {
  if (longest > cfg.max_position_embeddings)
    throw Error(cat("--prefill-lens: ", longest, " tokens exceed max_position_embeddings ",
                    cfg.max_position_embeddings, " of ", cfg.source));
  StageSpec spec;
  spec.layers = {0, cfg.num_hidden_layers};
  spec.max_seq = longest;
  spec.max_prompt = longest;
  spec.prefill_chunk = o.chunk;
  return spec;
}

// A prompt of n ids spread over the vocabulary (Knuth's multiplicative hash of i), so
// hash-routed layers see many experts.
std::vector<int32_t> bench_prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    ids[static_cast<size_t>(i)] = static_cast<int32_t>((static_cast<uint64_t>(i) * 2654435761u + 17) % vocab);
  return ids;
}

// Buffers of one prefill: h holds a chunk's rows, logits the last row's.
struct PrefillBuffers {
  FBuf h, logits;
  PrefillBuffers(Ops& ops, const ModelConfig& c, int64_t chunk_rows)
      : h(ops.alloc(static_cast<size_t>(chunk_rows) * c.hc_mult * c.hidden_size)),
        logits(ops.alloc(static_cast<size_t>(c.vocab_size))) {}
};

// What rank 0 waits for before the first token: the prompt's chunks through the layers,
// the head of the last row, the argmax on the host.
int32_t first_token(Stage& stage, Ops& ops, const ModelConfig& c, const std::vector<int32_t>& prompt,
                    PrefillBuffers& b) {
  const int64_t n = static_cast<int64_t>(prompt.size()), chunk = stage.chunk_rows();
  int64_t last_rows = 0;
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t c1 = std::min(n, c0 + chunk);
    const std::vector<int32_t> ids(prompt.begin() + c0, prompt.begin() + c1);
    if (c0 == 0) stage.prefill(ids, b.h.data(), nullptr);
    else stage.extend(ids, b.h.data(), nullptr);
    last_rows = c1 - c0;
  }
  const float* last = b.h.data() + (last_rows - 1) * c.hc_mult * c.hidden_size;
  stage.head_logits(last, 1, b.logits.data());
  int32_t token = -1;
  ops.argmax(b.logits.data(), 1, c.vocab_size, &token);
  return token;
}

}  // namespace

std::vector<PrefillRow> run_prefill_rows(Checkpoint& ckpt, Ops& ops, const PrefillBenchOptions& o,
                                         uint64_t free_at_start) {
  const ModelConfig& cfg = ckpt.config();
  const int64_t longest = *std::max_element(o.lens.begin(), o.lens.end());
  Stage stage(ckpt, ops, prefill_spec(cfg, o, longest));
  PrefillBuffers bufs(ops, cfg, stage.chunk_rows());
  std::vector<PrefillRow> rows;
  for (int64_t len : o.lens) {
    const std::vector<int32_t> prompt = bench_prompt(len, cfg.vocab_size);
    PrefillRow r;
    r.prompt_len = len;
    r.chunk = stage.chunk_rows();
    std::vector<int32_t> tokens;
    const std::vector<double> ms = time_steps(o.warmup, o.runs, [&] {
      tokens.push_back(first_token(stage, ops, cfg, prompt, bufs));
    });
    // Deterministic kernels (KERNEL_BRIEF: fixed-order reductions): every run of one
    // prompt ends in the same token.
    for (int32_t t : tokens)
      if (t != tokens.front())
        throw Error(cat("prefill of ", len, " tokens: first tokens differ between runs (", tokens.front(),
                        " and ", t, ")"));
    r.first_token = tokens.front();
    r.ttft_ms = median(ms);
    r.ms_min = *std::min_element(ms.begin(), ms.end());
    r.ms_max = *std::max_element(ms.begin(), ms.end());
    r.flops = prefill_flops(cfg, len);
    const uint64_t free_now = ckpt.weight_memory()->free_bytes();
    r.peak_mem = free_at_start > free_now ? free_at_start - free_now : 0;
    rows.push_back(r);
    std::fprintf(stderr, "prefill %lld tokens: %.3f ms to the first token\n", static_cast<long long>(len),
                 r.ttft_ms);
  }
  return rows;
}

std::string prefill_profile(Checkpoint& ckpt, Ops& ops, const PrefillBenchOptions& o) {
  const ModelConfig& cfg = ckpt.config();
  TimedOps timed(ops);
  timed.set_active(false);  // the stage's set-up and the warm-up prefill are not timed
  Stage stage(ckpt, timed, prefill_spec(cfg, o, o.profile_len));
  PrefillBuffers bufs(timed, cfg, stage.chunk_rows());
  const std::vector<int32_t> prompt = bench_prompt(o.profile_len, cfg.vocab_size);
  first_token(stage, timed, cfg, prompt, bufs);
  timed.set_active(true);
  first_token(stage, timed, cfg, prompt, bufs);
  timed.count_step();
  return timed.table();
}

void print_prefill_rows(const std::vector<PrefillRow>& rows, double peak_tflops) {
  std::printf("%-7s %10s %7s %10s %10s %10s %12s %10s %8s %12s\n", "kind", "prompt_len", "chunk",
              "ttft_ms", "min", "max", "tokens/s", "TFLOP/s", "x_peak", "peak_mem_GB");
  for (const PrefillRow& r : rows) {
    const double tflops = r.flops / (r.ttft_ms * 1e9);
    std::printf("%-7s %10lld %7lld %10.3f %10.3f %10.3f %12.1f %10.3f %8.4f %12.3f\n", "prefill",
                static_cast<long long>(r.prompt_len), static_cast<long long>(r.chunk), r.ttft_ms, r.ms_min,
                r.ms_max, r.prompt_len / (r.ttft_ms * 1e-3), tflops, tflops / peak_tflops, r.peak_mem / 1e9);
  }
}

nlohmann::ordered_json prefill_row_json(const PrefillRow& r, int trunk_layers, int runs,
                                        double peak_tflops) {
  const double tflops = r.flops / (r.ttft_ms * 1e9);
  return nlohmann::ordered_json{{"kind", "prefill"},
                                {"trunk_layers", trunk_layers},
                                {"prompt_len", r.prompt_len},
                                {"prefill_chunk", r.chunk},
                                {"ttft_ms", r.ttft_ms},
                                {"ms_min", r.ms_min},
                                {"ms_max", r.ms_max},
                                {"runs", runs},
                                {"tokens_per_s", r.prompt_len / (r.ttft_ms * 1e-3)},
                                {"flops", r.flops},
                                {"tflops", tflops},
                                {"peak_tflops", peak_tflops},
                                {"ratio_to_peak", tflops / peak_tflops},
                                {"peak_mem", r.peak_mem},
                                {"first_token", r.first_token}};
}

}  // namespace dsv4
