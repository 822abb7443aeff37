// The op tracer (tests/gpu/tracing_ops.h; the GPU test compares its records across
// backends) on the CPU backend: it changes no result, and each record holds what its op
// wrote, sized by the op's arguments, once per call.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "stage_harness.h"
#include "tests/gpu/tracing_ops.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// The records of one op label, in order.
std::vector<const TraceEntry*> entries(const std::vector<TraceEntry>& trace,
                                       const std::string& op) {
  std::vector<const TraceEntry*> out;
  for (const TraceEntry& e : trace)
    if (e.op == op) out.push_back(&e);
  return out;
}

}  // namespace

TEST_CASE("TracingOps records what each op wrote and changes no result") {
  constexpr int kPrompt = 7;  // the decode step at position 7 completes an r = 4 block
  constexpr int64_t kMaxSeq = 32;
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  const int L = c.num_hidden_layers;
  const std::vector<int32_t> ids = random_tokens(kPrompt + 1, c.vocab_size, 6060);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + kPrompt);

  auto cpu = make_cpu_ops();
  InProcessRun plain(ckpt, *cpu, {{0, L}}, kMaxSeq, false);
  plain.prefill(prompt);
  const std::vector<float> want = plain.decode(ids[kPrompt]);

  TracingOps tracer(*cpu);
  InProcessRun traced(ckpt, tracer, {{0, L}}, kMaxSeq, false);
  traced.prefill(prompt);
  // The prefill: every layer's MoE once for all prompt rows (issue 13: moe_gemm).
  const auto prefill_moe = entries(tracer.trace, "moe_gemm");
  CHECK(prefill_moe.size() == static_cast<size_t>(L));
  for (const TraceEntry* e : prefill_moe)
    CHECK(e->values.size() == size_t{kPrompt} * c.hidden_size);

  std::set<std::string> labels;  // each record's first word
  auto note_labels = [&] {
    for (const TraceEntry& e : tracer.trace) labels.insert(e.op.substr(0, e.op.find(' ')));
  };
  note_labels();
  tracer.trace.clear();
  const std::vector<float> got = traced.decode(ids[kPrompt]);
  note_labels();
  // Every op the model issues that has a record() overload (all but add) was recorded
  // under its label; nothing else was.
  const std::set<std::string> traced_ops = {
      "attention", "compress_at", "compress_blocks", "decode_index", "finish_kv", "finish_kv_at",
      "embed", "grouped_wo_a", "grouped_wo_a_gemm", "hadamard_fp4", "hc_head", "hc_post",
      "hc_pre", "head_rms", "indexer_topk", "inverse", "linear_bf16",
      "linear_bf16_gemm", "linear_fp8", "linear_fp8_gemm", "linear_island",
      "linear_island_gemm", "moe", "moe_gemm", "rmsnorm", "rope", "route", "sink_attention",
      "sink_attention_gemm"};
  std::string differences;
  for (const std::string& l : traced_ops)
    if (!labels.count(l)) differences += " missing " + l;
  for (const std::string& l : labels)
    if (!traced_ops.count(l)) differences += " unexpected " + l;
  CHECK_MESSAGE(differences.empty(), differences);
  REQUIRE(got.size() == want.size());
  CHECK(same_bits(got.data(), want.data(), got.size()));

  // The head's product (MODEL.md §4.25 step 5) is the step's last record: the logits.
  REQUIRE(!tracer.trace.empty());
  const TraceEntry& last = tracer.trace.back();
  CHECK(last.op.rfind("linear_island ", 0) == 0);
  CHECK_FALSE(last.integral);
  REQUIRE(last.values.size() == want.size());
  CHECK(std::equal(want.begin(), want.end(), last.values.begin(),
                   [](float w, double v) { return static_cast<double>(w) == v; }));

  // MODEL.md §5, one decode row: every layer runs hc_pre twice (attention, ffn), one
  // attention and one routed MoE; the outputs are [1, hc], [1, hidden], [1, k].
  const auto post = entries(tracer.trace, "hc_pre post");
  CHECK(post.size() == 2 * static_cast<size_t>(L));
  for (const TraceEntry* e : post) CHECK(e->values.size() == static_cast<size_t>(c.hc_mult));
  const auto moe = entries(tracer.trace, "moe");
  CHECK(moe.size() == static_cast<size_t>(L));
  for (const TraceEntry* e : moe) CHECK(e->values.size() == static_cast<size_t>(c.hidden_size));
  const auto sel = entries(tracer.trace, "route sel");
  CHECK(sel.size() == static_cast<size_t>(L));
  for (const TraceEntry* e : sel) {
    CHECK(e->integral);
    REQUIRE(e->values.size() == static_cast<size_t>(c.num_experts_per_tok));
    for (double id : e->values) CHECK((id >= 0 && id < c.n_routed_experts));
  }
  CHECK(entries(tracer.trace, "sink_attention").size() == static_cast<size_t>(L));
}
