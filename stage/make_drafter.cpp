#include "base/error.h"
#include "stage/drafter.h"
#include "stage/replay_drafter.h"

namespace dsv4 {

std::unique_ptr<Drafter> make_drafter(const std::string& name, Checkpoint& ckpt, Ops& ops,
                                      const Numerics& num, int64_t max_seq) {
  if (name == "dspark") return std::make_unique<DsparkDrafter>(ckpt, ops, num, max_seq);
  if (!name.starts_with(kReplayPrefix))
    throw Error(cat("drafter: unknown drafter '", name, "' (allowed: dspark, replay:FILE)"));
  const ModelConfig& c = ckpt.config();
  if (!c.dspark.present)
    throw Error(cat("drafter ", name, ": ", c.source, " has no dspark_* fields (block size)"));
  ReplaySpec spec = parse_replay_spec(name.substr(kReplayPrefix.size()));
  return std::make_unique<ReplayDrafter>(read_replay_tokens(spec.file), std::move(spec.script),
                                         c.dspark.block_size, c.vocab_size,
                                         static_cast<int32_t>(c.dspark.noise_token_id));
}

}  // namespace dsv4
