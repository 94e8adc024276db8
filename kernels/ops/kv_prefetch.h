// Software prefetch of a paged KV cache for the attention kernels (ops_avx2.cpp,
// ops_avx512.cpp). No intrinsics and internal linkage: each file compiles these under its own
// ISA flags, and the linker must not pick one file's copy for the other.
//
// Why prefetch far ahead: attention is one call per kv head, which reads that head's run of
// each block of the sequence (block_size * head_dim elements, 2 KiB at head_dim 64 in F16)
// and does little arithmetic per byte; a run fetched only when the previous block is read
// leaves the loads waiting on DRAM (bench/README.md, "Attention reads its KV ahead").
#pragma once

#if !defined(__AVX2__)
#error "kernels/ops/kv_prefetch.h: only for *_avx2.cpp / *_avx512.cpp files (README.md, \"Rules for SIMD files\")"
#endif

#include <cstdint>

#include "kernels/kernels.h"

namespace spillway::kernels::kv_prefetch {
namespace {

// How far ahead of the block being read the kernels prefetch: about this many bytes of the
// head's runs, at least one block (4 blocks at head_dim 64 in F16, where 4 and 8 measured the
// same; 1 at head_dim 256, whose K run is 8 KiB a block, as before this prefetch).
constexpr int64_t kBytesAhead = 8192;
template <class T>
inline int64_t blocks_ahead(const KvView& x, int dims) {
  const int64_t run = int64_t(x.block_size) * dims * int64_t(sizeof(T));
  return run >= kBytesAhead ? 1 : kBytesAhead / run;
}

// prefetcht0 of every line of [p, p + bytes). A volatile asm, not _mm_prefetch: GCC 12
// deleted every _mm_prefetch loop of this helper as dead code.
inline void lines(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = 0; o < bytes; o += 64) asm volatile("prefetcht0 %0" : : "m"(c[o]));
}

// Kv head h's rows in block b of the view's block table, elements [d0, d0 + dims) of each
// (one run where they are contiguous, as the engine stores them); nothing when block b
// starts at or past n_ctx. T: the stored element type.
template <class T>
inline void head_block(const KvView& x, int h, int64_t b, int64_t n_ctx, int d0, int dims) {
  const bool inside = b * x.block_size < n_ctx;
  const T* base = static_cast<const T*>(x.data) + int64_t(x.block_table[inside ? b : 0]) * x.block_stride +
                  int64_t(h) * x.head_stride;
  if (inside && x.dim_stride == 1) {  // V as the engine keeps it: block_size rows of dims
    if (x.token_stride == dims) {
      lines(base + d0, int64_t(x.block_size) * dims * int64_t(sizeof(T)));
    } else {
      for (int64_t i = 0; i < x.block_size; ++i) lines(base + d0 + i * x.token_stride, dims * int64_t(sizeof(T)));
    }
  } else if (inside && x.token_stride == 1) {  // K transposed: dims runs of block_size keys
    lines(base + d0 * x.dim_stride, ((dims - 1) * x.dim_stride + x.block_size) * int64_t(sizeof(T)));
  }
}

}  // namespace
}  // namespace spillway::kernels::kv_prefetch
