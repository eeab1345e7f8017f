/* Single-thread float32 products on OpenBLAS (cblas_sgemm) and oneDNN
 * (dnnl_sgemm) on the same operands, best of three rounds each: the numbers
 * behind runtime/cpu/MatMul.cpp's choice of library (README, "oneDNN for the
 * large products").
 *
 *   cc -O2 bench/gemm_libraries.c -o /tmp/gemm_libraries \
 *      -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas -ldnnl
 *   OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /tmp/gemm_libraries
 *
 * Rows: m n k, transposes of A and B, each library's Gflop/s and time. */
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  /* m, n, k, transA, transB: the step-time GPT's products (forward NT,
   * input gradient NN, weight gradient TN), its attention's per-head
   * products, the CNN's and small ones. */
  static const int shapes[][5] = {
      {512, 8192, 256, 0, 1}, {512, 256, 8192, 0, 0}, {8192, 256, 512, 1, 0},
      {512, 1024, 256, 0, 1}, {512, 256, 1024, 0, 0}, {1024, 256, 512, 1, 0},
      {512, 256, 1024, 0, 1}, {512, 1024, 256, 0, 0}, {256, 1024, 512, 1, 0},
      {512, 256, 256, 0, 1},  {256, 256, 512, 1, 0},  {64, 64, 32, 0, 1},
      {64, 32, 64, 0, 0},     {64, 64, 64, 0, 0},     {32, 64, 64, 1, 0},
      {64, 10, 384, 0, 1},    {64, 384, 3136, 0, 1},  {3136, 384, 64, 1, 0},
      {128, 128, 128, 0, 0},  {256, 256, 256, 0, 0},  {32, 32, 32, 0, 0},
      {16, 16, 16, 0, 0},     {8, 8, 8, 0, 0}};
  const size_t elems = 16u << 20;
  float *a = malloc(elems * 4), *b = malloc(elems * 4), *c = malloc(elems * 4);
  if (!a || !b || !c)
    return 1;
  for (size_t i = 0; i < elems; ++i) {
    a[i] = (float)(i % 7) * 0.1f;
    b[i] = (float)(i % 5) * 0.2f;
    c[i] = 0;
  }
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    int ta = shapes[s][3], tb = shapes[s][4];
    int lda = ta ? m : k, ldb = tb ? k : n;
    double flop = 2.0 * m * n * k;
    int reps = (int)(1e9 / flop);
    reps = reps < 5 ? 5 : reps > 200000 ? 200000 : reps;
    double best[2] = {1e9, 1e9};
    for (int round = 0; round < 3; ++round)
      for (int lib = 0; lib < 2; ++lib) {
        double t = now();
        for (int r = 0; r < reps; ++r) {
          if (lib == 0)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                        tb ? CblasTrans : CblasNoTrans, m, n, k, 1.f, a, lda, b,
                        ldb, 0.f, c, n);
          else
            dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.f, a, lda, b,
                       ldb, 0.f, c, n);
        }
        t = (now() - t) / reps;
        if (t < best[lib])
          best[lib] = t;
      }
    printf("%5d %5d %5d %c%c  openblas %6.1f  onednn %6.1f Gflop/s  (%.2f us "
           "against %.2f us)\n",
           m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N', flop / best[0] / 1e9,
           flop / best[1] / 1e9, best[0] * 1e6, best[1] * 1e6);
  }
  return 0;
}
