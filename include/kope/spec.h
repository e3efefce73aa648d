// kope/spec.h — operator specs: the op.toml format, shapes, cases and the CPU kernel ABI.
//
// An operator lives in a folder with `op.toml` and `reference.cpp` (docs/design.md §2), and
// optionally `library.cpp`: the same ABI implemented with a vendor library (oneDNN or OpenBLAS),
// the baseline speedups are measured against. load_op() validates everything and reports each
// problem as "path:line:column: what is wrong (what was expected)". Loaded specs are immutable
// values; all functions here are thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kope/error.h"

namespace kope::spec {

namespace fs = std::filesystem;

// Element types (docs/design.md §2, "Dtypes"). f16 and bf16 are storage formats: a kernel sees
// their bits as uint16_t (IEEE binary16; the upper half of an f32), bool is one byte 0 or 1.
enum class DType { f32, f64, i32, i64, boolean, i8, u8, i16, f16, bf16 };

std::string_view dtype_name(DType t);   // "f32", "bool", "bf16"
// The C type of one element in the kernel ABI: "float", "double", "int32_t", "int64_t",
// "uint8_t" (bool), "int8_t", "uint8_t", "int16_t", "uint16_t" (f16, bf16).
std::string_view dtype_ctype(DType t);
size_t dtype_size(DType t);
// True for every dtype holding floating-point values: f32, f64, f16, bf16.
bool dtype_is_float(DType t);
// True for f16 and bf16, whose C type (uint16_t bits) does not say what they hold.
bool dtype_is_half(DType t);
std::optional<DType> parse_dtype(std::string_view s);
// "f32, f64, f16, bf16, i64, i32, i16, i8, u8 or bool", for messages.
std::string_view dtype_list();
// The smallest and largest value an integer or bool dtype holds (bool: 0 and 1).
int64_t dtype_int_min(DType t);
int64_t dtype_int_max(DType t);

// Values of the dims for one case, by name.
using DimValues = std::map<std::string, int64_t, std::less<>>;

// An arithmetic expression over dim names: integer and float literals, + - * / (true division)
// // (floor division) % (floor modulo), unary minus, parentheses, and the functions min(a,b),
// max(a,b), cdiv(a,b) (ceiling division). Evaluated in double precision.
class Expr {
 public:
  Expr();  // the constant 0
  // Parses `text`; on failure the error message names the column (0-based offset in `text`
  // is returned through `error_offset` when not null).
  static Result<Expr> parse(std::string_view text, size_t* error_offset = nullptr);
  static Expr constant(double v);

  // Evaluates with the given dims. Names not in `dims` evaluate to NaN (validated at load).
  double eval(const DimValues& dims) const;
  // Evaluates and requires an exact non-negative integer.
  Result<int64_t> eval_size(const DimValues& dims) const;
  // Every dim name the expression mentions.
  std::set<std::string> names() const;
  const std::string& text() const { return m_text; }

  struct Node;

 private:
  std::shared_ptr<const Node> m_root;
  std::string m_text;
};

// Where a value came from in op.toml, for messages.
struct SourceLoc {
  int line = 0;
  int column = 0;
};

// How an input is filled: `normal(mean, std)`, `uniform(lo, hi)`, `randint(lo, hi)` (inclusive),
// `const(v)`, `arange(start, step)`, optionally followed by `| specials(p)`, which replaces a
// fraction p of the elements by NaN, +Inf, -Inf, -0.0 or subnormals (float dtypes only).
// Arguments are expressions over dims (e.g. `randint(0, N-1)` for indices).
//
// Structured generators (format v2) fill a tensor by its shape:
//   triangular(lower|upper, diag = G, off = G)  the last two axes a square matrix: the diagonal
//                                 from G (default uniform(1, 2)), the strict lower (upper)
//                                 triangle from `off` (default uniform(-1, 1)), the rest 0
//   diag_dominant(diag = G, off = G)  off-diagonal from `off`, each diagonal element the sum of
//                                 its row's |off-diagonal| plus a draw of `diag` (> 0: strictly
//                                 diagonally dominant, so nonsingular)
//   spd(diag = G, off = G)        the same, symmetric (with diag > 0: symmetric positive
//                                 definite by Gershgorin)
//   index(expr)                   expr over dims and the element's axis indices i, j, k, l, m, n
//                                 (axis 0 is i), e.g. index((i * j + 1) % N / N)
//   permutation                   each row (last axis, length n) a random permutation of 0..n-1
//   onehot                        each row (last axis) 0 but for one 1 at a random position
//   mask(p)                       1 with probability p, else 0
// G is one of the plain generators above (no specials).
struct InitSpec {
  enum class Kind { normal, uniform, randint, constant, arange, triangular, diag_dominant, spd, index, permutation, onehot, mask };
  Kind kind = Kind::normal;
  std::vector<Expr> args;
  double specials = 0.0;  // fraction in [0, 1]
  bool upper = false;     // triangular(upper, ...)
  std::vector<InitSpec> parts;  // triangular, diag_dominant, spd: {diag, off}
  std::string text;

  static Result<InitSpec> parse(std::string_view text, DType dtype);
  // True for the generators that need the tensor's shape (all but the plain five and mask).
  bool structured() const;
  // The dim names the arguments use (an index() expression's axis names excluded).
  std::set<std::string> dim_names() const;
  // "" when this generator can fill a tensor of this shape, else why not.
  std::string shape_problem(const std::vector<int64_t>& shape) const;
};

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

// An output's own tolerance, `tolerance = { atol = "1e-5 * K", rtol = 1e-4 }`: numbers or
// expressions over dims, evaluated per case (validated at load: finite and >= 0 on every
// case). A key it leaves out keeps the op's value. Float outputs only: integer and bool outputs
// are compared exactly.
struct ToleranceSpec {
  std::optional<Expr> atol;
  std::optional<Expr> rtol;
};

struct Tensor {
  std::string name;
  DType dtype = DType::f32;
  std::vector<Expr> shape;       // one expression per axis; rank-0 (scalar) when empty
  std::optional<InitSpec> init;  // inputs only; default normal(0, 1) / randint(-100, 100)
  std::optional<ToleranceSpec> tolerance;  // outputs only; else the op's
  // An `inouts` entry, updated in place: it appears twice, as the last inputs (its initial
  // contents, generated from `init` and read-only like every input) and as the last outputs
  // (the buffer the kernel gets, filled from the input before every call and verified like an
  // output). The kernel sees one `T*` parameter per inout, after the outputs.
  bool inout = false;
  SourceLoc loc;
};

struct Attr {
  std::string name;
  DType dtype = DType::f32;
  double value = 0;     // for float attrs
  int64_t ivalue = 0;   // for integer attrs
  // Format v2: some case sets a value of its own (Case::attrs), so the kernel receives the
  // attr at run time rather than as a constant of the entry shim.
  bool per_case = false;
  SourceLoc loc;
};

struct Case {
  int index = 0;               // position in `cases`, 0-based
  std::vector<int64_t> dims;   // in OpSpec::dims order
  std::vector<Attr> attrs;     // the attrs' values for this case, in OpSpec::attrs order
  bool timed = false;
  SourceLoc loc;
};

struct OpSpec {
  std::string name;
  std::string category;
  int level = 1;
  std::string summary;
  std::vector<std::string> dims;
  std::set<std::string, std::less<>> zero_dims;  // dims a case may set to 0 (`zero_dims = [...]`)
  std::vector<Tensor> inputs;   // the inputs, then the initial contents of each inout
  std::vector<Tensor> outputs;  // the outputs, then each inout
  std::vector<Attr> attrs;
  Expr flops;
  Expr bytes;
  Tolerance tolerance;  // of every output without its own
  std::vector<Case> cases;

  fs::path dir;             // the op folder
  fs::path spec_path;       // dir/op.toml
  fs::path reference_path;  // dir/reference.cpp
  std::optional<fs::path> library_path;  // dir/library.cpp when a vendor baseline exists
  std::string library_name;  // "onednn", "openblas" or "" (read from library.cpp's header)
  // dir/gpu_library.cu when the op has a GPU vendor baseline (the CUDA backend's, see
  // eval/cuda/ABI.md), and its library as that file's first line names it ("cublas", "cudnn",
  // "cublaslt", "cuda-naive"); "" without one.
  std::optional<fs::path> gpu_library_path;
  std::string gpu_library_name;
  std::string spec_hash;     // SHA-256 over op.toml and reference.cpp

  DimValues dim_values(const Case& c) const;
  // Concrete shape of a tensor for a case (validated at load: every entry is a size >= 0).
  std::vector<int64_t> shape_of(const Tensor& t, const Case& c) const;
  size_t element_count(const Tensor& t, const Case& c) const;
  size_t byte_size(const Tensor& t, const Case& c) const;
  // Sum of all input and output buffer sizes of a case.
  size_t case_buffer_bytes(const Case& c) const;
  // (input index, output index) of each inout, in order.
  std::vector<std::pair<size_t, size_t>> inout_pairs() const;
  // The tolerance output `t` is compared with on case `c`: its own where it has one, else the
  // op's.
  Tolerance tolerance_for(const Tensor& t, const Case& c) const;
  double flops_for(const Case& c) const;
  double bytes_for(const Case& c) const;
  std::vector<const Case*> timed_cases() const;
  int timed_case_count() const;
  // "N=64 D=1000", followed by the per-case attrs ("N=64 alpha=0.5").
  std::string case_label(const Case& c) const;
  // What the runner passes as kope_entry's `dims` for a case: the dims, then each per-case
  // attr (Attr::per_case) as 64 bits (a float attr's double bit pattern, an integer's value).
  std::vector<int64_t> call_args(const Case& c) const;
};

// Parses op.toml text. `path` is used in messages and to locate reference.cpp/library.cpp when
// `check_files` is true.
Result<OpSpec> parse_op(std::string_view toml_text, const fs::path& path, bool check_files = true);

// Loads `dir/op.toml` (or a path to an op.toml file) and checks its reference.cpp exists.
Result<OpSpec> load_op(const fs::path& dir);

// The operator suite: every ops/<category>/<name>/op.toml below `root`, sorted by
// (category, name). Fails on the first malformed spec, naming it.
struct Suite {
  fs::path root;
  std::vector<OpSpec> ops;
  const OpSpec* find(std::string_view name) const;
};

fs::path default_ops_dir();  // share_dir()/ops
Result<Suite> load_suite(const fs::path& root = default_ops_dir());

// Resolves what a user typed: a path to an op folder (anything containing '/' or naming an
// existing directory with op.toml) or the name of a suite op.
Result<OpSpec> resolve_op(std::string_view name_or_path, const fs::path& suite_root = default_ops_dir());

// Resolves a selector list: names, globs ("*norm*"), categories ("category:matmul" or a bare
// category name), levels ("level:2"), op folders. Empty list or "all" selects the whole suite.
Result<std::vector<OpSpec>> select_ops(const std::vector<std::string>& selectors,
                                       const fs::path& suite_root = default_ops_dir());

// The CPU C++ kernel ABI v1 declaration for this op, e.g.
// `extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D);`
std::string render_signature(const OpSpec& op, std::string_view function = "kope_kernel");

// One parameter of the kernel signature, its name dropped.
struct SignatureParam {
  // input: a read-only tensor (`const T*`); output: a tensor the kernel writes (`T*`); inout: a
  // tensor it updates in place (`T* /* inout */`); dim: an `int64_t` dim; attr: a scalar attr.
  enum class Kind { input, output, inout, dim, attr };
  Kind kind = Kind::input;
  // A tensor's element dtype, an attr's dtype, i64 for a dim. Always set by signature_shape();
  // nullopt only where a text parse (memory::legacy_signature_shape) met a C type it does not
  // know.
  std::optional<DType> dtype;
  bool operator==(const SignatureParam&) const = default;
};

// The shape of an op's kernel signature: its parameters in render_signature() order (inputs,
// outputs, inouts, dims, attrs) with their kinds and dtypes. Memory compares operators by it
// (similar ops, structurally close ones) and replay matches recorded kernels with it.
//
// Its text form, which memory stores with a task, is the parameters separated by commas, each
// `in:DTYPE`, `out:DTYPE`, `inout:DTYPE`, `dim` or `attr:DTYPE` (DTYPE a dtype_name, or `?` for
// an unknown one): "in:f32,out:f32,dim,dim,attr:f32". str() and parse() round-trip it.
struct SignatureShape {
  std::vector<SignatureParam> params;

  int inputs() const;   // read-only tensors
  int outputs() const;  // tensors the kernel writes, inouts included
  int dims() const;
  int scalars() const;  // attrs
  std::set<DType> dtypes() const;  // the tensors' dtypes (unknown ones left out)

  std::string str() const;
  // Fails with a config error naming the parameter that is not of the form above; "" is the
  // shape of a kernel without parameters.
  static Result<SignatureShape> parse(std::string_view text);
  bool operator==(const SignatureShape&) const = default;
};

// The shape of render_signature(op), from the typed spec.
SignatureShape signature_shape(const OpSpec& op);

// Whether a kernel of one shape can be called as a kernel of the other: the same parameters in
// order, kinds and dtypes, where a dim and an i64 attr count alike (both are `int64_t`
// arguments, which a signature's text does not tell apart).
bool same_parameters(const SignatureShape& a, const SignatureShape& b);

// A trusted translation unit that defines
// `extern "C" void kope_entry(void* const* buffers, const int64_t* dims)`, which calls
// kope_kernel with inputs then outputs from `buffers` (an inout's output buffer only), the dims
// in order and the attrs as exact constants, or from `dims` after the dims for per-case attrs
// (OpSpec::call_args). Compiled next to every candidate so callers need no per-op code.
std::string render_entry_shim(const OpSpec& op, std::string_view function = "kope_kernel");

}  // namespace kope::spec
