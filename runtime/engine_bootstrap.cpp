#include "runtime/engine_bootstrap.h"

#include <algorithm>

namespace spillway::runtime {

Result<EngineBootstrap> bootstrap_engine(const engine::Model& model, const EngineBootstrapOptions& options,
                                         const engine::MemorySource& memory) {
  EngineBootstrap b;
  b.threads = options.threads > 0 ? options.threads : kernels::default_thread_count();
  if (options.residency) {
    auto setup = engine::set_up_residency(
        model, *options.residency,
        engine::ResidencyDemand{.context_tokens = std::max<int32_t>(options.context_tokens, 1),
                                .max_batch_tokens = options.max_batch_tokens,
                                .threads = b.threads,
                                .state_slots = options.state_slots,
                                .state_snapshots = options.state_snapshots},
        memory, options.progress);
    if (!setup) return setup.error();
    b.residency = std::make_unique<engine::ResidencySetup>(std::move(*setup));
    engine::PressurePolicy policy = engine::default_pressure_policy();
    policy.max_resident_bytes = b.residency->plan.non_layer_bytes + b.residency->plan.resident_layer_bytes;
    b.controller = std::make_unique<engine::ResidencyController>(*b.residency->weights, memory, policy);
  }
  b.pool = std::make_unique<kernels::ThreadPool>(b.threads);
  return b;
}

}  // namespace spillway::runtime
