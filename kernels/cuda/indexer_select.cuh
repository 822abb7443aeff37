// The indexer's top-k (MODEL.md §4.18 step 7, D10) over a row's scores: the width best
// keys in the exact total order (score descending, key ascending), written as
// index_base + key, -1 past the row's visible keys. Two kernels give the same output bit
// for bit (an exact order has one answer):
//   radix  one 1,024-thread block a row: radix select of the threshold, compaction, a
//          bitonic sort (~70 block barriers: ~17 us a row at 1,024 keys on an H200);
//   rank   a thread a key: its rank = the keys before it in the order, counted over all
//          of the row's keys in shared memory (n^2 compares spread over n / 128 blocks),
//          written straight to out[rank]: no barrier after the load, for short rows.
// automatic launches both, each taking the rows of its side of kRankMaxKeys (the row's
// n_visible is on the device, so a captured step's launches stay the same at every
// position). Host-includable (the twin test calls it).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::cuda {

enum class IndexerSelect { automatic, radix, rank };

// Rows of at most this many visible keys take the rank kernel under `automatic` (4,096:
// context 16K on a ratio-4 layer; the rank kernel's compares grow as n^2, the radix
// kernel's barriers do not).
constexpr int64_t kRankMaxKeys = 4096;

// The widest selection either kernel writes.
constexpr int kSelectMaxWidth = 1024;

// idx[t * idx_stride + col0 + slot] = index_base + the slot-th key of row t of scores
// [rows, n_max] (its first n_visible[t] entries, clamped to [0, n_max]; device memory) in
// (score desc, key asc) order, -1 for slots past them; slots < width. On `stream`.
void indexer_select(IndexerSelect kernel, const float* scores, int rows, int64_t n_max, const int32_t* n_visible,
                    int width, int index_base, int32_t* idx, int idx_stride, int col0, cudaStream_t stream);

}  // namespace dsv4::cuda
