// Start-up agreement (issue 17 item 2): the comparison names the first differing item
// and groups the ranks by the value they hold.
#include <doctest/doctest.h>

#include "launcher/startup_agreement.h"

using namespace dsv4;

TEST_CASE("start-up agreement: equal ranks agree; a difference names the item and every rank") {
  const std::vector<AgreementItem> a = {{"backend", "cpu"}, {"prompt_ids", "[1,2]"}};
  const std::vector<AgreementItem> b = {{"backend", "cpu"}, {"prompt_ids", "[3]"}};
  CHECK(find_disagreement({a, a, a}) == "");
  CHECK(find_disagreement({a, b, a}) ==
        "start-up agreement: ranks disagree on prompt_ids: ranks 0, 2 have [1,2]; rank 1 has "
        "[3] (every rank must run the same run config, checkpoint, numerics and placement)");
  const std::vector<AgreementItem> other_build = {{"backend", "cpu"}};
  CHECK(find_disagreement({a, other_build}).find("rank 1 has (not stated") != std::string::npos);
}

TEST_CASE("start-up agreement: items survive their encoding") {
  const std::vector<AgreementItem> items = {{"checkpoint config.json", "fnv1a-64 00ff of 9 bytes"},
                                            {"placement", "[0,5) [5,7)"}, {"drafter", "a=b"}};
  const auto back = decode_items(encode_items(items));
  REQUIRE(back.size() == 3);
  CHECK(back[2].name == "drafter");
  CHECK(back[2].value == "a=b");
  CHECK(back[1].value == "[0,5) [5,7)");
}
