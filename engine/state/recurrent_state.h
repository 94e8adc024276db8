// Recurrent-state slots of hybrid models: one slot per running sequence, holding the state
// of every gated delta net layer (LayerSpec::recurrent_ordinal), f32:
//   conv: [K - 1][conv_dim] the last K - 1 raw (pre-conv) qkv rows, oldest first;
//   ssm:  [value heads][dk][dv] the delta-rule state of each value head (row = key index).
// Which sequence owns which slot is the scheduler's business (BatchSequence::state_slot).
//
// Double-buffered for one-step rollback where a model's steps may be undone (Undo::kOneStep:
// models with MoE layers, whose MoBiLE little pass may fall back; speculative decoding would
// drop the last token the same way): each slot has two buffers. A step that may be undone
// (set_keep_undo(true)) reads the current buffer and writes the whole other one (a step
// rewrites every value of the state); rollback(slot) then returns to the state before it,
// bit-exactly, until the next begin_step. A pool without undo (Undo::kNone: dense hybrids,
// which nothing rolls back) has one buffer a slot, half the memory a sequence costs and the
// memory plan counts. Every other step updates the current buffer in place: the kernels read
// each state value before they write it, and a decode step then moves two bytes of state per
// byte instead of three (filling the other buffer makes the CPU read its lines before it writes
// them: the Qwen3.5-0.8B decode recurrence 1.4-1.6x faster on cold states, bench/README.md).
//
// Thread contract: the engine thread owns it (the forward writes the output buffers of the
// slots of its batch; no two sequences of a batch share a slot). Allocation is lazy (an
// anonymous mapping, common/huge_pages.h): an unused slot costs address space only, and the
// first step to write a buffer pays its page faults, once per 2 MiB where the kernel grants
// transparent huge pages (on 4 KiB pages the development VM took ~0.2 ms per 64 KiB head
// state, ~115 ms for a Qwen3.5-0.8B slot; prefault() moves them out of a measurement).
// Buffers and layers start on 64-byte boundaries, so the kernels' vector loads and stores of a
// head's rows never split a line.
#pragma once

#include <cstdint>
#include <vector>

#include "common/huge_pages.h"
#include "engine/model/model_config.h"

namespace spillway::engine {

class RecurrentState {
 public:
  // A copy of one slot's current state (what the prefix cache stores).
  struct Snapshot {
    std::vector<float, HugePageAllocator<float>> values;
    int64_t bytes() const { return static_cast<int64_t>(values.size() * sizeof(float)); }
  };

  // Whether a step can be rolled back: a second buffer a slot (kOneStep) or none.
  enum class Undo { kNone, kOneStep };
  // What a model's steps may need: kOneStep with MoE layers (MoBiLE), kNone without.
  static Undo undo_for(const ModelConfig& config);

  // n_slots slots for the delta-net layers of `config` (none: an empty pool).
  RecurrentState(const ModelConfig& config, int32_t n_slots, Undo undo = Undo::kOneStep);

  int32_t n_slots() const { return n_slots_; }
  int32_t n_layers() const { return static_cast<int32_t>(layers_.size()); }
  Undo undo() const { return buffers_ == 2 ? Undo::kOneStep : Undo::kNone; }
  // Floats of one buffer of a slot: the state of one sequence.
  int64_t state_floats() const { return state_floats_; }
  // Bytes of one sequence's state (one buffer), and of one slot of the pool the model's
  // serving path makes (undo_for(config): one buffer or two).
  static int64_t state_bytes(const ModelConfig& config);
  static int64_t slot_bytes(const ModelConfig& config) {
    return (undo_for(config) == Undo::kOneStep ? 2 : 1) * state_bytes(config);
  }

  // Zeroes the slot's current state (on acquiring it for a new sequence); no rollback.
  void reset(int32_t slot);
  // Writes zeros over the slot's buffers, so that their pages are mapped before a timed step
  // (benchmarks' warm-up); its current state is zero afterwards, no rollback.
  void prefault(int32_t slot);
  // Whether the steps begun from now on keep the state before them for rollback() (double
  // buffer) or update it in place (the default). Keeping needs Undo::kOneStep (asserted; a
  // pool without undo goes on stepping in place). Engine thread, between steps.
  void set_keep_undo(bool keep);
  // Starts a forward step of the slot's sequence (once per step, before any layer runs).
  void begin_step(int32_t slot);
  // Returns to the state before the last begin_step; false (nothing changed) when there
  // is no step to undo (none yet, already rolled back, an in-place step, or reset / restore /
  // copy since).
  bool rollback(int32_t slot);
  // dst's current state = src's (n > 1: sequences forked from one prompt); no rollback on dst.
  void copy(int32_t src, int32_t dst);
  Snapshot snapshot(int32_t slot) const;
  // As snapshot(), into `out` (its storage reused: no allocation after the first).
  void snapshot_into(int32_t slot, Snapshot& out) const;
  // The slot's current state = the snapshot (taken from a pool of the same model); no rollback.
  void restore(int32_t slot, const Snapshot& snapshot);
  // Copies made by snapshot_into() (saves) and restore() since construction, and their wall
  // time (metrics).
  struct CopyStats {
    int64_t saves = 0, restores = 0;
    double save_seconds = 0.0, restore_seconds = 0.0;
  };
  const CopyStats& copy_stats() const { return copy_stats_; }

  // During a step (after begin_step): layer `ordinal`'s state the step starts from and the
  // buffer it writes (the same one for an in-place step): the (K - 1) x conv_dim conv rows at
  // its start, the ssm state from conv_floats(ordinal) on (the conv rows rounded up to a 64-byte
  // line).
  const float* step_input(int32_t slot, int32_t ordinal) const;
  float* step_output(int32_t slot, int32_t ordinal);
  // The slot's current state of a layer (between steps: the state after the last step).
  const float* current(int32_t slot, int32_t ordinal) const;
  int64_t conv_floats(int32_t ordinal) const { return layers_[ordinal].conv_floats; }

 private:
  struct Layer {
    int64_t offset;       // floats from the start of a buffer
    int64_t conv_floats;  // (K - 1) * conv_dim, rounded up to 16 floats (the ssm state starts after it)
  };
  float* buffer(int32_t slot, int which) const {
    return data_ + (int64_t{slot} * buffers_ + which) * state_floats_;
  }

  int32_t n_slots_ = 0;
  int32_t buffers_ = 2;       // a slot's: 2 with undo, else 1
  int64_t state_floats_ = 0;  // a multiple of 16 (64 bytes)
  std::vector<Layer> layers_;
  ZeroedPages allocation_;
  float* data_ = nullptr;  // allocation_'s: [n_slots][buffers_][state_floats]
  std::vector<uint8_t> current_;         // per slot: which buffer holds the current state
  std::vector<uint8_t> can_rollback_;    // per slot: the other buffer holds the state before the last step
  bool keep_undo_ = false;
  mutable CopyStats copy_stats_;         // snapshot_into() is const
};

}  // namespace spillway::engine
