#include "model/bpe.h"

#include <nlohmann/json.hpp>
#include <queue>

#include "base/error.h"
#include "model/utf8.h"

namespace dsv4 {

namespace {

// A merge entry is "a b" (older files) or ["a", "b"].
std::pair<std::string, std::string> merge_parts(const nlohmann::json& m, const std::string& at) {
  if (m.is_array() && m.size() == 2) return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && space > 0 && space + 1 < s.size() &&
        s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  }
  throw Error(cat(at, ": expected \"left right\" or [left, right], got ", m.dump()));
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& spec, const std::string& where) {
  const std::string field = cat(where, ": model");
  if (!spec.is_object() || spec.value("type", "") != "BPE")
    throw Error(cat(field, ": only a BPE model is supported"));
  if (!spec.value("dropout", nlohmann::json()).is_null() || spec.value("byte_fallback", false) ||
      spec.value("ignore_merges", false) ||
      !spec.value("continuing_subword_prefix", nlohmann::json()).is_null() ||
      !spec.value("end_of_word_suffix", nlohmann::json()).is_null())
    throw Error(cat(field, ": dropout, byte_fallback, ignore_merges and subword affixes are "
                    "not supported"));
  if (!spec.contains("vocab") || !spec["vocab"].is_object() || !spec.contains("merges"))
    throw Error(cat(field, ": needs a vocab object and a merges list"));
  for (const auto& [token, id] : spec["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw Error(cat(field, ".vocab[\"", token, "\"]: id ", id.dump(), " is not a token id"));
    vocab_.emplace(token, id.get<int32_t>());
  }
  const auto& merges = spec["merges"];
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string at = cat(field, ".merges[", r, "]");
    const auto [left, right] = merge_parts(merges[r], at);
    const int32_t a = token_id(left), b = token_id(right), ab = token_id(left + right);
    if (a < 0 || b < 0 || ab < 0)
      throw Error(cat(at, ": '", left, "' + '", right, "' has a part or a result outside the vocab"));
    merges_.insert_or_assign(pair_key(a, b), Merge{static_cast<int32_t>(r), ab});  // HF: last wins
  }
}

int32_t BpeModel::token_id(const std::string& token) const {
  const auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int prev, next;  // -1 at the ends; a merged-away symbol has id -1
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < word.size();) {
    const size_t begin = i;
    next_code_point(word, i);
    const int32_t id = token_id(std::string(word.substr(begin, i - begin)));
    DSV4_CHECK(id >= 0, "byte-level symbol outside the vocab in '", word, "'");
    const int n = static_cast<int>(sym.size());
    sym.push_back({id, n - 1, -1});
    if (n > 0) sym[static_cast<size_t>(n - 1)].next = n;
  }
  struct Candidate {
    int32_t rank, pos, id;
    bool operator<(const Candidate& o) const {  // the heap's top: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> heap;
  auto offer = [&](int left) {
    if (left < 0 || sym[static_cast<size_t>(left)].next < 0) return;
    const Symbol& l = sym[static_cast<size_t>(left)];
    const auto it = merges_.find(pair_key(l.id, sym[static_cast<size_t>(l.next)].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, it->second.id});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) offer(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = sym[static_cast<size_t>(c.pos)];
    if (l.id < 0 || l.next < 0) continue;
    const Symbol& r = sym[static_cast<size_t>(l.next)];
    const auto it = merges_.find(pair_key(l.id, r.id));
    if (it == merges_.end() || it->second.id != c.id) continue;  // stale: a neighbour merged
    const int right = l.next;
    l.id = c.id;
    l.next = r.next;
    if (l.next >= 0) sym[static_cast<size_t>(l.next)].prev = c.pos;
    sym[static_cast<size_t>(right)].id = -1;
    offer(l.prev);
    offer(c.pos);
  }
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[static_cast<size_t>(i)].next)
    out.push_back(sym[static_cast<size_t>(i)].id);
}

}  // namespace dsv4
