// Instruction-set levels the kernels are built for, detected at run time.
#pragma once

#include <string_view>
#include <vector>

namespace spillway::kernels {

enum class Isa {
  Scalar,  // portable C++: the reference
  Avx2,    // AVX2 + FMA + F16C
  Avx512,  // AVX-512 F/BW/VL/VNNI (+BF16 where present; see has_avx512_bf16)
};

std::string_view isa_name(Isa isa);
// Every level this CPU can run, Scalar first, best last.
const std::vector<Isa>& supported_isas();
// The level the dispatching functions use: the best supported, unless the environment
// variable SPILLWAY_ISA=scalar|avx2|avx512 asks for a lower supported one.
Isa active_isa();
// The level active_isa() picks for a SPILLWAY_ISA value: that level when supported,
// otherwise (empty, unknown, or not supported here) the best supported one.
Isa resolve_isa_request(std::string_view request);
bool has_avx512_bf16();

}  // namespace spillway::kernels
