// The weights the forward reads when a memory budget applies: every residency unit is
// either resident (copied once into anonymous memory) or streamed (read from disk into a
// staging slot each step by the WeightStreamer, ahead of use).
//
// Units: the non-layer set (token embeddings, output matrix; always resident) and each
// decoder layer's matrices; with the expert tier on (expert_cache_bytes >= 0) the routed
// experts of MoE layers are units of their own in an ExpertCache, and a layer unit holds
// the rest (attention, router, shared expert). A layer's 1-D tensors (norms, biases) are small float copies
// the Model already owns and are never streamed.
//
// A resident layer is one buffer. A streamed layer is streamed in pieces: each of its
// matrices is a unit of its own (a MoE layer without the expert tier: its routed experts
// together are one more), in the order the forward consumes them, and the kinds acquire
// exactly the matrices each matmul reads (acquire_matrices, through StepContext). The
// streamer's slots are sized by the largest piece, not the largest layer: held + ahead
// slots, where held is the most pieces a kind holds at once and ahead the pieces read
// ahead (prefetch_depth, more for small pieces up to min_ahead_bytes). Routed-experts
// pieces stream through a second streamer of 1 + prefetch_depth slots of their own size.
//
// Layout comes from the Model's bindings: every WeightMatrix of a freshly loaded Model
// points at its tensor's bytes in the file mapping, which gives the file and offset to read.
// The mapping itself is never read for these matrices, so the page cache does not fill
// with weights (reads go through DirectReader).
//
// Matrices with a tiled layout (F32/F16/BF16, Q8_0, Q4_0; kernels::has_tiled_layout) are
// rearranged in place into it (kernels::WeightLayout::Tiled, unless keep_file_layout) once
// their bytes are in memory: resident layers when they are loaded, streamed layers by the
// streamer's I/O thread after each read, the output matrix (unless tied to the embeddings)
// at creation. The kernels give bit-identical results on both
// layouts, so this changes speed only.
//
// Thread contract: everything here runs on the engine thread (except the retiling of streamed
// units, on the I/O thread with its own scratch); residency changes (make_resident /
// make_streamed) happen between forward steps. Outputs never depend on which layers are
// resident: the same bytes are read either way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/platform/direct_reader.h"
#include "engine/residency/expert_cache.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/model/model.h"
#include "engine/residency/weight_streamer.h"

namespace spillway::engine {

// Reading resident weights at creation: called on the creating thread with the bytes read
// so far and the total (the non-layer set plus the resident layers), first with 0.
using WeightLoadProgress = std::function<void(int64_t done_bytes, int64_t total_bytes)>;

struct WeightResidencyOptions {
  // Streamed pieces read ahead of those the forward holds: at least this many, more while
  // they hold less than min_ahead_bytes (at most 8).
  int32_t prefetch_depth = 2;
  uint64_t min_ahead_bytes = 32ull << 20;
  StreamerOptions stream{};               // requests in flight and their size
  bool direct_io = true;                  // O_DIRECT where the filesystem allows it
  // When something streams at creation and direct_io: read this many bytes of the model
  // file with O_DIRECT and buffered + DONTNEED, and pick by prefer_direct (read_mode_probe.h:
  // buffered unless O_DIRECT is clearly faster). 256 MiB per mode and round (~0.2 s each at
  // 1.5 GB/s): 64 MiB measured a few hundred milliseconds of a disk whose rate moves by 40%.
  // 0: no measurement, direct_io decides.
  uint64_t read_mode_probe_bytes = 256ull << 20;
  uint64_t coalesce_gap_bytes = 1 << 20;  // merge a layer's file ranges closer than this
  bool keep_file_layout = false;          // no retiling: the kernels read the file's layout
  // The expert tier (expert_cache.h): < 0 off (a MoE layer's unit holds all its routed
  // experts); >= 0 routed experts leave the layer units and live in a cache of this many
  // bytes of slots (at least the fewest slots the model needs).
  int64_t expert_cache_bytes = -1;
  int32_t expert_read_threads = 8;        // parallel expert reads (queue depth)
  ExpertCachePolicy expert_cache_policy = ExpertCachePolicy::LruFloor;
  // An untied token-embedding table is not copied into memory: embedding_row reads the
  // rows each step needs through the page cache. For plans that stream (the file stays
  // needed anyway): a step reads a row per token, and the table's bytes go to layers.
  bool embeddings_on_disk = false;
  // Row pieces: a streamed matrix larger than this streams as row ranges of at most this
  // many bytes (multiples of the 16-row tiles; a matrix narrower than that streams in
  // 16-row pieces), each computed as its own matmul as it arrives (StepContext::
  // matmul_multi, LayerWeightSource::row_pieces), so the kinds hold one piece at a time and
  // the staging slots are this size, not the largest matrix's. 0: whole matrices, the
  // kinds hold all the matrices of a matmul at once.
  uint64_t row_piece_bytes = 4ull << 20;
};

class WeightResidency final : public LayerWeightSource {
 public:
  // resident: one flag per layer. Reads the non-layer set and the resident layers now.
  static Result<std::unique_ptr<WeightResidency>> create(const Model& model,
                                                         const std::vector<bool>& resident,
                                                         const WeightResidencyOptions& options,
                                                         const WeightLoadProgress& progress = {});
  ~WeightResidency() override;

  // Bytes each unit takes in memory, without reading or allocating anything.
  struct UnitSizes {
    int64_t non_layer_bytes = 0;
    std::vector<int64_t> layer_bytes;
    int64_t staging_bytes = 0;  // the streamer's slots, once any layer is streamed
    int32_t staging_slots = 0;
  };
  static Result<UnitSizes> measure(const Model& model, const WeightResidencyOptions& options);

  Result<const BlockWeights*> acquire_layer(int32_t layer) override;
  // From the expert cache when it is on, else from the acquired layer (whose unit then
  // holds every routed expert).
  Result<std::vector<const ExpertWeights*>> acquire_experts(int32_t layer,
                                                           std::span<const int32_t> experts) override;
  Result<std::vector<const ExpertWeights*>> begin_acquire_experts(int32_t layer, std::span<const int32_t> experts,
                                                                 std::vector<uint8_t>& ready) override;
  Status wait_expert(int32_t layer, size_t index) override;
  void release_experts(int32_t layer) override;
  int32_t max_experts_per_acquire() const override;
  // With the expert tier: acquires (reads the misses in parallel) and releases at once.
  Status prefetch_experts(int32_t layer, std::span<const int32_t> experts) override;
  void release_layer(int32_t layer) override;
  Status acquire_matrices(int32_t layer, std::span<const kernels::WeightMatrix* const> ms) override;
  // With options.row_piece_bytes > 0, a streamed layer's matrices (all but a MoE layer's
  // routed experts) are row pieces: acquire_matrices is not used for them.
  int32_t row_pieces(int32_t layer, const kernels::WeightMatrix* m) const override;
  Result<kernels::WeightMatrix> acquire_row_piece(int32_t layer, const kernels::WeightMatrix* m, int32_t j,
                                                  int64_t* first_row) override;
  void release_row_piece(int32_t layer, const kernels::WeightMatrix* m, int32_t j) override;
  void release_matrices(int32_t layer, std::span<const kernels::WeightMatrix* const> ms) override;
  // With options.embeddings_on_disk (and untied embeddings) `data` is null and
  // embedding_row reads a row through the page cache.
  const kernels::WeightMatrix& token_embedding() const override { return token_embd_; }
  Result<const uint8_t*> embedding_row(int32_t id, uint8_t* scratch) const override;
  const kernels::WeightMatrix& output() const override { return output_; }

  // Between steps. make_resident reads the layer into memory (an Error leaves it streamed);
  // make_streamed frees its memory.
  Status make_resident(int32_t layer);
  void make_streamed(int32_t layer);

  int32_t n_layers() const { return static_cast<int32_t>(layers_.size()); }
  bool is_resident(int32_t layer) const { return layers_[layer].memory.data != nullptr; }
  int32_t resident_layers() const;
  int64_t layer_bytes(int32_t layer) const { return static_cast<int64_t>(layers_[layer].unit.buffer_bytes); }
  int64_t non_layer_bytes() const { return static_cast<int64_t>(non_layer_.buffer_bytes); }
  int64_t resident_weight_bytes() const;   // non-layer set + resident layers
  int64_t staging_bytes() const;           // 0 until something is streamed
  // What the streamer's slots take once something is streamed (whether or not it is now).
  int64_t staging_bytes_when_streaming() const {
    return int64_t{staging_slots_} * int64_t(max_piece_buffer_) +
           int64_t{experts_slots_} * int64_t(max_experts_piece_buffer_);
  }
  int32_t staging_slots() const { return staging_slots_ + experts_slots_; }
  int64_t streamed_bytes_per_step() const; // file bytes the streamed layers read per step
  StreamerStats streamer_stats() const;
  bool expert_tier() const { return experts_ != nullptr; }
  // The expert cache under memory pressure (between steps): frees / re-adds up to n slots;
  // returns how many (0 without the expert tier). See ExpertCache::shrink / grow.
  int32_t shrink_expert_cache(int32_t n) { return experts_ ? experts_->shrink(n) : 0; }
  int32_t grow_expert_cache(int32_t n) { return experts_ ? experts_->grow(n) : 0; }
  int32_t expert_cache_shrinkable_slots() const {
    return experts_ ? experts_->max_pin() - experts_->min_slots() : 0;
  }
  int32_t expert_cache_missing_slots() const {
    return experts_ ? experts_->created_slots() - experts_->max_pin() : 0;
  }
  int64_t expert_slot_bytes() const { return experts_ ? experts_->slot_bytes() : 0; }
  ExpertCacheStats expert_cache_stats() const;  // zeros when the expert tier is off
  bool direct_io() const;
  // One line: how reads were chosen at creation (empty when not measured).
  const std::string& read_mode_summary() const { return read_mode_summary_; }

 private:
  // A streamed unit: one matrix of a layer, or a MoE layer's routed experts together.
  struct Piece {
    StreamUnit unit;                               // unit.id: its index in pieces_
    int32_t layer = 0;
    bool experts = false;                          // the routed experts of its layer
    std::vector<kernels::WeightMatrix*> matrices;  // in the layer's `weights`
    std::vector<uint64_t> offsets;                 // of each matrix in the piece's buffer
    // A row piece (options_.row_piece_bytes > 0): rows [first_row, first_row + rows) of
    // its one matrix, handed out as a view (the layer's matrix keeps pointing nowhere).
    bool row_piece = false;
    int64_t first_row = 0;
    int64_t rows = 0;
  };
  struct Layer {
    StreamUnit unit;
    // Where each matrix's first byte sits in the unit's buffer, in
    // BlockWeights::for_each_matrix order.
    std::vector<uint64_t> matrix_offsets;
    std::vector<int32_t> pieces;  // its streamed pieces, in consumption order
    std::vector<int32_t> held;    // pieces acquired from the streamer, not released yet
    AlignedBytes memory;       // resident copy, or empty
    BlockWeights weights;      // the model's layer, matrices rebased to memory or a slot
  };

  WeightResidency(const Model& model, const WeightResidencyOptions& options);
  // Lays out the units (which file ranges, where each matrix lands); no I/O.
  Status build_layout();
  void rebase(Layer& layer, const uint8_t* buffer) const;
  Status acquire_piece(Layer& layer, int32_t piece);
  // The j-th row piece of matrix m in layer.pieces, or -1.
  int32_t row_piece_index(const Layer& layer, const kernels::WeightMatrix* m, int32_t j) const;
  void release_piece(Layer& layer, int32_t piece);
  // Rearranges a layer unit's tileable matrices in `buffer` into tiles, in place.
  void retile_layer(const Layer& layer, uint8_t* buffer, std::vector<uint8_t>& scratch) const;
  Status load_layer(int32_t layer);  // read into memory (no rescheduling)
  void unload_layer(int32_t layer);  // free its memory (no rescheduling)
  void reschedule();  // streamed layers in forward order -> the streamer

  const Model& model_;
  WeightResidencyOptions options_;
  std::vector<std::unique_ptr<DirectReader>> files_;
  std::vector<Layer> layers_;
  StreamUnit non_layer_;
  std::vector<uint64_t> non_layer_offsets_;  // the output matrix's, then the token embeddings
  struct EmbeddingOnDisk {
    int file_index = 0;
    uint64_t file_offset = 0;  // of row 0
  };
  std::optional<EmbeddingOnDisk> embd_on_disk_;  // options_.embeddings_on_disk and not tied
  AlignedBytes non_layer_memory_;
  kernels::WeightMatrix token_embd_, output_;
  std::vector<Piece> pieces_;
  uint64_t max_piece_buffer_ = 0;           // the matrices' pieces
  int32_t staging_slots_ = 0;
  bool row_pieces_ = false;                 // some matrix streams as row pieces
  uint64_t max_experts_piece_buffer_ = 0;   // routed-experts pieces (expert tier off)
  int32_t experts_slots_ = 0;               // 0: none
  size_t retile_scratch_bytes_ = 0;
  std::vector<uint8_t> retile_scratch_;     // engine thread
  std::string read_mode_summary_;
  std::unique_ptr<WeightStreamer> streamer_;  // created when the first layer is streamed
  std::unique_ptr<WeightStreamer> experts_streamer_;  // the routed-experts pieces
  bool experts_apart_ = false;                // routed experts are not in the layer units
  std::unique_ptr<ExpertCache> experts_;      // the expert tier, when experts_apart_
};

}  // namespace spillway::engine
