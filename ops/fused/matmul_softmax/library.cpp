// kope-library: onednn
// Linear layer + row softmax through two oneDNN primitives: a matmul writes the logits into y,
// then softmax_forward (axis 1) normalises y in place. Primitives are created on the first call
// for a shape and reused, so creation stays outside timed calls.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, w_md, y_md;
  dnnl::matmul matmul;
  dnnl::softmax_forward softmax;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t M, int64_t N, int64_t K) {
  static std::map<std::array<int64_t, 3>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 3> key{M, N, K};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  memory::desc x_md({M, K}, f32, tag::ab), w_md({K, N}, f32, tag::ab), y_md({M, N}, f32, tag::ab);
  dnnl::matmul::primitive_desc mm_pd(dnnl::matmul::desc(x_md, w_md, y_md), engine());
  dnnl::softmax_forward::primitive_desc sm_pd(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, y_md, 1), engine());
  Prim p{x_md, w_md, y_md, dnnl::matmul(mm_pd), dnnl::softmax_forward(sm_pd)};
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* w, float* y, int64_t M, int64_t N,
                            int64_t K) {
  Prim& p = get(M, N, K);
  dnnl::stream s(engine());
  memory xm(p.x_md, engine(), const_cast<float*>(x));
  memory wm(p.w_md, engine(), const_cast<float*>(w));
  memory ym(p.y_md, engine(), y);
  p.matmul.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}});
  p.softmax.execute(s, {{DNNL_ARG_SRC, ym}, {DNNL_ARG_DST, ym}});
  s.wait();
}
