// The idle-read probe (docs/benchmarks.md section 8, eleventh session): after an idle gap, time
// passes over a 24 MB buffer (the size of the s15m model's packed weights) pass by pass, with 4 KiB
// or transparent huge pages, sleeping or spinning through the gap; and a compute-only loop.
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>
#include <cstdlib>
#include <sys/mman.h>
#include <cstring>
using clk = std::chrono::steady_clock;
static double alu(long n) { double x = 1.0, y = 1.0000001; for (long i = 0; i < n; ++i) { x = x * y + 1e-9; } return x; }
static size_t N = 6 << 20;
static float readbuf(const float* b) { float s0=0,s1=0,s2=0,s3=0; for (size_t i=0;i<N;i+=4){s0+=b[i];s1+=b[i+1];s2+=b[i+2];s3+=b[i+3];} return s0+s1+s2+s3; }
int main(int argc, char** argv) {
  const int sleep_ms = argc > 1 ? atoi(argv[1]) : 300;
  const bool mem = argc > 2 && argv[2][0] == 'm';
  float* buf = (float*)aligned_alloc(2 << 20, N * 4);
  if (getenv("HUGE")) madvise(buf, N * 4, MADV_HUGEPAGE);
  for (size_t i = 0; i < N; ++i) buf[i] = 1.0f;
  volatile double sink = 0;
  const long n = 100000;  // ~ 100 us at 4 cycles per iteration
  std::vector<std::vector<double>> t(10);
  for (int rep = 0; rep < 10; ++rep) {
    if (getenv("SPIN")) { auto e = clk::now() + std::chrono::milliseconds(sleep_ms); while (clk::now() < e) {} } else std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    for (int k = 0; k < 12; ++k) {
      auto a = clk::now();
      if (mem) sink += readbuf(buf); else sink += alu(n);
      t[rep].push_back(std::chrono::duration<double, std::micro>(clk::now() - a).count());
    }
  }
  for (int k = 0; k < 12; ++k) { double s = 0; for (int r = 1; r < 10; ++r) s += t[r][k]; printf("%d %.1f\n", k, s / 9); }
}
