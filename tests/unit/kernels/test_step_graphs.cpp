// The capture rule of Ops::run_step (kernels/step_graphs.h, issue 12): warm-up, capture,
// replay; a memory move or other buffers drop the graph and start over; stale graphs of
// other steps are released at the next capture. Graph here is a tagged handle whose
// live count shows what is held.
#include <doctest/doctest.h>

#include <memory>

#include "kernels/step_graphs.h"

using namespace dsv4;

namespace {

// A graph handle that counts the live ones (the shared counter) and carries a tag.
struct FakeGraph {
  std::shared_ptr<int> live;
  int tag = 0;
  FakeGraph() = default;
  FakeGraph(std::shared_ptr<int> counter, int t) : live(std::move(counter)), tag(t) { ++*live; }
  FakeGraph(FakeGraph&& o) noexcept : live(std::move(o.live)), tag(o.tag) {}
  FakeGraph& operator=(FakeGraph&& o) noexcept {
    if (this != &o) {
      release();
      live = std::move(o.live);
      tag = o.tag;
    }
    return *this;
  }
  ~FakeGraph() { release(); }
  void release() {
    if (live) --*live;
    live.reset();
  }
};

// Two stages and two h buffers: only their addresses matter.
const char kOwners[2] = {};
const float kHs[2] = {};
const void* const kStageA = &kOwners[0];
const void* const kStageB = &kOwners[1];
const float* const kH1 = &kHs[0];
const float* const kH2 = &kHs[1];

StepKey key(const void* owner, const float* h) { return StepKey{owner, 1, {h, nullptr, nullptr}}; }

}  // namespace

TEST_CASE("a step runs plain once, is captured the next time, then replayed") {
  StepGraphs<FakeGraph> g;
  auto live = std::make_shared<int>(0);
  const StepKey k = key(kStageA, kH1);
  CHECK(g.next(k, 5) == StepAction::plain);
  g.ran_plain(k, 7);  // the warm-up grew scratch: it ends at generation 7
  CHECK(g.next(k, 7) == StepAction::capture);
  g.store(k, 7, FakeGraph(live, 1));
  CHECK(g.graph(k).tag == 1);
  for (int i = 0; i < 3; ++i) CHECK(g.next(k, 7) == StepAction::replay);
  const StepGraphCounts c = g.counts();
  CHECK(c.plain == 1);
  CHECK(c.captures == 1);
  CHECK(c.replays == 3);
  CHECK(*live == 1);
  CHECK(g.graphs_held() == 1);
}

TEST_CASE("a warm-up at an older generation does not license a capture") {
  StepGraphs<FakeGraph> g;
  const StepKey k = key(kStageA, kH1);
  CHECK(g.next(k, 1) == StepAction::plain);
  g.ran_plain(k, 1);
  CHECK(g.next(k, 2) == StepAction::plain);  // memory moved after the warm-up
  g.ran_plain(k, 2);
  CHECK(g.next(k, 2) == StepAction::capture);
}

TEST_CASE("memory moved after a capture: the graph is dropped and the step warms up again") {
  StepGraphs<FakeGraph> g;
  auto live = std::make_shared<int>(0);
  const StepKey k = key(kStageA, kH1);
  g.next(k, 1);
  g.ran_plain(k, 1);
  REQUIRE(g.next(k, 1) == StepAction::capture);
  g.store(k, 1, FakeGraph(live, 1));
  CHECK(g.next(k, 2) == StepAction::plain);  // never a replay of the stale graph
  CHECK(*live == 0);
  CHECK(g.graphs_held() == 0);
  g.ran_plain(k, 2);
  REQUIRE(g.next(k, 2) == StepAction::capture);
  g.store(k, 2, FakeGraph(live, 2));
  CHECK(g.next(k, 2) == StepAction::replay);
  CHECK(g.graph(k).tag == 2);
  CHECK(g.counts().captures == 2);
}

TEST_CASE("the same step with other buffers is issued afresh") {
  StepGraphs<FakeGraph> g;
  auto live = std::make_shared<int>(0);
  const StepKey k1 = key(kStageA, kH1), k2 = key(kStageA, kH2);
  g.next(k1, 1);
  g.ran_plain(k1, 1);
  g.next(k1, 1);
  g.store(k1, 1, FakeGraph(live, 1));
  CHECK(g.next(k2, 1) == StepAction::plain);  // not k1's graph, and not a capture yet
  CHECK(*live == 0);
  g.ran_plain(k2, 1);
  CHECK(g.next(k2, 1) == StepAction::capture);
  CHECK(g.next(k1, 1) == StepAction::plain);  // back to k1's buffers: afresh as well
}

TEST_CASE("steps of two stages keep their own graphs; stale ones go at the next capture") {
  StepGraphs<FakeGraph> g;
  auto live = std::make_shared<int>(0);
  const StepKey a = key(kStageA, kH1), b = key(kStageB, kH2);
  for (const StepKey& k : {a, b}) {
    g.next(k, 1);
    g.ran_plain(k, 1);
  }
  g.next(a, 1);
  g.store(a, 1, FakeGraph(live, 1));
  g.next(b, 1);
  g.store(b, 1, FakeGraph(live, 2));
  CHECK(g.next(a, 1) == StepAction::replay);
  CHECK(g.next(b, 1) == StepAction::replay);
  CHECK(g.graph(a).tag == 1);
  CHECK(g.graph(b).tag == 2);
  CHECK(*live == 2);
  // Memory moves (stage b was destroyed, say); a's next capture releases b's stale graph.
  CHECK(g.next(a, 2) == StepAction::plain);
  g.ran_plain(a, 2);
  REQUIRE(g.next(a, 2) == StepAction::capture);
  g.store(a, 2, FakeGraph(live, 3));
  CHECK(*live == 1);
  CHECK(g.graphs_held() == 1);
  CHECK(g.next(b, 2) == StepAction::plain);
}

TEST_CASE("a row count is a step of its own") {
  StepGraphs<FakeGraph> g;
  auto live = std::make_shared<int>(0);
  const StepKey one{kStageA, 1, {kH1, nullptr, nullptr}}, four{kStageA, 4, {kH1, nullptr, nullptr}};
  g.next(one, 1);
  g.ran_plain(one, 1);
  g.next(one, 1);
  g.store(one, 1, FakeGraph(live, 1));
  CHECK(g.next(four, 1) == StepAction::plain);
  CHECK(g.next(one, 1) == StepAction::replay);
}
