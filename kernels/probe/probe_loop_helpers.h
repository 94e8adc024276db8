// Helpers shared by the ISA-specific probe loops (machine_probe_avx2.cpp,
// machine_probe_avx512.cpp). No intrinsics here, so it compiles under either file's flags.
#pragma once

#include <cstring>

// Internal linkage: each file compiles these under its own ISA flags, and the linker must
// not pick one file's copy for the other.
namespace spillway::kernels::probe {
namespace {

// Streams of the read_streams loops (machine_probe.h): eight measured the same as four.
constexpr int kReadStreams = 4;

// Makes the compiler forget that the accumulators start out equal, so it keeps N
// independent chains (identical chains would be merged into one, a latency-bound loop), and
// the unrolled chain loops keep every accumulator in a register.
template <class V, int N>
inline void hide_values(V (&acc)[N]) {
#pragma GCC unroll 16
  for (int k = 0; k < N; ++k) asm volatile("" : "+v"(acc[k]));
}

// The sum of a vector's lanes read as `Lane`s, through memory (once per probe): it wraps for
// unsigned lanes, as the hardware accumulators do. (GCC 12's _mm512_reduce_add_* expand to
// _mm256_undefined_* and warn -Wuninitialized when inlined into the probe loops.)
template <class Lane, class Vec>
inline Lane sum_lanes(Vec v) {
  static_assert(sizeof(Vec) % sizeof(Lane) == 0);
  Lane lanes[sizeof(Vec) / sizeof(Lane)];
  std::memcpy(lanes, &v, sizeof(Vec));
  Lane total = 0;
  for (Lane x : lanes) total += x;
  return total;
}

}  // namespace
}  // namespace spillway::kernels::probe
