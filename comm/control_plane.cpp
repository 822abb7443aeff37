#include "comm/control_plane.h"

#include <cstring>

#include "base/error.h"

namespace dsv4 {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::prefill: return "prefill";
    case OpKind::decode: return "decode";
    case OpKind::propose: return "propose";
    case OpKind::verify: return "verify";
    case OpKind::commit: return "commit";
    case OpKind::reset: return "reset";
    case OpKind::stop: return "stop";
  }
  return "unknown";
}

namespace {
// Messages are little-endian words of one machine family; both ends run this binary.
class MessageWriter {
 public:
  template <class T>
  void put(T v) { append(&v, sizeof(T)); }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    put<int64_t>(static_cast<int64_t>(v.size()));
    append(v.data(), v.size() * sizeof(T));
  }
  std::vector<uint8_t> bytes;

 private:
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
};

class MessageReader {
 public:
  explicit MessageReader(const std::vector<uint8_t>& b) : b_(b) {}
  template <class T>
  T get() {
    T v;
    take(&v, sizeof(T));
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const auto n = get<int64_t>();
    DSV4_CHECK(n >= 0 && static_cast<size_t>(n) * sizeof(T) <= b_.size() - off_,
               "control message vector of ", n, " elements in ", b_.size(), " bytes");
    std::vector<T> v(static_cast<size_t>(n));
    take(v.data(), v.size() * sizeof(T));
    return v;
  }
  void finish() const { DSV4_CHECK(off_ == b_.size(), "control message has trailing bytes"); }

 private:
  void take(void* p, size_t n) {
    DSV4_CHECK(off_ + n <= b_.size(), "control message truncated at byte ", off_);
    std::memcpy(p, b_.data() + off_, n);
    off_ += n;
  }
  const std::vector<uint8_t>& b_;
  size_t off_ = 0;
};
}  // namespace

std::vector<uint8_t> encode_header(const OpHeader& h) {
  MessageWriter w;
  w.put<int32_t>(static_cast<int32_t>(h.kind));
  w.put<int64_t>(h.seq);
  w.put<int64_t>(h.pos);
  w.put<int32_t>(h.count);
  w.put<int32_t>(h.want_logits ? 1 : 0);
  w.put<int32_t>(h.last_chunk ? 1 : 0);
  w.put_vector(h.ids);
  return std::move(w.bytes);
}

OpHeader decode_header(const std::vector<uint8_t>& bytes) {
  MessageReader r(bytes);
  OpHeader h;
  const auto kind = r.get<int32_t>();
  DSV4_CHECK(kind >= 0 && kind <= static_cast<int32_t>(OpKind::stop), "operation kind ", kind);
  h.kind = static_cast<OpKind>(kind);
  h.seq = r.get<int64_t>();
  h.pos = r.get<int64_t>();
  h.count = r.get<int32_t>();
  h.want_logits = r.get<int32_t>() != 0;
  h.last_chunk = r.get<int32_t>() != 0;
  h.ids = r.get_vector<int32_t>();
  r.finish();
  return h;
}

std::vector<uint8_t> encode_result(const OpResult& res) {
  MessageWriter w;
  w.put_vector(res.ids);
  w.put_vector(res.logits);
  w.put_vector(res.scores);
  return std::move(w.bytes);
}

OpResult decode_result(const std::vector<uint8_t>& bytes) {
  MessageReader r(bytes);
  OpResult res;
  res.ids = r.get_vector<int32_t>();
  res.logits = r.get_vector<float>();
  res.scores = r.get_vector<float>();
  r.finish();
  return res;
}

}  // namespace dsv4
