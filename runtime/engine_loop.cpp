// The engine thread: an inbox of submits and cancels (mutex + condition variable), taken at
// step boundaries; one scheduler step per iteration; sleeps while there is no work.
#include "runtime/engine_loop.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "scheduler/runner.h"
#include "scheduler/scheduler.h"

namespace spillway::runtime {

using namespace scheduler;  // NOLINT: this layer binds the scheduler's types

namespace {

SchedulerConfig with_runner_geometry(SchedulerConfig config, const ModelRunner& runner) {
  // The runner's KV pool is the truth: block ids index it.
  config.block_size = runner.block_size();
  config.n_kv_blocks = runner.n_kv_blocks();
  config.n_state_slots = runner.n_state_slots();
  config.n_state_snapshots = runner.n_state_snapshots();
  return config;
}

}  // namespace

struct EngineLoop::Impl {
  struct Submit {
    RequestId id;
    GenerationParams params;
    UpdateSink sink;
    std::chrono::steady_clock::time_point submitted;
  };
  enum class Control { Cancel, Pause, Resume };
  struct InboxItem {
    std::optional<Submit> submit;  // else `control` of request `cancel_id`
    RequestId cancel_id = 0;
    Control control = Control::Cancel;
  };

  Impl(std::unique_ptr<ModelRunner> r, const engine::Tokenizer& tokenizer, SchedulerConfig cfg,
       MetricsObserver* obs)
      : runner(std::move(r)),
        config(with_runner_geometry(cfg, *runner)),
        observer(obs),
        scheduler(config, tokenizer, runner->n_vocab(), obs) {
    publish_locked();
  }

  void run();
  // One scheduler step; false when it could do nothing (an empty batch without preemptions:
  // every running sequence is paused and nothing waiting fits), so the thread may sleep
  // until the inbox changes something.
  bool step();
  void post_control(RequestId id, Control control);
  // Takes everything in `items` into the scheduler, item by item: a submit the scheduler
  // throws on gets a final error update; `items` is left empty. Never throws.
  void take(std::vector<InboxItem>& items);
  void publish(int32_t submits_taken);
  void publish_locked();

  std::unique_ptr<ModelRunner> runner;
  const SchedulerConfig config;
  MetricsObserver* observer;
  Scheduler scheduler;  // engine thread only (or stop()'s caller once no thread runs)
  StepResult result;

  std::mutex stop_mu;  // serializes start() / stop()
  std::thread thread;

  mutable std::mutex mu;  // guards everything below
  std::condition_variable wake;
  std::vector<InboxItem> inbox;
  int32_t inbox_submits = 0;
  bool accepting = true;
  bool stop_requested = false;
  bool started = false;
  EngineSnapshot published;
  RequestId next_id = 1;
};

void EngineLoop::Impl::publish_locked() {
  const SchedulerCounters c = scheduler.counters();
  const KvBlockManager& blocks = scheduler.blocks();
  EngineSnapshot s;
  s.running = c.running_requests;
  s.waiting = c.waiting_requests;
  s.kv_blocks_total = blocks.n_blocks();
  s.kv_blocks_used = blocks.used_blocks();
  s.kv_blocks_cached = blocks.cached_blocks();
  s.block_size = config.block_size;
  s.preemptions_total = c.preemptions_total;
  s.prefix_queried_tokens_total = c.prefix_queried_tokens_total;
  s.prefix_hit_tokens_total = c.prefix_hit_tokens_total;
  s.live_step_plans = runner->live_step_plans();
  s.state_slots_total = config.n_state_slots;
  s.state_slots_used = config.n_state_slots - scheduler.free_state_slots();
  s.state_snapshots = c.state_snapshots;
  s.state_snapshot_stats = runner->state_snapshot_stats();
  s.mobile_stats = runner->mobile_stats();
  if (const StepPlans* plans = runner->step_plans()) {
    s.step_plan_builds = plans->builds();
    s.padded_rows_by_bucket.clear();
    for (size_t b = 0; b < plans->sizes().size(); ++b) {
      s.padded_rows_by_bucket.emplace_back(plans->sizes()[b], plans->padded_rows(static_cast<int>(b)));
    }
  }
  s.canvases_running = c.running_canvases;
  published = s;
}

void EngineLoop::Impl::publish(int32_t submits_taken) {
  std::lock_guard lock(mu);
  inbox_submits -= submits_taken;
  publish_locked();
}

void EngineLoop::Impl::take(std::vector<InboxItem>& items) {
  for (InboxItem& item : items) {
    if (!item.submit) {
      try {
        if (item.control == Control::Cancel) {
          scheduler.cancel(item.cancel_id);
        } else {
          scheduler.set_output_paused(item.cancel_id, item.control == Control::Pause);
        }
      } catch (...) {
        // A cancel that cannot be applied leaves its request to finish normally.
      }
      continue;
    }
    Submit& s = *item.submit;
    // Kept so that a request the scheduler cannot take still gets its last update.
    UpdateSink sink = s.sink;
    const int32_t n_choices = s.params.n;
    std::string failure;
    try {
      scheduler.add_request(s.id, std::move(s.params), std::move(s.sink), s.submitted);
      continue;
    } catch (const std::exception& e) {
      failure = fmt::format("the engine could not take the request: {}", e.what());
    } catch (...) {
      failure = "the engine could not take the request";
    }
    RequestUpdate update;
    update.id = s.id;
    update.finished = true;
    update.error = failure;
    for (int32_t c = 0; c < std::max(n_choices, 1); ++c) {
      ChoiceUpdate choice;
      choice.index = c;
      choice.finish = FinishReason::Error;
      update.choices.push_back(std::move(choice));
    }
    try {
      sink(std::move(update));
    } catch (...) {
      // The sink is the server's; nothing more can be told to this request.
    }
  }
  items.clear();
}

bool EngineLoop::Impl::step() {
  const StepBatch& batch = scheduler.schedule();
  StepStats stats;
  stats.preemptions = scheduler.step_preemptions();
  if (!batch.empty()) {
    stats.batch_tokens = batch.n_tokens();
    stats.batch_sequences = scheduler.step_sequences();
    for (const CanvasRows& c : batch.canvases) stats.canvas_rows.push_back(c.canvas->forward_count());
    const auto start = std::chrono::steady_clock::now();
    Status status;
    try {
      status = runner->execute(batch, result);
    } catch (const std::exception& e) {
      status = Error{fmt::format("the model runner failed: {}", e.what())};
    } catch (...) {
      status = Error{"the model runner failed with an unknown exception"};
    }
    if (status.ok()) {
      scheduler.update(result);
    } else {
      scheduler.fail_step(status.error().message);
    }
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (observer && (!batch.empty() || stats.preemptions > 0)) observer->on_step(stats);
  return !batch.empty() || stats.preemptions > 0;
}

void EngineLoop::Impl::run() {
  std::vector<InboxItem> items;
  bool has_work = false;
  for (;;) {
    bool stopping = false;
    bool progressed = false;
    {
      std::unique_lock lock(mu);
      // Idle: wake at least every second so the runner can react to memory pressure.
      wake.wait_for(lock, std::chrono::seconds(1),
                    [&] { return stop_requested || !inbox.empty() || has_work; });
      items.swap(inbox);
      stopping = stop_requested;
    }
    int32_t submits = 0;
    for (const InboxItem& item : items) submits += item.submit.has_value();
    take(items);  // each item alone: one that fails is answered, the others still taken
    try {
      if (stopping) {
        scheduler.cancel_all();
        publish(submits);
        return;
      }
      progressed = scheduler.has_work() && step();
      runner->between_steps();
    } catch (const std::exception& e) {
      // Nothing may cross the thread: whatever was in flight ends with an error.
      scheduler.fail_all(fmt::format("the engine failed: {}", e.what()));
      if (stopping) {
        publish(submits);
        return;
      }
    }
    // Paused output: nothing to run until a resume, cancel or submit arrives in the inbox.
    has_work = scheduler.has_work() && (progressed || scheduler.step_paused() == 0);
    publish(submits);
  }
}

EngineLoop::EngineLoop(std::unique_ptr<ModelRunner> runner, const engine::Tokenizer& tokenizer,
                       SchedulerConfig config, MetricsObserver* observer)
    : impl_(std::make_unique<Impl>(std::move(runner), tokenizer, config, observer)) {}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::start() {
  std::lock_guard stop_lock(impl_->stop_mu);
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->started || impl_->stop_requested) return;
    impl_->started = true;
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

void EngineLoop::stop() {
  std::lock_guard stop_lock(impl_->stop_mu);
  bool had_thread;
  {
    std::lock_guard lock(impl_->mu);
    impl_->accepting = false;
    impl_->stop_requested = true;
    had_thread = impl_->started;
  }
  impl_->wake.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
  if (had_thread) return;
  // Never started: no engine thread will take the inbox; cancel its requests here.
  std::vector<Impl::InboxItem> items;
  {
    std::lock_guard lock(impl_->mu);
    items.swap(impl_->inbox);
  }
  int32_t submits = 0;
  for (const auto& item : items) submits += item.submit.has_value();
  impl_->take(items);
  impl_->scheduler.cancel_all();
  impl_->publish(submits);
}

std::variant<RequestId, SubmitRejection> EngineLoop::submit(GenerationParams params,
                                                            UpdateSink sink) {
  // validate() reads only the scheduler's immutable configuration.
  if (auto rejection = impl_->scheduler.validate(params)) return *rejection;
  const auto now = std::chrono::steady_clock::now();
  RequestId id;
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->accepting) {
      return SubmitRejection{SubmitError::ShuttingDown, "the server is shutting down"};
    }
    if (impl_->inbox_submits + impl_->published.waiting >= impl_->config.max_waiting) {
      return SubmitRejection{
          SubmitError::QueueFull,
          fmt::format("too many requests are waiting ({}); try again later", impl_->config.max_waiting)};
    }
    id = impl_->next_id++;
    Impl::InboxItem item;
    item.submit = Impl::Submit{id, std::move(params), std::move(sink), now};
    impl_->inbox.push_back(std::move(item));
    ++impl_->inbox_submits;
  }
  impl_->wake.notify_one();
  return id;
}

void EngineLoop::Impl::post_control(RequestId id, Control control) {
  {
    std::lock_guard lock(mu);
    if (stop_requested) return;  // stop() cancels everything anyway
    InboxItem item;
    item.cancel_id = id;
    item.control = control;
    inbox.push_back(std::move(item));
  }
  wake.notify_one();
}

void EngineLoop::cancel(RequestId id) { impl_->post_control(id, Impl::Control::Cancel); }

void EngineLoop::set_output_paused(RequestId id, bool paused) {
  impl_->post_control(id, paused ? Impl::Control::Pause : Impl::Control::Resume);
}

EngineSnapshot EngineLoop::snapshot() const {
  std::lock_guard lock(impl_->mu);
  return impl_->published;
}

const SchedulerConfig& EngineLoop::config() const { return impl_->config; }

}  // namespace spillway::runtime
