#include "engine/model/arch/diffusion_layers.h"

#include <fmt/format.h>

#include "engine/model/arch/transformer_block.h"

namespace spillway::engine {

Status describe_diffusion_layers(const ModelSource& src, ModelConfig& c) {
  SPILLWAY_TRY(describe_transformer_layers(src, c));
  for (LayerSpec& s : c.layers) s.attention = AttentionKind::Bidirectional;

  const Metadata& meta = src.metadata();
  auto mask = meta.get_int("tokenizer.ggml.mask_token_id");
  if (!mask) return mask.error();
  if (!mask->has_value()) {
    return Error{fmt::format("{}: missing metadata key 'tokenizer.ggml.mask_token_id' (a {} model "
                             "needs its mask token)", src.path(), c.architecture)};
  }
  if (**mask < 0 || **mask > (int64_t{1} << 30)) {
    return Error{fmt::format("{}: metadata 'tokenizer.ggml.mask_token_id' = {} is out of range",
                             src.path(), **mask)};
  }
  c.mask_token_id = static_cast<int32_t>(**mask);  // checked against n_vocab by Model::load

  auto shift = meta.get_bool("diffusion.shift_logits");
  if (!shift) return shift.error();
  c.shift_logits = shift->value_or(true);
  return {};
}

}  // namespace spillway::engine
