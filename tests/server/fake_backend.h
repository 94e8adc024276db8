// A scripted ModelBackend for HTTP tests: a tokenizer of single letters and an engine thread
// that emits one token per step for every running request, so tests control timing,
// cancellation, queue-full and failures without a model.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/format/model_source.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/chat_prompt.h"
#include "server/model_backend.h"

namespace spillway::server::testing {

// ids: 0 <unk>, 1 <s>, 2 </s>, 3 + k: the byte 32 + k (printable ASCII, 95 tokens).
class LetterTokenizer final : public engine::Tokenizer {
 public:
  LetterTokenizer() {
    texts_ = {"<unk>", "<s>", "</s>"};
    for (int c = 32; c < 127; ++c) texts_.push_back(std::string(1, static_cast<char>(c)));
  }
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(1);
    for (char c : text) ids.push_back(c >= 32 && c < 127 ? 3 + (c - 32) : 0);
    return ids;
  }
  std::string token_bytes(int32_t id, bool include_special) const override {
    if (id < 3) return include_special ? texts_[id] : "";
    return texts_.at(id);
  }
  const std::string& token_text(int32_t id) const override { return texts_.at(id); }
  int32_t n_vocab() const override { return static_cast<int32_t>(texts_.size()); }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  bool add_bos() const override { return true; }
  bool add_eos() const override { return false; }
  bool is_end_of_generation(int32_t id) const override { return id == 2; }
  bool is_special(int32_t id) const override { return id < 3; }
  std::optional<int32_t> find_token(std::string_view text) const override {
    for (size_t i = 0; i < texts_.size(); ++i) {
      if (texts_[i] == text) return static_cast<int32_t>(i);
    }
    return std::nullopt;
  }

 private:
  std::vector<std::string> texts_;
};

class FakeBackend final : public ModelBackend {
 public:
  // Each request generates `script` cyclically, one character per step, until max_tokens.
  std::string script = "hello world ";
  std::chrono::milliseconds step_delay{2};
  std::atomic<bool> refuse_queue_full{false};
  std::atomic<bool> fail_requests{false};

  FakeBackend() {
    engine::Metadata meta;  // no tokenizer.chat_template: the built-in chatml is used
    auto prompt = ChatPrompt::create(meta, tokenizer_, "llama");
    if (prompt) chat_ = std::move(*prompt);
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeBackend() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  bool ready() const override { return true; }
  std::optional<runtime::EngineSnapshot> snapshot() const override {
    std::lock_guard lock(mu_);
    runtime::EngineSnapshot s;
    s.running = static_cast<int32_t>(requests_.size());
    s.kv_blocks_total = 64;
    s.kv_blocks_used = static_cast<int32_t>(requests_.size());
    s.block_size = 16;
    return s;
  }
  std::variant<scheduler::RequestId, scheduler::SubmitRejection> submit(
      scheduler::GenerationParams params, scheduler::UpdateSink sink) override {
    if (refuse_queue_full) {
      return scheduler::SubmitRejection{scheduler::SubmitError::QueueFull, "the queue is full"};
    }
    std::lock_guard lock(mu_);
    const scheduler::RequestId id = ++next_id_;
    Request r;
    r.params = std::move(params);
    r.sink = std::move(sink);
    r.produced.assign(r.params.n, 0);
    requests_[id] = std::move(r);
    submitted_.push_back(id);
    cv_.notify_all();
    return id;
  }
  void cancel(scheduler::RequestId id) override {
    std::lock_guard lock(mu_);
    cancelled_.push_back(id);
    auto it = requests_.find(id);
    if (it != requests_.end()) it->second.cancel = true;
  }
  const engine::Tokenizer& tokenizer() const override { return tokenizer_; }
  const ChatPrompt& chat_prompt() const override { return *chat_; }
  int32_t max_context() const override { return 4096; }
  int32_t n_vocab() const override { return tokenizer_.n_vocab(); }

  std::vector<scheduler::RequestId> cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  std::vector<scheduler::RequestId> submitted() const {
    std::lock_guard lock(mu_);
    return submitted_;
  }
  size_t running() const {
    std::lock_guard lock(mu_);
    return requests_.size();
  }
  bool has_chat_prompt() const { return chat_ != nullptr; }

 private:
  struct Request {
    scheduler::GenerationParams params;
    scheduler::UpdateSink sink;
    std::vector<int32_t> produced;
    bool cancel = false;
    bool started = false;
  };

  void loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (requests_.empty()) {
        cv_.wait(lock);
        continue;
      }
      std::vector<scheduler::RequestId> done;
      for (auto& [id, r] : requests_) {
        scheduler::RequestUpdate u;
        u.id = id;
        u.prompt_tokens = static_cast<int32_t>(r.params.prompt.size());
        if (r.cancel || fail_requests) {
          for (int32_t c = 0; c < r.params.n; ++c) {
            scheduler::ChoiceUpdate cu;
            cu.index = c;
            cu.finish = r.cancel ? scheduler::FinishReason::Cancelled : scheduler::FinishReason::Error;
            u.choices.push_back(cu);
          }
          if (!r.cancel) u.error = "scripted failure";
          u.finished = true;
        } else {
          bool all_done = true;
          for (int32_t c = 0; c < r.params.n; ++c) {
            scheduler::ChoiceUpdate cu;
            cu.index = c;
            const int32_t k = r.produced[c]++;
            const char ch = script[static_cast<size_t>(k) % script.size()];
            cu.text = std::string(1, ch);
            scheduler::GeneratedToken t;
            t.id = 3 + (ch - 32);
            t.logprob = -0.5f;
            cu.tokens.push_back(t);
            if (r.produced[c] >= r.params.max_tokens) cu.finish = scheduler::FinishReason::Length;
            else all_done = false;
            u.choices.push_back(cu);
          }
          int32_t total = 0;
          for (int32_t p : r.produced) total += p;
          u.completion_tokens = total;
          u.finished = all_done;
        }
        if (u.finished) done.push_back(id);
        r.sink(std::move(u));
      }
      for (auto id : done) requests_.erase(id);
      lock.unlock();
      std::this_thread::sleep_for(step_delay);
      lock.lock();
    }
    // Shutdown: whatever runs is cancelled.
    for (auto& [id, r] : requests_) {
      scheduler::RequestUpdate u;
      u.id = id;
      u.finished = true;
      for (int32_t c = 0; c < r.params.n; ++c) {
        scheduler::ChoiceUpdate cu;
        cu.index = c;
        cu.finish = scheduler::FinishReason::Cancelled;
        u.choices.push_back(cu);
      }
      r.sink(std::move(u));
    }
    requests_.clear();
  }

  LetterTokenizer tokenizer_;
  std::unique_ptr<ChatPrompt> chat_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<scheduler::RequestId, Request> requests_;
  std::vector<scheduler::RequestId> cancelled_;
  std::vector<scheduler::RequestId> submitted_;
  scheduler::RequestId next_id_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace spillway::server::testing
