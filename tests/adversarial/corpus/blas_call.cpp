// expect: rejected
// op: matmul_small
// message: vendor library
#include <cstdint>

extern "C" void cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  cblas_sgemm(101, 111, 111, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f, A, static_cast<int>(K), B,
              static_cast<int>(N), 0.0f, C, static_cast<int>(N));
}
