#include "launcher/boundary_dump.h"

#include <charconv>
#include <climits>
#include <cstring>
#include <set>
#include <filesystem>

#include "launcher/output_files.h"
#include "base/error.h"
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
  out.push_back(i64("op_last_chunk", {hd.last_chunk ? 1 : 0}));
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
  const std::string path = boundary_file(dir, rank, rec.op_index, rec.outgoing);
  const std::string temp = begin_partial_output(path);
  try {
    write_safetensors(temp, out);
  } catch (...) {
    abandon_partial_output(temp);
    throw;
  }
  commit_partial_output(temp, path, "dump_boundary");
}

void clear_boundary_dump(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool dumped = name.starts_with("rank") && name.find("_op") != std::string::npos &&
                        name.ends_with(".safetensors");
    if (dumped || name == kRunDescriptionFile) std::filesystem::remove(entry.path(), ec);
  }
}

int count_dumped_operations(const std::string& dir, int rank) {
  std::set<int> recv, send;
  std::error_code ec;
  const std::string prefix = cat("rank", rank, "_op");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    int op = -1;
    const char* digits = name.c_str() + prefix.size();
    const auto [end, err] = std::from_chars(digits, name.c_str() + name.size(), op);
    const std::string rest(end);
    if (err != std::errc() || op < 0 || (rest != "_recv.safetensors" && rest != "_send.safetensors"))
      continue;  // not a dump file of this rank
    (rest == "_recv.safetensors" ? recv : send).insert(op);
  }
  if (ec) throw Error(cat("--replay ", dir, ": cannot list the folder: ", ec.message()));
  const int n = static_cast<int>(recv.size());
  for (int op = 0; op < n; ++op)
    if (!recv.count(op))
      throw Error(cat("--replay ", dir, ": missing ", boundary_file(dir, rank, op, false), " (",
                      n, " recv files of rank ", rank, " up to operation ", *recv.rbegin(), ")"));
  for (int op : send)
    if (!recv.count(op))
      throw Error(cat("--replay ", dir, ": ", boundary_file(dir, rank, op, true),
                      " has no recv file ", boundary_file(dir, rank, op, false)));
  return n;
}

std::optional<DumpedCrossing> read_boundary_record(const std::string& dir, int rank, int op,
                                                   bool outgoing) {
  const std::string path = boundary_file(dir, rank, op, outgoing);
  if (!std::filesystem::exists(path)) return std::nullopt;
  const SafetensorsFile f(path);
  // A header tensor's value within [min, max] (the 32-bit fields of OpHeader and StageSpec).
  auto field = [&](const std::string& name, int64_t v, int64_t min, int64_t max) {
    if (v < min || v > max)
      throw Error(cat(path, ": tensor ", name, " holds ", v, ", outside [", min, ", ", max, "]"));
    return v;
  };
  DumpedCrossing d;
  const int64_t kind = scalar(f, "op_kind");
  if (kind < 0 || kind > static_cast<int64_t>(OpKind::stop))
    throw Error(cat(path, ": op_kind ", kind, " is not an operation"));
  d.header.kind = static_cast<OpKind>(kind);
  d.header.seq = scalar(f, "op_seq");
  d.header.count = static_cast<int32_t>(field("op_count", scalar(f, "op_count"), 0, INT32_MAX));
  d.header.pos = field("op_pos", scalar(f, "op_pos"), 0, INT32_MAX);
  const auto last_chunk = values<int64_t>(f, "op_last_chunk", DType::I64);  // optional
  if (last_chunk.size() > 1) throw Error(cat(path, ": tensor op_last_chunk is not [1]"));
  d.header.last_chunk = last_chunk.empty() || field("op_last_chunk", last_chunk[0], 0, 1) == 1;
  const auto positions = values<int64_t>(f, "positions", DType::I64);
  const auto ids = values<int64_t>(f, "token_ids", DType::I64);
  if (positions.size() != ids.size())
    throw Error(cat(path, ": ", positions.size(), " positions but ", ids.size(), " token_ids"));
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] != d.header.pos + static_cast<int64_t>(i))
      throw Error(cat(path, ": tensor positions: entry ", i, " is ", positions[i], ", expected ",
                      d.header.pos + static_cast<int64_t>(i), " (rows are consecutive from op_pos)"));
  for (int64_t id : ids) d.header.ids.push_back(static_cast<int32_t>(field("token_ids", id, 0, INT32_MAX)));
  const auto range = values<int64_t>(f, "layer_range", DType::I64);
  if (range.size() != 2) throw Error(cat(path, ": layer_range missing or not [2]"));
  d.layers = {static_cast<int>(field("layer_range", range[0], 0, INT32_MAX)),
              static_cast<int>(field("layer_range", range[1], range[0] + 1, INT32_MAX))};
  d.n_ranks = static_cast<int>(field("n_ranks", scalar(f, "n_ranks"), rank + 1, INT32_MAX));
  d.h = values<float>(f, "h", DType::F32);
  d.taps = values<float>(f, "taps", DType::F32);
  d.logits = values<float>(f, "logits", DType::F32);
  d.scores = values<float>(f, "scores", DType::F32);
  for (int64_t id : values<int64_t>(f, "argmax", DType::I64))
    d.argmax.push_back(static_cast<int32_t>(field("argmax", id, 0, INT32_MAX)));
  return d;
}

}  // namespace dsv4
