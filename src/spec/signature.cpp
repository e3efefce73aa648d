// The shape of an op's kernel signature, from the typed spec, and its text form.
#include <algorithm>

#include "kope/spec.h"
#include "util/strings.h"

namespace kope::spec {

namespace {

using Kind = SignatureParam::Kind;

int count_kinds(const SignatureShape& s, std::initializer_list<Kind> kinds) {
  return static_cast<int>(std::count_if(s.params.begin(), s.params.end(), [&](const SignatureParam& p) {
    return std::find(kinds.begin(), kinds.end(), p.kind) != kinds.end();
  }));
}

bool is_tensor(Kind k) { return k == Kind::input || k == Kind::output || k == Kind::inout; }

// A dim, or an attr of dtype i64: an `int64_t` argument.
bool is_int64_scalar(const SignatureParam& p) {
  return p.kind == Kind::dim || (p.kind == Kind::attr && p.dtype == DType::i64);
}

constexpr std::pair<Kind, std::string_view> k_kind_names[] = {
    {Kind::input, "in"}, {Kind::output, "out"}, {Kind::inout, "inout"}, {Kind::dim, "dim"}, {Kind::attr, "attr"}};

}  // namespace

int SignatureShape::inputs() const { return count_kinds(*this, {Kind::input}); }
int SignatureShape::outputs() const { return count_kinds(*this, {Kind::output, Kind::inout}); }
int SignatureShape::dims() const { return count_kinds(*this, {Kind::dim}); }
int SignatureShape::scalars() const { return count_kinds(*this, {Kind::attr}); }

std::set<DType> SignatureShape::dtypes() const {
  std::set<DType> out;
  for (const auto& p : params) {
    if (is_tensor(p.kind) && p.dtype) out.insert(*p.dtype);
  }
  return out;
}

std::string SignatureShape::str() const {
  std::vector<std::string> parts;
  for (const auto& p : params) {
    std::string_view kind;
    for (const auto& [k, name] : k_kind_names) {
      if (k == p.kind) kind = name;
    }
    if (p.kind == Kind::dim) {
      parts.emplace_back(kind);
    } else {
      parts.push_back(fmt::format("{}:{}", kind, p.dtype ? dtype_name(*p.dtype) : "?"));
    }
  }
  return util::join(parts, ",");
}

Result<SignatureShape> SignatureShape::parse(std::string_view text) {
  SignatureShape s;
  if (util::trim(text).empty()) return s;
  for (const auto& part : util::split(text, ',')) {
    std::string_view item = util::trim(part);
    size_t colon = item.find(':');
    std::string_view kind_name = item.substr(0, colon);
    const auto* kind = std::find_if(std::begin(k_kind_names), std::end(k_kind_names),
                                    [&](const auto& k) { return k.second == kind_name; });
    if (kind == std::end(k_kind_names)) {
      return fail(ErrorKind::config, "signature shape '{}': parameter '{}' is not in:, out:, inout:, dim or attr:",
                  text, item);
    }
    SignatureParam p{kind->first, DType::i64};
    if (p.kind == Kind::dim) {
      if (colon != std::string_view::npos) {
        return fail(ErrorKind::config, "signature shape '{}': parameter '{}': a dim has no dtype (write 'dim')", text, item);
      }
    } else {
      if (colon == std::string_view::npos) {
        return fail(ErrorKind::config, "signature shape '{}': parameter '{}' has no dtype (expected {}:DTYPE)", text,
                    item, kind_name);
      }
      std::string_view dtype = item.substr(colon + 1);
      p.dtype = parse_dtype(dtype);
      if (!p.dtype && dtype != "?") {
        return fail(ErrorKind::config, "signature shape '{}': parameter '{}': unknown dtype '{}' (expected {}, or ?)",
                    text, item, dtype, dtype_list());
      }
    }
    s.params.push_back(p);
  }
  return s;
}

SignatureShape signature_shape(const OpSpec& op) {
  // The order of render_signature: an inout's input is not a parameter, its output is.
  SignatureShape s;
  for (const auto& t : op.inputs) {
    if (!t.inout) s.params.push_back({Kind::input, t.dtype});
  }
  for (const auto& t : op.outputs) s.params.push_back({t.inout ? Kind::inout : Kind::output, t.dtype});
  for (size_t i = 0; i < op.dims.size(); ++i) s.params.push_back({Kind::dim, DType::i64});
  for (const auto& a : op.attrs) s.params.push_back({Kind::attr, a.dtype});
  return s;
}

bool same_parameters(const SignatureShape& a, const SignatureShape& b) {
  return std::equal(a.params.begin(), a.params.end(), b.params.begin(), b.params.end(),
                    [](const SignatureParam& x, const SignatureParam& y) {
                      return x == y || (is_int64_scalar(x) && is_int64_scalar(y));
                    });
}

}  // namespace kope::spec
