// spillway: the command-line entry point.
//   spillway serve            the OpenAI-compatible HTTP server
//   spillway run              complete a raw prompt (engine check, no server)
//   spillway make-demo-model  write a deterministic random-weight GGUF
//   spillway bench            speeds as fractions of this machine's limits
// Exit codes: 0 ok, 1 runtime error (bad model file, ...), 2 usage error.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Spillway: an OpenAI-compatible LLM server that keeps serving when the model "
               "is bigger than memory"};
  app.require_subcommand(1);
  int exit_code = 0;
  spillway::cli::add_serve_command(app, exit_code);
  spillway::cli::add_run_command(app, exit_code);
  spillway::cli::add_make_demo_model_command(app, exit_code);
  spillway::cli::add_bench_command(app, exit_code);
  spillway::cli::add_expert_trace_command(app, exit_code);
  spillway::cli::add_mobile_eval_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  return exit_code;
}
