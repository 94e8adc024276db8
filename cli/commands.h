// The subcommands of the `spillway` executable.
// Each registers its flags on a CLI11 app and runs after parsing; it returns the process
// exit code (0 ok, 1 runtime error such as a bad model file, 2 usage error).
#pragma once

namespace CLI {
class App;
}

namespace spillway::cli {

// `spillway serve [...]`: the OpenAI-compatible HTTP server (server/serve.cpp runs it).
void add_serve_command(CLI::App& app, int& exit_code);
// `spillway run --model PATH --prompt TEXT [...]`: complete a raw prompt and print it.
void add_run_command(CLI::App& app, int& exit_code);
// `spillway make-demo-model --out PATH [...]`: write a deterministic random-weight GGUF.
void add_make_demo_model_command(CLI::App& app, int& exit_code);
// `spillway bench --model PATH [...]`: speeds as fractions of the machine's limits.
void add_bench_command(CLI::App& app, int& exit_code);
// `spillway expert-trace --model PATH --prompts FILE [...]`: MoE routing replayed through
// expert-cache policies (hit rates).
void add_expert_trace_command(CLI::App& app, int& exit_code);
// `spillway mobile-eval --model PATH --prompts FILE [...]`: MoBiLE decoding, JSON lines.
void add_mobile_eval_command(CLI::App& app, int& exit_code);

}  // namespace spillway::cli
