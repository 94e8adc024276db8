#include "scheduler/scheduler.h"

#include <algorithm>
#include <cassert>
#include <limits>

#include <fmt/format.h>

#include "engine/diffusion/active_set.h"

namespace spillway::scheduler {

namespace {

int32_t blocks_for(int32_t n_tokens, int32_t block_size) {
  return (n_tokens + block_size - 1) / block_size;
}

SubmitRejection invalid(std::string message) {
  return SubmitRejection{SubmitError::Invalid, std::move(message)};
}

constexpr int32_t kDefaultCanvasTokens = 128;  // diffusion, max_tokens unset

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, const engine::Tokenizer& tokenizer,
                     int32_t n_vocab, MetricsObserver* observer)
    : config_(config),
      tokenizer_(tokenizer),
      n_vocab_(n_vocab),
      observer_(observer),
      max_context_(static_cast<int32_t>(
          std::min<int64_t>(config.max_context, int64_t{config.n_kv_blocks} * config.block_size))),
      seed_source_(std::random_device{}()),
      blocks_(config.n_kv_blocks),
      prefix_cache_(blocks_, config.block_size, config.prefix_cache),
      snapshots_(config.n_state_slots > 0 ? std::max(config.n_state_snapshots, 0) : 0) {
  assert(config.block_size > 0 && config.n_kv_blocks > 0 && config.max_batch_tokens > 0);
  // Handed out lowest first (back of the vector).
  for (int32_t s = config.n_state_slots - 1; s >= 0; --s) free_state_slots_.push_back(s);
  const int32_t vocab = std::min(n_vocab, tokenizer.n_vocab());
  for (int32_t id = 0; id < vocab; ++id) {
    if (tokenizer.is_end_of_generation(id)) end_of_generation_ids_.push_back(id);
  }
}

Scheduler::~Scheduler() = default;

int32_t Scheduler::canvas_tokens(const GenerationParams& params) const {
  if (params.max_tokens > 0) return params.max_tokens;
  const auto n_prompt = static_cast<int32_t>(params.prompt.size());
  return std::max(1, std::min({kDefaultCanvasTokens, max_context_ - n_prompt, config_.max_batch_tokens - n_prompt}));
}

engine::diffusion::DiffusionParams Scheduler::canvas_params(const GenerationParams& params) const {
  engine::diffusion::DiffusionParams p;
  if (params.diffusion) {
    p = *params.diffusion;
  } else {
    p.schedule = engine::diffusion::Schedule::Timestep;
    p.steps = 0;
  }
  if (p.steps <= 0) p.steps = canvas_tokens(params);
  if (!p.cache_chosen && config_.diffusion_compact) p.compact = true;
  return p;
}

std::optional<SubmitRejection> Scheduler::validate_canvas(const GenerationParams& params) const {
  if (!config_.diffusion_model) {
    return invalid("diffusion: this model is autoregressive; 'diffusion' applies to diffusion models only");
  }
  if (params.n != 1) return invalid(fmt::format("n: a diffusion model generates one choice per request, got {}", params.n));
  const auto n_prompt = static_cast<int32_t>(params.prompt.size());
  const int32_t g = canvas_tokens(params);
  const int64_t length = int64_t{n_prompt} + g;
  if (length > max_context_) {
    return invalid(fmt::format("this model's maximum context length is {} tokens; the prompt has {} tokens and "
                               "the canvas {} more (max_tokens)", max_context_, n_prompt, g));
  }
  if (length > config_.max_batch_tokens) {
    return invalid(fmt::format("max_tokens: the canvas (prompt {} + max_tokens {}) exceeds this server's step "
                               "budget of {} tokens", n_prompt, g, config_.max_batch_tokens));
  }
  const Status st = engine::diffusion::validate(canvas_params(params), n_prompt, static_cast<int32_t>(length));
  if (!st) return invalid("diffusion." + st.error().message);
  return std::nullopt;
}

std::optional<SubmitRejection> Scheduler::validate(const GenerationParams& params) const {
  const int64_t n_prompt = static_cast<int64_t>(params.prompt.size());
  if (n_prompt == 0) return invalid("the prompt is empty");
  for (int32_t id : params.prompt) {
    if (id < 0 || id >= n_vocab_) {
      return invalid(fmt::format("prompt token id {} is out of range [0, {})", id, n_vocab_));
    }
  }
  if (params.n < 1) return invalid(fmt::format("n must be at least 1, got {}", params.n));
  if (params.n > config_.max_running) {
    return invalid(fmt::format("n = {} exceeds this server's limit of {} sequences", params.n,
                               config_.max_running));
  }
  if (hybrid() && params.n > config_.n_state_slots) {
    return invalid(fmt::format("n = {} exceeds this server's {} recurrent-state slots", params.n,
                               config_.n_state_slots));
  }
  if (params.max_tokens == 0 || params.max_tokens < -1) {
    return invalid(fmt::format("max_tokens must be at least 1, got {}", params.max_tokens));
  }
  if (params.min_tokens < 0) {
    return invalid(fmt::format("min_tokens must be at least 0, got {}", params.min_tokens));
  }
  if (params.max_tokens > 0 && params.min_tokens > params.max_tokens) {
    return invalid(fmt::format("min_tokens ({}) must not exceed max_tokens ({})", params.min_tokens,
                               params.max_tokens));
  }
  const int64_t needed = n_prompt + std::max(params.min_tokens, 1);
  if (needed > max_context_) {
    return invalid(fmt::format(
        "this model's maximum context length is {} tokens; the prompt has {} tokens and at "
        "least {} must be generated",
        max_context_, n_prompt, std::max(params.min_tokens, 1)));
  }
  if (params.grammar) {
    if (config_.diffusion_model) return invalid("structured output is not supported for diffusion models");
    if (!config_.token_trie) return invalid("structured output is not available on this engine (no token trie)");
  }
  for (int32_t id : params.stop_token_ids) {
    if (id < 0 || id >= n_vocab_) {
      return invalid(fmt::format("stop token id {} is out of range [0, {})", id, n_vocab_));
    }
  }
  if (params.moe) {  // MoBiLE override
    if (config_.moe_experts_used == 0) return invalid("moe: this model has no MoE layers");
    const engine::MobileRequest& m = *params.moe;
    if (m.little_experts && (*m.little_experts < engine::kMobileAuto || *m.little_experts > config_.moe_experts_used)) {
      return invalid(fmt::format("moe.little_experts must be 'auto', 'off' or 1..{}, got {}",
                                 config_.moe_experts_used, *m.little_experts));
    }
    if (m.fallback_confidence && !(*m.fallback_confidence >= 0.0 && *m.fallback_confidence <= 1.0)) {
      return invalid(fmt::format("moe.fallback_confidence must be in [0, 1], got {}", *m.fallback_confidence));
    }
  }
  if (params.diffusion || config_.diffusion_model) return validate_canvas(params);
  return std::nullopt;
}

void Scheduler::add_request(RequestId id, GenerationParams params, UpdateSink sink,
                            Clock::time_point submitted) {
  assert(!validate(params));
  assert(!requests_.contains(id));
  auto request = std::make_unique<Request>();
  Request& r = *request;
  r.id = id;
  r.sink = std::move(sink);
  r.submitted = submitted;
  r.n_prompt = static_cast<int32_t>(params.prompt.size());
  const int32_t room = max_context_ - r.n_prompt;
  const bool diffusion = config_.diffusion_model;
  const int32_t max_new = diffusion ? canvas_tokens(params)
                                    : params.max_tokens > 0 ? std::min(params.max_tokens, room) : room;
  const uint64_t fallback_seed = seed_source_();
  r.choices.reserve(params.n);
  for (int32_t c = 0; c < params.n; ++c) {
    r.choices.emplace_back(tokenizer_, params, c, end_of_generation_ids_, max_new, fallback_seed,
                           config_.token_trie);
  }
  auto seq = std::make_unique<Sequence>();
  seq->request = &r;
  seq->choice = 0;
  seq->pending_forks = params.n - 1;
  seq->tokens = params.prompt;
  if (diffusion) {
    seq->canvas = std::make_unique<engine::diffusion::Canvas>(params.prompt, r.n_prompt + max_new,
                                                              config_.mask_token_id, config_.shift_logits,
                                                              canvas_params(params));
    seq->canvas_emitted = r.n_prompt;
    if (!params.ignore_eos) seq->canvas->set_end_tokens(end_of_generation_ids_);  // EOS tail-drop
    seq->canvas->begin_step();  // a fresh canvas always has masks in its first block
    assert(!seq->canvas->done());
  }
  r.params = std::move(params);
  waiting_.push_back(seq.get());
  r.sequences.push_back(std::move(seq));
  requests_.emplace(id, std::move(request));
}

// --- building a step ---------------------------------------------------------------------

const StepBatch& Scheduler::schedule() {
  assert(scheduled_.empty());
  budget_ = config_.max_batch_tokens;
  step_preemptions_ = 0;
  step_paused_ = 0;
  restores_.swap(fork_restores_);  // forks of the last update() resume from snapshots
  fork_restores_.clear();

  // 1. Decodes, 2. the rest (prefill chunks, forked prompt tails, recomputation).
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < running_.size() && budget_ > 0; ++i) {
      Sequence& seq = *running_[i];
      if (seq.scheduled > 0) continue;
      if (seq.request->output_paused) {
        step_paused_ += pass == 0;  // counted once per step
        continue;
      }
      if (seq.canvas) {
        // The whole canvas or nothing, with the prefills (its blocks are held while running).
        const int32_t n = seq.canvas->forward_count();
        if (pass == 1 && n <= budget_ && ensure_blocks(seq, seq.canvas->length())) schedule_tokens(seq, n);
        continue;
      }
      const bool decode = seq.remaining() == 1;
      if (decode != (pass == 0)) continue;
      const int32_t n = chunk_for(seq, seq.computed, std::min(seq.remaining(), budget_));
      if (!ensure_blocks(seq, seq.computed + n)) continue;  // seq itself was preempted
      schedule_tokens(seq, n);
    }
  }

  // 3. Admission.
  if (step_preemptions_ == 0) {
    for (size_t i = 0; i < waiting_.size() && budget_ > 0;) {
      Sequence& seq = *waiting_[i];
      if (seq.request->output_paused) {
        // Not admitted while its client does not read (it would only hold blocks, and a
        // paused sequence preempted for KV would be recomputed again and again); it keeps
        // its place in the queue without blocking the others.
        ++step_paused_;
        ++i;
        continue;
      }
      if (!try_admit(seq)) break;  // removes seq from waiting_
    }
  }

  build_batch();
  return batch_;
}

void Scheduler::schedule_tokens(Sequence& seq, int32_t n) {
  assert(n > 0 && n <= budget_);
  seq.scheduled = n;
  budget_ -= n;
  scheduled_.push_back(&seq);
}

bool Scheduler::ensure_blocks(Sequence& seq, int32_t n_tokens) {
  const int32_t need =
      blocks_for(n_tokens, config_.block_size) - static_cast<int32_t>(seq.block_table.size());
  if (need <= 0) return true;
  while (!blocks_.allocate(need, seq.block_table)) {
    assert(!running_.empty());
    Sequence* victim = running_.back();
    preempt(*victim);
    if (victim == &seq) return false;
  }
  return true;
}

bool Scheduler::try_admit(Sequence& seq) {
  if (reserved_slots_ + seq.slots() > config_.max_running) return false;
  if (seq.canvas) return try_admit_canvas(seq);  // diffusion models are never hybrid
  // Hybrid: a state slot for it and one for each choice it will fork (the running
  // sequences' pending forks hold theirs already).
  const int32_t pending_forks = reserved_slots_ - static_cast<int32_t>(running_.size());
  if (hybrid() && free_state_slots() - pending_forks < seq.slots()) return false;
  PrefixMatch match;
  int32_t restore_from = -1;  // hybrid: the snapshot the match resumes from
  int32_t discarded = 0;
  std::optional<EndBlockMatch> end;  // hybrid: resumes at a finished sequence's exact end
  if (prefix_cache_.enabled() && (!hybrid() || snapshots_on())) {
    prefix_cache_.extend_hashes(seq.tokens, seq.block_hashes);
    match = prefix_cache_.lookup(seq.tokens, seq.block_hashes);
    if (hybrid() && seq.slots() == 1) {
      end = prefix_cache_.lookup_end_block(seq.tokens, seq.block_hashes, static_cast<int32_t>(match.blocks.size()));
      const std::optional<int32_t> snapshot = end ? snapshots_.find(end->hash) : std::nullopt;
      if (snapshot) {
        restore_from = *snapshot;
      } else {
        end.reset();
      }
    }
    if (hybrid() && !end) {
      // The deepest block boundary of the match with a state snapshot.
      auto keep = static_cast<int32_t>(match.blocks.size());
      for (; keep > 0; --keep) {
        if (auto s = snapshots_.find(seq.block_hashes[keep - 1])) {
          restore_from = *s;
          break;
        }
      }
      discarded = match.tokens - keep * config_.block_size;
      match.blocks.resize(keep);
      match.tokens = keep * config_.block_size;
    }
  }
  const auto full_blocks = static_cast<int32_t>(match.blocks.size());
  if (end) {
    match.blocks.push_back(end->block);
    match.tokens += end->tokens;
  }
  const int32_t n =
      chunk_for(seq, match.tokens, std::min(static_cast<int32_t>(seq.tokens.size()) - match.tokens, budget_));
  const int32_t need = blocks_for(match.tokens + n, config_.block_size) -
                       static_cast<int32_t>(match.blocks.size());
  if (blocks_.available_after_acquiring(match.blocks) < need) return false;

  for (int32_t b : match.blocks) blocks_.acquire(b);
  if (end) {
    // Taken over: this sequence writes the rest of the block. The snapshot is used up once
    // this step's restore has read it (saves into a reused slot come after the restores).
    prefix_cache_.take_end_block(end->block);
    snapshots_.forget(end->hash);
  }
  seq.block_table = match.blocks;
  const bool allocated = blocks_.allocate(need, seq.block_table);
  assert(allocated);
  (void)allocated;
  seq.computed = match.tokens;
  seq.registered_blocks = full_blocks;
  seq.state = Sequence::State::Running;
  if (hybrid()) {
    seq.state_slot = free_state_slots_.back();
    free_state_slots_.pop_back();
    if (restore_from >= 0) restores_.push_back({seq.state_slot, restore_from});
    prefix_discarded_tokens_total_ += discarded;
    if (observer_ && discarded > 0) observer_->on_prefix_discarded(discarded);
  }
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &seq));
  running_.push_back(&seq);
  reserved_slots_ += seq.slots();
  schedule_tokens(seq, n);

  Request& r = *seq.request;
  if (!r.admitted) {
    r.admitted = true;
    r.queue_seconds = std::chrono::duration<double>(Clock::now() - r.submitted).count();
    r.cached_prompt_tokens = std::min(match.tokens, r.n_prompt);
  }
  if (prefix_cache_.enabled()) {
    const auto queried = static_cast<int32_t>(seq.tokens.size());
    prefix_queried_tokens_total_ += queried;
    prefix_hit_tokens_total_ += match.tokens;
    if (observer_) observer_->on_prefix_lookup(queried, match.tokens);
  }
  return true;
}

bool Scheduler::try_admit_canvas(Sequence& seq) {
  seq.canvas->invalidate_cache();  // fresh KV blocks: the step forwards the whole canvas
  const int32_t n = seq.canvas->length();
  const int32_t need = blocks_for(n, config_.block_size);
  if (n > budget_ || blocks_.available_after_acquiring({}) < need) return false;
  const bool allocated = blocks_.allocate(need, seq.block_table);
  assert(allocated);
  (void)allocated;
  seq.computed = 0;
  seq.state = Sequence::State::Running;
  waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &seq));
  running_.push_back(&seq);
  reserved_slots_ += seq.slots();
  schedule_tokens(seq, n);
  Request& r = *seq.request;
  if (!r.admitted) {
    r.admitted = true;
    r.queue_seconds = std::chrono::duration<double>(Clock::now() - r.submitted).count();
  }
  return true;
}

void Scheduler::preempt(Sequence& seq) {
  assert(seq.state == Sequence::State::Running);
  if (seq.canvas) seq.canvas->invalidate_cache();
  if (seq.scheduled > 0) {
    budget_ += seq.scheduled;
    seq.scheduled = 0;
    scheduled_.erase(std::find(scheduled_.begin(), scheduled_.end(), &seq));
  }
  release_tail_snapshot(seq, /*publish=*/true);  // the resume may hit it
  release_blocks(seq);
  release_state_slot(seq);
  seq.computed = 0;
  seq.registered_blocks = 0;
  remove_from_running(seq);
  seq.state = Sequence::State::Waiting;
  waiting_.push_front(&seq);
  ++step_preemptions_;
  ++preemptions_total_;
}

void Scheduler::release_blocks(Sequence& seq) {
  // Last block first: the LRU then evicts a sequence's tail before its head, which is the
  // part other requests are most likely to share.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) blocks_.release(*it);
  seq.block_table.clear();
}

void Scheduler::save_end_state(Sequence& seq) {
  const int32_t bs = config_.block_size;
  const int32_t full = seq.computed / bs;
  // Not for n > 1 (their prompt's snapshot serves the forks), nor while a fork's restore
  // is planned (take_slot() could evict the snapshot it reads).
  if (!snapshots_on() || seq.state != Sequence::State::Running || seq.canvas ||
      seq.request->params.n != 1 || seq.computed % bs == 0 ||
      static_cast<int32_t>(seq.block_table.size()) <= full || !fork_restores_.empty() ||
      !snapshots_.can_take()) {
    return;
  }
  const std::span<const int32_t> computed(seq.tokens.data(), size_t(seq.computed));
  prefix_cache_.extend_hashes(computed, seq.block_hashes);
  const std::optional<uint64_t> hash =
      prefix_cache_.insert_end_block(computed, seq.block_hashes, full, seq.block_table[full]);
  if (!hash || snapshots_.contains(*hash)) return;  // the same end is saved already
  const int32_t slot = snapshots_.take_slot();
  snapshots_.insert(*hash, slot);
  end_saves_.push_back({*hash, {seq.state_slot, slot}});
}

void Scheduler::release_state_slot(Sequence& seq) {
  if (seq.state_slot < 0) return;
  // A planned restore into the slot (a fork's) must not land in the slot's next owner.
  const auto into_slot = [&](const StepBatch::StateTransfer& t) { return t.state_slot == seq.state_slot; };
  std::erase_if(restores_, into_slot);
  std::erase_if(fork_restores_, into_slot);
  free_state_slots_.push_back(seq.state_slot);
  seq.state_slot = -1;
}

void Scheduler::remove_from_running(Sequence& seq) {
  auto it = std::find(running_.begin(), running_.end(), &seq);
  assert(it != running_.end());
  running_.erase(it);
  reserved_slots_ -= seq.slots();
}

bool Scheduler::snapshot_boundary(const Sequence& seq, int32_t blocks) const {
  if (blocks <= 0) return false;
  const int32_t interval = std::max(config_.snapshot_interval_blocks, 1);
  return blocks % interval == 0 || blocks == seq.request->n_prompt / config_.block_size;
}

int32_t Scheduler::chunk_for(const Sequence& seq, int32_t computed, int32_t n) const {
  if (!snapshots_on() || n <= 1) return n;
  const int32_t bs = config_.block_size;
  for (int32_t b = computed / bs + 1; b * bs < computed + n; ++b) {
    if (snapshot_boundary(seq, b)) return b * bs - computed;
  }
  return n;
}

// After build: a save for every scheduled sequence whose step ends on a snapshot boundary
// not snapshotted yet, and a tail save for every one whose step ends on another block
// boundary past its prompt's last full block.
void Scheduler::plan_snapshot_saves() {
  batch_.state_saves.clear();
  if (!snapshots_on()) return;
  const int32_t bs = config_.block_size;
  for (Sequence* seq : scheduled_) {
    const int32_t end = seq->computed + seq->scheduled;
    if (seq->canvas || end % bs != 0) continue;
    if (!snapshot_boundary(*seq, end / bs)) {
      if (end / bs > seq->request->n_prompt / bs) plan_tail_save(*seq, end / bs);
      continue;
    }
    // The indexed snapshot at this boundary supersedes the tail's older one.
    release_tail_snapshot(*seq, /*publish=*/false);
    prefix_cache_.extend_hashes(std::span<const int32_t>(seq->tokens.data(), size_t(end)), seq->block_hashes);
    const uint64_t hash = seq->block_hashes[end / bs - 1];
    if (snapshots_.contains(hash)) continue;
    if (std::any_of(pending_snapshots_.begin(), pending_snapshots_.end(),
                    [&](const auto& p) { return p.first == hash; })) {
      continue;
    }
    if (!snapshots_.can_take()) continue;  // every slot is being saved or held as a tail
    const int32_t slot = snapshots_.take_slot();
    batch_.state_saves.push_back({seq->state_slot, slot});
    pending_snapshots_.emplace_back(hash, slot);
  }
}

void Scheduler::plan_tail_save(Sequence& seq, int32_t blocks) {
  if (seq.tail_snapshot < 0) {
    if (tail_holders_ >= snapshots_.n_snapshots() / 2 || !snapshots_.can_take()) return;
    seq.tail_snapshot = snapshots_.take_slot();
    seq.tail_snapshot_blocks = 0;
    ++tail_holders_;
  }
  batch_.state_saves.push_back({seq.state_slot, seq.tail_snapshot});
  pending_tail_saves_.emplace_back(&seq, blocks);
}

void Scheduler::release_tail_snapshot(Sequence& seq, bool publish) {
  if (seq.tail_snapshot < 0) return;
  const int32_t blocks = seq.tail_snapshot_blocks;
  if (publish && blocks > 0 && blocks <= static_cast<int32_t>(seq.block_hashes.size())) {
    snapshots_.insert(seq.block_hashes[blocks - 1], seq.tail_snapshot);
  } else {
    snapshots_.give_back(seq.tail_snapshot);
  }
  seq.tail_snapshot = -1;
  seq.tail_snapshot_blocks = 0;
  --tail_holders_;
}

// The step failed: its saves did not happen. A sequence whose tail save was planned loses
// its tail snapshot (the slot may hold a half-written state); end saves are forgotten.
void Scheduler::drop_pending_snapshots() {
  for (const auto& [hash, transfer] : end_saves_) snapshots_.forget(hash);
  end_saves_.clear();
  for (const auto& [hash, slot] : pending_snapshots_) snapshots_.give_back(slot);
  pending_snapshots_.clear();
  for (const auto& [seq, blocks] : pending_tail_saves_) release_tail_snapshot(*seq, /*publish=*/false);
  pending_tail_saves_.clear();
}

void Scheduler::build_batch() {
  engine::ForwardBatch& fb = batch_.forward;
  fb.tokens.clear();
  fb.logit_rows.clear();
  batch_.rows.clear();
  batch_.canvases.clear();
  row_owner_.clear();
  size_t n_seq = 0;
  for (Sequence* seq : scheduled_) {
    if (n_seq == fb.sequences.size()) fb.sequences.emplace_back();
    engine::BatchSequence& bs = fb.sequences[n_seq++];
    bs.first_token = static_cast<int32_t>(fb.tokens.size());
    bs.n_tokens = seq->scheduled;
    bs.start_position = seq->computed;
    bs.block_table.assign(seq->block_table.begin(), seq->block_table.end());
    bs.mode = engine::AttentionMode::Causal;
    bs.positions.clear();
    bs.state_slot = seq->state_slot;
    if (seq->canvas) {
      add_canvas_rows(*seq, bs);
      continue;
    }
    fb.tokens.insert(fb.tokens.end(), seq->tokens.begin() + seq->computed,
                     seq->tokens.begin() + seq->computed + seq->scheduled);
    if (seq->computed + seq->scheduled < static_cast<int32_t>(seq->tokens.size())) continue;
    // The last known token is computed in this step: sample the next one, for this
    // sequence's choice and for the choices that fork off it.
    const int32_t row = static_cast<int32_t>(fb.tokens.size()) - 1;
    Request& r = *seq->request;
    for (int32_t c = seq->choice; c <= seq->choice + seq->pending_forks; ++c) {
      ChoiceOutput& out = r.choices[c];
      fb.logit_rows.push_back(row);
      batch_.rows.push_back(RowSampling{&out.sampler(), seq->tokens, r.n_prompt, out.banned()});
      if (r.params.moe) batch_.rows.back().moe = &*r.params.moe;  // MoBiLE override
      row_owner_.emplace_back(seq, c);
    }
  }
  fb.sequences.resize(n_seq);
  batch_.state_restores = restores_;
  batch_.end_saves.clear();
  for (const auto& [hash, transfer] : end_saves_) batch_.end_saves.push_back(transfer);
  plan_snapshot_saves();
}

void Scheduler::add_canvas_rows(Sequence& seq, engine::BatchSequence& bs) {
  engine::ForwardBatch& fb = batch_.forward;
  const engine::diffusion::Canvas& canvas = *seq.canvas;
  assert(canvas.pending() && seq.computed == 0 && seq.scheduled == canvas.forward_count());
  engine::diffusion::fill_canvas_sequence(canvas, bs, fb.tokens);
  CanvasRows rows{seq.canvas.get(), static_cast<int32_t>(fb.logit_rows.size()), 0};
  for (int32_t p : canvas.pending_rows()) {
    fb.logit_rows.push_back(bs.first_token + engine::diffusion::forwarded_index(canvas, canvas.logit_row(p)));
    batch_.rows.push_back(RowSampling{});
    row_owner_.emplace_back(&seq, -1);
    ++rows.n_rows;
  }
  batch_.canvases.push_back(rows);
}

// After a canvas step was committed: hands the newly committed left-contiguous tokens to the
// choice's output (which applies EOS, stop strings and max_tokens) and prepares the next step.
void Scheduler::advance_canvas(Sequence& seq) {
  Request& r = *seq.request;
  engine::diffusion::Canvas& canvas = *seq.canvas;
  if (!r.touched) {
    r.touched = true;
    touched_.push_back(&r);
  }
  if (!canvas.pending()) canvas.begin_step();
  // Once done, everything left goes out (masks only remain with the origin algorithm); a
  // tripped repeat guard ends the output where the run reached its length.
  const bool guard = canvas.repeat_stop() >= 0;
  const int32_t end = guard ? canvas.repeat_stop() : canvas.done() ? canvas.length() : canvas.committed_prefix_end();
  bool finished = false;
  while (!finished && seq.canvas_emitted < end) {
    engine::SampledToken t;
    t.token = canvas.tokens()[seq.canvas_emitted++];
    finished = r.choices[seq.choice].append(std::move(t));
  }
  if (!finished && (guard || canvas.done())) {
    r.choices[seq.choice].end(guard ? FinishReason::Stop : FinishReason::Length);
    finished = true;
  }
  if (finished) finishing_.push_back(&seq);
}

// --- applying a step ---------------------------------------------------------------------

void Scheduler::update(StepResult& result) {
  assert(result.tokens.size() == row_owner_.size());
  for (const auto& [hash, slot] : pending_snapshots_) snapshots_.insert(hash, slot);
  pending_snapshots_.clear();
  for (const auto& [seq, blocks] : pending_tail_saves_) seq->tail_snapshot_blocks = blocks;
  pending_tail_saves_.clear();
  end_saves_.clear();  // the step ran them
  for (Sequence* seq : scheduled_) {
    computed_tokens_total_ += seq->scheduled;
    if (seq->canvas) {
      seq->scheduled = 0;  // computed stays 0: the canvas is forwarded whole every step
      advance_canvas(*seq);
      continue;
    }
    seq->computed += seq->scheduled;
    seq->scheduled = 0;
    register_full_blocks(*seq);
  }

  for (size_t row = 0; row < row_owner_.size(); ++row) {
    auto [seq, choice] = row_owner_[row];
    if (choice < 0) continue;  // a canvas row: committed by the runner
    Request& r = *seq->request;
    if (!r.touched) {
      r.touched = true;
      touched_.push_back(&r);
    }
    engine::SampledToken& sampled = result.tokens[row];
    const int32_t token = sampled.token;
    assert(token >= 0 && token < n_vocab_);
    const bool finished = r.choices[choice].append(std::move(sampled));
    if (finished && !r.choices[choice].error().empty() && !r.error) r.error = r.choices[choice].error();
    if (choice != seq->choice) {
      // A choice sampled from the shared prompt: it forks unless it already finished.
      if (finished) {
        --seq->pending_forks;
        --reserved_slots_;
      } else {
        fork_choice(*seq, choice, token);
      }
      continue;
    }
    if (finished) {
      finishing_.push_back(seq);
    } else {
      seq->tokens.push_back(token);
    }
  }
  // Forks took their references above, before any sequence is released.
  for (Sequence* seq : finishing_) {
    save_end_state(*seq);
    finish_sequence(*seq);
  }
  finishing_.clear();
  scheduled_.clear();
  row_owner_.clear();

  for (Request* r : touched_) deliver(*r);
  touched_.clear();
}

void Scheduler::register_full_blocks(Sequence& seq) {
  if (!prefix_cache_.enabled()) return;
  const int32_t full = seq.computed / config_.block_size;
  if (full <= seq.registered_blocks) return;
  prefix_cache_.extend_hashes(std::span<const int32_t>(seq.tokens.data(), size_t(full) * config_.block_size),
                              seq.block_hashes);
  for (int32_t i = seq.registered_blocks; i < full; ++i) {
    prefix_cache_.insert(seq.tokens, seq.block_hashes, i, seq.block_table[i]);
  }
  seq.registered_blocks = full;
}

void Scheduler::fork_choice(Sequence& parent, int32_t choice, int32_t first_token) {
  Request& r = *parent.request;
  assert(parent.pending_forks > 0 && parent.computed >= r.n_prompt);
  auto fork = std::make_unique<Sequence>();
  Sequence& f = *fork;
  f.request = &r;
  f.choice = choice;
  f.state = Sequence::State::Running;
  f.tokens.assign(parent.tokens.begin(), parent.tokens.begin() + r.n_prompt);
  f.tokens.push_back(first_token);
  // Share the prompt's full blocks; the partial last block is recomputed in a block of the
  // fork's own (the parent keeps writing into its copy). Hybrid: the recurrent state cannot
  // be rebuilt from KV; the fork gets a slot of its own (admission kept one free for it) and
  // the state snapshot taken at the prompt's last full block is copied into it (the next
  // step's restores), so it recomputes fewer than block_size tokens; without that snapshot
  // it recomputes its prompt from position 0.
  int32_t shared = r.n_prompt / config_.block_size;
  if (hybrid()) {
    assert(!free_state_slots_.empty());
    f.state_slot = free_state_slots_.back();
    free_state_slots_.pop_back();
    std::optional<int32_t> snapshot;
    if (shared > 0 && snapshots_on() && static_cast<int32_t>(parent.block_hashes.size()) >= shared) {
      snapshot = snapshots_.find(parent.block_hashes[shared - 1]);
    }
    if (snapshot) {
      fork_restores_.push_back({f.state_slot, *snapshot});
    } else {
      shared = 0;
    }
  }
  for (int32_t i = 0; i < shared; ++i) {
    blocks_.acquire(parent.block_table[i]);
    f.block_table.push_back(parent.block_table[i]);
  }
  f.computed = shared * config_.block_size;
  f.registered_blocks = std::min(shared, parent.registered_blocks);
  f.block_hashes.assign(parent.block_hashes.begin(),
                        parent.block_hashes.begin() + std::min<size_t>(shared, parent.block_hashes.size()));
  // The slot was reserved by the parent; it moves to the fork.
  --parent.pending_forks;
  --reserved_slots_;
  running_.push_back(&f);
  reserved_slots_ += f.slots();
  r.sequences.push_back(std::move(fork));
}

void Scheduler::finish_sequence(Sequence& seq) {
  if (seq.state == Sequence::State::Finished) return;
  if (seq.state == Sequence::State::Running) {
    // A next turn that repeats this sequence's tokens resumes at its tail snapshot (after
    // fail_step / fail_all: dropped before, the state may be wrong).
    release_tail_snapshot(seq, /*publish=*/true);
    release_blocks(seq);
    release_state_slot(seq);
    remove_from_running(seq);
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), &seq);
    assert(it != waiting_.end());
    waiting_.erase(it);
  }
  seq.pending_forks = 0;
  seq.state = Sequence::State::Finished;
}

void Scheduler::deliver(Request& r) {
  r.touched = false;
  RequestUpdate update;
  update.id = r.id;
  for (ChoiceOutput& c : r.choices) {
    ChoiceUpdate cu;
    if (c.take_update(cu)) update.choices.push_back(std::move(cu));
  }
  update.finished = r.all_finished();
  if (update.choices.empty() && !update.finished) return;
  update.prompt_tokens = r.n_prompt;
  update.cached_prompt_tokens = r.cached_prompt_tokens;
  update.completion_tokens = r.completion_tokens();
  update.queue_seconds = r.queue_seconds;
  if (!r.sequences.empty() && r.sequences[0]->canvas) {
    const engine::diffusion::CanvasStats& s = r.sequences[0]->canvas->stats();
    update.diffusion = DiffusionUsage{.forwards = s.forwards, .steps = s.steps_run, .committed = s.committed,
                                      .rows_evaluated = s.rows_evaluated};
    update.diffusion->forced_top1 = s.forced_top1;
    update.diffusion->eos_tail_dropped = s.eos_tail_dropped;
    update.diffusion->repeat_guard_trips = s.repeat_guard_trips;
    update.diffusion->repair_forwards = s.repair_forwards;
    update.diffusion->repair_changes = s.repair_changes;
    update.diffusion->blocks_finished = s.blocks_finished;
    update.diffusion->block_forwards = s.block_forwards;
  }
  if (update.finished) update.error = r.error;
  if (r.sink) {
    try {
      r.sink(std::move(update));
    } catch (...) {
      // Sinks must not throw (engine_loop.h); one that does loses this update, nothing else.
    }
  }
  if (r.all_finished()) {
    for (const auto& seq : r.sequences) {
      assert(seq->state == Sequence::State::Finished);
      (void)seq;
    }
    const RequestId id = r.id;
    requests_.erase(id);  // destroys r
  }
}

// --- ending requests from outside --------------------------------------------------------

void Scheduler::cancel(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  for (const auto& seq : r.sequences) finish_sequence(*seq);
  for (ChoiceOutput& c : r.choices) c.finish(FinishReason::Cancelled);
  deliver(r);
}

void Scheduler::set_output_paused(RequestId id, bool paused) {
  auto it = requests_.find(id);
  if (it != requests_.end()) it->second->output_paused = paused;
}

void Scheduler::cancel_all() {
  std::vector<RequestId> ids;
  ids.reserve(requests_.size());
  for (const auto& [id, _] : requests_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (RequestId id : ids) cancel(id);
}

void Scheduler::fail_step(const std::string& message) {
  drop_pending_snapshots();
  std::vector<Request*> failed;
  for (Sequence* seq : scheduled_) {
    seq->scheduled = 0;
    if (std::find(failed.begin(), failed.end(), seq->request) == failed.end()) {
      failed.push_back(seq->request);
    }
  }
  scheduled_.clear();
  row_owner_.clear();
  for (Request* r : failed) {
    for (const auto& seq : r->sequences) finish_sequence(*seq);
    for (ChoiceOutput& c : r->choices) c.finish(FinishReason::Error);
    r->error = message;
    deliver(*r);
  }
}

void Scheduler::fail_all(const std::string& message) {
  drop_pending_snapshots();
  for (Sequence* seq : scheduled_) seq->scheduled = 0;
  scheduled_.clear();
  row_owner_.clear();
  std::vector<RequestId> ids;
  for (const auto& [id, _] : requests_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (RequestId id : ids) {
    Request& r = *requests_.at(id);
    for (const auto& seq : r.sequences) {
      release_tail_snapshot(*seq, /*publish=*/false);  // the engine's state is suspect
      finish_sequence(*seq);
    }
    for (ChoiceOutput& c : r.choices) c.finish(FinishReason::Error);
    r.error = message;
    deliver(r);
  }
}

SchedulerCounters Scheduler::counters() const {
  SchedulerCounters c;
  for (const auto& [id, r] : requests_) {
    const bool running = std::any_of(r->sequences.begin(), r->sequences.end(), [](const auto& s) {
      return s->state == Sequence::State::Running;
    });
    ++(running ? c.running_requests : c.waiting_requests);
    if (running && r->sequences[0]->canvas) ++c.running_canvases;
  }
  c.preemptions_total = preemptions_total_;
  c.prefix_queried_tokens_total = prefix_queried_tokens_total_;
  c.prefix_hit_tokens_total = prefix_hit_tokens_total_;
  c.prefix_discarded_tokens_total = prefix_discarded_tokens_total_;
  c.state_snapshots = snapshots_.size();
  c.computed_tokens_total = computed_tokens_total_;
  return c;
}

}  // namespace spillway::scheduler
