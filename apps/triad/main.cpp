// Placeholder entry point while the subcommands are written (replaced in the CLI commit).
#include <cstdio>
int main() { std::puts("triad"); return 0; }
