// The stages of the sampler chain (engine/sampling.h builds the chain from SamplingParams).
//
// A row goes through the stages in order; each stage's apply() reads and narrows the row,
// and accept(token) tells stateful stages (the constraint) which token was chosen:
//
//   logit stages (in place on the row's logits, over the whole vocabulary):
//     LogitBias -> Penalties (repetition / presence / frequency) -> BannedTokens
//     (min_tokens' EOS ban) -> ConstraintMask (structured output)
//   candidate stages (on SamplingRow's candidate set, never sorting the vocabulary):
//     Temperature -> TopK -> TopP -> MinP -> Draw        or      Greedy
//
// What is still allowed is never a sorted vocabulary:
// - the whole row (no top-k): top-p / min-p record their cut-offs on the row (top_p,
//   min_p) and DrawStage hands the row to band_draw (band_draw.h): vectorized passes
//   through nested logit bands, the same rank-ordered cut-offs and draw as the old sampler;
// - candidates: after top-k, the k best (found by a count histogram, nth_element on the
//   few ids it leaves, then a sort of the k) in rank order; top-p / min-p / the draw then
//   walk them exactly as the old sampler did.
// Probabilities (softmax of logit * 1/T, as floats normalized by a double sum, over the set
// at the time they are first needed) are computed once and not renormalized by later
// truncation, as in the old sampler.
//
// Identical draws. For the same seed the chain draws the same uniform numbers from the
// same mt19937_64 as the old sort-based sampler and maps them through the same
// rank-ordered inverse CDF, so it picks the same tokens. The only difference is the order
// of floating-point sums (the softmax normalizer, the top-p and draw cumulative masses),
// which can move a boundary by a few ulps of a double (and, when the normalizer's last bit
// differs, very rarely round one probability's float the other way): a different token
// only when the uniform number falls that close to a cumulative boundary.
//
// Thread contract: a stage belongs to its Sampler (one sequence); a Sampler and the
// SamplerScratch it is given are used by one thread at a time, any thread (the runner
// samples rows on the kernel pool).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace spillway::engine {

// One candidate token: its (possibly biased / penalized) logit, id and probability (valid
// once SamplingRow::have_probs).
struct Candidate {
  float logit;
  int32_t id;
  float p;
};

// Rank order: a before b.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Reusable buffers for sampling one row: one per thread that samples (a row slot of the
// runner), never per token. Grows to the vocabulary once.
struct SamplerScratch {
  std::vector<float> logits;          // the row copied from the forward's output
  std::vector<Candidate> candidates;  // the candidate set (after top-k); band_draw's packed set
  std::vector<float> probs;           // band_draw: probability per id; the candidates' exps
  std::vector<int32_t> count;         // per bucket: ids (top-k)
  std::vector<float> raw_logits;      // logits before any stage, kept for logprobs
  std::vector<int32_t> ids;           // top-logprob selection
  std::vector<float> packed_logits;   // band_draw: one logit band's logits, probabilities, ids
  std::vector<float> packed_probs;
  std::vector<int32_t> packed_ids;
  std::vector<uint64_t> allowed;      // the constraint's bitmask
};

// The row being sampled and where it is in the chain. Spans are owned by the caller and
// valid for the duration of one Sampler::sample call.
struct SamplingRow {
  float* logits = nullptr;  // [n_vocab], modified by the logit stages
  int32_t n_vocab = 0;
  std::span<const int32_t> history;  // prompt + generated tokens
  size_t n_prompt = 0;               // how many of history are prompt
  std::span<const int32_t> banned;   // ids that must not be chosen this step
  std::mt19937_64* rng = nullptr;    // the sequence's generator
  SamplerScratch* scratch = nullptr;

  float inv_temperature = 1.0f;
  // Cut-offs on the whole row (no candidate set), applied by the draw (band_draw.h):
  // TopPStage / MinPStage record them here.
  float top_p = 1.0f;
  float min_p = 0.0f;

  // Logit range over the finite logits (ensure_range: kernels::row_range, one vectorized pass).
  bool have_range = false;
  float max_logit = 0.0f, min_logit = 0.0f;
  int32_t best_id = 0;    // the best-ranked id
  int32_t n_finite = 0;   // ids whose logit is not -inf

  // Candidate state (after top-k): cand[0, n_cand) in rank order.
  bool have_candidates = false;
  Candidate* cand = nullptr;  // = scratch->candidates.data()
  size_t n_cand = 0;
  bool have_probs = false;

  int32_t token = -1;  // the result, set by Greedy or Draw

  void ensure_range();
  // Softmax over the candidates (after top-k), into Candidate::p.
  void ensure_candidate_probs();
};

// The structured-output hook: which tokens may come next for one sequence. Implemented by
// the grammar matcher (issue 18); AllowedSetConstraint below is a grammar-free stand-in.
//
// Thread contract: called on whatever thread samples the sequence's row (a kernel pool
// thread), one call at a time per constraint; an implementation that computes its mask
// ahead (e.g. while the forward runs) only copies it here. No call may throw.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Writes the tokens allowed next as a bitmask: token t is allowed iff bit (t % 64) of
  // allowed[t / 64] is set. allowed.size() == (n_vocab + 63) / 64; it arrives all zero.
  // Bits at or above n_vocab are ignored. EOS belongs in the mask only where the grammar
  // may end. An all-zero mask leaves no candidate: the sampler then returns token 0 as it
  // does for any row with every logit at -inf.
  virtual void fill_allowed(std::span<uint64_t> allowed, int32_t n_vocab) = 0;
  // The token the sampler chose (the one now appended to the sequence).
  virtual void accept(int32_t token) = 0;
  // Optional: compute the next mask ahead (engine/sampling/mask_prefetcher.h calls it on a
  // helper thread while the forward runs); fill_allowed then only copies it. Never
  // concurrently with fill_allowed / accept on the same constraint.
  virtual void prepare() {}
  // The one token allowed next when the constraint allows exactly one (a forced token),
  // else -1. May compute the mask (as prepare). The Sampler then appends it without
  // running the chain (sampling.h) and calls accept(token) as usual.
  virtual int32_t forced_token() { return -1; }
};

// Test stand-in: a fixed set of allowed ids; records what it was told to accept.
class AllowedSetConstraint final : public TokenConstraint {
 public:
  explicit AllowedSetConstraint(std::vector<int32_t> allowed) : allowed_(std::move(allowed)) {}
  void fill_allowed(std::span<uint64_t> allowed, int32_t n_vocab) override;
  void accept(int32_t token) override { accepted_.push_back(token); }
  const std::vector<int32_t>& accepted() const { return accepted_; }

 private:
  std::vector<int32_t> allowed_;
  std::vector<int32_t> accepted_;
};

class SamplerStage {
 public:
  virtual ~SamplerStage() = default;
  virtual void apply(SamplingRow& row) = 0;
  // The chosen token, after the last stage ran. Default: stateless.
  virtual void accept(int32_t /*token*/) {}
};

// Adds each (id, bias) to the logit of id (ids outside the vocabulary are skipped).
class LogitBiasStage final : public SamplerStage {
 public:
  explicit LogitBiasStage(std::vector<std::pair<int32_t, float>> bias) : bias_(std::move(bias)) {}
  void apply(SamplingRow& row) override;

 private:
  std::vector<std::pair<int32_t, float>> bias_;
};

// repetition_penalty (HF / llama.cpp: divide positive, multiply negative logits) over every
// id in history; then presence / frequency (OpenAI: minus presence + frequency * count)
// over the generated part. Counts are recomputed from history on each call — O(history),
// small next to O(vocabulary) — so forced tokens and rewinds need no bookkeeping. The
// per-id count arrays are sized to the vocabulary on first use and belong to the sequence.
class PenaltyStage final : public SamplerStage {
 public:
  PenaltyStage(float repetition, float presence, float frequency)
      : repetition_(repetition), presence_(presence), frequency_(frequency) {}
  void apply(SamplingRow& row) override;

 private:
  void count(const SamplingRow& row, size_t first);
  float repetition_, presence_, frequency_;
  std::vector<int32_t> counts_;   // per id, zero between calls
  std::vector<int32_t> touched_;  // ids with a nonzero count
};

// Sets the logits of SamplingRow::banned ids to -inf (min_tokens' EOS ban).
class BannedTokensStage final : public SamplerStage {
 public:
  void apply(SamplingRow& row) override;
};

// Sets every id the constraint does not allow to -inf; forwards accept() to it.
class ConstraintMaskStage final : public SamplerStage {
 public:
  explicit ConstraintMaskStage(TokenConstraint* constraint) : constraint_(constraint) {}
  void apply(SamplingRow& row) override;
  void accept(int32_t token) override { constraint_->accept(token); }

 private:
  TokenConstraint* constraint_;  // not owned; outlives the Sampler
};

// Argmax of the logits, lowest id on ties (temperature 0, or top_k 1). No RNG.
class GreedyStage final : public SamplerStage {
 public:
  void apply(SamplingRow& row) override;
};

// Sets 1/T for the softmax (T > 0). Scaling commutes with top-k, so no work happens here.
class TemperatureStage final : public SamplerStage {
 public:
  explicit TemperatureStage(float temperature) : inv_t_(1.0f / temperature) {}
  void apply(SamplingRow& row) override;

 private:
  float inv_t_;
};

// Keeps the k best as the candidate set, in rank order; k >= finite ids: no-op.
class TopKStage final : public SamplerStage {
 public:
  explicit TopKStage(int32_t k) : k_(k) {}
  void apply(SamplingRow& row) override;

 private:
  int32_t k_;
};

// Keeps the smallest rank-ordered prefix whose probability mass reaches top_p (< 1).
class TopPStage final : public SamplerStage {
 public:
  explicit TopPStage(float top_p) : top_p_(top_p) {}
  void apply(SamplingRow& row) override;

 private:
  float top_p_;
};

// Keeps the best candidate and every candidate with p >= min_p * p(best).
class MinPStage final : public SamplerStage {
 public:
  explicit MinPStage(float min_p) : min_p_(min_p) {}
  void apply(SamplingRow& row) override;

 private:
  float min_p_;
};

// Draws r ~ U[0, total mass) from the row's RNG (one call) and picks the first candidate in
// rank order whose cumulative mass reaches r. No candidates: token 0.
class DrawStage final : public SamplerStage {
 public:
  void apply(SamplingRow& row) override;
};

// Over cand[0, n), rank order: the smallest m >= 1 such that the m best candidates' mass
// (Candidate::p, summed in double) is >= target. Rearranges cand so that cand[m - 1] is the
// m-th best and cand[0, m - 1) hold the m - 1 better ones (in no order). When the whole
// mass is below target, returns n with cand[n - 1] the worst. n >= 1. Expected O(n).
size_t weighted_select(Candidate* cand, size_t n, double target);

}  // namespace spillway::engine
