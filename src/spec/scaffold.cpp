// The scaffold of `kope ops new`.
#include "spec/scaffold.h"

#include "util/fs.h"
#include "util/strings.h"

namespace kope::spec {

std::string scaffold_op_toml(std::string_view name, std::string_view category) {
  return fmt::format(R"TOML(# {0}: a new operator (docs/design.md §2 has the whole format).
# `kope ops show <this folder>` prints what kope reads from this file and the kernel signature;
# `kope ops check <this folder>` validates it. It starts as y = x: change the tensors, the work
# and the cases, then reference.cpp.
name = "{0}"
category = "{1}"
level = 1                 # difficulty 1..4
summary = "y = x (replace with what the op computes)."
dims = ["N"]              # every dim is an int64_t kernel parameter
# zero_dims = ["N"]       # dims a case may set to 0

# Dtypes: f32 f64 f16 bf16 i64 i32 i16 i8 u8 bool (f16/bf16 are uint16_t bits, bool one byte 0/1).
# Generators: normal(m, s) uniform(a, b) randint(lo, hi) const(v) arange(start, step), each with an
# optional "| specials(p)"; structured: triangular(lower, diag = uniform(1, 2), off = uniform(-1, 1)),
# spd(), diag_dominant(), index(i * N + j), permutation, onehot, mask(p). Arguments are
# expressions over dims with + - * / // % min max cdiv pow sqrt exp log.
inputs = [
  {{ name = "x", dtype = "f32", shape = ["N"], init = "normal(0, 1)" }},
]
outputs = [
  # An output may have its own tolerance, numbers or expressions over dims:
  # {{ name = "s", dtype = "f32", shape = ["1"], tolerance = {{ atol = "1e-6 * N" }} }},
  {{ name = "y", dtype = "f32", shape = ["N"] }},
]
# Tensors updated in place: their init is the contents on entry, checked like outputs after.
# inouts = [{{ name = "c", dtype = "f32", shape = ["N"], init = "uniform(-1, 1)" }}]
attrs = [
  # Passed by value after the dims; a case may set its own value ({{ N = 8, alpha = 0.5 }}).
  # {{ name = "alpha", dtype = "f32", value = 1.0 }},
]
flops = "N"               # expressions over dims, for the roofline
bytes = "8*N"
tolerance = {{ atol = 0, rtol = 0 }}  # of every float output without its own; integers are exact
# Every case is verified; timed ones are also timed. The suite asks for at least 10 cases, 3
# timed, a size 1 and an odd size.
cases = [
  {{ N = 1 }}, {{ N = 2 }}, {{ N = 3 }}, {{ N = 17 }}, {{ N = 64 }}, {{ N = 97 }}, {{ N = 1000 }},
  {{ N = 4099, timed = true }}, {{ N = 65537, timed = true }}, {{ N = 1048576, timed = true }},
]
)TOML",
                     name, category);
}

std::string scaffold_reference(const OpSpec& op) {
  std::string out = fmt::format("// Reference {}: {}\n", op.name, op.summary.empty() ? "what the op computes." : op.summary);
  out += "// Trusted and simple: accumulate in double where it matters, no tricks. The signature is the\n";
  out += "// one `kope ops show " + op.name + " --signature` prints.\n";
  out += "#include <cstdint>\n\n";
  std::string signature = render_signature(op);
  out += signature.substr(0, signature.size() - 1) + " {\n";  // without the ';'
  // The scaffold's op is y = x over dim N (scaffold_op_toml).
  out += fmt::format("  for (int64_t i = 0; i < {0}; ++i) {1}[i] = {2}[i];\n", op.dims.at(0), op.outputs.at(0).name, op.inputs.at(0).name);
  out += "}\n";
  return out;
}

Result<std::filesystem::path> create_op_folder(const std::filesystem::path& root, std::string_view name,
                                               std::string_view category) {
  std::string toml = scaffold_op_toml(name, category);
  std::filesystem::path dir = root / std::string(category) / std::string(name);
  // Parsed before anything is written: a bad name or category is reported as op.toml would be.
  KOPE_ASSIGN(OpSpec op, parse_op(toml, dir / "op.toml", /*check_files=*/false));
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) return fail(ErrorKind::io, "{} exists already; kope ops new writes only new folders", dir.string());
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(ErrorKind::io, "cannot create {}: {}", dir.string(), ec.message());
  KOPE_TRY(util::write_file_atomic(dir / "op.toml", toml));
  KOPE_TRY(util::write_file_atomic(dir / "reference.cpp", scaffold_reference(op)));
  return dir;
}

}  // namespace kope::spec
