// The replay drafter (issue 6 item 4): spec syntax, file formats, the draft for
// position m is the recorded token m, and corruption at chosen draft indices.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "tests/unit/model/error_text.h"
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

TEST_CASE("replay options: confidence groups, accept_len, combined in any order, refused by name") {
  const ReplaySpec s = parse_replay_spec("/a:b.json:confidence=1,-2.5/0,3:corrupt=2");
  CHECK(s.file == "/a:b.json");
  CHECK(s.script.corrupt == std::vector<int>{2});
  CHECK(s.script.confidence == std::vector<std::vector<float>>{{1.0f, -2.5f}, {0.0f, 3.0f}});
  CHECK(parse_replay_spec("r.json:accept_len=2.8").script.accept_len_milli == 2800);
  CHECK(parse_replay_spec("r.json:accept_len=5.75").script.accept_len_milli == 5750);
  CHECK(parse_replay_spec("r.json:accept_len=3").script.accept_len_milli == 3000);
  auto refusal = [](const std::string& text) {
    return test::error_text([&] { parse_replay_spec(text); });
  };
  CHECK(refusal("r.json:accept_len=0.5").find("accept_len 0.5 < 1") != std::string::npos);
  CHECK(refusal("r.json:accept_len=2.8125").find("at most 3 decimals") != std::string::npos);
  CHECK(refusal("r.json:accept_len=x").find("accept_len 'x'") != std::string::npos);
  CHECK(refusal("r.json:accept_len=3:corrupt=1").find("corrupt and accept_len") != std::string::npos);
  CHECK(refusal("r.json:corrupt=1:corrupt=2").find("option 'corrupt' given twice") != std::string::npos);
  CHECK(refusal("r.json:confidence=1,nan").find("confidence 'nan'") != std::string::npos);
  CHECK(refusal("r.json:confidence=1,").find("empty item") != std::string::npos);
}

TEST_CASE("ReplayDrafter: scripted confidences cycle per proposal; reset starts the cycle again") {
  const std::vector<int32_t> seq{10, 11, 12, 13, 14, 15, 16, 17};
  ReplayDrafter d(seq, {{}, {{1, 2}, {3, 4}, {5, 6}}}, 2, 20, 19);
  CHECK(d.propose(12, 1).confidence == std::vector<float>{1, 2});
  CHECK(d.propose(12, 1).confidence == std::vector<float>{3, 4});
  CHECK(d.propose(12, 1).confidence == std::vector<float>{5, 6});
  CHECK(d.propose(12, 1).confidence == std::vector<float>{1, 2});
  d.reset();
  CHECK(d.propose(12, 1).confidence == std::vector<float>{1, 2});
  CHECK_THROWS_WITH_AS(ReplayDrafter(seq, {{}, {{1, 2, 3}}}, 2, 20, 0),
                       doctest::Contains("confidence group 1 has 3 logits"), Error);
}

// accept_len X: proposal k is corrupted at L_k = floor((k+1) X) - floor(k X); L_k = B + 1
// leaves it whole. X = 2.8 gives L = 2, 3, 3, 3, 3, 2, 3, 3, 3, 3, ... (sum 14 per 5).
TEST_CASE("ReplayDrafter accept_len: the rejection index follows floor((k+1) X) - floor(k X)") {
  std::vector<int32_t> seq;
  for (int i = 0; i < 40; ++i) seq.push_back(100 + i);
  auto first_wrong = [&](const Proposal& p, int64_t anchor) {  // 1-based; B + 1: none
    for (int j = 1; j < static_cast<int>(p.out_ids.size()); ++j)
      if (p.out_ids[static_cast<size_t>(j)] != seq[static_cast<size_t>(anchor + 1 + j)]) return j;
    return static_cast<int>(p.out_ids.size());
  };
  struct Want {
    int64_t milli;
    std::vector<int> lengths;
  };
  for (const Want& w : {Want{2800, {2, 3, 3, 3, 3, 2, 3, 3, 3, 3}},
                        Want{3500, {3, 4, 3, 4, 3, 4}},
                        Want{5700, {5, 6, 6, 5, 6, 6, 5, 6, 6, 6}}}) {
    ReplayScript script;
    script.accept_len_milli = w.milli;
    ReplayDrafter d(seq, script, 5, 1000, 0);
    CAPTURE(w.milli);
    for (size_t k = 0; k < w.lengths.size(); ++k) CHECK(first_wrong(d.propose(0, 3), 3) == w.lengths[k]);
  }
  ReplayScript too_long;
  too_long.accept_len_milli = 6100;
  CHECK_THROWS_WITH_AS(ReplayDrafter(seq, too_long, 5, 1000, 0),
                       doctest::Contains("exceeds block size + 1 = 6"), Error);
}
