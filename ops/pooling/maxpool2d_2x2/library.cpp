// kope-library: onednn
// 2x2 / stride 2 max pooling through oneDNN's pooling forward primitive (pooling_max). The
// primitive works on the plain NCHW tensors directly unless oneDNN only has its slow reference
// implementation for them; then it uses oneDNN's preferred layout and reorders the input in and
// the output out inside every call. Primitives and scratch buffers are created on the first
// call for a shape and reused, so creation stays outside timed calls (calls for one shape must
// not overlap).
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>

namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A plain user tensor and, when the primitive wants another layout, a buffer and a reorder.
struct Port {
  memory::desc user_md;
  std::optional<memory> buf;
  std::optional<dnnl::reorder> reorder;

  Port(const memory::desc& user, const memory::desc& prim, bool is_input) : user_md(user) {
    if (prim == user) return;
    buf = memory(prim, engine());
    memory u(user, engine(), DNNL_MEMORY_NONE);
    reorder = is_input ? dnnl::reorder(u, *buf) : dnnl::reorder(*buf, u);
  }
  // The memory the primitive reads: the user's data, or a reordered copy of it.
  memory in(dnnl::stream& s, const float* data) {
    memory u(user_md, engine(), const_cast<float*>(data));
    if (!reorder) return u;
    reorder->execute(s, u, *buf);
    return *buf;
  }
  // The memory the primitive writes; finish_out() copies it into the user's tensor if needed.
  memory out(float* data) { return buf ? *buf : memory(user_md, engine(), data); }
  void finish_out(dnnl::stream& s, float* data) {
    if (!reorder) return;
    memory u(user_md, engine(), data);
    reorder->execute(s, *buf, u);
  }
};

struct Prim {
  Port src, dst;
  std::optional<memory> workspace;
  dnnl::pooling_forward pool;
};

dnnl::pooling_forward::primitive_desc make_pd(const memory::desc& src, const memory::desc& dst,
                                              const memory::dims& kernel) {
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max,
                                src, dst, {2, 2}, kernel, {0, 0}, {0, 0});
  return dnnl::pooling_forward::primitive_desc(d, engine());
}

Prim& get(int64_t N, int64_t C, int64_t H, int64_t W) {
  static std::map<std::array<int64_t, 4>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 4> key{N, C, H, W};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto f32 = memory::data_type::f32;
  const memory::dims src_dims{N, C, H, W}, dst_dims{N, C, H / 2, W / 2}, kernel{2, 2};
  memory::desc src_md(src_dims, f32, tag::nchw), dst_md(dst_dims, f32, tag::nchw);
  auto pd = make_pd(src_md, dst_md, kernel);
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) {
    pd = make_pd(memory::desc(src_dims, f32, tag::any), memory::desc(dst_dims, f32, tag::any),
                 kernel);
  }
  Prim p{Port(src_md, pd.src_desc(), true), Port(dst_md, pd.dst_desc(), false), std::nullopt,
         dnnl::pooling_forward(pd)};
  if (pd.workspace_desc().get_size() != 0) p.workspace = memory(pd.workspace_desc(), engine());
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  Prim& p = get(N, C, H, W);
  dnnl::stream s(engine());
  memory src = p.src.in(s, x);
  memory dst = p.dst.out(y);
  if (p.workspace) {
    p.pool.execute(s,
                   {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WORKSPACE, *p.workspace}});
  } else {
    p.pool.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  }
  p.dst.finish_out(s, y);
  s.wait();
}
