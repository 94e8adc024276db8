// Wall time per part of the forward, summed over the steps run while a ForwardPass has it
// attached (ForwardPass::set_profile). For benchmarks: a few clock reads per layer.
#pragma once

#include <chrono>

namespace spillway::engine {

struct ForwardProfile {
  // Recurrence: the gated delta net layers' conv, gates and delta-rule recurrence (their
  // projections count as Qkv and Wo; Attention is the attention layers' only).
  enum Part { Embed, Norms, Qkv, RopeKv, Attention, Wo, GateUp, SiluMul, Down, Residual, Logits, Weights, Recurrence,
              kParts };
  double seconds[kParts] = {};
  static const char* name(int part);
  double total() const;
};

// Runs fn, adding its wall time to profile->seconds[part] when profile is not null.
template <class Fn>
void timed(ForwardProfile* profile, ForwardProfile::Part part, Fn&& fn) {
  if (!profile) {
    fn();
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  fn();
  profile->seconds[part] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace spillway::engine
