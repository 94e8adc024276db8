#include "engine/hf_folder.h"

#include <fmt/format.h>

namespace spillway::engine {

Result<std::unique_ptr<ModelSource>> open_hf_folder(const std::string& dir) {
  return Error{fmt::format("{}: Hugging Face folders are not supported yet", dir)};
}

}  // namespace spillway::engine
