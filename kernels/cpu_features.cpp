#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace spillway::kernels {

namespace {

struct CpuFeatures {
  bool avx2 = false;    // AVX2 + FMA + F16C, with the OS saving YMM state
  bool avx512 = false;  // AVX-512 F/BW/VL/DQ/VNNI, with the OS saving ZMM + opmask state
  bool avx512_bf16 = false;
};

uint64_t read_xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid(1, eax, ebx, ecx, edx);
  const bool osxsave = ecx & (1u << 27);
  const bool avx = ecx & (1u << 28);
  const bool fma = ecx & (1u << 12);
  const bool f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;     // SSE + AVX state
  const bool os_zmm = (xcr0 & 0xE6) == 0xE6;   // + opmask, ZMM_Hi256, Hi16_ZMM
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx2 = ebx & (1u << 5);
  const bool avx512f = ebx & (1u << 16);
  const bool avx512dq = ebx & (1u << 17);
  const bool avx512bw = ebx & (1u << 30);
  const bool avx512vl = ebx & (1u << 31);
  const bool avx512vnni = ecx & (1u << 11);
  unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;
  __cpuid_count(7, 1, eax1, ebx1, ecx1, edx1);
  const bool avx512bf16 = eax1 & (1u << 5);

  f.avx2 = os_ymm && avx2 && fma && f16c;
  f.avx512 = f.avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl && avx512vnni;
  f.avx512_bf16 = f.avx512 && avx512bf16;
  return f;
}

const CpuFeatures& features() {
  static const CpuFeatures f = detect();
  return f;
}

std::vector<Isa> detect_supported() {
  std::vector<Isa> isas{Isa::Scalar};
  if (features().avx2) isas.push_back(Isa::Avx2);
  if (features().avx512) isas.push_back(Isa::Avx512);
  return isas;
}

}  // namespace

Isa resolve_isa_request(std::string_view request) {
  const std::vector<Isa>& isas = supported_isas();
  for (Isa isa : isas) {
    if (isa_name(isa) == request) return isa;  // only supported levels can be forced
  }
  return isas.back();
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "unknown";
}

const std::vector<Isa>& supported_isas() {
  static const std::vector<Isa> isas = detect_supported();
  return isas;
}

Isa active_isa() {
  static const Isa isa = [] {
    const char* request = std::getenv("SPILLWAY_ISA");
    return resolve_isa_request(request ? request : "");
  }();
  return isa;
}

bool has_avx512_bf16() { return features().avx512_bf16; }

}  // namespace spillway::kernels
