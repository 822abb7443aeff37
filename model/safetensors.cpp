// safetensors shards: strict memory-mapped reader and reference-order writer
// (CHECKPOINT.md §1.4, refusal A1).
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "base/error.h"
#include "model/json_strict.h"

namespace dsv4 {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // §1.4: N <= 100 MB
constexpr char kMetadataKey[] = "__metadata__";

// Rank of a dtype in the safetensors Dtype enum (U8 < I8 < F8_E4M3 < F8_E8M0 < BF16 <
// I32 < F32 < I64); the reference writer orders tensors by it, descending.
int safetensors_enum_rank(DType d) {
  switch (d) {
    case DType::U8:
      return 0;
    case DType::I8:
      return 1;
    case DType::F8_E4M3:
      return 2;
    case DType::F8_E8M0:
      return 3;
    case DType::BF16:
      return 4;
    case DType::I32:
      return 5;
    case DType::F32:
      return 6;
    case DType::I64:
      return 7;
  }
  DSV4_CHECK(false, "DType ", static_cast<int>(d));
  return -1;
}

// prod(shape) x element bytes, or false on a negative dimension or u64 overflow.
bool tensor_bytes(const std::vector<int64_t>& shape, DType dtype, uint64_t* out) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

std::string syserr() { return std::strerror(errno); }

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(cat(path, ": cannot open: ", syserr()));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = syserr();
    ::close(fd);
    throw Error(cat(path, ": cannot stat: ", why));
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    throw Error(
        cat(path, ": truncated: ", file_size, " bytes, shorter than the 8-byte header length"));
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string map_err = syserr();
  ::close(fd);
  if (map == MAP_FAILED) throw Error(cat(path, ": mmap failed: ", map_err));
  map_ = static_cast<const uint8_t*>(map);
  map_size_ = file_size;

  try {
    uint64_t n = 0;  // u64 little-endian
    for (int i = 7; i >= 0; --i) n = (n << 8) | map_[i];
    if (n > kMaxHeaderBytes)
      throw Error(cat(path, ": header length ", n, " exceeds the 100 MB limit"));
    if (8 + n > file_size)
      throw Error(cat(path, ": truncated: header length ", n, " runs past the end of the file (",
                      file_size, " bytes)"));
    header_len_ = n;
    const uint64_t buffer = data_bytes();

    const char* text = reinterpret_cast<const char*>(map_ + 8);
    const nlohmann::json header = parse_json_strict(text, text + n, path + " header", "tensor");
    if (!header.is_object()) throw Error(cat(path, ": header is not a JSON object"));

    for (const auto& [name, info] : header.items()) {
      if (name == kMetadataKey) {
        if (!info.is_object()) throw Error(cat(path, ": __metadata__ is not an object"));
        for (const auto& [key, value] : info.items()) {
          if (!value.is_string())
            throw Error(cat(path, ": __metadata__ value of '", key, "' is not a string"));
          metadata_[key] = value.get<std::string>();
        }
        continue;
      }
      const std::string where = cat(path, ": tensor '", name, "': ");
      if (!info.is_object()) throw Error(where + "entry is not an object");
      const auto dtype_it = info.find("dtype");
      const auto shape_it = info.find("shape");
      const auto offsets_it = info.find("data_offsets");
      if (dtype_it == info.end() || !dtype_it->is_string())
        throw Error(where + "missing or non-string dtype");
      SafetensorsEntry e;
      e.name = name;
      if (!dtype_from_name(dtype_it->get<std::string>(), &e.dtype))
        throw Error(cat(where, "dtype ", dtype_it->get<std::string>(),
                        " is not accepted (BF16 F32 F8_E4M3 F8_E8M0 I8 U8 I64 I32)"));
      if (shape_it == info.end() || !shape_it->is_array())
        throw Error(where + "missing or non-array shape");
      for (const auto& d : *shape_it) {
        if (!d.is_number_unsigned())
          throw Error(cat(where, "shape entry ", d.dump(), " is not a non-negative integer"));
        e.shape.push_back(d.get<int64_t>());
      }
      if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
          !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned())
        throw Error(where + "data_offsets is not a pair of non-negative integers");
      e.begin = (*offsets_it)[0].get<uint64_t>();
      e.end = (*offsets_it)[1].get<uint64_t>();
      uint64_t expected = 0;
      if (!tensor_bytes(e.shape, e.dtype, &expected))
        throw Error(where + "shape byte count overflows");
      if (e.end < e.begin || e.end > buffer)
        throw Error(cat(where, "data_offsets [", e.begin, ", ", e.end, "] out of range of the ",
                        buffer, "-byte data buffer"));
      if (e.end - e.begin != expected)
        throw Error(cat(where, "byte length ", e.end - e.begin, " != ", expected, " (",
                        dtype_name(e.dtype), " x shape)"));
      entries_.push_back(std::move(e));
    }

    // Ranges in buffer order must tile [0, buffer) exactly: no overlap, no gap.
    std::sort(entries_.begin(), entries_.end(),
              [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
              });
    uint64_t covered = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const SafetensorsEntry& e : entries_) {
      if (e.begin < covered)
        throw Error(cat(path, ": tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
                        "] overlap tensor '", previous->name, "' ending at ", covered));
      if (e.begin > covered)
        throw Error(cat(path, ": tensor '", e.name, "': gap of ", e.begin - covered,
                        " bytes before its data_offsets [", e.begin, ", ", e.end, "]"));
      covered = e.end;
      previous = &e;
    }
    if (covered != buffer)
      throw Error(cat(path, ": ", buffer - covered,
                      " trailing bytes of the data buffer belong to no tensor",
                      previous ? cat(" (after tensor '", previous->name, "')") : std::string()));
    for (size_t i = 0; i < entries_.size(); ++i) by_name_[entries_[i].name] = i;
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), map_size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { ::munmap(const_cast<uint8_t*>(map_), map_size_); }

uint64_t SafetensorsFile::data_bytes() const { return map_size_ - 8 - header_len_; }

TensorView SafetensorsFile::view(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) throw Error(cat(path_, ": no tensor '", name, "'"));
  const SafetensorsEntry& e = entries_[it->second];
  TensorView v;
  v.name = e.name;
  v.dtype = e.dtype;
  v.shape = e.shape;
  v.data = map_ + 8 + header_len_ + e.begin;
  v.nbytes = e.end - e.begin;
  v.storage = storage_;
  return v;
}

void write_safetensors(const std::string& path, const std::vector<TensorData>& tensors) {
  std::vector<const TensorData*> order;
  std::set<std::string> names;
  for (const TensorData& t : tensors) {
    uint64_t expected = 0;
    if (!tensor_bytes(t.shape, t.dtype, &expected) || expected != t.bytes.size())
      throw Error(cat(path, ": tensor '", t.name, "': ", t.bytes.size(), " bytes do not match ",
                      dtype_name(t.dtype), " x shape"));
    if (t.name == kMetadataKey || !names.insert(t.name).second)
      throw Error(cat(path, ": tensor '", t.name, "': duplicate or reserved name"));
    order.push_back(&t);
  }
  // §1.4 reference order: dtype descending in the safetensors enum, then name.
  std::sort(order.begin(), order.end(), [](const TensorData* a, const TensorData* b) {
    const int ra = safetensors_enum_rank(a->dtype), rb = safetensors_enum_rank(b->dtype);
    return ra != rb ? ra > rb : a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const TensorData* t : order) {
    const uint64_t end = offset + t->bytes.size();
    header[t->name] = {
        {"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();  // compact, insertion order
  text.append((8 - text.size() % 8) % 8, ' ');

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(cat(path, ": cannot open for writing: ", syserr()));
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorData* t : order)
    out.write(reinterpret_cast<const char*>(t->bytes.data()),
              static_cast<std::streamsize>(t->bytes.size()));
  out.close();
  if (!out) throw Error(cat(path, ": write failed: ", syserr()));
}

}  // namespace dsv4
