// The GGUF reader on arbitrary files: open_gguf must return a model source or an error.
#include <cstdint>

#include "engine/format/gguf.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spillway::fuzz::InputFile file(data, size);
  if (!file.ok()) return 0;
  (void)spillway::engine::open_gguf(file.path());
  return 0;
}
