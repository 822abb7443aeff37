// Machine-readable outputs: the --dump-logits JSON (byte-stable, law 1 compares files),
// the control-plane encodings and the --dump-boundary files (round trips; a replay's
// run-description checks are tested by tests/mpi/replay_stage.sh).
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include <unistd.h>

#include "comm/control_plane.h"
#include "launcher/boundary_dump.h"
#include "launcher/logits_dump.h"
#include "base/error.h"

using namespace dsv4;

namespace {
// A fresh folder under the system temp dir, unique to this process.
std::string scratch_dir(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() / (tag + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}
}  // namespace

TEST_CASE("--dump-logits JSON: %.9g floats, null for non-finite, rows in token order") {
  const std::string json =
      logits_json({1, 2}, {3, 4}, {{0.5f, -1.0f, 1.0f / 3.0f}, {1e-20f, INFINITY, 250.0f}});
  CHECK(json ==
        "{\"prompt\": [1, 2], \"tokens\": [3, 4], \"logits\": [\n"
        "  [0.5, -1, 0.333333343],\n"
        "  [9.99999968e-21, null, 250]]}\n");
}

TEST_CASE("control plane: headers and results survive encoding") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, 511);
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  OpHeader h;
  h.kind = OpKind::verify;
  h.seq = 3;
  h.pos = 41;
  h.count = 2;
  h.want_logits = true;
  h.last_chunk = false;
  for (int i = 0; i < 6; ++i) h.ids.push_back(id(rng));
  const OpHeader back = decode_header(encode_header(h));
  CHECK(back.kind == OpKind::verify);
  CHECK(back.seq == 3);
  CHECK(back.pos == 41);
  CHECK(back.count == 2);
  CHECK(back.want_logits);
  CHECK(!back.last_chunk);
  CHECK(back.ids == h.ids);

  OpResult r;
  r.ids = {id(rng), id(rng)};
  for (int i = 0; i < 10; ++i) r.logits.push_back(value(rng));
  r.scores = {value(rng)};
  const OpResult rb = decode_result(encode_result(r));
  CHECK(rb.ids == r.ids);
  CHECK(rb.logits == r.logits);
  CHECK(rb.scores == r.scores);
  CHECK(std::string(op_kind_name(OpKind::commit)) == "commit");
}

TEST_CASE("--dump-boundary files hold the header, the layer range and the rows") {
  const std::string dir = scratch_dir("dsv4_dump_test_");
  ModelConfig mc;
  mc.hc_mult = 2;
  mc.hidden_size = 3;
  mc.vocab_size = 4;
  OpHeader h;
  h.kind = OpKind::decode;
  h.pos = 9;
  h.ids = {5};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  BoundaryRecord rec;
  rec.op_index = 2;
  rec.header = &h;
  for (int i = 0; i < 6; ++i) rec.h.push_back(value(rng));  // [T=1, hc=2, H=3]
  write_boundary_record(dir, 1, 3, {2, 5}, mc, rec);

  BoundaryRecord head = rec;
  head.outgoing = true;
  head.h.clear();
  head.logits = {0.25f, -1.5f, 3.0f, 0.0f};
  head.argmax = {2};
  write_boundary_record(dir, 2, 3, {5, 7}, mc, head);

  const auto in = read_boundary_record(dir, 1, 2, false);
  REQUIRE(in.has_value());
  CHECK(in->header.kind == OpKind::decode);
  CHECK(in->header.pos == 9);
  CHECK(in->header.ids == std::vector<int32_t>{5});
  CHECK(in->layers.begin == 2);
  CHECK(in->layers.end == 5);
  CHECK(in->n_ranks == 3);
  CHECK(in->h == rec.h);
  const auto out = read_boundary_record(dir, 2, 2, true);
  REQUIRE(out.has_value());
  CHECK(out->logits == head.logits);
  CHECK(out->argmax == std::vector<int32_t>{2});
  CHECK(out->h.empty());
  CHECK_FALSE(read_boundary_record(dir, 1, 3, false).has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("--dump-boundary: a commit keeps its position, a proposal its ids and confidences") {
  const std::string dir = scratch_dir("dsv4_dump_spec_test_");
  ModelConfig mc;
  OpHeader commit;
  commit.kind = OpKind::commit;
  commit.pos = 21;  // m0 of the round; a commit has no rows
  commit.count = 3;
  BoundaryRecord rec;
  rec.op_index = 4;
  rec.header = &commit;
  write_boundary_record(dir, 0, 2, {0, 4}, mc, rec);
  OpHeader propose;
  propose.kind = OpKind::propose;
  propose.pos = 24;
  propose.ids = {7};
  BoundaryRecord prop;
  prop.op_index = 5;
  prop.outgoing = true;
  prop.header = &propose;
  prop.argmax = {7, 1, 2, 3, 4, 5};
  prop.scores = {0.5f, -1.25f, NAN, 2.0f, 0.0f};
  write_boundary_record(dir, 1, 2, {4, 7}, mc, prop);

  const auto c = read_boundary_record(dir, 0, 4, false);
  REQUIRE(c.has_value());
  CHECK(c->header.kind == OpKind::commit);
  CHECK(c->header.pos == 21);
  CHECK(c->header.count == 3);
  CHECK(c->header.ids.empty());
  const auto p = read_boundary_record(dir, 1, 5, true);
  REQUIRE(p.has_value());
  CHECK(p->header.pos == 24);
  CHECK(p->argmax == prop.argmax);
  REQUIRE(p->scores.size() == 5);
  CHECK(std::memcmp(p->scores.data(), prop.scores.data(), 5 * sizeof(float)) == 0);
  std::filesystem::remove_all(dir);
}
