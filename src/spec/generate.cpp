// Deterministic generators. Compiled with -ffp-contract=off (see CMakeLists.txt): an FMA would
// round differently and change bytes between machines.
#include "spec/generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "spec/dtype.h"
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

// Marsaglia's polar method (two independent normals per accepted pair; only det_log and sqrt):
// f[k] = sqrt(-2 det_log(s[k]) / s[k]) for the accepted pairs' s in (0, 1), bit for bit the
// scalar expression (the tail's), four pairs per step on vectors (GCC's vector types:
// one AVX2 instruction per operation in the avx2 clone, two SSE2 ones in the default). Every
// operation is the scalar one, in the same order, so every lane rounds as the scalar code does.
// s is a normal double (s >= 2^-106), so frexp is the exponent field's arithmetic; a select by
// mask replaces det_log's branch, and its series is unrolled (the same terms in the same order).
using v4d = double __attribute__((vector_size(32)));
using v4u = uint64_t __attribute__((vector_size(32)));

[[gnu::target_clones("avx2", "default")]] void polar_factors(const double* s, double* f, size_t n) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    v4d x;
    std::memcpy(&x, s + k, sizeof x);
    v4u bits = __builtin_bit_cast(v4u, x);
    v4d m = __builtin_bit_cast(v4d, (bits & 0x000FFFFFFFFFFFFFULL) | 0x3FE0000000000000ULL);      // in [0.5, 1)
    v4d e = __builtin_bit_cast(v4d, ((bits >> 52) & 0x7FF) | 0x4330000000000000ULL);              // 2^52 + field
    e = (e - 4503599627370496.0) - 1022.0;                                                    // frexp's exponent
    v4d one = {1.0, 1.0, 1.0, 1.0};
    auto low = m < 0.70710678118654752440;
    m = low ? m * 2.0 : m;
    e = low ? e - one : e;
    v4d t = (m - 1.0) / (m + 1.0);
    v4d t2 = t * t;
    v4d poly = t2 * (1.0 / 23) + 1.0 / 21;
    poly = poly * t2 + 1.0 / 19;
    poly = poly * t2 + 1.0 / 17;
    poly = poly * t2 + 1.0 / 15;
    poly = poly * t2 + 1.0 / 13;
    poly = poly * t2 + 1.0 / 11;
    poly = poly * t2 + 1.0 / 9;
    poly = poly * t2 + 1.0 / 7;
    poly = poly * t2 + 1.0 / 5;
    poly = poly * t2 + 1.0 / 3;
    poly = poly * t2 + 1.0;
    v4d ln = 2.0 * t * poly + e * 0.69314718055994530942;
    v4d q = -2.0 * ln / x;
    for (int lane = 0; lane < 4; ++lane) f[k + static_cast<size_t>(lane)] = __builtin_sqrt(q[lane]);
  }
  for (; k < n; ++k) f[k] = std::sqrt(-2.0 * det_log(s[k]) / s[k]);
}

// The bits of a special value of f16 or bf16, as put_special picks them.
uint16_t half_special(DType dtype, uint64_t pick, uint64_t& state) {
  bool f16 = dtype == DType::f16;
  switch (pick) {
    case 0: return f16 ? 0x7E00 : 0x7FC0;  // quiet NaN
    case 1: return f16 ? 0x7C00 : 0x7F80;  // +Inf
    case 2: return f16 ? 0xFC00 : 0xFF80;  // -Inf
    case 3: return 0x8000;                 // -0
    default: {
      auto bits = static_cast<uint16_t>(1 + below(state, f16 ? 0x3FF : 0x7F));
      return pick == 5 ? static_cast<uint16_t>(bits | 0x8000) : bits;
    }
  }
}

// A special value: NaN, +Inf, -Inf, -0.0, or a subnormal of the dtype.
void put_special(DType dtype, void* out, size_t i, uint64_t& state) {
  uint64_t pick = below(state, 6);
  if (dtype_is_half(dtype)) {
    static_cast<uint16_t*>(out)[i] = half_special(dtype, pick, state);
  } else if (dtype == DType::f32) {
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

// fill_block_with for normal(): the same draws in the same order, in two passes. The first
// walks the stream as the element loop does (a pair's rejection loop before each even element,
// the specials draw after every element) and keeps each accepted pair's u, v and s, and each
// special with its element; the second computes the pairs' factors in bulk (polar_factors)
// and stores the values, then the specials over them, as put_special did in place.
template <class Store>
void fill_normal_block(const Resolved& r, DType dtype, uint64_t seed, void* out, Store store, size_t begin, size_t end) {
  constexpr size_t k_pairs = k_block / 2;
  struct Special {
    size_t i;
    unsigned char bytes[8];
  };
  double u[k_pairs], v[k_pairs], s[k_pairs], f[k_pairs];
  std::vector<Special> specials;
  const size_t special_bytes = dtype_is_half(dtype) ? 2 : dtype == DType::f32 ? 4 : 8;  // what put_special writes
  uint64_t state = mix(seed, begin / k_block);
  const size_t n = end - begin;
  for (size_t j = 0; j < n; ++j) {
    if ((j & 1) == 0) {
      for (;;) {
        double a = 2.0 * uniform01(state) - 1.0;
        double b = 2.0 * uniform01(state) - 1.0;
        double q = a * a + b * b;
        if (q > 0.0 && q < 1.0) {
          u[j / 2] = a;
          v[j / 2] = b;
          s[j / 2] = q;
          break;
        }
      }
    }
    if (r.specials > 0 && uniform01(state) < r.specials) {
      Special sp{begin + j, {}};
      put_special(dtype, sp.bytes, 0, state);
      specials.push_back(sp);
    }
  }
  const size_t pairs = (n + 1) / 2;
  polar_factors(s, f, pairs);
  for (size_t k = 0; k < pairs; ++k) {
    store(begin + 2 * k, r.a + r.b * (u[k] * f[k]));
    if (2 * k + 1 < n) store(begin + 2 * k + 1, r.a + r.b * (v[k] * f[k]));
  }
  for (const auto& sp : specials) std::memcpy(static_cast<unsigned char*>(out) + sp.i * special_bytes, sp.bytes, special_bytes);
}

// Fills elements [begin, end) through `store(i, v)`; the RNG stream depends only on the seed and
// the block, never on the dtype, so every dtype draws the same values.
template <class Store>
void fill_block_with(const Resolved& r, DType dtype, uint64_t seed, void* out, Store store, size_t begin, size_t end) {
  if (r.kind == InitSpec::Kind::normal) {
    fill_normal_block(r, dtype, seed, out, store, begin, end);
    return;
  }
  uint64_t state = mix(seed, begin / k_block);
  for (size_t i = begin; i < end; ++i) {
    double v = 0;
    switch (r.kind) {
      case InitSpec::Kind::uniform: v = r.a + (r.b - r.a) * uniform01(state); break;
      case InitSpec::Kind::randint: {
        auto lo = static_cast<int64_t>(r.a), hi = static_cast<int64_t>(r.b);
        v = static_cast<double>(lo + static_cast<int64_t>(below(state, static_cast<uint64_t>(hi - lo) + 1)));
        break;
      }
      case InitSpec::Kind::constant: v = r.a; break;
      case InitSpec::Kind::arange: v = r.a + r.b * static_cast<double>(i); break;
      case InitSpec::Kind::mask: v = uniform01(state) < r.a ? 1.0 : 0.0; break;
      default: break;  // normal: fill_normal_block; the structured generators fill by shape (generate_shaped)
    }
    store(i, v);
    if (r.specials > 0 && uniform01(state) < r.specials) put_special(dtype, out, i, state);
  }
}

template <class T>
void fill_block_typed(const Resolved& r, DType dtype, uint64_t seed, T* out, size_t begin, size_t end) {
  fill_block_with(r, dtype, seed, out, [out](size_t i, double v) { out[i] = static_cast<T>(v); }, begin, end);
}

void fill_block(const Resolved& r, DType dtype, uint64_t seed, void* out, size_t begin, size_t end) {
  switch (dtype) {
    case DType::f32: fill_block_typed(r, dtype, seed, static_cast<float*>(out), begin, end); break;
    case DType::f64: fill_block_typed(r, dtype, seed, static_cast<double*>(out), begin, end); break;
    case DType::i32: fill_block_typed(r, dtype, seed, static_cast<int32_t*>(out), begin, end); break;
    case DType::i64: fill_block_typed(r, dtype, seed, static_cast<int64_t*>(out), begin, end); break;
    default:  // the narrow dtypes: converted by the ABI's storage rules (spec/dtype.h)
      fill_block_with(r, dtype, seed, out, [dtype, out](size_t i, double v) { store_element(dtype, out, i, v); }, begin, end);
  }
}

// Constant arguments of an integer generator must stay within the dtype (a dim-dependent one is
// saturated when generated).
Status check_int_range(const InitSpec& spec, const std::string& name, DType dtype) {
  int64_t lo = dtype_int_min(dtype), hi = dtype_int_max(dtype);
  auto inside = [&](const Expr& e) {
    if (!e.names().empty()) return true;
    double v = e.eval({});
    return v >= static_cast<double>(lo) && v <= static_cast<double>(hi);
  };
  bool ok = true;
  if (spec.kind == InitSpec::Kind::randint || spec.kind == InitSpec::Kind::constant) {
    for (const auto& a : spec.args) ok = ok && inside(a);
  } else if (spec.kind == InitSpec::Kind::arange) {
    ok = inside(spec.args[0]);
  }
  if (!ok) return fail(ErrorKind::config, "{}() gives values outside {} ({}..{})", name, dtype_name(dtype), lo, hi);
  return {};
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
  // coefficients; no FMA (this file is compiled with -ffp-contract=off). polar_factors has the
  // same series unrolled: a change here is a change there.
  static constexpr double k_inv_odd[12] = {1.0,       1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11,
                                           1.0 / 13,  1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23};
  double t = (m - 1.0) / (m + 1.0);
  double t2 = t * t;
  double poly = k_inv_odd[11];
  for (int k = 10; k >= 0; --k) poly = poly * t2 + k_inv_odd[k];
  constexpr double k_ln2 = 0.69314718055994530942;
  return 2.0 * t * poly + static_cast<double>(e) * k_ln2;
}

double det_exp(double x) {
  if (std::isnan(x)) return x;
  if (x > 709.8) return std::numeric_limits<double>::infinity();
  if (x < -745.2) return 0.0;
  // x = k ln2 + r with |r| <= ln2/2; ln2 split in two (fdlibm's constants) so k * hi is exact.
  constexpr double k_ln2_hi = 6.93147180369123816490e-01, k_ln2_lo = 1.90821492927058770002e-10;
  double k = std::floor(x / 0.69314718055994530942 + 0.5);
  double r = (x - k * k_ln2_hi) - k * k_ln2_lo;
  // exp(r) by its Taylor series in Horner form: 18 terms leave a relative error below 1e-18.
  double sum = 1.0;
  for (int n = 18; n >= 1; --n) sum = 1.0 + sum * r / static_cast<double>(n);
  return std::ldexp(sum, static_cast<int>(k));
}

double det_pow(double a, double b) {
  if (b == std::floor(b) && std::fabs(b) <= 64) {  // integer powers by repeated squaring
    double result = 1.0, base = a;
    for (auto e = static_cast<uint64_t>(std::fabs(b)); e > 0; e >>= 1) {
      if (e & 1) result *= base;
      base *= base;
    }
    return b < 0 ? 1.0 / result : result;
  }
  if (a > 0) return det_exp(b * det_log(a));
  if (a == 0) return b > 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();  // a negative base to a fractional power
}

uint64_t derive_seed(uint64_t evaluation_seed, uint64_t case_index, uint64_t tensor_index) {
  return mix(mix(evaluation_seed, case_index + 1), tensor_index + 0x51);
}

void generate(const InitSpec& init, DType dtype, const DimValues& dims, uint64_t seed, void* out,
              size_t count) {
  if (init.structured()) {
    generate_shaped(init, dtype, dims, {static_cast<int64_t>(count)}, seed, out);
    return;
  }
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

namespace {

// Matrices of the last two axes: `rows` matrices of n x n.
struct MatrixShape {
  size_t count = 1;  // how many matrices (the product of the leading axes)
  size_t n = 0;
};

MatrixShape matrix_shape(const std::vector<int64_t>& shape) {
  MatrixShape m;
  m.n = shape.empty() ? 0 : static_cast<size_t>(shape.back());
  for (size_t a = 0; a + 2 < shape.size(); ++a) m.count *= static_cast<size_t>(shape[a]);
  return m;
}

// The draws of a plain generator, as doubles.
std::vector<double> draws(const InitSpec& g, const DimValues& dims, uint64_t seed, size_t count) {
  std::vector<double> v(count);
  generate(g, DType::f64, dims, seed, v.data(), count);
  return v;
}

// triangular, diag_dominant, spd: every matrix from the `diag` and `off` draws (element (i, j)
// of matrix b takes draw b*n*n + i*n + j of `off`; spd mirrors the upper triangle).
void fill_matrices(const InitSpec& init, DType dtype, const DimValues& dims, const std::vector<int64_t>& shape, uint64_t seed,
                   void* out) {
  MatrixShape m = matrix_shape(shape);
  size_t per = m.n * m.n;
  std::vector<double> diag = draws(init.parts[0], dims, mix(seed, 1), m.count * m.n);
  std::vector<double> off = draws(init.parts[1], dims, mix(seed, 2), m.count * per);
  for (size_t b = 0; b < m.count; ++b) {
    const double* o = off.data() + b * per;
    for (size_t i = 0; i < m.n; ++i) {
      double row = 0;  // the sum of |off-diagonal| of row i
      for (size_t j = 0; j < m.n; ++j) {
        if (j == i) continue;
        double v = o[i * m.n + j];
        if (init.kind == InitSpec::Kind::triangular) {
          v = (init.upper ? j > i : j < i) ? v : 0.0;
        } else if (init.kind == InitSpec::Kind::spd && j < i) {
          v = o[j * m.n + i];
        }
        store_element(dtype, out, b * per + i * m.n + j, v);
        row += std::fabs(v);
      }
      double d = diag[b * m.n + i];
      if (init.kind != InitSpec::Kind::triangular) d += row;
      store_element(dtype, out, b * per + i * m.n + i, d);
    }
  }
}

// index(expr): each element's value from its axis indices.
void fill_index(const InitSpec& init, DType dtype, const DimValues& dims, const std::vector<int64_t>& shape, void* out) {
  static constexpr const char* k_axes[] = {"i", "j", "k", "l", "m", "n"};
  DimValues env = dims;
  size_t count = 1;
  for (int64_t e : shape) count *= static_cast<size_t>(e);
  std::vector<int64_t> at(shape.size(), 0);
  for (size_t flat = 0; flat < count; ++flat) {
    for (size_t a = 0; a < shape.size() && a < 6; ++a) env[k_axes[a]] = at[a];
    store_element(dtype, out, flat, init.args[0].eval(env));
    for (size_t a = shape.size(); a-- > 0;) {  // the next index, row-major
      if (++at[a] < shape[a]) break;
      at[a] = 0;
    }
  }
}

// permutation and onehot: one RNG stream per row of the last axis.
void fill_rows(const InitSpec& init, DType dtype, const std::vector<int64_t>& shape, uint64_t seed, void* out) {
  size_t n = static_cast<size_t>(shape.back());
  size_t rows = 1;
  for (size_t a = 0; a + 1 < shape.size(); ++a) rows *= static_cast<size_t>(shape[a]);
  std::vector<int64_t> row(n);
  for (size_t r = 0; r < rows; ++r) {
    uint64_t state = mix(seed, r);
    if (init.kind == InitSpec::Kind::permutation) {
      for (size_t k = 0; k < n; ++k) row[k] = static_cast<int64_t>(k);
      for (size_t k = n; k > 1; --k) std::swap(row[k - 1], row[below(state, k)]);  // Fisher-Yates
    } else {
      std::fill(row.begin(), row.end(), 0);
      if (n > 0) row[below(state, n)] = 1;
    }
    for (size_t k = 0; k < n; ++k) store_element(dtype, out, r * n + k, static_cast<double>(row[k]));
  }
}

}  // namespace

void generate_shaped(const InitSpec& init, DType dtype, const DimValues& dims, const std::vector<int64_t>& shape, uint64_t seed,
                     void* out) {
  size_t count = 1;
  for (int64_t e : shape) count *= static_cast<size_t>(e);
  if (count == 0) return;
  if (!init.shape_problem(shape).empty()) {  // rejected at load; never fill past the buffer
    std::memset(out, 0, count * dtype_size(dtype));
    return;
  }
  switch (init.kind) {
    case InitSpec::Kind::triangular:
    case InitSpec::Kind::diag_dominant:
    case InitSpec::Kind::spd: fill_matrices(init, dtype, dims, shape, seed, out); break;
    case InitSpec::Kind::index: fill_index(init, dtype, dims, shape, out); break;
    case InitSpec::Kind::permutation:
    case InitSpec::Kind::onehot: fill_rows(init, dtype, shape, seed, out); break;
    default: generate(init, dtype, dims, seed, out, count);
  }
}

const InitSpec& default_init(DType dtype) {
  static const InitSpec k_float = *InitSpec::parse("normal(0, 1)", DType::f32);
  static const InitSpec k_int = *InitSpec::parse("randint(-100, 100)", DType::i64);
  static const InitSpec k_unsigned = *InitSpec::parse("randint(0, 255)", DType::u8);
  static const InitSpec k_bool = *InitSpec::parse("randint(0, 1)", DType::boolean);
  if (dtype_is_float(dtype)) return k_float;
  if (dtype == DType::u8) return k_unsigned;
  if (dtype == DType::boolean) return k_bool;
  return k_int;
}

void generate_inputs(const OpSpec& op, const Case& c, uint64_t evaluation_seed, void* const* buffers) {
  DimValues dv = op.dim_values(c);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor& t = op.inputs[i];
    const InitSpec& init = t.init ? *t.init : default_init(t.dtype);
    generate_shaped(init, t.dtype, dv, op.shape_of(t, c), derive_seed(evaluation_seed, static_cast<uint64_t>(c.index), i),
                    buffers[i]);
  }
}

void copy_inouts(const OpSpec& op, const Case& c, void* const* buffers) {
  for (auto [in, out] : op.inout_pairs()) {
    std::memcpy(buffers[op.inputs.size() + out], buffers[in], op.byte_size(op.inputs[in], c));
  }
}

namespace {

const char* k_generator_list =
    "normal(m, s), uniform(a, b), randint(lo, hi), const(v), arange(start, step), triangular(lower|upper, diag = G, off = G), "
    "diag_dominant(diag = G, off = G), spd(diag = G, off = G), index(expr), permutation, onehot or mask(p)";

// The axis names an index() expression may use, axis 0 first.
constexpr std::string_view k_axis_names[] = {"i", "j", "k", "l", "m", "n"};

struct Call {
  std::string name;
  std::vector<std::string> args;  // trimmed, split on top-level commas
};

Result<Call> split_call(std::string_view text, std::string_view whole) {
  Call call;
  auto open = text.find('(');
  if (open == std::string_view::npos) {
    call.name = std::string(util::trim(text));  // a bare name: permutation, onehot
    return call;
  }
  if (!text.ends_with(")")) return fail(ErrorKind::config, "'{}' is not of the form name(args) (expected {})", whole, k_generator_list);
  call.name = std::string(util::trim(text.substr(0, open)));
  std::string_view inner = text.substr(open + 1, text.size() - open - 2);
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= inner.size(); ++i) {
    if (i == inner.size() || (inner[i] == ',' && depth == 0)) {
      call.args.emplace_back(util::trim(inner.substr(start, i - start)));
      start = i + 1;
    } else if (inner[i] == '(') {
      ++depth;
    } else if (inner[i] == ')') {
      --depth;
    }
  }
  if (call.args.size() == 1 && call.args[0].empty()) call.args.clear();
  return call;
}

Status want_args(const Call& call, size_t want) {
  if (call.args.size() == want) return {};
  return fail(ErrorKind::config, "{}() takes {} argument{}, got {}", call.name, want, want == 1 ? "" : "s", call.args.size());
}

std::optional<InitSpec::Kind> plain_kind(std::string_view name) {
  using Kind = InitSpec::Kind;
  if (name == "normal") return Kind::normal;
  if (name == "uniform") return Kind::uniform;
  if (name == "randint") return Kind::randint;
  if (name == "const") return Kind::constant;
  if (name == "arange") return Kind::arange;
  return std::nullopt;
}

// The plain generators: normal, uniform, randint, const, arange.
Result<InitSpec> parse_plain(const Call& call, InitSpec::Kind kind, DType dtype) {
  using Kind = InitSpec::Kind;
  InitSpec spec;
  spec.kind = kind;
  KOPE_TRY(want_args(call, kind == Kind::constant ? 1 : 2));
  for (const auto& p : call.args) {
    KOPE_ASSIGN(Expr e, Expr::parse(p));
    spec.args.push_back(std::move(e));
  }
  if (!dtype_is_float(dtype) && (kind == Kind::normal || kind == Kind::uniform)) {
    return fail(ErrorKind::config, "{}() makes fractional values; integer dtype {} needs randint(lo, hi), const(v) or arange(start, step)", call.name, dtype_name(dtype));
  }
  if (!dtype_is_float(dtype)) KOPE_TRY(check_int_range(spec, call.name, dtype));
  if (kind == Kind::normal && spec.args[1].names().empty() && spec.args[1].eval({}) < 0) {
    return fail(ErrorKind::config, "normal() standard deviation must be >= 0");
  }
  return spec;
}

// triangular(lower|upper, diag = G, off = G), diag_dominant(diag = G, off = G), spd(...).
Result<InitSpec> parse_matrix(const Call& call, InitSpec::Kind kind, DType dtype) {
  InitSpec spec;
  spec.kind = kind;
  if (!dtype_is_float(dtype)) return fail(ErrorKind::config, "{}() makes a float matrix, not {}", call.name, dtype_name(dtype));
  spec.parts = {*InitSpec::parse("uniform(1, 2)", DType::f64), *InitSpec::parse("uniform(-1, 1)", DType::f64)};
  size_t first = 0;
  if (kind == InitSpec::Kind::triangular) {
    if (call.args.empty() || (call.args[0] != "lower" && call.args[0] != "upper")) {
      return fail(ErrorKind::config, "triangular() needs lower or upper first, e.g. triangular(lower, diag = uniform(1, 2))");
    }
    spec.upper = call.args[0] == "upper";
    first = 1;
  }
  for (size_t a = first; a < call.args.size(); ++a) {
    const std::string& arg = call.args[a];
    auto eq = arg.find('=');
    std::string key = eq == std::string::npos ? "" : std::string(util::trim(std::string_view(arg).substr(0, eq)));
    if (key != "diag" && key != "off") {
      return fail(ErrorKind::config, "{}(): argument '{}' should be diag = G or off = G (G a plain generator such as uniform(1, 2))", call.name, arg);
    }
    std::string_view value = util::trim(std::string_view(arg).substr(eq + 1));
    KOPE_ASSIGN(Call inner, split_call(value, value));
    auto inner_kind = plain_kind(inner.name);
    if (!inner_kind) return fail(ErrorKind::config, "{}(): {} = {} is not a plain generator (normal, uniform, randint, const, arange)", call.name, key, value);
    KOPE_ASSIGN(InitSpec part, parse_plain(inner, *inner_kind, DType::f64));
    part.text = std::string(value);
    spec.parts[key == "diag" ? 0 : 1] = std::move(part);
  }
  return spec;
}

}  // namespace

Result<InitSpec> InitSpec::parse(std::string_view text, DType dtype) {
  std::string_view main = text;
  std::string_view modifier;
  if (auto bar = text.find('|'); bar != std::string_view::npos) {
    main = text.substr(0, bar);
    modifier = util::trim(text.substr(bar + 1));
  }
  KOPE_ASSIGN(Call call, split_call(util::trim(main), text));
  InitSpec spec;
  if (auto plain = plain_kind(call.name)) {
    KOPE_ASSIGN(spec, parse_plain(call, *plain, dtype));
  } else if (call.name == "triangular" || call.name == "diag_dominant" || call.name == "spd") {
    Kind kind = call.name == "triangular" ? Kind::triangular : call.name == "spd" ? Kind::spd : Kind::diag_dominant;
    KOPE_ASSIGN(spec, parse_matrix(call, kind, dtype));
  } else if (call.name == "index") {
    KOPE_TRY(want_args(call, 1));
    spec.kind = Kind::index;
    KOPE_ASSIGN(Expr e, Expr::parse(call.args[0]));
    spec.args.push_back(std::move(e));
  } else if (call.name == "permutation" || call.name == "onehot") {
    KOPE_TRY(want_args(call, 0));
    spec.kind = call.name == "permutation" ? Kind::permutation : Kind::onehot;
    if (spec.kind == Kind::permutation && dtype == DType::boolean) return fail(ErrorKind::config, "permutation needs a numeric dtype, not bool");
  } else if (call.name == "mask") {
    KOPE_TRY(want_args(call, 1));
    spec.kind = Kind::mask;
    KOPE_ASSIGN(Expr p, Expr::parse(call.args[0]));
    if (!p.names().empty() || !(p.eval({}) >= 0 && p.eval({}) <= 1)) {
      return fail(ErrorKind::config, "mask(p) takes a constant probability in [0, 1], not '{}'", call.args[0]);
    }
    spec.args.push_back(std::move(p));
  } else {
    return fail(ErrorKind::config, "unknown generator '{}' (expected {})", call.name, k_generator_list);
  }
  spec.text = std::string(text);
  if (!modifier.empty()) {
    if (!modifier.starts_with("specials(") || !modifier.ends_with(")")) {
      return fail(ErrorKind::config, "unknown modifier '{}' (expected specials(p))", modifier);
    }
    if (!dtype_is_float(dtype)) return fail(ErrorKind::config, "specials() needs a float dtype, not {}", dtype_name(dtype));
    if (spec.structured()) return fail(ErrorKind::config, "specials() applies to the plain generators only, not {}", call.name);
    KOPE_ASSIGN(Expr p, Expr::parse(modifier.substr(9, modifier.size() - 10)));
    if (!p.names().empty()) return fail(ErrorKind::config, "specials(p) takes a constant fraction");
    spec.specials = p.eval({});
    if (!(spec.specials >= 0 && spec.specials <= 1)) return fail(ErrorKind::config, "specials(p): p = {} is not in [0, 1]", spec.specials);
  }
  return spec;
}

bool InitSpec::structured() const {
  switch (kind) {
    case Kind::triangular:
    case Kind::diag_dominant:
    case Kind::spd:
    case Kind::index:
    case Kind::permutation:
    case Kind::onehot: return true;
    default: return false;
  }
}

std::set<std::string> InitSpec::dim_names() const {
  std::set<std::string> out;
  for (const auto& a : args) {
    for (const auto& n : a.names()) {
      bool axis = kind == Kind::index && std::find(std::begin(k_axis_names), std::end(k_axis_names), n) != std::end(k_axis_names);
      if (!axis) out.insert(n);
    }
  }
  for (const auto& p : parts) out.merge(p.dim_names());
  return out;
}

std::string InitSpec::shape_problem(const std::vector<int64_t>& shape) const {
  switch (kind) {
    case Kind::triangular:
    case Kind::diag_dominant:
    case Kind::spd:
      if (shape.size() < 2 || shape[shape.size() - 1] != shape[shape.size() - 2]) {
        return fmt::format("{} fills square matrices: the last two axes must be equal", text);
      }
      return "";
    case Kind::index: {
      for (const auto& n : args[0].names()) {
        auto it = std::find(std::begin(k_axis_names), std::end(k_axis_names), n);
        if (it != std::end(k_axis_names) && static_cast<size_t>(it - std::begin(k_axis_names)) >= shape.size()) {
          return fmt::format("{} uses axis '{}' but the tensor has {} ax{}", text, n, shape.size(), shape.size() == 1 ? "is" : "es");
        }
      }
      return "";
    }
    case Kind::permutation:
    case Kind::onehot:
      if (shape.empty()) return fmt::format("{} fills rows: the tensor needs at least one axis", text);
      return "";
    default: return "";
  }
}

}  // namespace kope::spec
