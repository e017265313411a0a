// anuvad_lowp_products: GOP/s of the decoding products of the small and base configs (1 and 64
// rows, 2 GOP per multiply-add) in bfloat16 (bf16_affine: oneDNN from 4 rows where available,
// own AVX-512 BF16 kernel below) and int8 (int8_affine, core/int8.h), the median of 7 samples of
// at least 50 ms each, all threads (OMP_NUM_THREADS). Random normal weights and activations;
// the quantization of the activations is inside the timed call on both sides.
// Usage: build/tests/anuvad_lowp_products   (tests/bench/README.md, "int8 weights")
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "anuvad/core/bf16.h"
#include "anuvad/core/int8.h"

using namespace anuvad;

namespace {

/// Median GOP/s of f() (one product of m·n·k multiply-adds) over 7 samples of ≥ 50 ms.
template <class F>
double gops(F f, Index m, Index n, Index k) {
  std::vector<double> rates;
  for (int sample = 0; sample < 7; ++sample) {
    int calls = 0;
    double elapsed = 0;
    const auto t0 = std::chrono::steady_clock::now();
    do {
      f();
      ++calls;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < 0.05);
    rates.push_back(2.0 * double(m) * double(n) * double(k) * calls / elapsed / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[3];
}

}  // namespace

int main() {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  // [rows, in, out]: small (d_model 256, d_ff 1024) and base (512, 2048), vocabulary 8000.
  const int shapes[][3] = {{1, 256, 256},   {1, 256, 1024},   {1, 1024, 256},   {1, 256, 8000},
                           {1, 512, 512},   {1, 512, 2048},   {1, 2048, 512},   {1, 512, 8000},
                           {64, 256, 256},  {64, 256, 1024},  {64, 1024, 256},  {64, 256, 8000},
                           {64, 512, 512},  {64, 512, 2048},  {64, 2048, 512},  {64, 512, 8000}};
  std::printf("threads %d; bfloat16 kernel %s; int8 kernel %s\n", omp_get_max_threads(),
              bf16_kernel_name(Bf16Kernel::kAuto).c_str(), int8_kernel_name(Int8Kernel::kAuto).c_str());
  // The widest of anuvad's own bfloat16 paths (no BLAS, no oneDNN), beside what kAuto runs.
  const Bf16Kernel own = bf16_widest_own_kernel();
  std::printf("| rows x in x out | bfloat16 GOP/s | bfloat16 %s GOP/s | bfloat16 openblas GOP/s | int8 GOP/s | int8 / bfloat16 |\n"
              "|---|---|---|---|---|---|\n", bf16_kernel_name(own).c_str());
  for (const auto& s : shapes) {
    const Index m = s[0], k = s[1], n = s[2];
    Mat w(n, k), x(m, k), y(m, n);
    const Mat bias = Mat::Zero(1, n);
    for (Index i = 0; i < w.size(); ++i) w.data()[i] = normal(rng);
    for (Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
    const Bf16Matrix wb = to_bf16(w);
    const Int8Matrix wi = to_int8(w);
    const double b = gops([&] { bf16_affine(x, wb, bias, y); }, m, n, k);
    const double o = gops([&] { bf16_affine(x, wb, bias, y, own); }, m, n, k);
    const double blas = gops([&] { bf16_affine(x, wb, bias, y, Bf16Kernel::kBlas); }, m, n, k);
    const double i = gops([&] { int8_affine(x, wi, bias, y); }, m, n, k);
    std::printf("| %ld x %ld x %ld | %.1f | %.1f | %.1f | %.1f | %.2f |\n", long(m), long(k), long(n), b, o, blas, i, i / b);
  }
}
