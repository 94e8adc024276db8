// spillway: the command-line entry point (subcommands run, serve, make-demo-model, bench).
int main() { return 0; }
