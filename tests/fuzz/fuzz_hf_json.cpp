// Hugging Face JSON imports on arbitrary files: config.json and tokenizer.json into GGUF
// metadata (the first byte picks which).
#include <cstdint>

#include "engine/format/hf_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  spillway::fuzz::InputFile file(data + 1, size - 1);
  if (!file.ok()) return 0;
  spillway::engine::Metadata meta;
  if (data[0] & 1) {
    (void)spillway::engine::import_tokenizer_json(file.path(), meta);
  } else {
    (void)spillway::engine::import_hf_config(file.path(), meta);
  }
  return 0;
}
