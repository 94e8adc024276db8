#include "engine/residency/expert_cache.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#include <fmt/format.h>

#include "engine/residency/unit_layout.h"

namespace spillway::engine {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

ExpertCacheReport expert_cache_report(const ExpertCacheStats& now, const ExpertCacheStats& before) {
  ExpertCacheReport r;
  r.expert_requests_hit = now.hits - before.hits;
  r.expert_requests_miss = now.misses - before.misses;
  r.expert_bytes_read = now.bytes_read - before.bytes_read;
  r.expert_requested_bytes = now.requested_bytes - before.requested_bytes;
  r.evictions = now.evictions - before.evictions;
  r.io_stall_seconds = now.stall_seconds - before.stall_seconds;
  r.read_seconds = now.read_seconds - before.read_seconds;
  const uint64_t requests = r.expert_requests_hit + r.expert_requests_miss;
  r.hit_rate = requests > 0 ? static_cast<double>(r.expert_requests_hit) / static_cast<double>(requests) : 0.0;
  r.resident_experts = now.resident_experts;
  r.slots = now.slots;
  r.cache_bytes = now.cache_bytes;
  r.read_time = now.read_time.since(before.read_time);
  r.experts_per_layer_step = now.experts_per_layer_step.since(before.experts_per_layer_step);
  return r;
}

void accumulate_expert_stats(ExpertCacheStats& sum, const ExpertCacheStats& now, const ExpertCacheStats& before) {
  sum.hits += now.hits - before.hits;
  sum.misses += now.misses - before.misses;
  sum.bytes_read += now.bytes_read - before.bytes_read;
  sum.requested_bytes += now.requested_bytes - before.requested_bytes;
  sum.evictions += now.evictions - before.evictions;
  sum.read_seconds += now.read_seconds - before.read_seconds;
  sum.stall_seconds += now.stall_seconds - before.stall_seconds;
  sum.read_time.add(now.read_time.since(before.read_time));
  sum.experts_per_layer_step.add(now.experts_per_layer_step.since(before.experts_per_layer_step));
  sum.slots = now.slots;
  sum.resident_experts = now.resident_experts;
  sum.cache_bytes = now.cache_bytes;
  sum.slot_bytes = now.slot_bytes;
}

ExpertDecodeReport expert_decode_report(const ExpertCacheStats& now, const ExpertCacheStats& before,
                                        double tokens, double seconds, double disk_bytes_per_second) {
  const ExpertCacheReport r = expert_cache_report(now, before);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  ExpertDecodeReport d;
  d.tokens = tokens;
  d.seconds = seconds;
  d.hit_rate = r.hit_rate;
  d.requested_bytes_per_token = ratio(static_cast<double>(now.requested_bytes - before.requested_bytes), tokens);
  d.bytes_read_per_token = ratio(static_cast<double>(r.expert_bytes_read), tokens);
  d.miss_bytes_bound_per_token = (1.0 - d.hit_rate) * d.requested_bytes_per_token;
  d.stall_fraction = ratio(r.io_stall_seconds, seconds);
  d.experts_per_layer_step = r.experts_per_layer_step.mean();
  d.read_seconds_per_expert = r.read_time.mean();
  if (disk_bytes_per_second > 0 && d.bytes_read_per_token > 0) {
    d.disk_bound_tokens_per_second = disk_bytes_per_second / d.bytes_read_per_token;
  }
  return d;
}

Status ExpertCache::build(const Model& model) {
  TensorLocator locator(model);
  const auto& layers = model.layers();
  units_.assign(layers.size(), {});
  slot_of_.assign(layers.size(), {});
  requests_.assign(layers.size(), {});
  layer_slots_.assign(layers.size(), 0);
  layer_floor_.assign(layers.size(), 0);
  layer_step_experts_.assign(layers.size(), 0);
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto* moe = std::get_if<MoeFfnWeights>(&layers[l].ffn);
    if (!moe) continue;
    const LayerSpec& spec = model.config().layers[l];
    layer_floor_[l] = 2 * spec.n_expert_used;
    units_[l].resize(moe->experts.size());
    slot_of_[l].assign(moe->experts.size(), -1);
    requests_[l].assign(moe->experts.size(), 0);
    for (size_t e = 0; e < moe->experts.size(); ++e) {
      ExpertUnit& u = units_[l][e];
      u.shape = moe->experts[e];
      std::vector<const TensorInfo*> tensors;
      Status located;
      u.shape.for_each_matrix([&](kernels::WeightMatrix& m) {
        auto t = locator.locate(m);
        if (!t) {
          if (located.ok()) located = t.error();
          return;
        }
        tensors.push_back(*t);
        m.data = nullptr;
        if (options_.retile && kernels::has_tiled_layout(m.type, m.cols)) {
          m.layout = kernels::WeightLayout::Tiled;
          retile_scratch_bytes_ = std::max(retile_scratch_bytes_, kernels::retile_scratch_bytes(m.type, m.cols));
        }
      });
      SPILLWAY_TRY(located);
      // Gap 0: only touching ranges merge (the expert's slices of separate tensors lie
      // n_expert slices apart; reading what lies between would be other experts' bytes).
      u.unit.id = static_cast<int32_t>(e);
      const std::vector<uint64_t> offsets = build_stream_unit(tensors, 0, u.unit);
      std::copy(offsets.begin(), offsets.end(), u.offsets);
      for (const UnitRange& r : u.unit.ranges) u.file_bytes += r.bytes;
      slot_bytes_ = std::max(slot_bytes_, u.unit.buffer_bytes);
    }
  }
  return {};
}

Result<ExpertCache::Sizes> ExpertCache::measure(const Model& model) {
  ExpertCache c;
  SPILLWAY_TRY(c.build(model));
  Sizes s;
  s.slot_bytes = static_cast<int64_t>(c.slot_bytes_);
  int32_t moe_layers = 0, floors = 0;
  for (size_t l = 0; l < c.units_.size(); ++l) {
    if (c.units_[l].empty()) continue;
    ++moe_layers;
    floors += c.layer_floor_[l];
    s.min_slots = std::max(s.min_slots, model.config().layers[l].n_expert_used);
    s.routed_expert_bytes += s.slot_bytes * static_cast<int64_t>(c.units_[l].size());
  }
  s.floor_slots = floors;
  if (moe_layers == 0) return Error{fmt::format("{}: the model has no routed experts", model.source().path())};
  return s;
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::create(const Model& model, std::vector<const DirectReader*> files,
                                                         const ExpertCacheOptions& options) {
  ASSIGN_OR_RETURN(const Sizes sizes, measure(model));
  std::unique_ptr<ExpertCache> c(new ExpertCache());
  c->files_ = std::move(files);
  c->options_ = options;
  SPILLWAY_TRY(c->build(model));
  const int64_t want = std::max<int64_t>(options.cache_bytes / std::max<int64_t>(sizes.slot_bytes, 1), sizes.min_slots);
  int64_t total_experts = 0;
  for (const auto& u : c->units_) total_experts += static_cast<int64_t>(u.size());
  const auto n_slots = static_cast<int32_t>(std::min(want, total_experts));
  c->layer_floor_wanted_ = c->layer_floor_;
  c->min_slots_ = sizes.min_slots;
  c->created_slots_ = n_slots;
  c->grow(n_slots);
  const int32_t n_readers = std::max(1, options.read_threads);
  for (int32_t i = 0; i < n_readers; ++i) c->readers_.emplace_back([p = c.get()] { p->reader_loop(); });
  return c;
}

ExpertCache::~ExpertCache() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : readers_) t.join();
}

void ExpertCache::reader_loop() {
  std::vector<uint8_t> scratch(retile_scratch_bytes_);
  std::unique_lock lk(mu_);
  for (;;) {
    work_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const ReadJob job = queue_.front();
    queue_.pop_front();
    lk.unlock();
    const auto start = Clock::now();
    Status st = read_stream_unit(files_, job.unit->unit, job.buffer);
    if (st.ok()) {
      // Retile in place, as a resident layer's matrices are (weight_residency.cpp).
      int i = 0;
      const_cast<ExpertWeights&>(job.unit->shape).for_each_matrix([&](kernels::WeightMatrix& m) {
        const uint64_t offset = job.unit->offsets[i++];
        if (m.layout == kernels::WeightLayout::Tiled) {
          kernels::retile_in_place(m.type, job.buffer + offset, m.rows, m.cols, scratch.data());
        }
      });
    }
    const double seconds = seconds_since(start);
    lk.lock();
    stats_.read_seconds += seconds;
    stats_.read_time.observe(seconds, kExpertReadSecondsBounds);
    if (st.ok()) {
      for (const UnitRange& r : job.unit->unit.ranges) stats_.bytes_read += r.bytes;
    } else if (first_error_.empty()) {
      first_error_ = st.error().message;
    }
    slots_[job.slot].loading = false;
    --pending_;
    done_.notify_all();
  }
}

void ExpertCache::update_floors() {
  int32_t total = 0;
  for (int32_t f : layer_floor_wanted_) total += f;
  const bool on = options_.policy == ExpertCachePolicy::LruFloor && static_cast<int32_t>(slots_.size()) >= total;
  for (size_t l = 0; l < layer_floor_.size(); ++l) layer_floor_[l] = on ? layer_floor_wanted_[l] : 0;
  stats_.slots = static_cast<int32_t>(slots_.size());
  stats_.cache_bytes = static_cast<int64_t>(slot_bytes_) * stats_.slots;
  stats_.slot_bytes = static_cast<int64_t>(slot_bytes_);
}

int32_t ExpertCache::grow(int32_t n) {
  int32_t added = 0;
  while (added < n && static_cast<int32_t>(slots_.size()) < created_slots_) {
    Slot& s = slots_.emplace_back();
    s.memory = AlignedBytes::allocate(slot_bytes_);
    s.buffer = s.memory.data.get();
    ++added;
  }
  update_floors();
  return added;
}

int32_t ExpertCache::shrink(int32_t n) {
  int32_t dropped = 0;
  while (dropped < n && static_cast<int32_t>(slots_.size()) > min_slots_) {
    // The least recently used slot (free slots first: last_use 0).
    int32_t victim = -1;
    for (int32_t i = 0; i < static_cast<int32_t>(slots_.size()); ++i) {
      if (slots_[i].pinned) continue;
      if (slots_[i].layer < 0) {
        victim = i;
        break;
      }
      if (victim < 0 || slots_[i].last_use < slots_[victim].last_use) victim = i;
    }
    if (victim < 0) break;
    Slot& s = slots_[victim];
    if (s.layer >= 0) {
      slot_of_[s.layer][s.expert] = -1;
      --layer_slots_[s.layer];
      ++stats_.evictions;
    }
    // Move the last slot into the hole and repoint its expert.
    if (victim != static_cast<int32_t>(slots_.size()) - 1) {
      s = std::move(slots_.back());
      if (s.layer >= 0) slot_of_[s.layer][s.expert] = victim;
    }
    slots_.pop_back();
    ++dropped;
  }
  update_floors();
  return dropped;
}

bool ExpertCache::better_victim(int32_t a, int32_t b) const {
  const Slot& x = slots_[a];
  const Slot& y = slots_[b];
  if (options_.policy == ExpertCachePolicy::Lfu) {
    const uint64_t fx = requests_[x.layer][x.expert], fy = requests_[y.layer][y.expert];
    if (fx != fy) return fx < fy;
  }
  return x.last_use < y.last_use;
}

int32_t ExpertCache::pick_victim(int32_t layer) const {
  int32_t best = -1, best_any = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(slots_.size()); ++i) {
    const Slot& s = slots_[i];
    if (s.pinned) continue;
    if (s.layer < 0) return i;  // free
    if (best_any < 0 || better_victim(i, best_any)) best_any = i;
    const bool floor_ok = s.layer == layer || layer_slots_[s.layer] > layer_floor_[s.layer];
    if (floor_ok && (best < 0 || better_victim(i, best))) best = i;
  }
  return best >= 0 ? best : best_any;
}

Result<std::vector<const ExpertWeights*>> ExpertCache::acquire(int32_t layer, std::span<const int32_t> ids) {
  std::vector<uint8_t> ready;
  auto out = begin_acquire(layer, ids, ready);
  if (!out) return out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ready[i]) SPILLWAY_TRY(wait(i));
  }
  return out;
}

Result<std::vector<const ExpertWeights*>> ExpertCache::begin_acquire(int32_t layer, std::span<const int32_t> ids,
                                                                     std::vector<uint8_t>& ready) {
  if (layer < 0 || layer >= static_cast<int32_t>(units_.size()) || units_[layer].empty()) {
    return Error{fmt::format("expert cache: layer {} has no routed experts", layer)};
  }
  if (ids.size() > slots_.size()) {
    return Error{fmt::format("expert cache: {} experts requested at once, {} slots", ids.size(), slots_.size())};
  }
  const auto n_expert = static_cast<int32_t>(units_[layer].size());
  for (const int32_t e : ids) {
    if (e < 0 || e >= n_expert) return Error{fmt::format("expert cache: layer {} has no expert {}", layer, e)};
  }
  std::vector<const ExpertWeights*> out(ids.size(), nullptr);
  ready.assign(ids.size(), 0);
  request_slots_.assign(ids.size(), -1);
  request_layer_ = layer;
  ++tick_;
  for (const int32_t e : ids) {
    ++requests_[layer][e];
    stats_.requested_bytes += units_[layer][e].file_bytes;
  }
  layer_step_experts_[layer] += static_cast<int32_t>(ids.size());
  // Hits first, pinned, so that the misses of this request cannot evict them.
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t s = slot_of_[layer][ids[i]];
    if (s >= 0) {
      slots_[s].pinned = true;
      slots_[s].last_use = tick_;
      out[i] = &slots_[s].weights;
      ready[i] = 1;
      ++stats_.hits;
    }
  }
  std::vector<ReadJob> jobs;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (out[i]) continue;
    const int32_t e = ids[i];
    const int32_t s = pick_victim(layer);
    assert(s >= 0);  // ids.size() <= slots and only this layer's experts are pinned
    Slot& slot = slots_[s];
    if (slot.layer >= 0) {
      slot_of_[slot.layer][slot.expert] = -1;
      --layer_slots_[slot.layer];
      ++stats_.evictions;
    }
    slot.layer = layer;
    slot.expert = e;
    slot.pinned = true;
    slot.loading = true;
    slot.last_use = tick_;
    slot_of_[layer][e] = s;
    ++layer_slots_[layer];
    const ExpertUnit& u = units_[layer][e];
    slot.weights = u.shape;
    int m = 0;
    slot.weights.for_each_matrix([&](kernels::WeightMatrix& w) { w.data = slot.buffer + u.offsets[m++]; });
    out[i] = &slot.weights;
    request_slots_[i] = s;
    jobs.push_back({&u, slot.buffer, s});
    ++stats_.misses;
  }
  if (!jobs.empty()) {
    std::lock_guard lk(mu_);
    for (const ReadJob& j : jobs) queue_.push_back(j);  // read in request order
    pending_ += jobs.size();
    work_.notify_all();
  }
  return out;
}

Status ExpertCache::wait(size_t index) {
  if (index >= request_slots_.size() || request_slots_[index] < 0) return {};
  const int32_t s = request_slots_[index];
  const auto start = Clock::now();
  std::string error;
  {
    std::unique_lock lk(mu_);
    done_.wait(lk, [&] { return !slots_[s].loading; });
    if (!first_error_.empty()) {
      // Let every read of the request land before its slots are forgotten.
      done_.wait(lk, [&] { return pending_ == 0; });
      error.swap(first_error_);
    }
  }
  stats_.stall_seconds += seconds_since(start);
  if (error.empty()) return {};
  // The failed slots hold garbage: forget every expert of this request that was read.
  for (const int32_t slot_index : request_slots_) {
    if (slot_index < 0) continue;
    Slot& slot = slots_[slot_index];
    if (slot.layer >= 0) {
      slot_of_[slot.layer][slot.expert] = -1;
      --layer_slots_[slot.layer];
    }
    slot.layer = slot.expert = -1;
    slot.pinned = false;
  }
  request_slots_.clear();
  release(request_layer_);
  layer_step_experts_[request_layer_] = 0;  // the failed step is not counted
  return Error{error};
}

void ExpertCache::release(int32_t layer) {
  for (Slot& s : slots_) {
    if (s.layer == layer) s.pinned = false;
  }
}

void ExpertCache::finish_layer(int32_t layer) {
  release(layer);
  if (layer < 0 || layer >= static_cast<int32_t>(layer_step_experts_.size())) return;
  int32_t& n = layer_step_experts_[layer];
  if (n == 0) return;
  std::lock_guard lk(mu_);  // stats_ is read under mu_ (stats())
  stats_.experts_per_layer_step.observe(n, kExpertsPerLayerStepBounds);
  n = 0;
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard lk(mu_);
  ExpertCacheStats s = stats_;
  s.resident_experts = 0;
  for (const Slot& slot : slots_) s.resident_experts += slot.layer >= 0;
  return s;
}

}  // namespace spillway::engine
