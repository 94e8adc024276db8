// What `spillway serve`, `run` and `bench` set up between opening a model and its first
// forward, in one place so that the three agree: the kernel thread pool (physical cores
// unless told otherwise), the weights under the memory budget (residency plan, resident
// layers read, streaming prepared) and the pressure controller that sheds and re-admits
// resident layers between steps.
//
// Ownership: the EngineBootstrap owns the pool, the residency and the controller; the model
// and the memory source must outlive it. Thread contract: created on any thread, then used
// by the engine thread only (the controller's on_step() between forward steps).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "common/result.h"
#include "engine/model/model.h"
#include "engine/platform/memory_probe.h"
#include "engine/residency/residency_controller.h"
#include "engine/residency/residency_setup.h"
#include "kernels/thread_pool.h"

namespace spillway::runtime {

struct EngineBootstrapOptions {
  // The memory budget and residency flags; nullopt: the model's file mapping is used as it
  // is, with no plan and no controller (`bench --no-streaming`).
  std::optional<engine::ResidencyOptions> residency = engine::ResidencyOptions{};
  int32_t context_tokens = 0;      // the largest context a sequence may use
  int32_t max_batch_tokens = 512;  // tokens of one forward step
  int threads = 0;                 // 0: kernels::default_thread_count() (physical cores)
  int32_t state_slots = 1;         // recurrent-state slots (hybrid models) the budget must hold
  int32_t state_snapshots = 0;     // and prefix-cache state snapshots
  // Called while the resident weights are read (done, total bytes).
  engine::WeightLoadProgress progress;
};

struct EngineBootstrap {
  int threads = 0;
  std::unique_ptr<kernels::ThreadPool> pool;
  std::unique_ptr<engine::ResidencySetup> residency;           // null without a budget
  std::unique_ptr<engine::ResidencyController> controller;     // null without a budget

  // The forward's weight source: the residency's, or null for the model's mapping.
  engine::LayerWeightSource* weights() const { return residency ? residency->weights.get() : nullptr; }
  // Between forward steps (engine thread): the pressure controller's check.
  void between_steps() const {
    if (controller) controller->on_step();
  }
};

Result<EngineBootstrap> bootstrap_engine(const engine::Model& model, const EngineBootstrapOptions& options,
                                         const engine::MemorySource& memory);

}  // namespace spillway::runtime
