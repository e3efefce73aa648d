// Deterministic generators. Compiled with -ffp-contract=off (see CMakeLists.txt): an FMA would
// round differently and change bytes between machines.
#include "spec/generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "util/strings.h"

namespace kope::spec {

namespace {

constexpr size_t k_block = 4096;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0xD6E8FEB86659FD93ULL);
  splitmix64(s);
  return splitmix64(s);
}

// Uniform in [0, 1) with 53 random bits.
double uniform01(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

// Uniform integer in [0, range) without modulo bias (rejection).
uint64_t below(uint64_t& state, uint64_t range) {
  if (range == 0) return splitmix64(state);
  uint64_t limit = std::numeric_limits<uint64_t>::max() - (std::numeric_limits<uint64_t>::max() % range);
  for (;;) {
    uint64_t x = splitmix64(state);
    if (x < limit) return x % range;
  }
}

// Marsaglia's polar method: two independent normals per accepted pair; needs only det_log
// and sqrt.
void normal_pair(uint64_t& state, double& z0, double& z1) {
  for (;;) {
    double u = 2.0 * uniform01(state) - 1.0;
    double v = 2.0 * uniform01(state) - 1.0;
    double s = u * u + v * v;
    if (s > 0.0 && s < 1.0) {
      double f = std::sqrt(-2.0 * det_log(s) / s);
      z0 = u * f;
      z1 = v * f;
      return;
    }
  }
}

// A special value: NaN, +Inf, -Inf, -0.0, or a subnormal of the dtype.
void put_special(DType dtype, void* out, size_t i, uint64_t& state) {
  uint64_t pick = below(state, 6);
  if (dtype == DType::f32) {
    float v;
    switch (pick) {
      case 0: v = std::numeric_limits<float>::quiet_NaN(); break;
      case 1: v = std::numeric_limits<float>::infinity(); break;
      case 2: v = -std::numeric_limits<float>::infinity(); break;
      case 3: v = -0.0f; break;
      default: {
        uint32_t bits = static_cast<uint32_t>(1 + below(state, 0x7FFFFF));
        if (pick == 5) bits |= 0x80000000u;
        std::memcpy(&v, &bits, sizeof v);
      }
    }
    static_cast<float*>(out)[i] = v;
  } else {
    double v;
    switch (pick) {
      case 0: v = std::numeric_limits<double>::quiet_NaN(); break;
      case 1: v = std::numeric_limits<double>::infinity(); break;
      case 2: v = -std::numeric_limits<double>::infinity(); break;
      case 3: v = -0.0; break;
      default: {
        uint64_t bits = 1 + below(state, 0xFFFFFFFFFFFFFULL);
        if (pick == 5) bits |= 0x8000000000000000ULL;
        std::memcpy(&v, &bits, sizeof v);
      }
    }
    static_cast<double*>(out)[i] = v;
  }
}

struct Resolved {
  InitSpec::Kind kind;
  double a = 0, b = 0;
  double specials = 0;
};

template <class T>
void fill_block_typed(const Resolved& r, DType dtype, uint64_t seed, T* out, size_t begin, size_t end) {
  uint64_t state = mix(seed, begin / k_block);
  double spare = 0;
  bool have_spare = false;
  for (size_t i = begin; i < end; ++i) {
    double v = 0;
    switch (r.kind) {
      case InitSpec::Kind::normal: {
        double z;
        if (have_spare) {
          z = spare;
          have_spare = false;
        } else {
          normal_pair(state, z, spare);
          have_spare = true;
        }
        v = r.a + r.b * z;
        break;
      }
      case InitSpec::Kind::uniform: v = r.a + (r.b - r.a) * uniform01(state); break;
      case InitSpec::Kind::randint: {
        auto lo = static_cast<int64_t>(r.a), hi = static_cast<int64_t>(r.b);
        v = static_cast<double>(lo + static_cast<int64_t>(below(state, static_cast<uint64_t>(hi - lo) + 1)));
        break;
      }
      case InitSpec::Kind::constant: v = r.a; break;
      case InitSpec::Kind::arange: v = r.a + r.b * static_cast<double>(i); break;
    }
    out[i] = static_cast<T>(v);
    if (r.specials > 0 && uniform01(state) < r.specials) put_special(dtype, out, i, state);
  }
}

void fill_block(const Resolved& r, DType dtype, uint64_t seed, void* out, size_t begin, size_t end) {
  switch (dtype) {
    case DType::f32: fill_block_typed(r, dtype, seed, static_cast<float*>(out), begin, end); break;
    case DType::f64: fill_block_typed(r, dtype, seed, static_cast<double*>(out), begin, end); break;
    case DType::i32: fill_block_typed(r, dtype, seed, static_cast<int32_t*>(out), begin, end); break;
    case DType::i64: fill_block_typed(r, dtype, seed, static_cast<int64_t*>(out), begin, end); break;
  }
}

}  // namespace

double det_log(double x) {
  if (!(x > 0)) return std::numeric_limits<double>::quiet_NaN();
  int e = 0;
  double m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1): exact
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  // ln(m) = 2 atanh(t) = 2 (t + t^3/3 + t^5/5 + ...), t = (m-1)/(m+1), |t| <= 0.1716 so
  // t^2 <= 0.0295: twelve terms leave a relative error below 1e-18. Horner form with fixed
  // coefficients; no FMA (this file is compiled with -ffp-contract=off).
  static constexpr double k_inv_odd[12] = {1.0,       1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11,
                                           1.0 / 13,  1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23};
  double t = (m - 1.0) / (m + 1.0);
  double t2 = t * t;
  double poly = k_inv_odd[11];
  for (int k = 10; k >= 0; --k) poly = poly * t2 + k_inv_odd[k];
  constexpr double k_ln2 = 0.69314718055994530942;
  return 2.0 * t * poly + static_cast<double>(e) * k_ln2;
}

uint64_t derive_seed(uint64_t evaluation_seed, uint64_t case_index, uint64_t tensor_index) {
  return mix(mix(evaluation_seed, case_index + 1), tensor_index + 0x51);
}

void generate(const InitSpec& init, DType dtype, const DimValues& dims, uint64_t seed, void* out,
              size_t count) {
  Resolved r;
  r.kind = init.kind;
  if (!init.args.empty()) r.a = init.args[0].eval(dims);
  if (init.args.size() > 1) r.b = init.args[1].eval(dims);
  r.specials = dtype_is_float(dtype) ? init.specials : 0.0;
  if (r.kind == InitSpec::Kind::randint && r.b < r.a) r.b = r.a;
  size_t blocks = (count + k_block - 1) / k_block;
  unsigned threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), blocks / 64 + 1);
  auto work = [&](unsigned t) {
    for (size_t blk = t; blk < blocks; blk += threads) {
      fill_block(r, dtype, seed, out, blk * k_block, std::min(count, (blk + 1) * k_block));
    }
  };
  if (threads <= 1) {
    work(0);
    return;
  }
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
}

const InitSpec& default_init(DType dtype) {
  static const InitSpec k_float = *InitSpec::parse("normal(0, 1)", DType::f32);
  static const InitSpec k_int = *InitSpec::parse("randint(-100, 100)", DType::i64);
  return dtype_is_float(dtype) ? k_float : k_int;
}

void generate_inputs(const OpSpec& op, const Case& c, uint64_t evaluation_seed, void* const* buffers) {
  DimValues dv = op.dim_values(c);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor& t = op.inputs[i];
    const InitSpec& init = t.init ? *t.init : default_init(t.dtype);
    generate(init, t.dtype, dv, derive_seed(evaluation_seed, static_cast<uint64_t>(c.index), i), buffers[i],
             op.element_count(t, c));
  }
}

Result<InitSpec> InitSpec::parse(std::string_view text, DType dtype) {
  InitSpec spec;
  spec.text = std::string(text);
  std::string_view main = text;
  std::string_view modifier;
  if (auto bar = text.find('|'); bar != std::string_view::npos) {
    main = text.substr(0, bar);
    modifier = util::trim(text.substr(bar + 1));
  }
  main = util::trim(main);
  auto open = main.find('(');
  if (open == std::string_view::npos || !main.ends_with(")")) {
    return fail(ErrorKind::config, "'{}' is not of the form name(args) (expected normal(m, s), uniform(a, b), randint(lo, hi), const(v) or arange(start, step))", text);
  }
  std::string name(util::trim(main.substr(0, open)));
  std::string_view inner = main.substr(open + 1, main.size() - open - 2);
  // Split arguments on top-level commas.
  std::vector<std::string> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    if (i == inner.size() || (inner[i] == ',' && depth == 0)) {
      parts.emplace_back(util::trim(inner.substr(start, i - start)));
      start = i + 1;
    } else if (inner[i] == '(') {
      ++depth;
    } else if (inner[i] == ')') {
      --depth;
    }
  }
  if (parts.size() == 1 && parts[0].empty()) parts.clear();
  size_t want = 2;
  if (name == "normal") {
    spec.kind = Kind::normal;
  } else if (name == "uniform") {
    spec.kind = Kind::uniform;
  } else if (name == "randint") {
    spec.kind = Kind::randint;
  } else if (name == "const") {
    spec.kind = Kind::constant;
    want = 1;
  } else if (name == "arange") {
    spec.kind = Kind::arange;
  } else {
    return fail(ErrorKind::config, "unknown generator '{}' (expected normal, uniform, randint, const or arange)", name);
  }
  if (parts.size() != want) {
    return fail(ErrorKind::config, "{}() takes {} argument{}, got {}", name, want, want == 1 ? "" : "s", parts.size());
  }
  for (const auto& p : parts) {
    KOPE_ASSIGN(Expr e, Expr::parse(p));
    spec.args.push_back(std::move(e));
  }
  if (!dtype_is_float(dtype) && (spec.kind == Kind::normal || spec.kind == Kind::uniform)) {
    return fail(ErrorKind::config, "{}() makes fractional values; integer dtype {} needs randint(lo, hi), const(v) or arange(start, step)", name, dtype_name(dtype));
  }
  if (spec.kind == Kind::normal && spec.args[1].names().empty() && spec.args[1].eval({}) < 0) {
    return fail(ErrorKind::config, "normal() standard deviation must be >= 0");
  }
  if (!modifier.empty()) {
    if (!modifier.starts_with("specials(") || !modifier.ends_with(")")) {
      return fail(ErrorKind::config, "unknown modifier '{}' (expected specials(p))", modifier);
    }
    if (!dtype_is_float(dtype)) return fail(ErrorKind::config, "specials() needs a float dtype, not {}", dtype_name(dtype));
    KOPE_ASSIGN(Expr p, Expr::parse(modifier.substr(9, modifier.size() - 10)));
    if (!p.names().empty()) return fail(ErrorKind::config, "specials(p) takes a constant fraction");
    spec.specials = p.eval({});
    if (!(spec.specials >= 0 && spec.specials <= 1)) return fail(ErrorKind::config, "specials(p): p = {} is not in [0, 1]", spec.specials);
  }
  return spec;
}

}  // namespace kope::spec
