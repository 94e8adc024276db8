// Exact hierarchical top-K over a vocabulary row (the seed's "chunk maxima -> top-K chunks
// -> top-K inside"): one pass takes the maximum of every chunk of kTopKChunk logits; the
// k-th largest chunk maximum t is a lower bound of the k-th largest logit (the k best
// chunks each hold a logit >= t), so the k best logits lie in the chunks whose maximum is
// >= t and are found by scanning only those (with fewer chunks than k, all). The result equals a partial sort of all
// (logit, id) pairs by (logit descending, id ascending): ties go to the lower id.
//
// softmax_sum() is the normalizer the plain RowSampler path computes (sum in double of
// float exp(l - max) in the plain path's order), skipping only chunks whose every term is
// exactly 0.0f, so it is bit-identical to the plain sum.
//
// Thread: an instance is one thread's scratch. Logits must be finite (no NaN).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace spillway::engine::diffusion {

inline constexpr int32_t kTopKChunk = 64;

class VocabTopK {
 public:
  // The k largest (logit, id) pairs of logits[0, n), best first; k is clamped to [1, n].
  // Also fills the chunk maxima that softmax_sum() reuses.
  void top_k(const float* logits, int32_t n, int32_t k, std::vector<std::pair<float, int32_t>>& out);

  // After top_k() on the same row: sum over i of double(expf(logits[i] - max)) with max the
  // row's largest logit, in the plain path's order: index `first` (the row's best id), then
  // the others ascending with index 0 taking `first`'s place (the plain path swaps the best
  // to the front). Chunks whose maximum is below max - 110 contribute exact zeros and are
  // skipped.
  double softmax_sum(const float* logits, int32_t n, float max, int32_t first) const;

  // Chunks scanned by the last top_k() refine (for tests and the bench).
  int32_t chunks_scanned() const { return chunks_scanned_; }

 private:
  std::vector<float> chunk_max_;
  std::vector<int32_t> chunk_order_;
  int32_t chunks_scanned_ = 0;
};

}  // namespace spillway::engine::diffusion
