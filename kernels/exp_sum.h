// The exp of a scaled row and its sum: the sampler's softmax (engine/sampling), dispatched
// through KernelTable::exp_scaled_sum like the other row operations of kernels.h.
#pragma once

#include <cstdint>

namespace spillway::kernels {

// out[i] = exp_poly((x[i] - shift) * scale) for i < n (the subtraction and the product
// rounded in float, in that order), and returns the sum of the out[i] in double. out may be
// nullptr (only the sum) and may alias x. Single thread, no allocation. Bit-identical on
// every ISA: each element is exp_poly below, and the sum runs in a fixed order: 16 double
// lanes, lane l adding the elements i = l (mod 16) in increasing i from +0, then
// s8[l] = a[l] + a[l + 8], s4[l] = s8[l] + s8[l + 4], s2[l] = s4[l] + s4[l + 2],
// sum = s2[0] + s2[1].
double exp_scaled_sum(const float* x, float shift, float scale, float* out, int64_t n);

// e^x in float, within 2 ulp of the correctly rounded value where that is a normal float
// (Cephes' polynomial after the reduction x = n ln2 + r, then 2^n applied as two exact
// power-of-two factors so that results down to the smallest subnormal round once, as
// std::exp's do): 0 for x < -104 and for -inf, +inf for x > 88.72283, NaN for NaN. The
// scalar definition of each element of exp_scaled_sum, for callers outside a row kernel
// (the reference sampler of the tests).
float exp_poly(float x);

}  // namespace spillway::kernels
