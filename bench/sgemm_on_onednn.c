/* A preload library that sends every cblas_sgemm to oneDNN's dnnl_sgemm:
 * how the README's whole-step comparison ("oneDNN for the large products")
 * ran a step with every float32 product on oneDNN, before MatMul.cpp drew
 * its line at 128. Row-major calls only (all of Shard's).
 *
 *   cc -O2 -shared -fPIC bench/sgemm_on_onednn.c -o /tmp/libsgemm_on_onednn.so
 * -ldnnl
 *   LD_PRELOAD=/tmp/libsgemm_on_onednn.so OMP_NUM_THREADS=1 \
 *     OPENBLAS_NUM_THREADS=1 shardrun P --data DIR --steps 25 --nproc 2 --log L
 *
 * (With today's MatMul.cpp the products of 128 and more go to oneDNN
 * anyway; the library then moves only the smaller ones.) */
#include <oneapi/dnnl/dnnl.h>

enum { RowMajor = 101, Trans = 112 };

void cblas_sgemm(int order, int transA, int transB, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc) {
  (void)order;
  dnnl_sgemm(transA == Trans ? 'T' : 'N', transB == Trans ? 'T' : 'N', m, n, k,
             alpha, a, lda, b, ldb, beta, c, ldc);
}
