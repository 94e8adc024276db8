// Sampler: see sampling.h for the order of operations.
#include "engine/sampling.h"

namespace spillway::engine {

Sampler::Sampler(SamplingParams params, uint64_t fallback_seed)
    : params_(std::move(params)), rng_(params_.seed.value_or(fallback_seed)) {}

}  // namespace spillway::engine
