#include "engine/sampling/mask_prefetcher.h"

namespace spillway::engine {

MaskPrefetcher::~MaskPrefetcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MaskPrefetcher::start(std::vector<TokenConstraint*>& constraints) {
  std::erase(constraints, nullptr);
  if (constraints.empty()) return;
  {
    std::lock_guard lock(mu_);
    jobs_.swap(constraints);
    busy_ = true;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
}

void MaskPrefetcher::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !busy_; });
}

void MaskPrefetcher::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || busy_; });
    if (stop_) return;
    std::vector<TokenConstraint*> jobs;
    jobs.swap(jobs_);
    lock.unlock();
    for (TokenConstraint* c : jobs) c->prepare();  // prepare() does not throw (contract)
    jobs.clear();
    lock.lock();
    jobs_.swap(jobs);  // keep the capacity
    jobs_.clear();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace spillway::engine
