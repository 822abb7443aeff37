// Stage::cache_classes: the decode state as raw bytes, live parts per MODEL.md §6.7
// item 2 (or whole buffers, SPECDECODE.md §4.1 / §7 G3).
#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "stage/stage_impl.h"

namespace dsv4 {
namespace {

struct Collector {
  Ops& ops;
  std::vector<CacheClass>& out;

  void add(std::string name, const float* src, size_t n) {
    std::vector<float> host(n);
    if (n > 0) ops.download(host.data(), src, n);
    CacheClass c{std::move(name), std::vector<uint8_t>(n * sizeof(float))};
    std::memcpy(c.bytes.data(), host.data(), c.bytes.size());
    out.push_back(std::move(c));
  }
  void add_value(std::string name, int64_t v) {
    CacheClass c{std::move(name), std::vector<uint8_t>(sizeof v)};
    std::memcpy(c.bytes.data(), &v, sizeof v);
    out.push_back(std::move(c));
  }
};

// Pending rows that are live after `pos` positions (§6.7 item 2), or all of them.
void add_pending(Collector& col, const std::string& name, const CompressorState& cs,
                 int64_t pos, bool whole) {
  const CompressorWeights& w = cs.weights();
  const size_t lc = w.latent();
  const int r = w.ratio;
  const int rem = static_cast<int>(pos % r);
  int first = 0, last = cs.slots();  // rows [first, last) plus the overlap prev block
  if (!whole) {
    if (w.overlap) {
      if (pos / r >= 1) {
        col.add(name + " pending prev kv", cs.pending_kv(), r * lc);
        col.add(name + " pending prev score", cs.pending_score(), r * lc);
      }
      first = r;
      last = r + rem;
    } else {
      last = rem;
    }
  }
  col.add(name + " pending kv", cs.pending_kv() + first * lc, (last - first) * lc);
  col.add(name + " pending score", cs.pending_score() + first * lc, (last - first) * lc);
  col.add_value(name + " blocks", cs.blocks());
}

}  // namespace

std::vector<CacheClass> Stage::cache_classes(bool whole) const {
  const Impl& m = *impl_;
  std::vector<CacheClass> out;
  Collector col{m.ops, out};
  col.add_value("pos", m.pos);
  for (const auto& layer : m.layers) {
    const LayerCache& c = layer->cache();
    const std::string name = cat("layer ", layer->weights().layer_id);
    const size_t d = c.head_dim;
    // Ring: every slot once the window is full; before that slots [0, pos) (§6.3).
    const int64_t ring_rows = whole ? c.window : std::min<int64_t>(m.pos, c.window);
    col.add(name + " ring", c.kvc.data(), ring_rows * d);
    if (c.attn) {
      col.add(name + " store", c.store_rows(), c.attn->blocks() * d);
      add_pending(col, name + " attention", *c.attn, m.pos, whole);
    }
    if (c.index) {
      col.add(name + " indexer store", c.ikvc.data(),
              c.index->blocks() * static_cast<size_t>(c.index->weights().d));
      add_pending(col, name + " indexer", *c.index, m.pos, whole);
    }
  }
  return out;
}

}  // namespace dsv4
