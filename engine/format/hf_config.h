// A Hugging Face config.json, turned into GGUF-named metadata.
//
// For model_type llama, qwen2 and qwen3 (general.architecture = model_type):
//   hidden_size             -> <arch>.embedding_length
//   num_hidden_layers       -> <arch>.block_count
//   intermediate_size       -> <arch>.feed_forward_length
//   num_attention_heads     -> <arch>.attention.head_count
//   num_key_value_heads     -> <arch>.attention.head_count_kv     (default: head_count)
//   head_dim                -> <arch>.attention.key_length / value_length
//                                                            (default: hidden / heads)
//   rms_norm_eps            -> <arch>.attention.layer_norm_rms_epsilon
//   rope_theta              -> <arch>.rope.freq_base
//   max_position_embeddings -> <arch>.context_length
//   vocab_size              -> <arch>.vocab_size
//   rope_scaling {type | rope_type: linear | llama3, factor, low_freq_factor,
//                 high_freq_factor, original_max_position_embeddings}
//                           -> <arch>.rope.scaling.{type, factor, low_freq_factor,
//                              high_freq_factor, original_context_length}
// qwen3_next (-> qwen3next), qwen3_5_text and qwen3_5 (its text_config; -> qwen35) also:
//   linear_conv_kernel_dim -> ssm.conv_kernel; linear_{key,value}_head_dim (equal) -> ssm.state_size;
//   linear_num_key_heads -> ssm.group_count; linear_num_value_heads -> ssm.time_step_rank;
//   layer_types (linear_attention | full_attention) -> attention.recurrent_layers, else
//   full_attention_interval; head_dim * partial_rotary_factor -> rope.dimension_count;
//   spillway.ssm_value_heads_grouped = true (HF's value-head order); qwen3_next's MoE keys
//   (+ shared_expert_intermediate_size -> expert_shared_feed_forward_length).
// Optional keys absent from the file get the value transformers would use for that
// model_type, written explicitly (GGUF's defaults differ, e.g. rms_norm_eps). What the
// engine would compute differently is an error rather than ignored: hidden_act other than
// silu, use_sliding_window, attention_bias / mlp_bias (o_proj and MLP biases), rope types
// other than default / linear / llama3.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"
#include "engine/format/model_source.h"

namespace spillway::engine {

// What the folder loader needs from config.json beyond the metadata.
struct HfConfig {
  std::string model_type;
  bool tie_word_embeddings = false;
  // qwen3_next / qwen3_5: zero-centred RMSNorm weights (GGUF stores w + 1, ssm_norm aside),
  // A_log (GGUF: -exp(A_log)), conv1d [C, 1, K], post_attention_layernorm -> post_attention_norm.
  bool hybrid = false;
  std::optional<int64_t> bos_token_id;  // when config.json holds a single integer
  std::optional<int64_t> eos_token_id;
};

// "llama, qwen2, qwen3" — for error messages.
std::string supported_hf_model_types();

// Reads config_json_path and adds the keys above to meta. Errors name the file and the key.
Result<HfConfig> import_hf_config(const std::string& config_json_path, Metadata& meta);

}  // namespace spillway::engine
