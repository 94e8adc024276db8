// The preamble of every AVX-512 kernel file (*_avx512.cpp, compiled with the AVX-512 flags of
// kernels/CMakeLists.txt): the intrinsics, and GCC 12's avx512fintrin.h false warnings off.
// Include it first, before any other header: the pragmas hold from here to the end of the
// translation unit, and must precede <immintrin.h> (its _mm512_undefined_*() trip
// -W(maybe-)uninitialized where the intrinsics are inlined).
#pragma once

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512DQ__) || !defined(__AVX512VNNI__)
#error "kernels/avx512_target.h: only for *_avx512.cpp files (compiled with the AVX-512 flags)"
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
