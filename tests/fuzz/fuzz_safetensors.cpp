// The safetensors header reader on arbitrary files.
#include <cstdint>

#include "engine/format/safetensors.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spillway::fuzz::InputFile file(data, size);
  if (!file.ok()) return 0;
  (void)spillway::engine::SafetensorsFile::open(file.path());
  return 0;
}
