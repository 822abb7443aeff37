#include "launcher/boundary_dump.h"

#include <cstring>
#include <filesystem>

#include "model/error.h"
#include "model/safetensors.h"

namespace dsv4 {

namespace {
template <class T>
TensorData tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                  const std::vector<T>& values) {
  TensorData t{name, dtype, std::move(shape), {}};
  t.bytes.resize(values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

TensorData i64(const std::string& name, const std::vector<int64_t>& values) {
  return tensor(name, DType::I64, {static_cast<int64_t>(values.size())}, values);
}

template <class T>
std::vector<T> values(const SafetensorsFile& f, const std::string& name, DType dtype) {
  if (!f.contains(name)) return {};
  const TensorView v = f.view(name);
  if (v.dtype != dtype)
    throw Error(cat(f.path(), ": tensor ", name, " is ", dtype_name(v.dtype), ", expected ",
                    dtype_name(dtype)));
  std::vector<T> out(v.nbytes / sizeof(T));
  std::memcpy(out.data(), v.data, out.size() * sizeof(T));
  return out;
}

int64_t scalar(const SafetensorsFile& f, const std::string& name) {
  const auto v = values<int64_t>(f, name, DType::I64);
  if (v.size() != 1) throw Error(cat(f.path(), ": tensor ", name, " missing or not [1]"));
  return v[0];
}
}  // namespace

std::string boundary_file(const std::string& dir, int rank, int op, bool outgoing) {
  return cat(dir, "/rank", rank, "_op", op, outgoing ? "_send" : "_recv", ".safetensors");
}

void write_boundary_record(const std::string& dir, int rank, int n_ranks, LayerRange layers,
                           const ModelConfig& config, const BoundaryRecord& rec) {
  const OpHeader& hd = *rec.header;
  const int64_t t_rows = hd.rows();
  std::vector<TensorData> out;
  out.push_back(i64("op_kind", {static_cast<int64_t>(hd.kind)}));
  out.push_back(i64("op_seq", {hd.seq}));
  out.push_back(i64("op_count", {hd.count}));
  out.push_back(i64("op_pos", {hd.pos}));
  out.push_back(i64("layer_range", {layers.begin, layers.end}));
  out.push_back(i64("n_ranks", {n_ranks}));
  if (t_rows > 0) {
    std::vector<int64_t> positions, ids(hd.ids.begin(), hd.ids.end());
    for (int64_t i = 0; i < t_rows; ++i) positions.push_back(hd.pos + i);
    out.push_back(i64("positions", positions));
    out.push_back(i64("token_ids", ids));
  }
  if (!rec.h.empty())
    out.push_back(tensor("h", DType::F32, {t_rows, config.hc_mult, config.hidden_size}, rec.h));
  if (!rec.taps.empty())
    out.push_back(tensor("taps", DType::F32,
                         {t_rows, static_cast<int64_t>(config.dspark.target_layer_ids.size()),
                          config.hidden_size},
                         rec.taps));
  if (!rec.argmax.empty()) {
    const auto rows = static_cast<int64_t>(rec.argmax.size());
    out.push_back(i64("argmax", std::vector<int64_t>(rec.argmax.begin(), rec.argmax.end())));
    if (!rec.logits.empty())
      out.push_back(tensor("logits", DType::F32, {rows, config.vocab_size}, rec.logits));
  }
  if (!rec.scores.empty())
    out.push_back(tensor("scores", DType::F32, {static_cast<int64_t>(rec.scores.size())}, rec.scores));
  write_safetensors(boundary_file(dir, rank, rec.op_index, rec.outgoing), out);
}

std::optional<DumpedCrossing> read_boundary_record(const std::string& dir, int rank, int op,
                                                   bool outgoing) {
  const std::string path = boundary_file(dir, rank, op, outgoing);
  if (!std::filesystem::exists(path)) return std::nullopt;
  const SafetensorsFile f(path);
  DumpedCrossing d;
  const int64_t kind = scalar(f, "op_kind");
  if (kind < 0 || kind > static_cast<int64_t>(OpKind::stop))
    throw Error(cat(path, ": op_kind ", kind, " is not an operation"));
  d.header.kind = static_cast<OpKind>(kind);
  d.header.seq = scalar(f, "op_seq");
  d.header.count = static_cast<int32_t>(scalar(f, "op_count"));
  d.header.pos = scalar(f, "op_pos");
  for (int64_t id : values<int64_t>(f, "token_ids", DType::I64))
    d.header.ids.push_back(static_cast<int32_t>(id));
  const auto range = values<int64_t>(f, "layer_range", DType::I64);
  if (range.size() != 2) throw Error(cat(path, ": layer_range missing or not [2]"));
  d.layers = {static_cast<int>(range[0]), static_cast<int>(range[1])};
  d.n_ranks = static_cast<int>(scalar(f, "n_ranks"));
  d.h = values<float>(f, "h", DType::F32);
  d.taps = values<float>(f, "taps", DType::F32);
  d.logits = values<float>(f, "logits", DType::F32);
  d.scores = values<float>(f, "scores", DType::F32);
  for (int64_t id : values<int64_t>(f, "argmax", DType::I64))
    d.argmax.push_back(static_cast<int32_t>(id));
  return d;
}

}  // namespace dsv4
