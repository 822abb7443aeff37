// Start-up agreement (issue 17 item 2): before any weight is read, every rank states
// what it is about to run as named items (the run config's keys that shape the
// computation, the checkpoint's config.json and index, the numerics, the placement) and
// the ranks compare them. An MPMD launch (`mpirun -np 1 dsv4-stage A : -np 1 dsv4-stage
// B`) whose ranks differ would otherwise emit tokens of no model, or deadlock.
// Per-rank paths (log_dir, dump_boundary) and the checkpoint's location may differ; the
// checkpoint is compared by content.
#pragma once
#include <string>
#include <vector>

#include "launcher/run_config.h"
#include "model/checkpoint.h"
#include "model/placement.h"

namespace dsv4 {

class MpiEndpoint;

struct AgreementItem {
  std::string name;   // e.g. "prompt_ids", "checkpoint config.json"
  std::string value;  // canonical text, or "fnv1a-64 <hex> of <n> bytes" when long
};

std::vector<AgreementItem> agreement_items(const RunConfig& c, const Checkpoint& ckpt,
                                           const std::vector<LayerRange>& placement);

// One line per item ("name=value\n"; names and values hold no newline) and back.
std::string encode_items(const std::vector<AgreementItem>& items);
std::vector<AgreementItem> decode_items(const std::string& text);

// "" when every rank's items equal rank 0's; else "start-up agreement: ranks disagree on
// <item>: rank 0 has <v>; ranks 1, 2 have <w> ..." for the first differing item.
std::string find_disagreement(const std::vector<std::vector<AgreementItem>>& per_rank);

// Collective over every rank of `ep`: the disagreement text ("" when all agree).
std::string startup_disagreement(MpiEndpoint& ep, const std::vector<AgreementItem>& mine);

}  // namespace dsv4
