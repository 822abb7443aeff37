#include "launcher/run_checks.h"

#include "base/error.h"
#include "stage/coordinator.h"

namespace dsv4 {

void check_run_against_model(const RunConfig& c, const Checkpoint& ckpt) {
  const ModelConfig& mc = ckpt.config();
  const int64_t max_seq = c.effective_max_seq(mc.max_position_embeddings);
  GenerationRequest req;
  // A text run or the server has no ids yet (its prompts are checked once tokenized):
  // one placeholder id keeps the other checks (stop ids, max_new against max_seq).
  const bool ids_later = !c.prompt.empty() || c.serve;
  req.prompt = ids_later ? std::vector<int32_t>{0} : c.prompt_ids;
  req.max_new = c.max_new;
  req.stop_ids = c.stop_ids;
  try {
    check_admission(req, max_seq, mc.vocab_size);
  } catch (const Error& e) {
    throw Error(cat(e.what(), " (model ", mc.source, ")"));
  }
  if (c.drafter == "none") return;
  if (!mc.dspark.present)
    throw Error(cat("drafter: ", c.drafter, " needs a DSpark block size, but ", mc.source,
                    " has no dspark_* fields"));
  if (c.drafter == "dspark" && ckpt.drafter_kind() != DrafterKind::dspark)
    throw Error(cat("drafter: dspark, but ", ckpt.dir(), " holds no DSpark drafter (",
                    ckpt.drafter_kind() == DrafterKind::nextn ? "its mtp.0 block is NextN"
                                                              : "no mtp.* tensors",
                    ")"));
  const int depth_max = mc.dspark.block_size + 1;  // S3: a verify round holds t + B drafts
  if (c.spec_depth > depth_max)
    throw Error(cat("spec_depth: ", c.spec_depth, " exceeds dspark_block_size + 1 = ", depth_max,
                    " (", mc.source, ")"));
}

}  // namespace dsv4
