// --dump-logits FILE.json (rank 0): {"prompt": [ids], "tokens": [ids], "logits": [[V
// floats] per generated token]}, where logits[i] is the row that chose tokens[i] (row 0
// from the prefill). Floats are printed with %.9g (round-trips every f32) and non-finite
// values as null, so equal runs give byte-identical files (law 1 compares them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsv4 {

std::string logits_json(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                        const std::vector<std::vector<float>>& logits);
void write_logits_json(const std::string& path, const std::string& json);

}  // namespace dsv4
