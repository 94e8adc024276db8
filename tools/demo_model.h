// Deterministic random-weight models for tests, benches and the zero-config demo server.
//
// The tokenizer is one the project generates itself: a SentencePiece-style ("llama")
// vocabulary of <unk>, <s>, </s>, the 256 byte-fallback tokens, single characters, and
// "▁word" prefix chains of common English words then generated syllable words, up to
// the requested vocabulary size. Weights are N(0, 0.02²) per tensor from a PRNG seeded by
// (seed, tensor name); like the peaked test model in ../shared/testdata, the embedding
// (std 0.15) and output (std 0.5) are larger so greedy choices are not near-ties, and the
// output rows of ids 0..258 are zero so generated text is valid UTF-8 and never hits EOS.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"
#include "kernels/dtype.h"

namespace spillway::tools {

struct DemoModelOptions {
  // llama | qwen2 | qwen3 | qwen3moe | qwen35 | llada | dream. The diffusion ones (llada:
  // llama's tensors; dream: qwen2's) add tokenizer.ggml.mask_token_id = vocab - 1 (a control
  // token whose output row is zero) and llada's diffusion.shift_logits = false.
  std::string architecture = "llama";
  int32_t layers = 4;
  int32_t dim = 256;
  int32_t ff = 0;        // 0: 8/3 * dim rounded up to a multiple of 64
  int32_t heads = 0;     // 0: dim / 64
  int32_t kv_heads = 0;  // 0: heads / 2 (GQA), at least 1
  int32_t vocab = 4096;  // at least 512
  int32_t context = 2048;
  kernels::DType type = kernels::DType::F16;  // 2-D weights; norms stay F32
  // llama-quantize's _M mixes (Q4_K_M, Q5_K_M): output.weight, and attn_v / ffn_down of the
  // layers llama.cpp gives more bits (the first and last eighth, every third in between),
  // in Q6_K; everything else `type`.
  bool k_mix = false;
  // No output.weight: the token embeddings are the output matrix (tied embeddings).
  bool tied_output = false;
  uint64_t seed = 0;
  // qwen3moe only: routed experts per layer, used per token, their hidden size (0: ff / 4
  // rounded up to the block). The router stays F32 as in llama.cpp's files; 3-D expert
  // tensors ffn_{gate,up,down}_exps, no dense FFN.
  int32_t experts = 8;
  int32_t experts_used = 2;
  int32_t expert_ff = 0;
  // qwen35 only (hybrid): every 4th layer gated attention, the others Gated DeltaNet with
  // key/value head size min(128, dim / 2), dim / (2 * that) key heads and twice as many value
  // heads, conv kernel 4; rope over a quarter of each attention head.
  // Overrides (0: the defaults above): attention head size (qwen3, qwen3moe, qwen35;
  // attention.key_length; the projections are then heads * head_dim wide, not dim); qwen35: delta-net key heads, value heads
  // (a multiple of the key heads) and key/value head size (ssm.state_size).
  int32_t head_dim = 0;
  int32_t ssm_key_heads = 0;
  int32_t ssm_value_heads = 0;
  int32_t ssm_head_dim = 0;
};

// Named shapes for --shape: a Qwen3.5-0.8B- or -2B-shaped qwen35 model ("qwen35-0.8b",
// "qwen35-2b") or a Qwen3-30B-A3B-shaped qwen3moe model ("qwen3-30b-a3b": 128 experts, top-8,
// expert ff 768), filled into options (architecture, layers, dim, ff, heads, head sizes,
// vocab, experts); an Error naming the known shapes otherwise.
Status apply_demo_shape(const std::string& shape, DemoModelOptions& options);

// Fills in the derived defaults and checks the shapes (e.g. dim multiple of heads, rows a
// multiple of the quant block).
Result<DemoModelOptions> resolve_demo_model_options(DemoModelOptions options);

// Writes the model to `path`. progress(done, total) is called as tensors are written.
Status write_demo_model(const std::string& path, const DemoModelOptions& options,
                        const std::function<void(int64_t done, int64_t total)>& progress = {});

// The model `spillway serve` uses when no --model is given (DemoModelOptions' defaults),
// written beside `path` and renamed into place so a concurrent start never reads half a file.
Status write_default_demo_model(const std::string& path,
                                const std::function<void(int64_t done, int64_t total)>& progress);

}  // namespace spillway::tools
