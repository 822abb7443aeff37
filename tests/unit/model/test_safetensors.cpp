// safetensors reader and writer (CHECKPOINT.md §1.4, refusal A1): reference-order
// round trip and every structural refusal, on files built byte by byte.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "error_text.h"
#include "model/safetensors.h"

using namespace dsv4;
using dsv4::test::error_text;
using dsv4::test::mentions;

namespace {

// A fresh directory per test case under the system temp dir.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("dsv4_st_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// u64 little-endian N, then the header text, then the data buffer.
std::vector<uint8_t> shard_bytes(uint64_t n, const std::string& header, size_t data_len) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_len; ++i) out.push_back(static_cast<uint8_t>(i * 7 + 1));
  return out;
}
std::vector<uint8_t> shard_bytes(const std::string& header, size_t data_len) {
  return shard_bytes(header.size(), header, data_len);
}

TensorData tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, size_t nbytes,
                  uint8_t seed) {
  TensorData t{name, dtype, std::move(shape), {}};
  for (size_t i = 0; i < nbytes; ++i) t.bytes.push_back(static_cast<uint8_t>(seed + 13 * i));
  return t;
}

}  // namespace

TEST_CASE(
    "writer: reference order (dtype descending, then name), compact JSON, header padded to 8 "
    "(§1.4)") {
  TempDir dir("order");
  const std::vector<TensorData> tensors = {
      tensor("w", DType::BF16, {2}, 4, 1), tensor("q", DType::U8, {3}, 3, 2),
      tensor("norm", DType::F32, {}, 4, 3), tensor("ids", DType::I64, {1}, 8, 4),
      tensor("a", DType::F32, {0, 4}, 0, 5)};
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, tensors);

  // Worked by hand: I64 ids [0,8), F32 a (empty) [8,8), F32 norm [8,12), BF16 w [12,16), U8 q
  // [16,19).
  std::string header = R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                       R"("a":{"dtype":"F32","shape":[0,4],"data_offsets":[8,8]},)"
                       R"("norm":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)"
                       R"("w":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]},)"
                       R"("q":{"dtype":"U8","shape":[3],"data_offsets":[16,19]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  REQUIRE(header.size() % 8 == 0);

  std::vector<uint8_t> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  expected.insert(expected.end(), header.begin(), header.end());
  for (const char* name : {"ids", "a", "norm", "w", "q"})
    for (const TensorData& t : tensors)
      if (t.name == name) expected.insert(expected.end(), t.bytes.begin(), t.bytes.end());
  CHECK(read_bytes(path) == expected);

  // Deterministic: another input order writes the same bytes.
  const std::string path2 = dir.file("again.safetensors");
  write_safetensors(path2, {tensors[4], tensors[3], tensors[2], tensors[1], tensors[0]});
  CHECK(read_bytes(path2) == expected);
}

TEST_CASE("writer -> reader round trip: names, dtypes, shapes, bytes, every accepted dtype") {
  TempDir dir("roundtrip");
  const std::vector<TensorData> tensors = {
      tensor("layers.0.attn.wq_a.weight", DType::F8_E4M3, {3, 5}, 15, 10),
      tensor("layers.0.attn.wq_a.scale", DType::F8_E8M0, {1, 1}, 1, 20),
      tensor("layers.0.ffn.experts.0.w1.weight", DType::I8, {2, 4}, 8, 30),
      tensor("layers.0.ffn.experts.1.w1.weight", DType::U8, {2, 4}, 8, 40),
      tensor("layers.0.attn_norm.weight", DType::BF16, {7}, 14, 50),
      tensor("layers.0.attn.attn_sink", DType::F32, {3}, 12, 60),
      tensor("layers.0.ffn.gate.tid2eid", DType::I64, {2, 3}, 48, 70),
      tensor("layers.1.ffn.gate.tid2eid", DType::I32, {2, 3}, 24, 80),
      tensor("layers.0.ffn.experts.1.w1.weight_scale_2", DType::F32, {}, 4, 90)};
  const std::string path = dir.file("shard.safetensors");
  write_safetensors(path, tensors);

  const SafetensorsFile f(path);
  CHECK(f.path() == path);
  REQUIRE(f.entries().size() == tensors.size());
  uint64_t total = 0;
  for (const TensorData& t : tensors) {
    INFO(t.name);
    REQUIRE(f.contains(t.name));
    const TensorView v = f.view(t.name);
    CHECK(v.name == t.name);
    CHECK(v.dtype == t.dtype);
    CHECK(v.shape == t.shape);
    CHECK(v.nbytes == t.bytes.size());
    CHECK(std::vector<uint8_t>(v.data, v.data + v.nbytes) == t.bytes);
    total += t.bytes.size();
  }
  CHECK(f.data_bytes() == total);
  CHECK(f.metadata().empty());
  // Entries come in buffer order, which is the writer's dtype-descending order.
  CHECK(f.entries().front().name == "layers.0.ffn.gate.tid2eid");        // I64
  CHECK(f.entries().back().name == "layers.0.ffn.experts.1.w1.weight");  // U8
  CHECK_FALSE(f.contains("absent"));
  CHECK(mentions(error_text([&] { f.view("absent"); }), path, "absent"));
}

TEST_CASE("reader accepts an optional __metadata__ string map") {
  TempDir dir("meta");
  const std::string path = dir.file("m.safetensors");
  write_bytes(
      path,
      shard_bytes(
          R"({"__metadata__":{"format":"pt"},"x":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})",
          2));
  const SafetensorsFile f(path);
  CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(f.entries().size() == 1);
  CHECK(f.view("x").data[1] == 8);  // shard_bytes fills i * 7 + 1
}

TEST_CASE("reader refusals name the file and the tensor (A1)") {
  TempDir dir("refuse");
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  auto refusal = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = dir.file(name);
    write_bytes(path, bytes);
    return error_text([&] { SafetensorsFile f(path); });
  };

  SUBCASE("file shorter than the 8-byte length") {
    const std::string msg = refusal("short.safetensors", {1, 2, 3, 4, 5});
    CHECK(mentions(msg, "short.safetensors", "truncated"));
  }
  SUBCASE("truncated data: the last tensor runs past the buffer") {
    const std::string path = dir.file("full.safetensors");
    write_safetensors(path,
                      {tensor("a", DType::F32, {2}, 8, 1), tensor("b", DType::U8, {4}, 4, 2)});
    std::vector<uint8_t> bytes = read_bytes(path);
    bytes.resize(bytes.size() - 2);  // cut the U8 tensor b, which the writer put last
    const std::string msg = refusal("cut.safetensors", bytes);
    CHECK(mentions(msg, "cut.safetensors", "tensor 'b'", "out of range"));
  }
  SUBCASE("header length past the end of the file") {
    const std::string header = "{" + ok_entry + "}";
    const std::string msg =
        refusal("hlen.safetensors", shard_bytes(header.size() + 100, header, 8));
    CHECK(mentions(msg, "hlen.safetensors", "past the end"));
  }
  SUBCASE("header length over 100 MB") {
    const std::string msg = refusal("huge.safetensors", shard_bytes(200'000'000, "{}", 0));
    CHECK(mentions(msg, "huge.safetensors", "100 MB"));
  }
  SUBCASE("offsets out of range") {
    const std::string msg = refusal("range.safetensors", shard_bytes("{" + ok_entry + "}", 4));
    CHECK(mentions(msg, "range.safetensors", "tensor 'a'", "out of range"));
  }
  SUBCASE("overlapping ranges") {
    const std::string msg = refusal(
        "overlap.safetensors",
        shard_bytes("{" + ok_entry + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                    10));
    CHECK(mentions(msg, "overlap.safetensors", "tensor 'b'", "overlap", "'a'"));
  }
  SUBCASE("gap between ranges") {
    const std::string msg = refusal(
        "gap.safetensors",
        shard_bytes("{" + ok_entry + R"(,"b":{"dtype":"U8","shape":[4],"data_offsets":[12,16]}})",
                    16));
    CHECK(mentions(msg, "gap.safetensors", "tensor 'b'", "gap"));
  }
  SUBCASE("trailing bytes that belong to no tensor") {
    const std::string msg = refusal("tail.safetensors", shard_bytes("{" + ok_entry + "}", 12));
    CHECK(mentions(msg, "tail.safetensors", "trailing", "'a'"));
  }
  SUBCASE("unknown dtype F16") {
    const std::string msg =
        refusal("f16.safetensors",
                shard_bytes(R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4));
    CHECK(mentions(msg, "f16.safetensors", "tensor 'h'", "F16"));
  }
  SUBCASE("byte count does not match dtype x shape") {
    const std::string msg =
        refusal("len.safetensors",
                shard_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8));
    CHECK(mentions(msg, "len.safetensors", "tensor 'a'", "byte length 8 != 12"));
  }
  SUBCASE("duplicate name") {
    const std::string msg = refusal(
        "dup.safetensors",
        shard_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                    R"("a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                    8));
    CHECK(mentions(msg, "dup.safetensors", "tensor 'a'", "duplicate"));
  }
  SUBCASE("header not a JSON object") {
    const std::string msg = refusal("array.safetensors", shard_bytes("[1, 2]  ", 0));
    CHECK(mentions(msg, "array.safetensors", "not a JSON object"));
  }
  SUBCASE("header not JSON at all") {
    const std::string msg = refusal("garbage.safetensors", shard_bytes("{\"a\": nope}", 0));
    CHECK(mentions(msg, "garbage.safetensors", "not valid JSON"));
  }
  SUBCASE("negative dimension") {
    const std::string msg =
        refusal("neg.safetensors",
                shard_bytes(R"({"a":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", 4));
    CHECK(mentions(msg, "neg.safetensors", "tensor 'a'", "shape"));
  }
}

TEST_CASE("writer refuses bytes that do not match dtype x shape, naming the tensor") {
  TempDir dir("wbad");
  const std::string path = dir.file("bad.safetensors");
  CHECK(mentions(error_text([&] { write_safetensors(path, {tensor("x", DType::F32, {3}, 8, 0)}); }),
                 path, "tensor 'x'"));
  CHECK(mentions(error_text([&] {
                   write_safetensors(path, {tensor("x", DType::U8, {1}, 1, 0),
                                            tensor("x", DType::U8, {1}, 1, 0)});
                 }),
                 "tensor 'x'", "duplicate"));
}
