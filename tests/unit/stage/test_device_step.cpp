// Issue 12, step 1 of a CUDA graph per decode step: a plain decode step reads its
// position and token from the StepState (backend memory), so the op calls it issues, with
// every argument, are the same at every position; and Ops::decode_index (the backend's
// index row of the device position) gives exactly the host rows of stage/attention_index.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

#include "stage/attention_index.h"
#include "stage_harness.h"
#include "tests/unit/stage/decode_calls.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// Ops::decode_index of `rows` rows from p against step_index's rows (a plain decode row with
// trans_base -1, a verify round's otherwise): the same columns, -1 past step_index's width,
// the same n_visible.
void check_decode_index(Ops& ops, int ratio, int window, int topk, int cap_blocks, int64_t p, int rows = 1,
                        int trans_base = -1) {
  std::vector<int32_t> want;
  const MergedIndex host = step_index(ratio, p, rows, window, topk, trans_base, want);
  const MergedIndex shape = decode_index_shape(ratio, window, topk, cap_blocks);
  REQUIRE(shape.width >= host.width);
  std::vector<int32_t> positions(static_cast<size_t>(rows));
  for (int t = 0; t < rows; ++t) positions[t] = static_cast<int32_t>(p + t);
  IBuf pos = ops.alloc_i32(positions.size()), nv = ops.alloc_i32(positions.size());
  IBuf idx = ops.alloc_i32(static_cast<size_t>(rows) * shape.width);
  ops.upload_i32(pos.data(), positions.data(), positions.size());
  ops.fill_i32(idx.data(), 7777, idx.size());  // every column must be written
  ops.decode_index(pos.data(), rows, ratio, window, shape.tail_width, trans_base, idx.data(),
                   ratio == 4 ? nv.data() : nullptr);
  std::vector<int32_t> got(idx.size());
  ops.download_i32(got.data(), idx.data(), got.size());
  INFO("ratio " << ratio << " window " << window << " position " << p << " rows " << rows);
  for (int t = 0; t < rows; ++t) {
    std::vector<int32_t> row(want.begin() + static_cast<int64_t>(t) * host.width,
                             want.begin() + static_cast<int64_t>(t + 1) * host.width);
    row.resize(static_cast<size_t>(shape.width), -1);
    CHECK(std::vector<int32_t>(got.begin() + static_cast<int64_t>(t) * shape.width,
                               got.begin() + static_cast<int64_t>(t + 1) * shape.width) == row);
  }
  if (ratio == 4) {
    std::vector<int32_t> n(positions.size(), -1);
    ops.download_i32(n.data(), nv.data(), n.size());
    CHECK(n == host.n_visible);
  }
}

}  // namespace

TEST_CASE("decode_index gives step_index's decode rows at the fixed decode width") {
  auto ops = make_cpu_ops();
  // Flash shapes: window 128, index_topk 512, ratios 0 / 4 / 128, max_seq 65536.
  constexpr int64_t kMaxSeq = 65536;
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < 1100; ++p) positions.push_back(p);
  for (int64_t p : {2047, 2048, 2049, 4095, 4096, 4097, 8191, 16383, 32767, 65534, 65535}) positions.push_back(p);
  for (int ratio : {0, 4, 128})
    for (int64_t p : positions)
      check_decode_index(*ops, ratio, 128, 512, ratio > 0 ? static_cast<int>(kMaxSeq / ratio) : 0, p);
  // The tiny model's shapes: window 16, index_topk 8, ratios 0 / 4 / 16, max_seq 256.
  for (int ratio : {0, 4, 16})
    for (int64_t p = 0; p < 256; ++p) check_decode_index(*ops, ratio, 16, 8, ratio > 0 ? 256 / ratio : 0, p);
}

// A verify round's rows (SPECDECODE §4.2): in-round positions at the transient rows.
TEST_CASE("decode_index gives step_index's verify rows at the fixed decode width") {
  auto ops = make_cpu_ops();
  for (int ratio : {0, 4, 16})
    for (int rows = 1; rows <= 4; ++rows)
      for (int64_t p = 0; p + rows <= 256; ++p) {
        const int cap = ratio > 0 ? 256 / ratio : 0;
        check_decode_index(*ops, ratio, 16, 8, cap, p, rows, 16 + cap);
      }
}

TEST_CASE("decode_index refuses a position whose blocks exceed the tail width") {
  auto ops = make_cpu_ops();
  IBuf pos = ops->alloc_i32(1), idx = ops->alloc_i32(16 + 4);
  const int32_t p = 16 * 5 - 1;  // 5 blocks of 16 completed, the tail holds 4
  ops->upload_i32(pos.data(), &p, 1);
  CHECK_THROWS_WITH_AS(ops->decode_index(pos.data(), 1, 16, 16, 4, -1, idx.data(), nullptr),
                       doctest::Contains("more than the tail width 4"), Error);
}

TEST_CASE("a plain decode step issues the same op calls with the same arguments at every position") {
  auto cpu = make_cpu_ops();
  check_position_independent_decode(*cpu);
}

TEST_CASE("a verify round of T rows issues the same op calls with the same arguments at every position") {
  auto cpu = make_cpu_ops();
  check_position_independent_verify(*cpu);
}

namespace {

// A recorded stage's pipeline (one rank) after the prefill of the first 10 of 64 random ids.
struct PipelineRun {
  PipelineRun(Ops& backend, bool drafter, uint64_t seed)
      : r(backend, drafter, 64),
        pipe(r.stage, r.rec, r.cfg, nullptr, nullptr, PipelineHooks{}),
        ids(random_tokens(64, r.cfg.vocab_size, seed)) {
    OpHeader prefill;
    prefill.kind = OpKind::prefill;
    prefill.ids = {ids.begin(), ids.begin() + 10};
    pipe.execute(prefill);
  }
  // An operation of `kind` at the stage's position with ids[pos .. pos + rows).
  OpHeader op(OpKind kind, int rows) const {
    OpHeader h;
    h.kind = kind;
    h.pos = r.stage.pos();
    h.ids = {ids.begin() + h.pos, ids.begin() + h.pos + rows};
    return h;
  }
  RecordedStage r;
  Pipeline pipe;
  std::vector<int32_t> ids;
};

}  // namespace

// Ops::run_step (a CUDA graph per stage, issue 12) replays a step only while its key and
// the backend's memory stay: the pipeline must hand every plain decode the same boundary
// buffers and allocate nothing around it, and the head must score the row inside it.
TEST_CASE("a pipeline's plain decode steps allocate nothing and repeat one step key") {
  auto cpu = make_cpu_ops();
  PipelineRun run(*cpu, false, 77);
  std::string key;  // the first step's run_step line
  for (int i = 10; i < 16; ++i) {
    OpHeader h = run.op(OpKind::decode, 1);
    h.want_logits = i % 2 == 0;  // the logits download follows the step either way
    OpResult r;
    const std::vector<std::string> calls = run.r.calls_of([&] { r = run.pipe.execute(h); });
    INFO("position " << h.pos);
    CHECK(r.ids.size() == 1);
    CHECK(r.logits.size() == (h.want_logits ? static_cast<size_t>(run.r.cfg.vocab_size) : 0));
    for (const char* op : {"alloc", "alloc_i32"}) CHECK_MESSAGE(count_op(calls, op) == 0, op);
    CHECK(count_op(calls, "hc_head") == 1);  // the head's logits ...
    REQUIRE(count_op(calls, "run_step") == 1);
    const auto line = find_call(calls, "run_step"), head = find_call(calls, "hc_head");
    CHECK(line < head);  // ... inside the step, the argmax after it
    CHECK(count_op({head, calls.end()}, "argmax") == 1);
    if (key.empty()) key = *line;
    CHECK(*line == key);
  }
  // run_step OWNER 1 H TAPS LOGITS: no taps without the drafter, logits on the head rank.
  std::istringstream fields(key);
  std::string op, owner, rows, h, taps, logits;
  fields >> op >> owner >> rows >> h >> taps >> logits;
  CHECK(rows == "1");
  CHECK(taps == "0");
  CHECK(logits != "0");
}

// The same for verify rounds (issue 12 target 3): a pipeline with the drafter's stage hands
// every round of T rows the same boundary buffers and scores its rows into a logits buffer
// it keeps, so a round and its commit allocate nothing and repeat one step key per T.
TEST_CASE("a pipeline's verify rounds and commits allocate nothing and repeat one step key per T") {
  auto cpu = make_cpu_ops();
  PipelineRun run(*cpu, true, 78);
  std::vector<std::string> keys(5);  // [T]: the first round's run_step line
  for (int k = 0; k < 8; ++k) {
    const int t = 1 + k % 4;
    const OpHeader verify = run.op(OpKind::verify, t);
    OpHeader commit = run.op(OpKind::commit, 0);
    commit.count = 1 + k % t;
    OpResult r;
    const std::vector<std::string> calls = run.r.calls_of([&] {
      r = run.pipe.execute(verify);
      run.pipe.execute(commit);
    });
    INFO("round at " << verify.pos << " of " << t << " rows");
    CHECK(r.ids.size() == static_cast<size_t>(t));
    for (const char* op : {"alloc", "alloc_i32"}) CHECK_MESSAGE(count_op(calls, op) == 0, op);
    REQUIRE(count_op(calls, "run_step") == 1);
    const std::string line = *find_call(calls, "run_step");
    if (keys[t].empty()) keys[t] = line;
    CHECK(line == keys[t]);
    CHECK(run.r.stage.pos() == verify.pos + commit.count);
  }
  const OpHeader deep = run.op(OpKind::verify, run.r.cfg.dspark.block_size + 2);
  CHECK_THROWS_WITH_AS(run.pipe.execute(deep), doctest::Contains("exceeds tmax"), Error);
}
