#include "engine/diffusion/canvas.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "engine/diffusion/active_set.h"
#include "engine/diffusion/schedule.h"

namespace spillway::engine::diffusion {

Canvas::Canvas(std::span<const int32_t> prompt, int32_t length, int32_t mask_token, bool shift_logits,
               const DiffusionParams& params)
    : params_(params),
      n_prompt_(static_cast<int32_t>(prompt.size())),
      mask_token_(mask_token),
      shift_logits_(shift_logits),
      rng_(params.seed),
      sampler_(params) {
  assert(validate(params, n_prompt_, length).ok());
  tokens_.assign(prompt.begin(), prompt.end());
  tokens_.resize(length, mask_token);
  if (params_.schedule == Schedule::Block) {
    num_blocks_ = block_count(params_, n_prompt_, length);
    steps_per_block_ = params_.steps / num_blocks_;
  } else {
    num_blocks_ = 1;
    steps_per_block_ = params_.steps;
  }
  start_block();
}

void Canvas::start_block() {
  step_ = 0;
  refresh_ = true;
  if (params_.schedule == Schedule::Block) {
    const BlockRange r = block_range(block_, n_prompt_, params_.block_length, length());
    block_begin_ = r.begin;
    block_end_ = std::max(r.begin, r.end);
    int32_t masks = 0;
    for (int32_t p = block_begin_; p < block_end_; ++p) masks += is_masked(p) ? 1 : 0;
    block_counts_ = block_commit_counts(masks, steps_per_block_);
  } else {
    block_begin_ = 0;
    block_end_ = length();
  }
}

void Canvas::collect_masked() {
  masked_.clear();
  for (int32_t p = block_begin_; p < block_end_; ++p) {
    if (is_masked(p)) masked_.push_back(p);
  }
}

std::span<const int32_t> Canvas::begin_step() {
  assert(!pending_);
  if (repeat_stop_ >= 0) done_ = true;
  while (!done_) {
    if (eos_pos_ >= 0 && !any_mask()) {
      // EOS tail-drop: every mask after the end token is padding and none is left before it.
      end_block();
      if (finish_or_repair()) return masked_;
      break;
    }
    if (step_ >= steps_per_block_ && !params_.turbo()) {
      end_block();
      if (++block_ >= num_blocks_) {
        if (finish_or_repair()) return masked_;
        break;
      }
      start_block();
      continue;
    }
    collect_masked();
    if (masked_.empty()) {
      if (params_.turbo()) {
        // Turbo blocks end when they are full, without a wasted step.
        end_block();
        if (++block_ >= num_blocks_) {
          if (finish_or_repair()) return masked_;
          break;
        }
        start_block();
        continue;
      }
      // llama.cpp: one decode whose logits are unused, then the block ends.
      ++stats_.steps_run;
      ++stats_.empty_steps;
      step_ = steps_per_block_;
      continue;
    }
    pending_ = true;
    if (params_.compact) compacted_positions(*this, masked_, last_positions_, live_);
    return masked_;
  }
  masked_.clear();
  return masked_;
}

int32_t Canvas::commit_count() const {
  const auto remaining = static_cast<int32_t>(masked_.size());
  if (params_.schedule == Schedule::Timestep) {
    return timestep_commit_count(step_, steps_per_block_, remaining, params_.eps);
  }
  return block_counts_[step_];
}

void Canvas::commit(const float* logits, int32_t n_vocab) {
  assert(pending_);
  if (repairing_) {
    repair_commit(logits, n_vocab);
    return;
  }
  const int32_t forwarded = forward_count();
  pending_ = false;
  ++block_forwards_;
  const auto n = static_cast<int32_t>(masked_.size());
  ++stats_.steps_run;
  ++stats_.forwards;
  stats_.rows_evaluated += forwarded;
  if (forwarded < length()) ++stats_.cached_forwards;
  refresh_ = false;
  // compact_refresh: the step after every compact_refresh-th step of the block forwards all.
  if (params_.compact && params_.compact_refresh > 0 && (step_ + 1) % params_.compact_refresh == 0) refresh_ = true;
  stats_.rows_sampled += n;
  last_positions_.clear();
  last_tokens_.clear();
  const int32_t count = params_.turbo() ? 0 : std::min(commit_count(), n);

  if (params_.algorithm == Algorithm::Origin) {
    // Each masked position flips with probability count / n (one draw per position).
    const float p_transfer = static_cast<float>(count) / static_cast<float>(n);
    for (int32_t i = 0; i < n; ++i) {
      if (uniform_float(rng_) < p_transfer) {
        last_positions_.push_back(masked_[i]);
        last_tokens_.push_back(sampler_.sample_token(logits + size_t(i) * n_vocab, n_vocab, rng_));
      }
    }
  } else {
    choices_.resize(n);
    for (int32_t i = 0; i < n; ++i) choices_[i] = sampler_.choose(logits + size_t(i) * n_vocab, n_vocab, rng_);
    if (params_.turbo()) {
      threshold_commit();
    } else if (count > 0) {
      order_.resize(n);
      for (int32_t i = 0; i < n; ++i) order_[i] = i;
      if (params_.alg_temp <= 0.0f) {
        std::partial_sort(order_.begin(), order_.begin() + count, order_.end(), [&](int32_t a, int32_t b) {
          if (choices_[a].confidence != choices_[b].confidence) return choices_[a].confidence > choices_[b].confidence;
          return a < b;
        });
        order_.resize(count);
      } else {
        // Draw `count` positions without replacement from softmax(confidence / alg_temp).
        std::vector<double> w(n);
        double max_c = -INFINITY;
        for (int32_t i = 0; i < n; ++i) max_c = std::max(max_c, double(choices_[i].confidence) / params_.alg_temp);
        for (int32_t i = 0; i < n; ++i) w[i] = std::exp(double(choices_[i].confidence) / params_.alg_temp - max_c);
        std::vector<int32_t> picked;
        for (int32_t k = 0; k < count; ++k) {
          double total = 0;
          for (double x : w) total += x;
          const double u = uniform_float(rng_) * total;
          double cum = 0;
          int32_t chosen = -1;
          for (int32_t i = 0; i < n; ++i) {
            if (w[i] <= 0) continue;
            chosen = i;
            cum += w[i];
            if (u < cum) break;
          }
          picked.push_back(chosen);
          w[chosen] = 0;
        }
        order_ = picked;
      }
      std::sort(order_.begin(), order_.end());
      for (int32_t i : order_) {
        last_positions_.push_back(masked_[i]);
        last_tokens_.push_back(choices_[i].token);
      }
    }
  }
  for (size_t i = 0; i < last_positions_.size(); ++i) tokens_[last_positions_[i]] = last_tokens_[i];
  stats_.committed += static_cast<int32_t>(last_positions_.size());
  ++step_;
  if (params_.eos_tail_drop) drop_tail();
  if (params_.repeat_guard > 0 && repeat_stop_ < 0) {
    // With tail-drop the padding after the end token is not text: the scan stops at it.
    const int32_t end = eos_pos_ >= 0 ? std::min(left_committed_end(), eos_pos_ + 1) : left_committed_end();
    for (scanned_ = std::max(scanned_, n_prompt_); scanned_ < end; ++scanned_) {
      const int32_t t = tokens_[scanned_];
      run_length_ = t == run_token_ ? run_length_ + 1 : 1;
      run_token_ = t;
      if (run_length_ >= params_.repeat_guard) {
        repeat_stop_ = scanned_ + 1;
        stats_.repeat_guard_trips = 1;
        break;
      }
    }
  }
}

void Canvas::threshold_commit() {
  const auto n = static_cast<int32_t>(masked_.size());
  const float tau = params_.threshold_low > 0.0f && step_ >= params_.threshold_switch ? params_.threshold_low
                                                                                      : params_.threshold;
  int32_t best = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (choices_[i].p_token > choices_[best].p_token) best = i;
  }
  bool any = false;
  for (int32_t i = 0; i < n; ++i) {
    if (choices_[i].p_token >= tau) {
      last_positions_.push_back(masked_[i]);
      last_tokens_.push_back(choices_[i].token);
      any = true;
    }
  }
  if (!any) {
    ++stats_.forced_top1;
    last_positions_.push_back(masked_[best]);
    last_tokens_.push_back(choices_[best].token);
  }
}

std::span<const int32_t> Canvas::forward_positions() const {
  if (!params_.compact || !pending_ || (refresh_ && !params_.compact_all_live)) return {};
  return live_;
}

int32_t Canvas::forward_count() const {
  const std::span<const int32_t> live = forward_positions();
  if (!live.empty()) return static_cast<int32_t>(live.size());
  const Range r = forward_range();
  return r.end - r.begin;
}

Canvas::Range Canvas::forward_range() const {
  if (params_.compact) return {0, length()};
  if (!params_.block_cache || refresh_ || params_.schedule != Schedule::Block) return {0, length()};
  const int32_t begin = shift_logits_ ? std::max(0, block_begin_ - 1) : block_begin_;
  return {begin, block_end_};
}

int32_t Canvas::committed_prefix_end() const {
  if (params_.repair && !repaired_) return n_prompt_;
  return left_committed_end();
}

int32_t Canvas::left_committed_end() const {
  int32_t p = n_prompt_;
  while (p < length() && !is_masked(p)) ++p;
  return p;
}

bool Canvas::any_mask() const {
  for (int32_t p = n_prompt_; p < length(); ++p) {
    if (is_masked(p)) return true;
  }
  return false;
}

void Canvas::set_end_tokens(std::span<const int32_t> ids) {
  end_tokens_.assign(ids.begin(), ids.end());
  std::sort(end_tokens_.begin(), end_tokens_.end());
}

bool Canvas::is_end(int32_t token) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), token);
}

void Canvas::end_block() {
  if (block_forwards_ > 0) {
    ++stats_.blocks_finished;
    stats_.block_forwards += block_forwards_;
  }
  block_forwards_ = 0;
}

bool Canvas::finish_or_repair() {
  if (!params_.repair || repaired_) {
    done_ = true;
    return false;
  }
  repairing_ = true;
  refresh_ = true;  // the repair forwards the whole canvas, block cache or not
  masked_.clear();
  const int32_t end = eos_pos_ >= 0 ? eos_pos_ + 1 : length();
  for (int32_t p = n_prompt_; p < end; ++p) masked_.push_back(p);
  pending_ = true;
  return true;
}

void Canvas::drop_tail() {
  int32_t e = -1;
  for (size_t i = 0; i < last_positions_.size(); ++i) {  // ascending: the first is the lowest
    if (is_end(last_tokens_[i])) {
      e = last_positions_[i];
      break;
    }
  }
  if (e < 0 || (eos_pos_ >= 0 && e >= eos_pos_)) return;
  eos_pos_ = e;
  for (int32_t p = e + 1; p < length(); ++p) {
    if (is_masked(p)) {
      tokens_[p] = tokens_[e];
      ++stats_.eos_tail_dropped;
    }
  }
}

void Canvas::repair_commit(const float* logits, int32_t n_vocab) {
  pending_ = false;
  repairing_ = false;
  repaired_ = true;
  done_ = true;
  const auto n = static_cast<int32_t>(masked_.size());
  ++stats_.forwards;
  ++stats_.repair_forwards;
  const Range range = forward_range();
  stats_.rows_evaluated += range.end - range.begin;
  refresh_ = false;
  stats_.rows_sampled += n;
  last_positions_.clear();
  last_tokens_.clear();
  for (int32_t i = 0; i < n; ++i) {
    const float* row = logits + size_t(i) * n_vocab;
    int32_t best = 0;
    for (int32_t v = 1; v < n_vocab; ++v) {
      if (row[v] > row[best]) best = v;
    }
    const int32_t p = masked_[i];
    if (tokens_[p] != best) {
      tokens_[p] = best;
      last_positions_.push_back(p);
      last_tokens_.push_back(best);
      ++stats_.repair_changes;
    }
  }
  masked_.clear();
}

}  // namespace spillway::engine::diffusion
