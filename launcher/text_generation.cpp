#include "launcher/text_generation.h"

#include "launcher/stop_strings.h"

namespace dsv4 {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
  }
  return "unknown";
}

TextResult generate_text(Coordinator& coordinator, const Tokenizer& tok, const TextRequest& req) {
  TextResult out;
  StreamDecoder decoder(tok, true);
  StopMatcher stops(req.stop);
  bool cancelled = false;
  auto hand_over = [&](const std::string& delta) {
    if (delta.empty() || cancelled) return;
    out.text += delta;
    if (req.on_text && !req.on_text(delta)) cancelled = true;
  };

  GenerationRequest g;
  g.prompt = req.prompt;
  g.max_new = req.max_tokens;
  g.stop_ids = req.stop_ids;
  g.sampling = req.sampling;
  g.spec_tmax = req.spec_tmax;
  g.depth_cap = req.depth_cap;
  g.auto_depth = req.auto_depth;
  g.on_token = [&](int32_t token) {
    hand_over(stops.push(decoder.push(token)));
    return !stops.stopped() && !cancelled;
  };
  out.engine = coordinator.generate(g);
  out.tokens = out.engine.tokens;
  if (!stops.stopped()) hand_over(stops.push(decoder.finish()) + stops.finish());
  if (cancelled) out.finish = FinishReason::cancelled;
  else if (stops.stopped() || out.engine.stopped) out.finish = FinishReason::stop;
  else out.finish = FinishReason::length;
  return out;
}

}  // namespace dsv4
