// `spillway make-demo-model`: writes a deterministic random-weight GGUF (engine/demo_model.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tools/demo_model.h"
#include "cli/commands.h"

namespace spillway::cli {

namespace {

struct MakeDemoModelOptions {
  std::string out;
  std::string type = "f16";
  std::string shape;  // a named shape; the integer flags given with it win
  tools::DemoModelOptions model;
  std::vector<std::pair<CLI::Option*, int32_t tools::DemoModelOptions::*>> int_flags;
};

int make_demo_model(MakeDemoModelOptions o) {
  static const std::map<std::string, kernels::DType> kTypes = {
      {"f32", kernels::DType::F32},   {"f16", kernels::DType::F16},
      {"bf16", kernels::DType::BF16}, {"q8_0", kernels::DType::Q8_0},
      {"q4_0", kernels::DType::Q4_0}, {"q4_1", kernels::DType::Q4_1},
      {"q5_0", kernels::DType::Q5_0}, {"q5_1", kernels::DType::Q5_1},
      {"q2_k", kernels::DType::Q2_K}, {"q3_k", kernels::DType::Q3_K},
      {"q4_k", kernels::DType::Q4_K}, {"q5_k", kernels::DType::Q5_K},
      {"q6_k", kernels::DType::Q6_K}, {"q4_k_m", kernels::DType::Q4_K},
      {"q5_k_m", kernels::DType::Q5_K}};
  std::string type = o.type;
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = kTypes.find(type);
  if (it == kTypes.end()) {
    fmt::print(stderr,
               "error: --type '{}' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, "
               "q3_k, q4_k, q5_k, q6_k, q4_k_m, q5_k_m\n",
               o.type);
    return 2;
  }
  if (!o.shape.empty()) {
    // The shape first, then the flags given explicitly on top of it.
    tools::DemoModelOptions shaped;
    if (Status st = tools::apply_demo_shape(o.shape, shaped); !st) {
      fmt::print(stderr, "error: {}\n", st.error().message);
      return 2;
    }
    shaped.seed = o.model.seed;
    for (const auto& [flag, field] : o.int_flags) {
      if (flag->count() > 0) shaped.*field = o.model.*field;
    }
    o.model = shaped;
  }
  o.model.k_mix = type.ends_with("_m");
  o.model.type = it->second;
  auto resolved = tools::resolve_demo_model_options(o.model);
  if (!resolved) {
    fmt::print(stderr, "error: {}\n", resolved.error().message);
    return 2;
  }
  const tools::DemoModelOptions& m = *resolved;
  fmt::print(stderr,
             "writing {}: {} layers, dim {}, ff {}, {} heads ({} kv), vocab {}, {} weights\n",
             o.out, m.layers, m.dim, m.ff, m.heads, m.kv_heads, m.vocab, o.type);
  if (m.architecture == "qwen3moe") {
    fmt::print(stderr, "  {} routed experts per layer, {} used per token, expert ff {}\n", m.experts,
               m.experts_used, m.expert_ff);
  }
  const bool tty = isatty(STDERR_FILENO);
  auto progress = [tty](int64_t done, int64_t total) {
    if (tty) {
      fmt::print(stderr, "\r  tensors {}/{}", done, total);
      if (done == total) fmt::print(stderr, "\n");
    } else if (done == total || done % 50 == 0) {
      fmt::print(stderr, "  tensors {}/{}\n", done, total);
    }
  };
  Status st = tools::write_demo_model(o.out, m, progress);
  if (!st) {
    fmt::print(stderr, "error: {}\n", st.error().message);
    return 1;
  }
  return 0;
}

}  // namespace

void add_make_demo_model_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<MakeDemoModelOptions>();
  CLI::App* cmd = app.add_subcommand("make-demo-model",
                                     "Write a deterministic random-weight GGUF model");
  cmd->add_option("--out", opts->out, "Output GGUF path")->required();
  cmd->add_option("--arch", opts->model.architecture, "llama | qwen2 | qwen3 | qwen3moe | qwen35 | llada | dream");
  cmd->add_option("--shape", opts->shape,
                  "A named shape: qwen35-0.8b | qwen35-2b (Qwen3.5-shaped hybrids) | qwen3-30b-a3b "
                  "(Qwen3-30B-A3B-shaped MoE); the size flags given with it override it");
  using M = tools::DemoModelOptions;
  auto int_flag = [&](const char* name, int32_t M::*field, const char* help) {
    opts->int_flags.emplace_back(cmd->add_option(name, opts->model.*field, help), field);
  };
  int_flag("--layers", &M::layers, "Decoder layers");
  int_flag("--dim", &M::dim, "Embedding size");
  int_flag("--ff", &M::ff, "MLP hidden size (default 8/3 dim)");
  int_flag("--heads", &M::heads, "Attention heads (default dim/64)");
  int_flag("--kv-heads", &M::kv_heads, "KV heads (default heads/2)");
  int_flag("--vocab", &M::vocab, "Vocabulary size");
  int_flag("--context", &M::context, "Context length");
  int_flag("--head-dim", &M::head_dim, "qwen3, qwen3moe, qwen35: attention head size (default dim/heads)");
  int_flag("--ssm-key-heads", &M::ssm_key_heads, "qwen35: Gated DeltaNet key heads (default dim/(2 x head size))");
  int_flag("--ssm-value-heads", &M::ssm_value_heads, "qwen35: Gated DeltaNet value heads (default 2 x key heads)");
  int_flag("--ssm-head-dim", &M::ssm_head_dim, "qwen35: Gated DeltaNet key/value head size (default min(128, dim/2))");
  cmd->add_option("--type", opts->type,
                  "Weight type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k, or the "
                  "mixes q4_k_m q5_k_m (llama-quantize's: some tensors Q6_K)");
  cmd->add_option("--seed", opts->model.seed);
  int_flag("--experts", &M::experts, "qwen3moe: routed experts per layer (default 8)");
  int_flag("--experts-used", &M::experts_used, "qwen3moe: experts per token (default 2)");
  int_flag("--expert-ff", &M::expert_ff, "qwen3moe: expert hidden size (default ff/4)");
  cmd->callback([opts, &exit_code] { exit_code = make_demo_model(*opts); });
}

}  // namespace spillway::cli
