// Issue 12: a stage's plain decode step as one captured CUDA graph (Ops::run_step,
// kernels/cuda/step_graph.cu). Replayed steps equal steps issued op by op bit for bit
// (logits and every cache class) across r = 4 and r = 16 block completions, the ring
// wrap and the last positions; memory that moves after a capture forces a re-capture,
// never a replay of the stale graph; a host copy inside a capture is refused by name and
// leaves the backend usable. Verify rounds of T rows replayed from their graphs equal
// rounds op by op and the plain steps. The step's concurrent lines (Ops::on_line) change no bit:
// steps on a backend that keeps every op on the main line equal them; nor does launching
// the kernels with Programmatic Dependent Launch (cuda_pdl).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/forwarding_ops.h"
#include "kernels/step_knockout.h"
#include "tests/unit/stage/stage_harness.h"

namespace dsv4::test {

namespace {

constexpr int64_t kMaxSeq = 256;  // the tiny model's max_position_embeddings

// A CUDA backend with Ops::on_line ignored: every op on the main line, in the order issued
// (what the CPU runs); as a decorator it also runs every step op by op.
class MainLineOps final : public ForwardingOps {
 public:
  explicit MainLineOps(std::unique_ptr<Ops> inner) : ForwardingOps(*inner), owned_(std::move(inner)) {}
  void on_line(int) override {}
  void join_lines() override {}

 private:
  std::unique_ptr<Ops> owned_;
};

// One single-stage tiny model on one backend, its decode buffers fixed (as the pipeline's).
// drafter: the stage has the verify rows and writes tap rows (as a speculative run's);
// pdl: kernels launch with Programmatic Dependent Launch (kernels/cuda/launch.cuh).
struct GraphRun {
  GraphRun(Checkpoint& ckpt, bool graphs, bool drafter = false, bool lines = true, bool pdl = true)
      : cfg(ckpt.config()),
        ops(lines ? make_cuda_ops(0, graphs, pdl) : std::make_unique<MainLineOps>(make_cuda_ops(0, false, pdl))),
        stage(ckpt, *ops, stage_spec(0, 1, {0, cfg.num_hidden_layers}, kMaxSeq, drafter)),
        h(ops->alloc(static_cast<size_t>(kMaxSeq) * cfg.hc_mult * cfg.hidden_size)),
        taps(ops->alloc(drafter ? tap_rows() * cfg.dspark.target_layer_ids.size() * cfg.hidden_size : 0)),
        logits(ops->alloc(rows_cap() * static_cast<size_t>(cfg.vocab_size))) {}

  // One plain decode step, its logits [V].
  std::vector<float> decode(int32_t token) {
    stage.decode(token, h.data(), taps.data(), logits.data());
    return host_logits(1);
  }
  // The logits [T, V] of a verify round of T rows (left open).
  std::vector<float> verify(const std::vector<int32_t>& round) {
    stage.verify(round, h.data(), taps.data());
    stage.head_logits(h.data(), static_cast<int>(round.size()), logits.data());
    return host_logits(round.size());
  }

  size_t rows_cap() const { return static_cast<size_t>(cfg.dspark.block_size) + 1; }
  // A prefill writes its last min(W, n) tap rows, a verify round T.
  size_t tap_rows() const { return std::max(rows_cap(), static_cast<size_t>(cfg.sliding_window)); }
  std::vector<float> host_logits(size_t rows) {
    std::vector<float> host(rows * static_cast<size_t>(cfg.vocab_size));
    ops->download(host.data(), logits.data(), host.size());
    return host;
  }

  const ModelConfig& cfg;
  std::unique_ptr<Ops> ops;
  Stage stage;
  FBuf h, taps, logits;  // h [max_seq, hc, H], taps [tap_rows, n_targets, H], logits [T, V]
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every cache class of both stages, byte for byte (names included).
void check_same_caches(const Stage& a, const Stage& b, int64_t pos) {
  const std::vector<CacheClass> ca = a.cache_classes(true), cb = b.cache_classes(true);
  REQUIRE(ca.size() == cb.size());
  for (size_t i = 0; i < ca.size(); ++i) {
    INFO("position " << pos << ", " << ca[i].name);
    CHECK(ca[i].name == cb[i].name);
    CHECK(ca[i].bytes == cb[i].bytes);
  }
}

}  // namespace

TEST_CASE("cuda graphs: replayed plain decode steps equal steps op by op, bit for bit") {
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  GraphRun graphs(ckpt, true), plain(ckpt, false), one_line(ckpt, false, false, /*lines=*/false);
  const std::vector<int32_t> ids = random_tokens(static_cast<int>(kMaxSeq), c.vocab_size, 1212);
  constexpr int kPrompt = 13;
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + kPrompt);
  for (GraphRun* r : {&graphs, &plain, &one_line}) r->stage.prefill(prompt, r->h.data(), nullptr);

  // Positions 13..80: r = 4 blocks complete at every 4th, r = 16 ones at 15, 31, 47, 63,
  // 79; the window ring (16 slots) wraps at 16, 32, ...; then 240..255, the last ones,
  // after both caches are refilled alike (the fill moves memory: a re-capture).
  auto walk = [&](int64_t from, int64_t to) {
    for (int64_t p = from; p < to; ++p) {
      INFO("position " << p);
      REQUIRE(graphs.stage.pos() == p);
      const int32_t token = ids[static_cast<size_t>(p)];
      const std::vector<float> replayed = graphs.decode(token);
      CHECK(same_bits(replayed, plain.decode(token)));
      CHECK(same_bits(replayed, one_line.decode(token)));  // the lines change no bit
      if (p % 8 == 7) {
        check_same_caches(graphs.stage, plain.stage, p);
        check_same_caches(graphs.stage, one_line.stage, p);
      }
    }
  };
  walk(kPrompt, 81);
  const StepGraphCounts first = graphs.ops->step_graph_counts();
  MESSAGE("steps 13..80 with graphs: ", first.plain, " plain, ", first.captures, " captured, ",
          first.replays, " replayed");
  CHECK(first.plain == 1);     // the warm-up
  CHECK(first.captures == 1);  // nothing moved memory between the steps
  CHECK(first.replays == 81 - kPrompt - 2);
  const StepGraphCounts none = plain.ops->step_graph_counts();
  CHECK(none.captures == 0);
  CHECK(none.replays == 0);

  for (GraphRun* r : {&graphs, &plain, &one_line}) r->stage.fill_for_benchmark(240, 77);
  walk(240, kMaxSeq);
  check_same_caches(graphs.stage, plain.stage, kMaxSeq);
  check_same_caches(graphs.stage, one_line.stage, kMaxSeq);
  const StepGraphCounts last = graphs.ops->step_graph_counts();
  CHECK(last.replays > first.replays);  // the late positions were replayed too
}

// The knockout (kernels/step_knockout.h, dsv4-bench-decode --knockout): the held step
// graph's kernels are listed by name, and disabling one changes what a step computes, while
// disabling then re-enabling it changes nothing. Three runs walk the same positions; at the
// third step (a replay) run b has embed_kernel disabled (every step embeds its token: the
// step then reads the previous token's h), run c has it disabled and re-enabled.
TEST_CASE("cuda graphs: the knockout lists a step graph's kernels and switches one off and back") {
  Checkpoint ckpt(tiny_dir());
  const std::vector<int32_t> ids = random_tokens(32, ckpt.config().vocab_size, 4242);
  GraphRun a(ckpt, true), b(ckpt, true), c(ckpt, true);
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + 9);
  for (GraphRun* r : {&a, &b, &c}) r->stage.prefill(prompt, r->h.data(), nullptr);
  CHECK(step_graph_kernels(*a.ops).empty());  // nothing captured yet
  for (int i = 9; i < 11; ++i)  // the warm-up, then the capture
    for (GraphRun* r : {&a, &b, &c}) r->decode(ids[i]);
  const std::vector<StepKernel> kernels = step_graph_kernels(*b.ops);
  REQUIRE(!kernels.empty());
  const auto embed = std::find_if(kernels.begin(), kernels.end(), [](const StepKernel& k) { return k.name == "embed_kernel"; });
  REQUIRE(embed != kernels.end());
  CHECK(embed->nodes == 1);
  for (const StepKernel& k : kernels) {
    INFO(k.name);
    CHECK(k.name.find("::") == std::string::npos);  // kernel_base_name's form: no namespace,
    CHECK(k.name.find(' ') == std::string::npos);   // no space, no parameter list
    CHECK(k.name.back() != ')');
    CHECK(k.nodes >= 1);
  }
  set_step_kernel_enabled(*b.ops, "embed_kernel", false);
  set_step_kernel_enabled(*c.ops, "embed_kernel", false);
  set_step_kernel_enabled(*c.ops, "embed_kernel", true);
  const std::vector<float> want = a.decode(ids[11]);
  CHECK(!same_bits(b.decode(ids[11]), want));
  CHECK(same_bits(c.decode(ids[11]), want));
  CHECK(c.ops->step_graph_counts().replays == 1);  // the switched graph itself was replayed
  CHECK_THROWS_WITH_AS(set_step_kernel_enabled(*a.ops, "no_such_kernel", false),
                       doctest::Contains("no step graph held has kernel 'no_such_kernel'"), Error);
}

// Law 4 (SPECDECODE R-I3) against the graph path: verify rounds of T rows, issued op by
// op on a stage with the drafter's transient rows, give each row the logits bits of the
// replayed plain step at its position; commit(T) continues from there.
TEST_CASE("cuda graphs: verify rows equal the replayed plain steps bit for bit") {
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  GraphRun graphs(ckpt, true, true), spec(ckpt, false, true);
  const int tmax = c.dspark.block_size + 1;
  const std::vector<int32_t> ids = random_tokens(static_cast<int>(kMaxSeq), c.vocab_size, 3434);
  constexpr int kPrompt = 11;
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + kPrompt);
  for (GraphRun* r : {&graphs, &spec}) r->stage.prefill(prompt, r->h.data(), r->taps.data());

  std::vector<std::vector<float>> steps;  // the graph run's logits at positions kPrompt..
  constexpr int64_t kEnd = 75;
  for (int64_t p = kPrompt; p < kEnd; ++p) steps.push_back(graphs.decode(ids[static_cast<size_t>(p)]));
  CHECK(graphs.ops->step_graph_counts().replays == kEnd - kPrompt - 2);

  int t = 1;
  for (int64_t p = kPrompt; p + t <= kEnd; p += t, t = t % tmax + 1) {  // T = 1, 2, .., tmax, 1, ..
    const std::vector<float> rows = spec.verify({ids.begin() + p, ids.begin() + p + t});
    for (int i = 0; i < t; ++i) {
      INFO("verify round at " << p << " of " << t << " rows, row " << i);
      const auto row = rows.begin() + static_cast<ptrdiff_t>(i) * c.vocab_size;
      CHECK(same_bits({row, row + c.vocab_size}, steps[static_cast<size_t>(p - kPrompt + i)]));
    }
    spec.stage.commit(t);
  }
}

// Issue 12 target 3: a verify round of T rows as one captured graph per (stage, T),
// replayed at every position. Rounds of T = 1..4 (then again, so each T replays) from
// position 11 and after a refill at 240 up to the last position, committing n = 1..T rows
// (rollbacks included): the replayed rounds give the logits and taps bits of rounds issued
// op by op (graphs off) and of rounds on one line, every row those of the replayed plain
// step at its position (R-I3), and every cache class stays equal to the op-by-op run's
// after each commit and to the plain steps' at the round ends.
TEST_CASE("cuda graphs: replayed verify rounds equal rounds op by op and the plain steps, bit for bit") {
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  const int64_t V = c.vocab_size;
  const size_t tap_row = c.dspark.target_layer_ids.size() * c.hidden_size;
  GraphRun graphs(ckpt, true, true), op_by_op(ckpt, false, true), one_line(ckpt, false, true, /*lines=*/false);
  GraphRun steps(ckpt, true, true);  // the plain steps at the committed positions
  const std::vector<int32_t> ids = random_tokens(static_cast<int>(kMaxSeq), c.vocab_size, 5656);
  constexpr int kPrompt = 11;
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + kPrompt);
  GraphRun* const runs[] = {&graphs, &op_by_op, &one_line, &steps};
  for (GraphRun* r : runs) r->stage.prefill(prompt, r->h.data(), r->taps.data());
  auto taps_of = [&](GraphRun& r, size_t rows) {
    std::vector<float> host(rows * tap_row);
    r.ops->download(host.data(), r.taps.data(), host.size());
    return host;
  };

  int rounds = 0, k = 0;
  auto walk = [&](int64_t to) {
    for (int t = 1; graphs.stage.pos() + t <= to; t = t % 4 + 1, ++k) {
      const int64_t p = graphs.stage.pos();
      const int n = 1 + k % t;
      INFO("round at " << p << " of " << t << " rows, commit " << n);
      const std::vector<int32_t> x(ids.begin() + p, ids.begin() + p + t);
      const std::vector<float> replayed = graphs.verify(x);
      const std::vector<float> rt = taps_of(graphs, static_cast<size_t>(t));
      CHECK(same_bits(replayed, op_by_op.verify(x)));
      CHECK(same_bits(rt, taps_of(op_by_op, static_cast<size_t>(t))));
      CHECK(same_bits(replayed, one_line.verify(x)));
      CHECK(same_bits(rt, taps_of(one_line, static_cast<size_t>(t))));
      for (int i = 0; i < n; ++i) {
        INFO("row " << i);
        const auto row = replayed.begin() + static_cast<ptrdiff_t>(i) * V;
        CHECK(same_bits({row, row + V}, steps.decode(x[static_cast<size_t>(i)])));
        const std::vector<float> st = taps_of(steps, 1);
        CHECK(std::memcmp(rt.data() + i * tap_row, st.data(), tap_row * sizeof(float)) == 0);
      }
      for (GraphRun* r : {&graphs, &op_by_op, &one_line}) r->stage.commit(n);
      check_same_caches(graphs.stage, op_by_op.stage, p);
      if (k % 4 == 3) {
        check_same_caches(graphs.stage, one_line.stage, p);
        check_same_caches(graphs.stage, steps.stage, p);
      }
      ++rounds;
    }
  };
  walk(130);
  for (GraphRun* r : runs) r->stage.fill_for_benchmark(240, 78);
  walk(kMaxSeq);
  check_same_caches(graphs.stage, steps.stage, kMaxSeq);
  const StepGraphCounts counts = graphs.ops->step_graph_counts();
  MESSAGE(rounds, " rounds with graphs (and the plain steps of another stage on another backend): ",
          counts.plain, " op by op, ", counts.captures, " captured, ", counts.replays, " replayed");
  // Each T warms up and captures once per memory generation; the refill moves memory once.
  CHECK(counts.replays >= rounds - 4 * 2 * 3);
  CHECK(op_by_op.ops->step_graph_counts().replays == 0);
}

TEST_CASE("cuda graphs: memory allocated after a capture forces a re-capture, not a stale replay") {
  auto ops = make_cuda_ops(0, true);
  constexpr size_t n = 1000;
  FBuf one = ops->alloc(n), a = ops->alloc(n);
  ops->fill(one.data(), 1.0f, n);
  float* target = a.data();
  const StepKey key{&target, 1, {}};
  auto step = [&] { ops->run_step(key, [&] { ops->add(target, one.data(), n); }); };
  auto value = [&](const FBuf& b) {
    std::vector<float> host(n);
    ops->download(host.data(), b.data(), n);
    for (float v : host) REQUIRE(v == host[0]);
    return host[0];
  };
  for (int i = 0; i < 3; ++i) step();  // plain, captured, replayed
  CHECK(value(a) == 3.0f);
  CHECK(ops->step_graph_counts().captures == 1);

  // A new buffer while `a` lives (not the freed address again): the body now writes it.
  // A replay of the first graph would add to `a` and leave b at 0.
  FBuf b = ops->alloc(n);
  target = b.data();
  for (int i = 0; i < 3; ++i) step();
  CHECK(value(b) == 3.0f);
  CHECK(value(a) == 3.0f);
  StepGraphCounts c = ops->step_graph_counts();
  CHECK(c.plain == 2);
  CHECK(c.captures == 2);
  CHECK(c.replays == 2);

  // A free moves memory too (the graph may hold the freed address).
  a.reset();
  step();
  CHECK(ops->step_graph_counts().plain == 3);
  CHECK(value(b) == 4.0f);
}

TEST_CASE("cuda graphs: a host copy inside a capture is refused by name; the backend stays usable") {
  auto ops = make_cuda_ops(0, true);
  FBuf buf = ops->alloc(4);
  const float host[4] = {1, 2, 3, 4};
  const int owner = 0;
  const StepKey key{&owner, 1, {}};
  auto body = [&] { ops->upload(buf.data(), host, 4); };
  ops->run_step(key, body);  // the warm-up runs it op by op: allowed
  CHECK_THROWS_WITH_AS(ops->run_step(key, body), doctest::Contains("upload (16 bytes) inside a step being captured"),
                       Error);
  // The stream left capture mode: ordinary work runs and lands.
  ops->fill(buf.data(), 5.0f, 4);
  std::vector<float> got(4);
  ops->download(got.data(), buf.data(), 4);
  CHECK(got == std::vector<float>(4, 5.0f));
  // So does an allocation inside a capture.
  const int other = 0;
  const StepKey alloc_key{&other, 1, {}};
  auto alloc_body = [&] { FBuf t = ops->alloc(8); };
  ops->run_step(alloc_key, alloc_body);
  CHECK_THROWS_WITH_AS(ops->run_step(alloc_key, alloc_body), doctest::Contains("alloc (32 bytes) inside a step"),
                       Error);
}

TEST_CASE("cuda graphs off: run_step runs every body op by op") {
  auto ops = make_cuda_ops(0, false);
  FBuf buf = ops->alloc(4);
  const int owner = 0;
  const StepKey key{&owner, 1, {}};
  const float host[4] = {1, 2, 3, 4};
  for (int i = 0; i < 3; ++i) ops->run_step(key, [&] { ops->upload(buf.data(), host, 4); });
  CHECK(ops->step_graph_counts().captures == 0);
  CHECK(ops->step_graph_counts().replays == 0);
}


// cuda_pdl (kernels/cuda/launch.cuh): kernels that start while the one ahead of them ends
// and wait for it (griddepcontrol.wait) before they read its output change no bit — in a
// replayed graph (programmatic edges), op by op (the stream), on the main line alone,
// and in verify rounds; a kernel that read its input before the wait would differ here.
// Both backends live in one thread, as the settings are per CudaOps (activate).
TEST_CASE("cuda pdl: decode steps and verify rounds with PDL equal them without it, bit for bit") {
  Checkpoint ckpt(tiny_dir());
  const ModelConfig& c = ckpt.config();
  GraphRun pdl(ckpt, true, true), off(ckpt, true, true, true, /*pdl=*/false),
      pdl_ops(ckpt, false, true), off_ops(ckpt, false, true, true, false),
      pdl_line(ckpt, false, true, /*lines=*/false);
  const std::vector<GraphRun*> runs{&pdl, &off, &pdl_ops, &off_ops, &pdl_line};
  const std::vector<int32_t> ids = random_tokens(static_cast<int>(kMaxSeq), c.vocab_size, 5656);
  constexpr int kPrompt = 9;
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + kPrompt);
  for (GraphRun* r : runs) r->stage.prefill(prompt, r->h.data(), r->taps.data());
  constexpr int64_t kEnd = 60;  // r = 4 and r = 16 blocks complete, the ring wraps at 16, 32, 48
  for (int64_t p = kPrompt; p < kEnd; ++p) {
    INFO("position " << p);
    const int32_t token = ids[static_cast<size_t>(p)];
    const std::vector<float> want = off.decode(token);
    for (GraphRun* r : {&pdl, &pdl_ops, &off_ops, &pdl_line}) CHECK(same_bits(r->decode(token), want));
    if (p % 8 == 7)
      for (GraphRun* r : {&pdl, &pdl_ops, &off_ops, &pdl_line}) check_same_caches(r->stage, off.stage, p);
  }
  CHECK(pdl.ops->step_graph_counts().replays == kEnd - kPrompt - 2);
  CHECK(off.ops->step_graph_counts().replays == kEnd - kPrompt - 2);

  const int tmax = c.dspark.block_size + 1;
  int64_t p = kEnd;
  for (int t = 1; t <= tmax && p + t <= kMaxSeq; p += t, ++t) {  // T = 1 .. tmax
    INFO("verify round at " << p << " of " << t << " rows");
    const std::vector<int32_t> round(ids.begin() + p, ids.begin() + p + t);
    const std::vector<float> want = off.verify(round);
    for (GraphRun* r : {&pdl, &pdl_ops, &off_ops, &pdl_line}) CHECK(same_bits(r->verify(round), want));
    for (GraphRun* r : runs) r->stage.commit(t);
  }
}

}  // namespace dsv4::test
