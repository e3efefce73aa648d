// kope-library: onednn
// Batched matmul through oneDNN's matmul primitive on 3-D tensors (the batch is the leading
// dim). Primitives are created on the first call for a shape and reused, so creation stays
// outside timed calls.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

struct Prim {
  dnnl::memory::desc a_md, b_md, c_md;
  dnnl::matmul prim;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t BATCH, int64_t M, int64_t N, int64_t K) {
  static std::map<std::array<int64_t, 4>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 4> key{BATCH, M, N, K};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  dnnl::memory::desc a_md({BATCH, M, K}, f32, tag::abc);
  dnnl::memory::desc b_md({BATCH, K, N}, f32, tag::abc);
  dnnl::memory::desc c_md({BATCH, M, N}, f32, tag::abc);
  dnnl::matmul::desc d(a_md, b_md, c_md);
  dnnl::matmul::primitive_desc pd(d, engine());
  return cache.emplace(key, Prim{a_md, b_md, c_md, dnnl::matmul(pd)}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* a, const float* b, float* c, int64_t BATCH, int64_t M,
                            int64_t N, int64_t K) {
  Prim& p = get(BATCH, M, N, K);
  dnnl::stream s(engine());
  dnnl::memory am(p.a_md, engine(), const_cast<float*>(a));
  dnnl::memory bm(p.b_md, engine(), const_cast<float*>(b));
  dnnl::memory cm(p.c_md, engine(), c);
  p.prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.wait();
}
