#include "engine/tokenizer.h"

namespace spillway::engine {

Status import_tokenizer_json(const std::string& tokenizer_json_path, Metadata& meta) {
  return Error{tokenizer_json_path + ": not implemented yet"};
}

}  // namespace spillway::engine
