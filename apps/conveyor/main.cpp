// conveyor: the command-line entry point (serve, generate, bench, worker, config).
#include <cstdio>

int main() {
  std::puts("conveyor");
  return 0;
}
