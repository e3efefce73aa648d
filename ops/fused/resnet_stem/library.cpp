// kope-library: onednn
// ResNet stem through two oneDNN primitives, the way inference engines run it: a convolution
// (7x7, stride 2, padding 3) with the batch norm folded into a per-channel scale and shift
// (computed on each call, applied by binary_mul and binary_add post-ops) and a ReLU post-op,
// writing oneDNN's preferred layout; then max pooling (3x3, stride 2, padding 1) reading that
// layout. x and the weights are reordered in and y out inside every call when the primitives
// want other layouts, so the baseline always does the whole job from plain NCHW tensors.
// Primitives and scratch buffers are created on the first call for a shape and reused, so
// creation stays outside timed calls (calls for one shape must not overlap).
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <vector>

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
  Port src, wei;
  memory::desc chan_md;
  memory t;  // the convolution's output, in its own layout
  dnnl::convolution_forward conv;
  Port dst;
  dnnl::pooling_forward pool;
  std::vector<float> scale, shift;
};

dnnl::convolution_forward::primitive_desc make_conv_pd(const memory::dims& src, const memory::dims& wei,
                                                       const memory::dims& dst,
                                                       const memory::desc& chan) {
  const auto f32 = memory::data_type::f32;
  dnnl::convolution_forward::desc d(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      memory::desc(src, f32, tag::any), memory::desc(wei, f32, tag::any),
      memory::desc(dst, f32, tag::any), {2, 2}, {3, 3}, {3, 3});
  dnnl::post_ops ops;
  ops.append_binary(dnnl::algorithm::binary_mul, chan);
  ops.append_binary(dnnl::algorithm::binary_add, chan);
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return dnnl::convolution_forward::primitive_desc(d, attr, engine());
}

Prim& get(int64_t N, int64_t C, int64_t H, int64_t W, int64_t CO) {
  static std::map<std::array<int64_t, 5>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 5> key{N, C, H, W, CO};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const auto f32 = memory::data_type::f32;
  const int64_t HT = (H - 1) / 2 + 1, WT = (W - 1) / 2 + 1;
  const int64_t HY = (HT - 1) / 2 + 1, WY = (WT - 1) / 2 + 1;
  const memory::dims src_dims{N, C, H, W}, wei_dims{CO, C, 7, 7}, t_dims{N, CO, HT, WT},
      y_dims{N, CO, HY, WY};
  memory::desc chan_md({1, CO, 1, 1}, f32, tag::nchw);
  auto conv_pd = make_conv_pd(src_dims, wei_dims, t_dims, chan_md);
  dnnl::pooling_forward::primitive_desc pool_pd(
      dnnl::pooling_forward::desc(dnnl::prop_kind::forward_inference,
                                  dnnl::algorithm::pooling_max, conv_pd.dst_desc(),
                                  memory::desc(y_dims, f32, tag::any), {2, 2}, {3, 3}, {1, 1},
                                  {1, 1}),
      engine());
  Prim p{Port(memory::desc(src_dims, f32, tag::nchw), conv_pd.src_desc(), true),
         Port(memory::desc(wei_dims, f32, tag::oihw), conv_pd.weights_desc(), true),
         chan_md,
         memory(conv_pd.dst_desc(), engine()),
         dnnl::convolution_forward(conv_pd),
         Port(memory::desc(y_dims, f32, tag::nchw), pool_pd.dst_desc(), false),
         dnnl::pooling_forward(pool_pd),
         std::vector<float>(CO),
         std::vector<float>(CO)};
  return cache.emplace(key, std::move(p)).first->second;
}

// Folds the batch norm into t = z * scale + shift.
void fold(const float* g, const float* b, const float* mean, const float* var, float eps,
          std::vector<float>& scale, std::vector<float>& shift) {
  for (size_t c = 0; c < scale.size(); ++c) {
    scale[c] = g[c] / std::sqrt(var[c] + eps);
    shift[c] = b[c] - mean[c] * scale[c];
  }
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* wt, const float* bn_g, const float* bn_b,
                            const float* bn_mean, const float* bn_var, float* y, int64_t N,
                            int64_t C, int64_t H, int64_t W, int64_t CO, float eps) {
  Prim& p = get(N, C, H, W, CO);
  fold(bn_g, bn_b, bn_mean, bn_var, eps, p.scale, p.shift);
  dnnl::stream s(engine());
  memory src = p.src.in(s, x);
  memory wei = p.wei.in(s, wt);
  memory scale(p.chan_md, engine(), p.scale.data()), shift(p.chan_md, engine(), p.shift.data());
  const auto post = [](int index) { return DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1; };
  p.conv.execute(s, {{DNNL_ARG_SRC, src},
                     {DNNL_ARG_WEIGHTS, wei},
                     {DNNL_ARG_DST, p.t},
                     {post(0), scale},
                     {post(1), shift}});
  memory dst = p.dst.out(y);
  p.pool.execute(s, {{DNNL_ARG_SRC, p.t}, {DNNL_ARG_DST, dst}});
  p.dst.finish_out(s, y);
  s.wait();
}
