// Loading and validating op.toml (docs/design.md §2).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

#include <toml++/toml.h>

#include "kope/spec.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"

namespace kope::spec {

namespace {

// Formats messages as "path:line:column: text".
class Context {
 public:
  explicit Context(fs::path path) : m_path(std::move(path)) {}

  template <class... Args>
  std::unexpected<Error> at(const toml::source_region& where, fmt::format_string<Args...> f,
                            Args&&... args) const {
    return fail(ErrorKind::config, "{}:{}:{}: {}", m_path.string(), where.begin.line,
                where.begin.column, fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  std::unexpected<Error> at_loc(SourceLoc loc, fmt::format_string<Args...> f, Args&&... args) const {
    return fail(ErrorKind::config, "{}:{}:{}: {}", m_path.string(), loc.line, loc.column,
                fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  std::unexpected<Error> whole(fmt::format_string<Args...> f, Args&&... args) const {
    return fail(ErrorKind::config, "{}: {}", m_path.string(), fmt::format(f, std::forward<Args>(args)...));
  }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

SourceLoc loc_of(const toml::node& n) {
  return SourceLoc{static_cast<int>(n.source().begin.line), static_cast<int>(n.source().begin.column)};
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// Words that cannot name a tensor, dim or attr because they would break the generated C++.
bool is_reserved(std::string_view s) {
  static const std::set<std::string_view> k_reserved = {
      "auto", "bool", "break", "case", "char", "class", "const", "continue", "default", "delete",
      "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int",
      "int32_t", "int64_t", "long", "new", "operator", "private", "public", "register", "return",
      "short", "signed", "sizeof", "static", "struct", "switch", "template", "this", "typedef",
      "union", "unsigned", "void", "volatile", "while", "kope_kernel", "kope_entry", "buffers",
      "restrict", "std", "size_t", "min", "max", "cdiv"};
  return k_reserved.contains(s);
}

Status check_keys(const Context& ctx, const toml::table& t, std::initializer_list<std::string_view> allowed,
                  std::string_view where) {
  for (auto&& [key, node] : t) {
    if (std::find(allowed.begin(), allowed.end(), key.str()) == allowed.end()) {
      std::vector<std::string> names(allowed.begin(), allowed.end());
      return ctx.at(key.source(), "unknown key '{}' in {} (expected one of: {})", key.str(), where,
                    util::join(names, ", "));
    }
  }
  return {};
}

Result<std::string> get_string(const Context& ctx, const toml::table& t, std::string_view key,
                               std::string_view where, bool required = true) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    if (!required) return std::string();
    return ctx.at(t.source(), "{} is missing the required key '{}' (a string)", where, key);
  }
  if (!n->is_string()) return ctx.at(n->source(), "'{}' in {} must be a string, not {}", key, where, type_name(*n));
  return std::string(n->as_string()->get());
}

Result<DType> get_dtype(const Context& ctx, const toml::table& t, std::string_view where) {
  KOPE_ASSIGN(std::string s, get_string(ctx, t, "dtype", where));
  auto d = parse_dtype(s);
  if (!d) return ctx.at(t.get("dtype")->source(), "unknown dtype '{}' in {} (expected {})", s, where, dtype_list());
  return *d;
}

Result<double> get_number(const Context& ctx, const toml::node& n, std::string_view what) {
  if (auto i = n.as_integer()) return static_cast<double>(i->get());
  if (auto f = n.as_floating_point()) return f->get();
  return ctx.at(n.source(), "{} must be a number, not {}", what, type_name(n));
}

// Parses an expression held in a TOML string or integer; names must be declared dims.
Result<Expr> get_expr(const Context& ctx, const toml::node& n, std::string_view what,
                      const std::vector<std::string>& dims) {
  std::string text;
  if (auto s = n.as_string()) {
    text = s->get();
  } else if (auto i = n.as_integer()) {
    text = std::to_string(i->get());
  } else if (auto f = n.as_floating_point()) {
    text = fmt::format("{}", f->get());
  } else {
    return ctx.at(n.source(), "{} must be a string expression over dims or a number, not {}", what, type_name(n));
  }
  size_t offset = 0;
  auto e = Expr::parse(text, &offset);
  if (!e) {
    SourceLoc loc = loc_of(n);
    if (n.is_string()) loc.column += 1 + static_cast<int>(offset);  // inside the quotes
    return ctx.at_loc(loc, "cannot parse {} '{}': {}", what, text, e.error().message);
  }
  for (const auto& name : e->names()) {
    if (std::find(dims.begin(), dims.end(), name) == dims.end()) {
      SourceLoc loc = loc_of(n);
      if (n.is_string()) loc.column += 1 + static_cast<int>(text.find(name));
      return ctx.at_loc(loc, "{} '{}' uses '{}', which is not a declared dim (dims = [{}])", what,
                        text, name, util::join(dims, ", "));
    }
  }
  return *e;
}

// An output's `tolerance = { atol = ..., rtol = ... }` (kope/spec.h ToleranceSpec).
Result<ToleranceSpec> parse_output_tolerance(const Context& ctx, const toml::node& n, const Tensor& out,
                                             const std::string& where, const std::vector<std::string>& dims) {
  const toml::table* t = n.as_table();
  if (t == nullptr) return ctx.at(n.source(), "'tolerance' of {} must be a table {{ atol = ..., rtol = ... }}, not {}", where, type_name(n));
  if (!dtype_is_float(out.dtype)) {
    return ctx.at(n.source(), "{} has dtype {}, which is compared exactly; remove its tolerance", where, dtype_name(out.dtype));
  }
  KOPE_TRY(check_keys(ctx, *t, {"atol", "rtol"}, fmt::format("the tolerance of {}", where)));
  if (t->empty()) return ctx.at(n.source(), "'tolerance' of {} sets neither atol nor rtol", where);
  ToleranceSpec spec;
  for (std::string_view key : {"atol", "rtol"}) {
    const toml::node* v = t->get(key);
    if (v == nullptr) continue;
    KOPE_ASSIGN(Expr e, get_expr(ctx, *v, fmt::format("tolerance {} of {}", key, where), dims));
    (key == "atol" ? spec.atol : spec.rtol) = std::move(e);
  }
  return spec;
}

// What a tensor of op.toml is: an entry of `inputs`, `outputs` or `inouts`.
enum class Role { input, output, inout };

std::string_view role_name(Role r) {
  switch (r) {
    case Role::input: return "input";
    case Role::output: return "output";
    case Role::inout: return "inout";
  }
  return "?";
}

Result<Tensor> parse_tensor(const Context& ctx, const toml::node& n, Role role, size_t index,
                            const std::vector<std::string>& dims) {
  std::string where = fmt::format("{} #{}", role_name(role), index + 1);
  const toml::table* t = n.as_table();
  if (t == nullptr) return ctx.at(n.source(), "{} must be a table like {{ name = \"x\", dtype = \"f32\", shape = [\"N\"] }}, not {}", where, type_name(n));
  if (role == Role::input) {
    KOPE_TRY(check_keys(ctx, *t, {"name", "dtype", "shape", "init"}, where));
  } else if (role == Role::output) {
    KOPE_TRY(check_keys(ctx, *t, {"name", "dtype", "shape", "tolerance"}, where));
  } else {
    KOPE_TRY(check_keys(ctx, *t, {"name", "dtype", "shape", "init", "tolerance"}, where));
  }
  Tensor tensor;
  tensor.inout = role == Role::inout;
  tensor.loc = loc_of(n);
  KOPE_ASSIGN(tensor.name, get_string(ctx, *t, "name", where));
  if (!is_identifier(tensor.name) || is_reserved(tensor.name)) {
    return ctx.at(t->get("name")->source(), "{} name '{}' is not a valid C identifier (letters, digits, '_'; not a C++ keyword)", where, tensor.name);
  }
  where = fmt::format("{} '{}'", role_name(role), tensor.name);
  KOPE_ASSIGN(tensor.dtype, get_dtype(ctx, *t, where));
  const toml::node* shape = t->get("shape");
  if (shape == nullptr) return ctx.at(t->source(), "{} is missing the required key 'shape' (an array of dim expressions)", where);
  const toml::array* arr = shape->as_array();
  if (arr == nullptr) return ctx.at(shape->source(), "'shape' of {} must be an array of dim expressions, not {}", where, type_name(*shape));
  for (const auto& axis : *arr) {
    KOPE_ASSIGN(Expr e, get_expr(ctx, axis, fmt::format("shape entry of {}", where), dims));
    tensor.shape.push_back(std::move(e));
  }
  if (const toml::node* init = t->get("init")) {
    if (!init->is_string()) return ctx.at(init->source(), "'init' of {} must be a string such as \"normal(0, 1)\", not {}", where, type_name(*init));
    auto spec = InitSpec::parse(init->as_string()->get(), tensor.dtype);
    if (!spec) return ctx.at(init->source(), "bad init of {}: {}", where, spec.error().message);
    for (const auto& name : spec->dim_names()) {
      if (std::find(dims.begin(), dims.end(), name) == dims.end()) {
        return ctx.at(init->source(), "init of {} uses '{}', which is not a declared dim", where, name);
      }
    }
    if (spec->kind == InitSpec::Kind::index) {
      for (const auto& name : spec->args[0].names()) {
        if (name.size() == 1 && std::string_view("ijklmn").find(name[0]) != std::string_view::npos &&
            std::find(dims.begin(), dims.end(), name) != dims.end()) {
          return ctx.at(init->source(), "init of {}: '{}' is both a dim and an index() axis name (i, j, k, l, m, n); rename the dim", where, name);
        }
      }
    }
    tensor.init = std::move(*spec);
  }
  if (const toml::node* tol = t->get("tolerance")) {
    KOPE_ASSIGN(tensor.tolerance, parse_output_tolerance(ctx, *tol, tensor, where, dims));
  }
  return tensor;
}

// Reads an attr's value (`value = ...` or a case's `name = ...`) into a.value / a.ivalue by
// its dtype; `what` names it in messages.
Status parse_attr_value(const Context& ctx, const toml::node& v, Attr& a, const std::string& what) {
  if (dtype_is_float(a.dtype)) {
    KOPE_ASSIGN(a.value, get_number(ctx, v, what));
    a.ivalue = 0;
    return {};
  }
  auto i = v.as_integer();
  auto b = v.as_boolean();
  if (a.dtype == DType::boolean && b != nullptr) {
    a.ivalue = b->get() ? 1 : 0;
  } else if (i == nullptr) {
    return ctx.at(v.source(), "{} must be {} (dtype {}), not {}", what, a.dtype == DType::boolean ? "true or false" : "an integer",
                  dtype_name(a.dtype), type_name(v));
  } else {
    a.ivalue = i->get();
  }
  if (a.ivalue < dtype_int_min(a.dtype) || a.ivalue > dtype_int_max(a.dtype)) {
    return ctx.at(v.source(), "{} is {}, which does not fit in {} ({}..{})", what, a.ivalue, dtype_name(a.dtype),
                  dtype_int_min(a.dtype), dtype_int_max(a.dtype));
  }
  a.value = static_cast<double>(a.ivalue);
  return {};
}

Result<Attr> parse_attr(const Context& ctx, const toml::node& n, size_t index) {
  std::string where = fmt::format("attr #{}", index + 1);
  const toml::table* t = n.as_table();
  if (t == nullptr) return ctx.at(n.source(), "{} must be a table like {{ name = \"eps\", dtype = \"f32\", value = 1e-5 }}, not {}", where, type_name(n));
  KOPE_TRY(check_keys(ctx, *t, {"name", "dtype", "value"}, where));
  Attr a;
  a.loc = loc_of(n);
  KOPE_ASSIGN(a.name, get_string(ctx, *t, "name", where));
  if (!is_identifier(a.name) || is_reserved(a.name)) {
    return ctx.at(t->get("name")->source(), "attr name '{}' is not a valid C identifier", a.name);
  }
  where = fmt::format("attr '{}'", a.name);
  KOPE_ASSIGN(a.dtype, get_dtype(ctx, *t, where));
  if (dtype_is_half(a.dtype)) {
    return ctx.at(t->get("dtype")->source(), "{} has dtype {}, a storage format; attrs are passed by value, so use f32", where,
                  dtype_name(a.dtype));
  }
  const toml::node* v = t->get("value");
  if (v == nullptr) return ctx.at(t->source(), "{} is missing the required key 'value'", where);
  KOPE_TRY(parse_attr_value(ctx, *v, a, fmt::format("'value' of {}", where)));
  return a;
}

const Attr* find_attr(const std::vector<Attr>& attrs, std::string_view name) {
  for (const auto& a : attrs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// One entry of `cases`: every dim (at least 1, or 0 for a dim in `zero_dims`), optionally
// `timed`, and optionally a value for any attr (format v2: attrs that vary per case).
Result<Case> parse_case(const Context& ctx, const toml::node& n, int index, const OpSpec& op) {
  const auto& dims = op.dims;
  const toml::table* t = n.as_table();
  if (t == nullptr) return ctx.at(n.source(), "case #{} must be a table of dim values like {{ N = 4 }}, not {}", index + 1, type_name(n));
  Case c;
  c.index = index;
  c.loc = loc_of(n);
  c.attrs = op.attrs;
  for (auto&& [key, value] : *t) {
    if (key.str() == "timed") {
      auto b = value.as_boolean();
      if (b == nullptr) return ctx.at(value.source(), "'timed' in case #{} must be true or false, not {}", index + 1, type_name(value));
      c.timed = b->get();
      continue;
    }
    if (const Attr* a = find_attr(op.attrs, key.str())) {
      Attr& mine = c.attrs[static_cast<size_t>(a - op.attrs.data())];
      KOPE_TRY(parse_attr_value(ctx, value, mine, fmt::format("attr '{}' in case #{}", a->name, index + 1)));
      continue;
    }
    if (std::find(dims.begin(), dims.end(), key.str()) == dims.end()) {
      return ctx.at(key.source(), "case #{} sets '{}', which is not a declared dim (dims = [{}]; the other keys are 'timed' and the attrs)", index + 1, key.str(), util::join(dims, ", "));
    }
  }
  for (const auto& d : dims) {
    const toml::node* v = t->get(d);
    if (v == nullptr) return ctx.at(n.source(), "case #{} misses dim '{}' (every case sets every dim: {})", index + 1, d, util::join(dims, ", "));
    auto i = v->as_integer();
    if (i == nullptr) return ctx.at(v->source(), "dim '{}' in case #{} must be an integer, not {}", d, index + 1, type_name(*v));
    bool may_be_zero = op.zero_dims.contains(d);
    if (i->get() < (may_be_zero ? 0 : 1)) {
      return ctx.at(v->source(), "dim '{}' in case #{} is {}; dims must be at least {}", d, index + 1, i->get(),
                    may_be_zero ? "0" : "1 (list the dim in zero_dims to allow 0)");
    }
    c.dims.push_back(i->get());
  }
  return c;
}

// `reference = "reference.py"` (docs/design.md §2, "PyTorch references"): which file of the op
// folder is the trusted reference; its extension says its kind (eval/pytorch_reference.h).
// Default reference.cpp.
Result<std::string> parse_reference(const Context& ctx, const toml::table& root) {
  KOPE_ASSIGN(std::string file, get_string(ctx, root, "reference", "op.toml", /*required=*/false));
  if (file.empty()) return std::string("reference.cpp");
  const toml::node* node = root.get("reference");
  if (file.find('/') != std::string::npos || file.starts_with(".")) {
    return ctx.at(node->source(), "'reference' is '{}'; expected a file name in the op folder (reference.cpp or reference.py)", file);
  }
  if (!file.ends_with(".py") && !file.ends_with(".cpp")) {
    return ctx.at(node->source(), "'reference' is '{}'; expected a .cpp (C++ ABI) or a .py (PyTorch) file", file);
  }
  return file;
}

// The op's identity: name, category, level, summary, source and which file is the reference.
Status parse_identity(const Context& ctx, const toml::table& root, OpSpec& op) {
  KOPE_ASSIGN(op.name, get_string(ctx, root, "name", "op.toml"));
  if (op.name.empty() || !std::all_of(op.name.begin(), op.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      })) {
    return ctx.at(root.get("name")->source(), "op name '{}' must be non-empty letters, digits, '_' or '-'", op.name);
  }
  KOPE_ASSIGN(op.category, get_string(ctx, root, "category", "op.toml"));
  if (op.category.empty() || !std::all_of(op.category.begin(), op.category.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      })) {
    return ctx.at(root.get("category")->source(), "category '{}' must be lower-case letters, digits, '-' or '_' (e.g. elementwise, matmul, data-movement)", op.category);
  }
  const toml::node* level = root.get("level");
  if (level == nullptr) return ctx.at(root.source(), "op.toml is missing the required key 'level' (an integer 1..4)");
  if (!level->is_integer()) return ctx.at(level->source(), "'level' must be an integer 1..4, not {}", type_name(*level));
  op.level = static_cast<int>(level->as_integer()->get());
  if (op.level < 1 || op.level > 4) return ctx.at(level->source(), "'level' is {}; expected 1..4", op.level);
  KOPE_ASSIGN(op.summary, get_string(ctx, root, "summary", "op.toml", /*required=*/false));
  // `source = "KernelBench level 1 problem 23: 23_Softmax.py"`: where the problem comes from, for
  // readers (the file's text is part of the spec hash).
  KOPE_TRY(get_string(ctx, root, "source", "op.toml", /*required=*/false));
  KOPE_ASSIGN(std::string reference_file, parse_reference(ctx, root));
  op.reference_path = reference_file;  // made absolute to the folder by parse_op
  return {};
}

// `dims`: the names of the op's size parameters, distinct C identifiers.
Status parse_dims(const Context& ctx, const toml::table& root, OpSpec& op) {
  const toml::node* dims = root.get("dims");
  if (dims == nullptr) return ctx.at(root.source(), "op.toml is missing the required key 'dims' (an array of dim names)");
  if (!dims->is_array()) return ctx.at(dims->source(), "'dims' must be an array of names, not {}", type_name(*dims));
  for (const auto& d : *dims->as_array()) {
    if (!d.is_string()) return ctx.at(d.source(), "each entry of 'dims' must be a string, not {}", type_name(d));
    std::string name(d.as_string()->get());
    if (!is_identifier(name) || is_reserved(name)) return ctx.at(d.source(), "dim name '{}' is not a valid C identifier", name);
    if (std::find(op.dims.begin(), op.dims.end(), name) != op.dims.end()) return ctx.at(d.source(), "dim '{}' is declared twice", name);
    op.dims.push_back(name);
  }
  return {};
}

// One array of tensors (`inputs`, `outputs` or `inouts`), appended to `out`.
Status parse_tensor_list(const Context& ctx, const toml::table& root, std::string_view key, Role role,
                         const std::vector<std::string>& dims, std::vector<Tensor>& out) {
  const toml::node* n = root.get(key);
  if (n == nullptr) {
    // `inouts` is optional, and so is `outputs` beside it (an op may only update in place).
    if (role == Role::inout || (role == Role::output && root.get("inouts") != nullptr)) return {};
    return ctx.at(root.source(), "op.toml is missing the required key '{}' (an array of tensors)", key);
  }
  if (!n->is_array()) return ctx.at(n->source(), "'{}' must be an array of tables, not {}", key, type_name(*n));
  size_t i = 0;
  for (const auto& item : *n->as_array()) {
    KOPE_ASSIGN(Tensor t, parse_tensor(ctx, item, role, i++, dims));
    out.push_back(std::move(t));
  }
  return {};
}

// `inputs`, `outputs` and `inouts`; each inout joins both the inputs and the outputs.
Status parse_tensors(const Context& ctx, const toml::table& root, OpSpec& op) {
  KOPE_TRY(parse_tensor_list(ctx, root, "inputs", Role::input, op.dims, op.inputs));
  KOPE_TRY(parse_tensor_list(ctx, root, "outputs", Role::output, op.dims, op.outputs));
  std::vector<Tensor> inouts;
  KOPE_TRY(parse_tensor_list(ctx, root, "inouts", Role::inout, op.dims, inouts));
  if (op.outputs.empty() && inouts.empty()) {
    const toml::node* where = root.get("outputs") ? root.get("outputs") : &root;
    return ctx.at(where->source(), "an op needs at least one output (or inout)");
  }
  // An inout is both: an input the evaluator generates (its initial contents) and an output it
  // verifies, after the op's own inputs and outputs (kope/spec.h, Tensor::inout).
  for (const auto& t : inouts) {
    op.inputs.push_back(t);
    op.outputs.push_back(t);
  }
  return {};
}

// The optional `attrs` (scalar parameters) and `zero_dims` (dims a case may set to 0).
Status parse_attrs_and_zero_dims(const Context& ctx, const toml::table& root, OpSpec& op) {
  if (const toml::node* attrs = root.get("attrs")) {
    if (!attrs->is_array()) return ctx.at(attrs->source(), "'attrs' must be an array of tables, not {}", type_name(*attrs));
    size_t i = 0;
    for (const auto& item : *attrs->as_array()) {
      KOPE_ASSIGN(Attr a, parse_attr(ctx, item, i++));
      op.attrs.push_back(std::move(a));
    }
  }

  if (const toml::node* zero = root.get("zero_dims")) {
    if (!zero->is_array()) return ctx.at(zero->source(), "'zero_dims' must be an array of dim names, not {}", type_name(*zero));
    for (const auto& d : *zero->as_array()) {
      if (!d.is_string() || std::find(op.dims.begin(), op.dims.end(), d.as_string()->get()) == op.dims.end()) {
        return ctx.at(d.source(), "each entry of 'zero_dims' must name a declared dim (dims = [{}])", util::join(op.dims, ", "));
      }
      op.zero_dims.insert(std::string(d.as_string()->get()));
    }
  }
  return {};
}

// Every name becomes a C parameter: they must be distinct. A dim's location is the `dims` key's.
Status check_distinct_names(const Context& ctx, const toml::table& root, const OpSpec& op) {
  const toml::node* dims = root.get("dims");
  std::map<std::string, SourceLoc> seen;
  auto claim = [&](const std::string& name, SourceLoc loc) -> Status {
    if (seen.contains(name)) return ctx.at_loc(loc, "name '{}' is used twice (tensors, dims and attrs share one namespace: they are all kernel parameters)", name);
    seen[name] = loc;
    return {};
  };
  for (const auto& d : op.dims) KOPE_TRY(claim(d, loc_of(*dims)));
  for (const auto& t : op.inputs) KOPE_TRY(claim(t.name, t.loc));
  for (const auto& t : op.outputs) {
    if (!t.inout) KOPE_TRY(claim(t.name, t.loc));  // claimed as an input already
  }
  for (const auto& a : op.attrs) KOPE_TRY(claim(a.name, a.loc));
  return {};
}

// The `flops` and `bytes` expressions over the dims, and the `tolerance` table.
Status parse_costs_and_tolerance(const Context& ctx, const toml::table& root, OpSpec& op) {
  for (std::string_view key : {"flops", "bytes"}) {
    const toml::node* n = root.get(key);
    if (n == nullptr) return ctx.at(root.source(), "op.toml is missing the required key '{}' (an expression over dims, e.g. \"2*N*D\")", key);
    KOPE_ASSIGN(Expr e, get_expr(ctx, *n, fmt::format("'{}' expression", key), op.dims));
    (key == "flops" ? op.flops : op.bytes) = std::move(e);
  }

  const toml::node* tol = root.get("tolerance");
  if (tol == nullptr) return ctx.at(root.source(), "op.toml is missing the required key 'tolerance' (e.g. {{ atol = 1e-5, rtol = 1e-4 }})");
  if (!tol->is_table()) return ctx.at(tol->source(), "'tolerance' must be a table {{ atol = ..., rtol = ... }}, not {}", type_name(*tol));
  KOPE_TRY(check_keys(ctx, *tol->as_table(), {"atol", "rtol"}, "tolerance"));
  for (std::string_view key : {"atol", "rtol"}) {
    const toml::node* v = tol->as_table()->get(key);
    if (v == nullptr) return ctx.at(tol->source(), "tolerance is missing '{}'", key);
    KOPE_ASSIGN(double x, get_number(ctx, *v, fmt::format("tolerance {}", key)));
    if (!(x >= 0) || !std::isfinite(x)) return ctx.at(v->source(), "tolerance {} is {}; it must be a finite number >= 0", key, x);
    (key == "atol" ? op.tolerance.atol : op.tolerance.rtol) = x;
  }
  return {};
}

// `cases`, at least one; an attr one of them sets to another value becomes per_case.
Status parse_cases(const Context& ctx, const toml::table& root, OpSpec& op) {
  const toml::node* cases = root.get("cases");
  if (cases == nullptr) return ctx.at(root.source(), "op.toml is missing the required key 'cases' (an array of {{ dim = value }} tables)");
  if (!cases->is_array()) return ctx.at(cases->source(), "'cases' must be an array of tables, not {}", type_name(*cases));
  int index = 0;
  for (const auto& item : *cases->as_array()) {
    KOPE_ASSIGN(Case c, parse_case(ctx, item, index++, op));
    op.cases.push_back(std::move(c));
  }
  if (op.cases.empty()) return ctx.at(cases->source(), "an op needs at least one case");
  for (size_t a = 0; a < op.attrs.size(); ++a) {
    for (const auto& c : op.cases) {
      const Attr& mine = c.attrs[a];
      if (mine.value != op.attrs[a].value || mine.ivalue != op.attrs[a].ivalue) op.attrs[a].per_case = true;
    }
  }
  return {};
}

// Every shape, flops and bytes expression must give a sensible value on every case.
Status check_cases(const Context& ctx, const OpSpec& op) {
  for (const auto& c : op.cases) {
    DimValues dv = op.dim_values(c);
    for (const auto* list : {&op.inputs, &op.outputs}) {
      for (const auto& t : *list) {
        for (const auto& axis : t.shape) {
          auto v = axis.eval_size(dv);
          if (!v) return ctx.at_loc(c.loc, "case #{} ({}): shape of '{}': {}", c.index + 1, op.case_label(c), t.name, v.error().message);
        }
      }
    }
    for (const auto& t : op.inputs) {
      if (!t.init) continue;
      std::string problem = t.init->shape_problem(op.shape_of(t, c));
      if (!problem.empty()) return ctx.at_loc(t.loc, "case #{} ({}): init of '{}': {}", c.index + 1, op.case_label(c), t.name, problem);
    }
    for (const auto& t : op.outputs) {
      Tolerance own = op.tolerance_for(t, c);
      for (double x : {own.atol, own.rtol}) {
        if (!(x >= 0) || !std::isfinite(x)) {
          return ctx.at_loc(t.loc, "case #{} ({}): the tolerance of output '{}' evaluates to {}; it must be a finite number >= 0",
                            c.index + 1, op.case_label(c), t.name, x);
        }
      }
    }
    for (const Expr* e : {&op.flops, &op.bytes}) {
      double v = e->eval(dv);
      if (!std::isfinite(v) || v < 0) return ctx.at_loc(c.loc, "case #{} ({}): '{}' evaluates to {}; expected a finite value >= 0", c.index + 1, op.case_label(c), e->text(), v);
    }
  }
  return {};
}

// The whole op.toml, section by section in the order its errors are reported.
Result<OpSpec> parse_table(const Context& ctx, const toml::table& root) {
  KOPE_TRY(check_keys(ctx, root,
                      {"name", "category", "level", "summary", "dims", "zero_dims", "inputs", "outputs", "inouts", "attrs",
                       "flops", "bytes", "tolerance", "cases", "reference", "source"},
                      "op.toml"));
  OpSpec op;
  KOPE_TRY(parse_identity(ctx, root, op));
  KOPE_TRY(parse_dims(ctx, root, op));
  KOPE_TRY(parse_tensors(ctx, root, op));
  KOPE_TRY(parse_attrs_and_zero_dims(ctx, root, op));
  KOPE_TRY(check_distinct_names(ctx, root, op));
  KOPE_TRY(parse_costs_and_tolerance(ctx, root, op));
  KOPE_TRY(parse_cases(ctx, root, op));
  KOPE_TRY(check_cases(ctx, op));
  return op;
}

// The first line of library.cpp (gpu_library.cu) names the library: "// kope-library: onednn".
std::string library_name_of(std::string_view source) {
  auto first_line = source.substr(0, source.find('\n'));
  auto pos = first_line.find("kope-library:");
  if (pos == std::string_view::npos) return "unknown";
  return std::string(util::trim(first_line.substr(pos + 13)));
}

}  // namespace

DimValues OpSpec::dim_values(const Case& c) const {
  DimValues dv;
  for (size_t i = 0; i < dims.size() && i < c.dims.size(); ++i) dv[dims[i]] = c.dims[i];
  return dv;
}

std::vector<int64_t> OpSpec::shape_of(const Tensor& t, const Case& c) const {
  DimValues dv = dim_values(c);
  std::vector<int64_t> shape;
  for (const auto& axis : t.shape) shape.push_back(axis.eval_size(dv).value_or(0));
  return shape;
}

size_t OpSpec::element_count(const Tensor& t, const Case& c) const {
  size_t n = 1;
  for (int64_t s : shape_of(t, c)) n *= static_cast<size_t>(s);
  return n;
}

size_t OpSpec::byte_size(const Tensor& t, const Case& c) const {
  return element_count(t, c) * dtype_size(t.dtype);
}

size_t OpSpec::case_buffer_bytes(const Case& c) const {
  size_t total = 0;
  for (const auto& t : inputs) total += byte_size(t, c);
  for (const auto& t : outputs) total += byte_size(t, c);
  return total;
}

std::vector<std::pair<size_t, size_t>> OpSpec::inout_pairs() const {
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].inout) continue;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].inout && inputs[i].name == outputs[o].name) pairs.emplace_back(i, o);
    }
  }
  return pairs;
}

Tolerance OpSpec::tolerance_for(const Tensor& t, const Case& c) const {
  Tolerance tol = tolerance;
  if (!t.tolerance) return tol;
  DimValues dv = dim_values(c);
  if (t.tolerance->atol) tol.atol = t.tolerance->atol->eval(dv);
  if (t.tolerance->rtol) tol.rtol = t.tolerance->rtol->eval(dv);
  return tol;
}

double OpSpec::flops_for(const Case& c) const { return flops.eval(dim_values(c)); }
double OpSpec::bytes_for(const Case& c) const { return bytes.eval(dim_values(c)); }

std::vector<const Case*> OpSpec::timed_cases() const {
  std::vector<const Case*> out;
  for (const auto& c : cases) {
    if (c.timed) out.push_back(&c);
  }
  return out;
}

int OpSpec::timed_case_count() const { return static_cast<int>(timed_cases().size()); }

std::string OpSpec::case_label(const Case& c) const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < dims.size() && i < c.dims.size(); ++i) parts.push_back(fmt::format("{}={}", dims[i], c.dims[i]));
  for (size_t a = 0; a < attrs.size() && a < c.attrs.size(); ++a) {
    if (!attrs[a].per_case) continue;
    const Attr& v = c.attrs[a];
    parts.push_back(dtype_is_float(v.dtype) ? fmt::format("{}={}", v.name, v.value) : fmt::format("{}={}", v.name, v.ivalue));
  }
  return util::join(parts, " ");
}

std::vector<int64_t> OpSpec::call_args(const Case& c) const {
  std::vector<int64_t> args = c.dims;
  for (size_t a = 0; a < attrs.size() && a < c.attrs.size(); ++a) {
    if (!attrs[a].per_case) continue;
    int64_t bits = c.attrs[a].ivalue;
    if (dtype_is_float(attrs[a].dtype)) std::memcpy(&bits, &c.attrs[a].value, sizeof bits);
    args.push_back(bits);
  }
  return args;
}

Result<OpSpec> parse_op(std::string_view toml_text, const fs::path& path, bool check_files) {
  Context ctx(path);
  toml::table root;
  try {
    root = toml::parse(toml_text, path.string());
  } catch (const toml::parse_error& e) {
    return ctx.at(e.source(), "TOML syntax error: {}", e.description());
  }
  KOPE_ASSIGN(OpSpec op, parse_table(ctx, root));
  op.spec_path = path;
  op.dir = path.parent_path();
  op.reference_path = op.dir / op.reference_path;
  if (check_files) {
    auto ref = util::read_file(op.reference_path);
    if (!ref) return ctx.whole("the op has no readable {} beside it ({})", op.reference_path.filename().string(), ref.error().message);
    op.spec_hash = util::sha256_hex(std::string(toml_text) + '\0' + *ref);
    fs::path lib = op.dir / "library.cpp";
    std::error_code ec;
    if (fs::exists(lib, ec)) {
      KOPE_ASSIGN(std::string lib_src, util::read_file(lib));
      op.library_path = lib;
      op.library_name = library_name_of(lib_src);
    }
    fs::path gpu_lib = op.dir / "gpu_library.cu";
    if (fs::exists(gpu_lib, ec)) {
      KOPE_ASSIGN(std::string gpu_src, util::read_file(gpu_lib));
      op.gpu_library_path = gpu_lib;
      op.gpu_library_name = library_name_of(gpu_src);
    }
  } else {
    op.spec_hash = util::sha256_hex(toml_text);
  }
  return op;
}

Result<OpSpec> load_op(const fs::path& dir) {
  fs::path spec_path = dir;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) spec_path = dir / "op.toml";
  auto text = util::read_file(spec_path);
  if (!text) {
    return fail(text.error().kind == ErrorKind::not_found ? ErrorKind::not_found : ErrorKind::io,
                "{}: no op.toml here ({})", dir.string(), text.error().message);
  }
  return parse_op(*text, spec_path);
}

const OpSpec* Suite::find(std::string_view name) const {
  for (const auto& op : ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

fs::path default_ops_dir() { return util::share_dir() / "ops"; }

Result<Suite> load_suite(const fs::path& root) {
  Suite suite;
  suite.root = root;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return fail(ErrorKind::not_found, "operator suite not found at {}", root.string());
  std::vector<fs::path> dirs;
  for (const auto& cat : fs::directory_iterator(root, ec)) {
    if (!cat.is_directory()) continue;
    for (const auto& opdir : fs::directory_iterator(cat.path(), ec)) {
      if (opdir.is_directory() && fs::exists(opdir.path() / "op.toml")) dirs.push_back(opdir.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  std::set<std::string> names;
  for (const auto& d : dirs) {
    KOPE_ASSIGN(OpSpec op, load_op(d));
    std::string folder_cat = d.parent_path().filename().string();
    if (op.category != folder_cat) {
      return fail(ErrorKind::config, "{}: category is '{}' but the op lives under ops/{}/", op.spec_path.string(), op.category, folder_cat);
    }
    if (!names.insert(op.name).second) {
      return fail(ErrorKind::config, "{}: a second op named '{}' in the suite", op.spec_path.string(), op.name);
    }
    suite.ops.push_back(std::move(op));
  }
  std::sort(suite.ops.begin(), suite.ops.end(), [](const OpSpec& a, const OpSpec& b) {
    return std::tie(a.category, a.name) < std::tie(b.category, b.name);
  });
  return suite;
}

Result<OpSpec> resolve_op(std::string_view name_or_path, const fs::path& suite_root) {
  fs::path p(name_or_path);
  std::error_code ec;
  bool looks_like_path = name_or_path.find('/') != std::string_view::npos || name_or_path.ends_with(".toml");
  if (looks_like_path || (fs::is_directory(p, ec) && fs::exists(p / "op.toml", ec))) return load_op(p);
  KOPE_ASSIGN(Suite suite, load_suite(suite_root));
  if (const OpSpec* op = suite.find(name_or_path)) return *op;
  std::vector<std::string> close;
  for (const auto& op : suite.ops) {
    if (op.name.find(name_or_path) != std::string::npos) close.push_back(op.name);
  }
  return fail(ErrorKind::not_found, "no operator named '{}' in {}{}{}", name_or_path, suite_root.string(),
              close.empty() ? "" : "; did you mean: ", util::join(close, ", "));
}

Result<std::vector<OpSpec>> select_ops(const std::vector<std::string>& selectors, const fs::path& suite_root) {
  std::vector<OpSpec> out;
  std::set<std::string> taken;
  auto add = [&](const OpSpec& op) {
    if (taken.insert(op.spec_path.string()).second) out.push_back(op);
  };
  std::optional<Suite> suite;
  auto get_suite = [&]() -> Result<const Suite*> {
    if (!suite) {
      KOPE_ASSIGN(Suite s, load_suite(suite_root));
      suite = std::move(s);
    }
    return &*suite;
  };
  std::vector<std::string> sels;
  for (const auto& s : selectors) {
    for (auto& part : util::split(s, ',')) {
      if (!util::trim(part).empty()) sels.emplace_back(util::trim(part));
    }
  }
  if (sels.empty()) sels.push_back("all");
  for (const auto& sel : sels) {
    std::error_code ec;
    if (sel.find('/') != std::string::npos || (fs::is_directory(sel, ec) && fs::exists(fs::path(sel) / "op.toml", ec))) {
      KOPE_ASSIGN(OpSpec op, load_op(sel));
      add(op);
      continue;
    }
    KOPE_ASSIGN(const Suite* s, get_suite());
    size_t before = out.size();
    if (sel == "all") {
      for (const auto& op : s->ops) add(op);
    } else if (sel.starts_with("level:")) {
      int level = std::atoi(sel.c_str() + 6);
      for (const auto& op : s->ops) {
        if (op.level == level) add(op);
      }
    } else if (sel.starts_with("category:")) {
      std::string cat = sel.substr(9);
      for (const auto& op : s->ops) {
        if (op.category == cat) add(op);
      }
    } else {
      for (const auto& op : s->ops) {
        if (util::glob_match(sel, op.name) || op.category == sel) add(op);
      }
    }
    if (out.size() == before && std::none_of(s->ops.begin(), s->ops.end(), [&](const OpSpec& op) {
          return util::glob_match(sel, op.name) || op.category == sel;
        })) {
      return fail(ErrorKind::not_found, "selector '{}' matches no operator (try `kope ops list`)", sel);
    }
  }
  return out;
}

namespace {

// The dtypes whose C type does not say what they hold carry their name as a comment, and so
// does an inout: `const uint16_t* x /* bf16 */`, `uint8_t* mask /* bool */`,
// `float* C /* inout */`.
std::string param_note(DType t, bool inout = false) {
  std::vector<std::string> notes;
  if (dtype_is_half(t) || t == DType::boolean) notes.emplace_back(dtype_name(t));
  if (inout) notes.emplace_back("inout");
  return notes.empty() ? std::string() : fmt::format(" /* {} */", util::join(notes, ", "));
}

}  // namespace

std::string render_signature(const OpSpec& op, std::string_view function) {
  std::vector<std::string> params;
  for (const auto& t : op.inputs) {
    if (!t.inout) params.push_back(fmt::format("const {}* {}{}", dtype_ctype(t.dtype), t.name, param_note(t.dtype)));
  }
  for (const auto& t : op.outputs) params.push_back(fmt::format("{}* {}{}", dtype_ctype(t.dtype), t.name, param_note(t.dtype, t.inout)));
  for (const auto& d : op.dims) params.push_back(fmt::format("int64_t {}", d));
  for (const auto& a : op.attrs) params.push_back(fmt::format("{} {}{}", dtype_ctype(a.dtype), a.name, param_note(a.dtype)));
  return fmt::format("extern \"C\" void {}({});", function, util::join(params, ", "));
}

std::string render_entry_shim(const OpSpec& op, std::string_view function) {
  std::string out;
  out += "// Generated by kope: calls the kernel with buffers, dims and attrs of the spec.\n";
  out += "#include <cstdint>\n";
  out += render_signature(op, function) + "\n";
  if (std::any_of(op.attrs.begin(), op.attrs.end(), [](const Attr& a) { return a.per_case && dtype_is_float(a.dtype); })) {
    out += "static double kope_attr_f64(int64_t bits) { double d; __builtin_memcpy(&d, &bits, sizeof d); return d; }\n";
  }
  out += "extern \"C\" void kope_entry(void* const* buffers, const int64_t* dims) {\n";
  std::vector<std::string> args;
  size_t b = 0;
  for (const auto& t : op.inputs) {
    // An inout's initial contents (its input buffer) reach the kernel through its output buffer,
    // which the runner fills from them before every call.
    if (!t.inout) args.push_back(fmt::format("static_cast<const {}*>(buffers[{}])", dtype_ctype(t.dtype), b));
    ++b;
  }
  for (const auto& t : op.outputs) args.push_back(fmt::format("static_cast<{}*>(buffers[{}])", dtype_ctype(t.dtype), b++));
  for (size_t i = 0; i < op.dims.size(); ++i) args.push_back(fmt::format("dims[{}]", i));
  size_t next = op.dims.size();  // where the per-case attrs start in `dims`
  for (const auto& a : op.attrs) {
    if (a.per_case) {
      args.push_back(dtype_is_float(a.dtype) ? fmt::format("static_cast<{}>(kope_attr_f64(dims[{}]))", dtype_ctype(a.dtype), next++)
                                             : fmt::format("static_cast<{}>(dims[{}])", dtype_ctype(a.dtype), next++));
    } else if (dtype_is_float(a.dtype)) {
      args.push_back(fmt::format("static_cast<{}>({:a})", dtype_ctype(a.dtype), a.value));
    } else {
      args.push_back(fmt::format("static_cast<{}>({}LL)", dtype_ctype(a.dtype), a.ivalue));
    }
  }
  out += fmt::format("  {}({});\n}}\n", function, util::join(args, ",\n      "));
  return out;
}

}  // namespace kope::spec
