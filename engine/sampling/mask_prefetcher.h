// Structured output off the critical path: the masks of a step's constrained rows are
// computed on one helper thread while the forward runs (TokenConstraint::prepare), so the
// sampler only copies them. A row whose mask is not ready when sampling starts computes it
// there, as without a prefetcher.
//
// Thread contract: start() and wait() from the one thread that runs the steps (the engine
// thread), in pairs; between them the constraints given belong to the helper thread and
// must not be touched. wait() returns once every prepare() returned. The helper thread is
// started on the first start() that has work and joined by the destructor.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/sampling/sampler_stages.h"

namespace spillway::engine {

class MaskPrefetcher {
 public:
  MaskPrefetcher() = default;
  ~MaskPrefetcher();
  MaskPrefetcher(const MaskPrefetcher&) = delete;
  MaskPrefetcher& operator=(const MaskPrefetcher&) = delete;

  // Takes the constraints (nulls skipped; the vector is reused) and starts preparing them.
  void start(std::vector<TokenConstraint*>& constraints);
  void wait();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenConstraint*> jobs_;
  bool busy_ = false;   // jobs_ handed to the helper and not finished
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace spillway::engine
