#include "engine/residency/weight_residency.h"

#include "engine/residency/unit_layout.h"
#include "engine/platform/read_mode_probe.h"

#include <algorithm>
#include <cassert>

#include <fmt/format.h>

namespace spillway::engine {

namespace {

// The matrices of a layer unit, in a fixed order: all of the block's (BlockWeights::
// for_each_matrix), or, when the expert tier serves the routed experts, all but those.
template <class Fn>
void for_each_unit_matrix(BlockWeights& b, bool experts_apart, Fn&& fn) {
  if (!experts_apart) {
    b.for_each_matrix(fn);
    return;
  }
  std::visit([&](auto& m) { m.for_each_matrix(fn); }, b.mixer);
  std::visit([&](auto& f) {
    if constexpr (std::is_same_v<std::decay_t<decltype(f)>, MoeFfnWeights>) {
      f.for_each_non_expert_matrix(fn);
    } else {
      f.for_each_matrix(fn);
    }
  }, b.ffn);
}

// The pieces a streamed layer is read in, in the order the forward kinds consume them:
// fn(std::vector<kernels::WeightMatrix*>, bool experts) once per piece. One matrix each,
// except a MoE layer's routed experts (when the layer unit holds them), one piece read
// between the shared expert's gate/up and its down projection (forward/moe_ffn.cpp).
template <class Fn>
void for_each_piece(BlockWeights& b, bool experts_apart, Fn&& fn) {
  std::visit([&](auto& m) { m.for_each_matrix([&](kernels::WeightMatrix& w) { fn(std::vector{&w}, false); }); },
             b.mixer);
  std::visit([&](auto& f) {
    if constexpr (std::is_same_v<std::decay_t<decltype(f)>, MoeFfnWeights>) {
      fn(std::vector{&f.router}, false);
      if (f.has_shared()) fn(std::vector{&f.shared_gate}, false), fn(std::vector{&f.shared_up}, false);
      if (!experts_apart && !f.experts.empty()) {
        std::vector<kernels::WeightMatrix*> all;
        for (ExpertWeights& e : f.experts) e.for_each_matrix([&](kernels::WeightMatrix& w) { all.push_back(&w); });
        fn(std::move(all), true);
      }
      if (f.has_shared()) fn(std::vector{&f.shared_down}, false);
    } else {
      f.for_each_matrix([&](kernels::WeightMatrix& w) { fn(std::vector{&w}, false); });
    }
  }, b.ffn);
}

// The most matrix pieces of one layer the forward kinds hold at once: the matrices of
// their largest matmul_multi (attention: q, k, v; delta net: qkv, gate, beta, alpha; MoE:
// router and the shared gate, up).
int32_t most_pieces_held(const BlockWeights& b) {
  // A kind not listed here: the most any kind may hold.
  int32_t n = 1;
  std::visit([&](const auto& m) {
    using T = std::decay_t<decltype(m)>;
    if constexpr (std::is_same_v<T, AttentionWeights>) {
      n = std::max(n, 3);
    } else if constexpr (std::is_same_v<T, DeltaNetWeights>) {
      n = std::max(n, m.fused_ba ? 3 : 4);
    } else {
      n = LayerWeightSource::kMaxMatricesHeld;
    }
  }, b.mixer);
  std::visit([&](const auto& f) {
    using T = std::decay_t<decltype(f)>;
    if constexpr (std::is_same_v<T, DenseFfnWeights>) {
      n = std::max(n, 2);
    } else if constexpr (std::is_same_v<T, MoeFfnWeights>) {
      n = std::max(n, f.has_shared() ? 3 : 1);  // the routed-experts piece has a streamer of its own
    } else {
      n = LayerWeightSource::kMaxMatricesHeld;
    }
  }, b.ffn);
  return std::min(n, LayerWeightSource::kMaxMatricesHeld);
}

constexpr int32_t kMaxAheadPieces = 8;

struct RowRange {
  int64_t first = 0;
  int64_t rows = 0;
};

// Rows [0, rows) cut into ranges of at most max_bytes (row_bytes each row), every range
// but the last a multiple of the 16-row tiles (at least one tile), as equal as that allows.
std::vector<RowRange> split_rows(int64_t rows, uint64_t row_bytes, uint64_t max_bytes) {
  constexpr int64_t kTileRows = 16;
  int64_t most = static_cast<int64_t>(max_bytes / std::max<uint64_t>(row_bytes, 1));
  most = std::max(kTileRows, most / kTileRows * kTileRows);
  const int64_t n = (rows + most - 1) / most;
  int64_t per = (rows + n - 1) / n;
  per = (per + kTileRows - 1) / kTileRows * kTileRows;
  std::vector<RowRange> out;
  for (int64_t first = 0; first < rows; first += per) out.push_back({first, std::min(per, rows - first)});
  return out;
}

}  // namespace

WeightResidency::WeightResidency(const Model& model, const WeightResidencyOptions& options)
    : model_(model), options_(options) {
  if (options.expert_cache_bytes >= 0) {
    for (const BlockWeights& b : model.layers()) experts_apart_ |= std::holds_alternative<MoeFfnWeights>(b.ffn);
  }
}

WeightResidency::~WeightResidency() = default;

Status WeightResidency::build_layout() {
  const Model& model = model_;
  TensorLocator locator(model);
  auto tensor_of = [&](const kernels::WeightMatrix& m) { return locator.locate(m); };

  // The non-layer set: the output matrix, and the token embeddings unless they stay on
  // disk (options_.embeddings_on_disk; tied ones are the output matrix).
  std::vector<const TensorInfo*> tensors;
  auto out = tensor_of(model.output());
  if (!out) return out.error();
  tensors.push_back(*out);
  if (model.output().data != model.token_embedding().data) {
    auto embd = tensor_of(model.token_embedding());
    if (!embd) return embd.error();
    if (options_.embeddings_on_disk) {
      embd_on_disk_ = EmbeddingOnDisk{.file_index = (*embd)->file_index, .file_offset = (*embd)->file_offset};
    } else {
      tensors.push_back(*embd);
    }
  }
  // non_layer_offsets_: the output's, then the embeddings' (== when tied or on disk).
  non_layer_offsets_ = build_stream_unit(tensors, options_.coalesce_gap_bytes, non_layer_);
  if (tensors.size() == 1) non_layer_offsets_.push_back(non_layer_offsets_[0]);

  const auto n_layers = static_cast<int32_t>(model.layers().size());
  layers_.resize(n_layers);
  for (int32_t l = 0; l < n_layers; ++l) {
    Layer& layer = layers_[l];
    layer.weights = model.layers()[l];
    layer.unit.id = l;
    tensors.clear();
    Status bound;
    for_each_unit_matrix(const_cast<BlockWeights&>(model.layers()[l]), experts_apart_, [&](const kernels::WeightMatrix& m) {
      auto t = tensor_of(m);
      if (!t) {
        if (bound.ok()) bound = t.error();
        return;
      }
      tensors.push_back(*t);
    });
    SPILLWAY_TRY(bound);
    layer.matrix_offsets = build_stream_unit(tensors, options_.coalesce_gap_bytes, layer.unit);
    if (experts_apart_) {
      // Served by the expert cache: never read through these views.
      if (auto* moe = std::get_if<MoeFfnWeights>(&layer.weights.ffn)) {
        for (ExpertWeights& e : moe->experts) e.for_each_matrix([](kernels::WeightMatrix& m) { m.data = nullptr; });
      }
    }
    for_each_unit_matrix(layer.weights, experts_apart_, [&](kernels::WeightMatrix& m) {
      if (!options_.keep_file_layout && kernels::has_tiled_layout(m.type, m.cols)) {
        m.layout = kernels::WeightLayout::Tiled;
        retile_scratch_bytes_ = std::max(retile_scratch_bytes_, kernels::retile_scratch_bytes(m.type, m.cols));
      }
    });
  }

  // The streamed pieces of every layer (pointing into layers_[l].weights: layers_ is not
  // resized from here on).
  int32_t held = 1;
  for (int32_t l = 0; l < n_layers; ++l) {
    Layer& layer = layers_[l];
    // Row pieces: the kinds hold one at a time (StepContext::matmul_in_row_pieces).
    if (options_.row_piece_bytes == 0) held = std::max(held, most_pieces_held(layer.weights));
    Status bound;
    for_each_piece(layer.weights, experts_apart_, [&](std::vector<kernels::WeightMatrix*> ms, bool experts) {
      if (!experts && ms.size() == 1 && options_.row_piece_bytes > 0) {
        if (!bound.ok()) return;
        auto t = tensor_of(*ms.front());
        if (!t) {
          bound = t.error();
          return;
        }
        const kernels::WeightMatrix& m = *ms.front();
        const auto row_bytes = static_cast<uint64_t>(kernels::row_bytes(m.type, m.cols));
        if (m.rows > 0 && row_bytes * static_cast<uint64_t>(m.rows) == (*t)->n_bytes) {
          for (const RowRange& r : split_rows(m.rows, row_bytes, options_.row_piece_bytes)) {
            Piece piece;
            piece.layer = l;
            piece.row_piece = true;
            piece.first_row = r.first;
            piece.rows = r.rows;
            piece.unit.id = static_cast<int32_t>(pieces_.size());
            TensorInfo slice = **t;  // the rows' bytes as a tensor of their own
            slice.file_offset += static_cast<uint64_t>(r.first) * row_bytes;
            slice.n_bytes = static_cast<uint64_t>(r.rows) * row_bytes;
            slice.data = nullptr;
            tensors.assign(1, &slice);
            piece.offsets = build_stream_unit(tensors, options_.coalesce_gap_bytes, piece.unit);
            max_piece_buffer_ = std::max(max_piece_buffer_, piece.unit.buffer_bytes);
            piece.matrices = ms;
            layer.pieces.push_back(piece.unit.id);
            pieces_.push_back(std::move(piece));
          }
          row_pieces_ = true;
          return;
        }
      }
      Piece piece;
      piece.layer = l;
      piece.experts = experts;
      piece.unit.id = static_cast<int32_t>(pieces_.size());
      tensors.clear();
      // Still the model's bindings into the file mapping here (rebased at load / acquire).
      for (kernels::WeightMatrix* m : ms) {
        auto t = tensor_of(*m);
        if (!t) {
          if (bound.ok()) bound = t.error();
          return;
        }
        tensors.push_back(*t);
      }
      piece.offsets = build_stream_unit(tensors, options_.coalesce_gap_bytes, piece.unit);
      uint64_t& largest = experts ? max_experts_piece_buffer_ : max_piece_buffer_;
      largest = std::max(largest, piece.unit.buffer_bytes);
      if (experts) experts_slots_ = 1 + std::max(options_.prefetch_depth, 1);
      piece.matrices = std::move(ms);
      layer.pieces.push_back(piece.unit.id);
      pieces_.push_back(std::move(piece));
    });
    SPILLWAY_TRY(bound);
  }
  // Slots: the pieces the forward holds at once, plus those read ahead.
  int32_t ahead = std::max(options_.prefetch_depth, 1);
  if (max_piece_buffer_ > 0) {
    const auto for_bytes = static_cast<int32_t>(std::min<uint64_t>(
        (options_.min_ahead_bytes + max_piece_buffer_ - 1) / max_piece_buffer_, kMaxAheadPieces));
    ahead = std::max(ahead, for_bytes);
  }
  staging_slots_ = held + ahead;
  return {};
}

Result<WeightResidency::UnitSizes> WeightResidency::measure(const Model& model,
                                                            const WeightResidencyOptions& options) {
  WeightResidency w(model, options);
  SPILLWAY_TRY(w.build_layout());
  UnitSizes sizes;
  sizes.non_layer_bytes = static_cast<int64_t>(w.non_layer_.buffer_bytes);
  for (const Layer& l : w.layers_) sizes.layer_bytes.push_back(static_cast<int64_t>(l.unit.buffer_bytes));
  sizes.staging_bytes = w.staging_bytes_when_streaming();
  sizes.staging_slots = w.staging_slots_;
  return sizes;
}

Result<std::unique_ptr<WeightResidency>> WeightResidency::create(
    const Model& model, const std::vector<bool>& resident, const WeightResidencyOptions& options,
    const WeightLoadProgress& progress) {
  const auto n_layers = static_cast<int32_t>(model.layers().size());
  if (static_cast<int32_t>(resident.size()) != n_layers) {
    return Error{fmt::format("residency: {} flags for {} layers", resident.size(), n_layers)};
  }
  if (options.prefetch_depth < 1) return Error{"residency: the prefetch depth must be at least 1"};
  std::unique_ptr<WeightResidency> w(new WeightResidency(model, options));
  SPILLWAY_TRY(w->build_layout());

  int64_t total_bytes = static_cast<int64_t>(w->non_layer_.buffer_bytes), done_bytes = 0;
  for (int32_t l = 0; l < n_layers; ++l) {
    if (resident[l]) total_bytes += static_cast<int64_t>(w->layers_[l].unit.buffer_bytes);
  }
  if (progress) progress(0, total_bytes);

  bool direct = options.direct_io;
  const bool streams = w->experts_apart_ || std::find(resident.begin(), resident.end(), false) != resident.end();
  if (direct && streams && options.read_mode_probe_bytes > 0) {
    ASSIGN_OR_RETURN(const ReadModeChoice choice,
                     choose_read_mode(model.source().files().front(), options.read_mode_probe_bytes,
                                      options.stream.read_threads, options.stream.chunk_bytes));
    direct = choice.direct;
    w->read_mode_summary_ = choice.summary();
  }
  for (const std::string& path : model.source().files()) {
    auto reader = DirectReader::open(path, direct);
    if (!reader) return reader.error();
    w->files_.push_back(std::move(*reader));
  }
  std::vector<const DirectReader*> files;
  for (const auto& f : w->files_) files.push_back(f.get());

  w->non_layer_memory_ = AlignedBytes::allocate(w->non_layer_.buffer_bytes);
  SPILLWAY_TRY(read_stream_unit(files, w->non_layer_, w->non_layer_memory_.data.get(), options.stream));
  w->output_ = model.output();
  uint8_t* output_bytes = w->non_layer_memory_.data.get() + w->non_layer_offsets_[0];
  w->output_.data = output_bytes;
  w->token_embd_ = model.token_embedding();
  w->token_embd_.data = w->embd_on_disk_ ? nullptr : w->non_layer_memory_.data.get() + w->non_layer_offsets_[1];
  // The embeddings are looked up by row: a tied output matrix is retiled only where its rows
  // can be copied back out of the tiles (float weights: embedding_row then gathers a row).
  const bool tied = model.output().data == model.token_embedding().data;
  if ((!tied || kernels::tiled_rows_readable(w->output_.type)) && !options.keep_file_layout &&
      kernels::has_tiled_layout(w->output_.type, w->output_.cols)) {
    std::vector<uint8_t> scratch(kernels::retile_scratch_bytes(w->output_.type, w->output_.cols));
    kernels::retile_in_place(w->output_.type, output_bytes, w->output_.rows, w->output_.cols, scratch.data());
    w->output_.layout = kernels::WeightLayout::Tiled;
    if (tied) w->token_embd_.layout = kernels::WeightLayout::Tiled;
  }
  w->retile_scratch_.resize(w->retile_scratch_bytes_);
  done_bytes += static_cast<int64_t>(w->non_layer_.buffer_bytes);
  if (progress) progress(done_bytes, total_bytes);

  for (int32_t l = 0; l < n_layers; ++l) {
    if (resident[l]) {
      SPILLWAY_TRY(w->load_layer(l));
      done_bytes += static_cast<int64_t>(w->layers_[l].unit.buffer_bytes);
      if (progress) progress(done_bytes, total_bytes);
    } else {
      w->unload_layer(l);
    }
  }
  if (streams) {
    // Model::open read the layers' small tensors (norms, biases) through the file mapping;
    // each fault read the device's readahead window around them (read_ahead_kb: 8 MiB on
    // the dev VM, ~370 MB of page cache for a 22-layer model), charged to the cgroup and
    // never read again (the weights come through DirectReader): drop it.
    for (const auto& f : w->files_) f->drop_cached();
  }
  if (w->experts_apart_) {
    ExpertCacheOptions cache_options{.policy = options.expert_cache_policy,
                                     .cache_bytes = options.expert_cache_bytes,
                                     .read_threads = options.expert_read_threads,
                                     .retile = !options.keep_file_layout};
    ASSIGN_OR_RETURN(w->experts_, ExpertCache::create(model, files, cache_options));
  }
  w->reschedule();
  return w;
}

void WeightResidency::rebase(Layer& layer, const uint8_t* buffer) const {
  size_t i = 0;
  for_each_unit_matrix(layer.weights, experts_apart_, [&](kernels::WeightMatrix& m) { m.data = buffer + layer.matrix_offsets[i++]; });
}

void WeightResidency::retile_layer(const Layer& layer, uint8_t* buffer, std::vector<uint8_t>& scratch) const {
  // Reads only the matrices' shapes and layouts, never `data` (which the engine thread
  // rebases), so the I/O thread may run it while the engine works.
  size_t i = 0;
  for_each_unit_matrix(const_cast<BlockWeights&>(layer.weights), experts_apart_, [&](const kernels::WeightMatrix& w) {
    const uint64_t offset = layer.matrix_offsets[i++];
    if (w.layout != kernels::WeightLayout::Tiled) return;
    kernels::retile_in_place(w.type, buffer + offset, w.rows, w.cols, scratch.data());
  });
}

void WeightResidency::reschedule() {
  // Two cycles, each consumed in its own order: the matrices, and (MoE layers without the
  // expert tier) the routed-experts pieces, whose slots are sized apart so that the
  // matrices' slots stay small.
  std::vector<const StreamUnit*> order, experts_order;
  for (const Layer& layer : layers_) {
    if (layer.memory.data) continue;
    for (int32_t p : layer.pieces) (pieces_[p].experts ? experts_order : order).push_back(&pieces_[p].unit);
  }
  // Units are pieces, their id the index in pieces_; runs on the streamer's reader
  // threads, several at once: each with its own scratch. Reads only the matrices' shapes
  // and layouts, never `data` (which the engine thread rebases).
  auto retile_streamed = [this](const StreamUnit& unit, uint8_t* buffer) {
    thread_local std::vector<uint8_t> scratch;
    const Piece& piece = pieces_[unit.id];
    for (size_t i = 0; i < piece.matrices.size(); ++i) {
      const kernels::WeightMatrix& w = *piece.matrices[i];
      if (w.layout != kernels::WeightLayout::Tiled) continue;
      scratch.resize(std::max(scratch.size(), retile_scratch_bytes_));
      kernels::retile_in_place(w.type, buffer + piece.offsets[i], piece.row_piece ? piece.rows : w.rows, w.cols,
                               scratch.data());
    }
  };
  std::vector<const DirectReader*> files;
  for (const auto& f : files_) files.push_back(f.get());
  if (!order.empty() && !streamer_) {
    streamer_ = std::make_unique<WeightStreamer>(files, staging_slots_, max_piece_buffer_, retile_streamed,
                                                 options_.stream);
  }
  if (!experts_order.empty() && !experts_streamer_) {
    experts_streamer_ = std::make_unique<WeightStreamer>(files, experts_slots_, max_experts_piece_buffer_,
                                                         retile_streamed, options_.stream);
  }
  if (streamer_) streamer_->set_schedule(std::move(order));
  if (experts_streamer_) experts_streamer_->set_schedule(std::move(experts_order));
}

Status WeightResidency::load_layer(int32_t layer_index) {
  Layer& layer = layers_[layer_index];
  AlignedBytes memory = AlignedBytes::allocate(layer.unit.buffer_bytes);
  std::vector<const DirectReader*> files;
  for (const auto& f : files_) files.push_back(f.get());
  SPILLWAY_TRY(read_stream_unit(files, layer.unit, memory.data.get(), options_.stream));
  retile_layer(layer, memory.data.get(), retile_scratch_);
  layer.memory = std::move(memory);
  rebase(layer, layer.memory.data.get());
  return {};
}

void WeightResidency::unload_layer(int32_t layer_index) {
  Layer& layer = layers_[layer_index];
  layer.memory = AlignedBytes{};
  // Until acquire_layer points them at a staging slot, a streamed layer's matrices point
  // nowhere: a use without acquire faults instead of silently reading the file mapping.
  for_each_unit_matrix(layer.weights, experts_apart_, [](kernels::WeightMatrix& m) { m.data = nullptr; });
}

Status WeightResidency::make_resident(int32_t layer_index) {
  if (is_resident(layer_index)) return {};
  SPILLWAY_TRY(load_layer(layer_index));
  reschedule();
  return {};
}

void WeightResidency::make_streamed(int32_t layer_index) {
  if (!is_resident(layer_index)) return;
  unload_layer(layer_index);
  reschedule();
}

Result<const BlockWeights*> WeightResidency::acquire_layer(int32_t layer_index) {
  // A streamed layer's matrices point nowhere until acquire_matrices / acquire_experts.
  return &layers_[layer_index].weights;
}

Status WeightResidency::acquire_piece(Layer& layer, int32_t p) {
  if (std::find(layer.held.begin(), layer.held.end(), p) != layer.held.end()) return {};
  Piece& piece = pieces_[p];
  auto buffer = (piece.experts ? experts_streamer_ : streamer_)->acquire(piece.unit.id);
  if (!buffer) return buffer.error();
  for (size_t i = 0; i < piece.matrices.size(); ++i) piece.matrices[i]->data = *buffer + piece.offsets[i];
  layer.held.push_back(p);
  return {};
}

void WeightResidency::release_piece(Layer& layer, int32_t p) {
  auto it = std::find(layer.held.begin(), layer.held.end(), p);
  if (it == layer.held.end()) return;
  layer.held.erase(it);
  Piece& piece = pieces_[p];
  if (!piece.row_piece) {
    for (kernels::WeightMatrix* m : piece.matrices) m->data = nullptr;
  }
  (piece.experts ? experts_streamer_ : streamer_)->release(piece.unit.id);
}

Status WeightResidency::acquire_matrices(int32_t layer_index, std::span<const kernels::WeightMatrix* const> ms) {
  Layer& layer = layers_[layer_index];
  if (layer.memory.data) return {};
  for (const kernels::WeightMatrix* m : ms) {
    for (int32_t p : layer.pieces) {
      const Piece& piece = pieces_[p];
      if (piece.experts || piece.row_piece || piece.matrices.front() != m) continue;
      SPILLWAY_TRY(acquire_piece(layer, p));
      break;
    }
  }
  return {};
}

void WeightResidency::release_matrices(int32_t layer_index, std::span<const kernels::WeightMatrix* const> ms) {
  Layer& layer = layers_[layer_index];
  if (layer.memory.data) return;
  for (const kernels::WeightMatrix* m : ms) {
    for (int32_t p : layer.pieces) {
      if (!pieces_[p].experts && !pieces_[p].row_piece && pieces_[p].matrices.front() == m) release_piece(layer, p);
    }
  }
}

int32_t WeightResidency::row_piece_index(const Layer& layer, const kernels::WeightMatrix* m, int32_t j) const {
  for (int32_t p : layer.pieces) {
    const Piece& piece = pieces_[p];
    if (piece.row_piece && piece.matrices.front() == m && j-- == 0) return p;
  }
  return -1;
}

int32_t WeightResidency::row_pieces(int32_t layer_index, const kernels::WeightMatrix* m) const {
  const Layer& layer = layers_[layer_index];
  if (!row_pieces_ || layer.memory.data) return 0;
  int32_t n = 0;
  for (int32_t p : layer.pieces) n += pieces_[p].row_piece && pieces_[p].matrices.front() == m;
  return n;
}

Result<kernels::WeightMatrix> WeightResidency::acquire_row_piece(int32_t layer_index, const kernels::WeightMatrix* m,
                                                                 int32_t j, int64_t* first_row) {
  Layer& layer = layers_[layer_index];
  const int32_t p = layer.memory.data ? -1 : row_piece_index(layer, m, j);
  if (p < 0) return Error{fmt::format("layer {}: no row piece {} of that matrix is streamed", layer_index, j)};
  const Piece& piece = pieces_[p];
  auto buffer = streamer_->acquire(piece.unit.id);
  if (!buffer) return buffer.error();
  layer.held.push_back(p);
  kernels::WeightMatrix view = *m;
  view.data = *buffer + piece.offsets[0];
  view.rows = piece.rows;
  *first_row = piece.first_row;
  return view;
}

void WeightResidency::release_row_piece(int32_t layer_index, const kernels::WeightMatrix* m, int32_t j) {
  Layer& layer = layers_[layer_index];
  const int32_t p = row_piece_index(layer, m, j);
  if (p >= 0) release_piece(layer, p);
}

void WeightResidency::release_layer(int32_t layer_index) {
  if (experts_) experts_->finish_layer(layer_index);
  Layer& layer = layers_[layer_index];
  while (!layer.held.empty()) release_piece(layer, layer.held.back());
}

Result<std::vector<const ExpertWeights*>> WeightResidency::acquire_experts(int32_t layer,
                                                                          std::span<const int32_t> experts) {
  if (experts_) return experts_->acquire(layer, experts);
  Layer& l = layers_[layer];
  if (!l.memory.data) {
    // The layer's routed experts are one piece, held until release_layer.
    for (int32_t p : l.pieces) {
      if (pieces_[p].experts) SPILLWAY_TRY(acquire_piece(l, p));
    }
  }
  return experts_of_block(l.weights, layer, experts);
}

Result<std::vector<const ExpertWeights*>> WeightResidency::begin_acquire_experts(int32_t layer,
                                                                                std::span<const int32_t> experts,
                                                                                std::vector<uint8_t>& ready) {
  if (experts_) return experts_->begin_acquire(layer, experts, ready);
  return LayerWeightSource::begin_acquire_experts(layer, experts, ready);
}

Status WeightResidency::wait_expert(int32_t layer, size_t index) {
  return experts_ ? experts_->wait(index) : Status{};
}

void WeightResidency::release_experts(int32_t layer) {
  if (experts_) experts_->release(layer);
}

Status WeightResidency::prefetch_experts(int32_t layer, std::span<const int32_t> experts) {
  if (!experts_ || experts.empty()) return {};
  auto views = experts_->acquire(layer, experts);
  if (views) experts_->release(layer);  // a failed acquire has unpinned them itself
  if (!views) return views.error();
  return {};
}

int32_t WeightResidency::max_experts_per_acquire() const {
  return experts_ ? experts_->max_pin() : LayerWeightSource::max_experts_per_acquire();
}

ExpertCacheStats WeightResidency::expert_cache_stats() const {
  return experts_ ? experts_->stats() : ExpertCacheStats{};
}

Result<const uint8_t*> WeightResidency::embedding_row(int32_t id, uint8_t* scratch) const {
  if (!embd_on_disk_) return LayerWeightSource::embedding_row(id, scratch);
  const int64_t row_bytes = kernels::row_bytes(token_embd_.type, token_embd_.cols);
  const DirectReader& file = *files_[embd_on_disk_->file_index];
  SPILLWAY_TRY(file.read_cached(embd_on_disk_->file_offset + uint64_t(id) * uint64_t(row_bytes),
                                static_cast<uint64_t>(row_bytes), scratch));
  return scratch;
}

int32_t WeightResidency::resident_layers() const {
  int32_t n = 0;
  for (const Layer& l : layers_) n += l.memory.data != nullptr;
  return n;
}

int64_t WeightResidency::resident_weight_bytes() const {
  int64_t bytes = static_cast<int64_t>(non_layer_.buffer_bytes);
  for (const Layer& l : layers_) {
    if (l.memory.data) bytes += static_cast<int64_t>(l.unit.buffer_bytes);
  }
  return bytes;
}

int64_t WeightResidency::staging_bytes() const {
  int64_t bytes = 0;
  for (const WeightStreamer* s : {streamer_.get(), experts_streamer_.get()}) {
    if (s) bytes += static_cast<int64_t>(s->slots()) * static_cast<int64_t>(s->slot_bytes());
  }
  return bytes;
}

int64_t WeightResidency::streamed_bytes_per_step() const {
  int64_t bytes = 0;
  for (const Layer& l : layers_) {
    if (l.memory.data) continue;
    for (int32_t p : l.pieces) {
      for (const UnitRange& r : pieces_[p].unit.ranges) bytes += static_cast<int64_t>(r.bytes);
    }
  }
  return bytes;
}

StreamerStats WeightResidency::streamer_stats() const {
  StreamerStats sum;
  for (const WeightStreamer* s : {streamer_.get(), experts_streamer_.get()}) {
    if (!s) continue;
    const StreamerStats one = s->stats();
    sum.bytes_read += one.bytes_read;
    sum.read_seconds += one.read_seconds;
    sum.stall_seconds += one.stall_seconds;
    sum.units_read += one.units_read;
    sum.restarts += one.restarts;
  }
  return sum;
}

bool WeightResidency::direct_io() const {
  return !files_.empty() && files_.front()->direct();
}

}  // namespace spillway::engine
