// The capture rule of a backend's Ops::run_step (kernels/ops.h; CudaOps's step graphs,
// issue 12), host logic only so the CPU suite tests it. Per (owner, rows): the first run
// at a memory generation is plain (the warm-up: scratch grows, weights become resident,
// and the generation it ends at is remembered), the next run at that generation is
// captured, and later runs replay the graph while the generation and the key's buffers
// stay. Any allocation or free moves the generation (a graph holds raw pointers), so the
// graph is dropped and the key starts over with a warm-up; so do other buffers.
// Graph: a movable owner of one instantiated graph; a default-constructed one is none.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/ops.h"

namespace dsv4 {

enum class StepAction { plain, capture, replay };

template <class Graph>
class StepGraphs {
 public:
  // What to do with key's step at memory generation `generation`.
  StepAction next(const StepKey& key, uint64_t generation) {
    Entry& e = entry(key);
    if (e.key != key) e = Entry{key};  // the same step with other buffers: issued afresh
    if (e.captured == generation) {
      ++counts_.replays;
      return StepAction::replay;
    }
    if (e.captured) {  // stale: memory moved since the capture
      e.graph = Graph{};
      e.captured.reset();
    }
    return e.warm == generation ? StepAction::capture : StepAction::plain;
  }
  // The body ran op by op and left the memory at `generation` (its own growth included).
  void ran_plain(const StepKey& key, uint64_t generation) {
    entry(key).warm = generation;
    ++counts_.plain;
  }
  // The body was captured at `generation`. Every other key's graph of another generation
  // is stale (it would be dropped at its next run), so it is released now: the graphs
  // held are those of the current memory, whatever owners came and went.
  void store(const StepKey& key, uint64_t generation, Graph graph) {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const Entry& e) {
                                    return !same_step(e.key, key) && e.captured &&
                                           *e.captured != generation;
                                  }),
                   entries_.end());
    Entry& e = entry(key);
    e.graph = std::move(graph);
    e.captured = generation;
    ++counts_.captures;
  }
  // The graph of key (after next() said replay, or after store()).
  Graph& graph(const StepKey& key) { return entry(key).graph; }
  StepGraphCounts counts() const { return counts_; }
  // f(graph) for every graph held.
  template <class F>
  void for_each_graph(F&& f) const {
    for (const Entry& e : entries_)
      if (e.captured) f(e.graph);
  }
  size_t graphs_held() const {
    return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(),
                                             [](const Entry& e) { return e.captured.has_value(); }));
  }

 private:
  struct Entry {
    explicit Entry(const StepKey& k) : key(k) {}
    StepKey key;
    std::optional<uint64_t> warm, captured;
    Graph graph{};
  };
  static bool same_step(const StepKey& a, const StepKey& b) {
    return a.owner == b.owner && a.rows == b.rows;
  }
  Entry& entry(const StepKey& key) {
    for (Entry& e : entries_)
      if (same_step(e.key, key)) return e;
    entries_.push_back(Entry{key});
    return entries_.back();
  }

  std::vector<Entry> entries_;
  StepGraphCounts counts_;
};

}  // namespace dsv4
