// safetensors shards: a strict memory-mapped reader and the reference-order writer
// (CHECKPOINT.md §1.4, refusal A1).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/tensor_view.h"

namespace dsv4 {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets into the data buffer
};

// Maps one shard read-only and validates its header: 8 + N <= file size, N <= 100 MB,
// a JSON object without duplicate names, known dtypes, byte length = dtype x shape,
// ranges inside the buffer, no overlap, no gaps. Every refusal throws Error naming the
// file (and the tensor when there is one).
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  bool contains(const std::string& name) const { return by_name_.count(name) != 0; }
  TensorView view(const std::string& name) const;  // throws Error if absent
  std::map<std::string, std::string> metadata() const { return metadata_; }
  uint64_t data_bytes() const;                     // size of the data buffer

 private:
  std::string path_;
  const uint8_t* map_ = nullptr;
  uint64_t storage_ = next_storage_id();  // the mapping's identity (TensorView::storage)
  size_t map_size_ = 0;
  uint64_t header_len_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// One tensor for the writer.
struct TensorData {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major, dense
};

// Writes a shard the way the reference writer does: tensors ordered by dtype
// descending in safetensors enum order (I64 > F32 > BF16 > F8_E8M0 > F8_E4M3 > I8 > U8),
// then by name; compact JSON; header padded with spaces to a multiple of 8; no
// __metadata__. Deterministic: same input, same bytes. Throws Error on I/O failure.
void write_safetensors(const std::string& path, const std::vector<TensorData>& tensors);

}  // namespace dsv4
