// The replay drafter (issue 6 item 4): spec syntax, file formats, the draft for
// position m is the recorded token m, and corruption at chosen draft indices.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "model/error.h"
#include "stage/replay_drafter.h"

using namespace dsv4;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p) << text;
  return p.string();
}

}  // namespace

TEST_CASE("parse_replay_spec: file, optional corrupt list") {
  const ReplaySpec a = parse_replay_spec("/a/b:c.json");
  CHECK(a.file == "/a/b:c.json");  // a colon inside the path is kept
  CHECK(a.script.corrupt.empty());
  const ReplaySpec b = parse_replay_spec("run.json:corrupt=3,1,3");
  CHECK(b.file == "run.json");
  CHECK(b.script.corrupt == std::vector<int>{1, 3});
  CHECK_THROWS_WITH_AS(parse_replay_spec("run.json:corrupt=0"), doctest::Contains("'0'"), Error);
  CHECK_THROWS_WITH_AS(parse_replay_spec("run.json:corrupt=2x"), doctest::Contains("'2x'"), Error);
  CHECK_THROWS_WITH_AS(parse_replay_spec(":corrupt=2"), doctest::Contains("no file"), Error);
}

TEST_CASE("read_replay_tokens: prompt ++ tokens of a --dump-logits file, or bare tokens") {
  const std::string dump = write_temp("dsv4_replay_dump.json",
      "{\"prompt\": [5, 6], \"tokens\": [7, 8, 9], \"logits\": [[0.5, null]]}");
  CHECK(read_replay_tokens(dump) == std::vector<int32_t>{5, 6, 7, 8, 9});
  const std::string bare = write_temp("dsv4_replay_bare.json", "{\"tokens\": [1, 2]}");
  CHECK(read_replay_tokens(bare) == std::vector<int32_t>{1, 2});
  const std::string bad = write_temp("dsv4_replay_bad.json", "{\"tokens\": [1, \"x\"]}");
  CHECK_THROWS_WITH_AS(read_replay_tokens(bad), doctest::Contains("\"tokens\"[1]"), Error);
  CHECK_THROWS_WITH_AS(read_replay_tokens(bad + ".missing"), doctest::Contains("cannot open"), Error);
}

TEST_CASE("ReplayDrafter: draft j of anchor a is recorded token a + 1 + j, corrupted on request") {
  const std::vector<int32_t> seq{10, 11, 12, 13, 14, 15, 16, 17};
  ReplayDrafter plain(seq, {}, 3, 20, 19);
  // anchor 2: head at position 3, drafts for positions 4, 5, 6.
  Proposal p = plain.propose(13, 2);
  CHECK(p.out_ids == std::vector<int32_t>{13, 14, 15, 16});
  CHECK(p.confidence == std::vector<float>{0, 0, 0});
  // Past the recording: the fallback token.
  CHECK(plain.propose(16, 5).out_ids == std::vector<int32_t>{16, 17, 19, 19});

  ReplayDrafter bad(seq, {{1, 3}, {}}, 3, 18, 0);
  CHECK(bad.propose(13, 2).out_ids == std::vector<int32_t>{13, 15, 15, 17});
  CHECK(bad.propose(16, 5).out_ids == std::vector<int32_t>{16, 0, 0, 1});  // (17 + 1) mod 18
  CHECK_THROWS_WITH_AS(ReplayDrafter(seq, {{4}, {}}, 3, 20, 0), doctest::Contains("corrupt index 4"), Error);
  CHECK_THROWS_WITH_AS(ReplayDrafter(seq, {}, 3, 12, 0), doctest::Contains("position 2"), Error);
}
