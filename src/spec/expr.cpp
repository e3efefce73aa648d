// Expression parser and evaluator for shapes, flops, bytes and init arguments.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "kope/spec.h"
#include "spec/generate.h"

namespace kope::spec {

struct Expr::Node {
  enum class Op { constant, name, add, sub, mul, div, floordiv, mod, neg, min, max, cdiv, pow, sqrt, exp, log };
  Op op = Op::constant;
  double value = 0;
  std::string name;
  std::shared_ptr<const Node> a, b;
};

namespace {

using NodePtr = std::shared_ptr<const Expr::Node>;
using Op = Expr::Node::Op;

NodePtr make(Op op, NodePtr a = nullptr, NodePtr b = nullptr) {
  auto n = std::make_shared<Expr::Node>();
  n->op = op;
  n->a = std::move(a);
  n->b = std::move(b);
  return n;
}

// Recursive-descent parser:
//   expr   := term (('+'|'-') term)*
//   term   := unary (('*'|'/'|'//'|'%') unary)*
//   unary  := '-' unary | '+' unary | atom
//   atom   := number | name | name '(' expr ')' | name '(' expr ',' expr ')' | '(' expr ')'
class Parser {
 public:
  explicit Parser(std::string_view text) : m_text(text) {}

  Result<NodePtr> parse_all() {
    KOPE_ASSIGN(NodePtr n, parse_expr());
    skip_space();
    if (m_pos != m_text.size()) return error("unexpected '{}'", m_text.substr(m_pos, 1));
    return n;
  }

  size_t pos() const { return m_pos; }

 private:
  template <class... Args>
  std::unexpected<Error> error(fmt::format_string<Args...> f, Args&&... args) {
    return fail(ErrorKind::config, "column {}: {}", m_pos + 1,
                fmt::format(f, std::forward<Args>(args)...));
  }

  void skip_space() {
    while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos]))) ++m_pos;
  }

  bool eat(std::string_view tok) {
    skip_space();
    if (m_text.substr(m_pos).starts_with(tok)) {
      m_pos += tok.size();
      return true;
    }
    return false;
  }

  Result<NodePtr> parse_expr() {
    KOPE_ASSIGN(NodePtr lhs, parse_term());
    for (;;) {
      if (eat("+")) {
        KOPE_ASSIGN(NodePtr rhs, parse_term());
        lhs = make(Op::add, lhs, rhs);
      } else if (eat("-")) {
        KOPE_ASSIGN(NodePtr rhs, parse_term());
        lhs = make(Op::sub, lhs, rhs);
      } else {
        return lhs;
      }
    }
  }

  Result<NodePtr> parse_term() {
    KOPE_ASSIGN(NodePtr lhs, parse_unary());
    for (;;) {
      Op op;
      if (eat("//")) {
        op = Op::floordiv;
      } else if (eat("*")) {
        op = Op::mul;
      } else if (eat("/")) {
        op = Op::div;
      } else if (eat("%")) {
        op = Op::mod;
      } else {
        return lhs;
      }
      KOPE_ASSIGN(NodePtr rhs, parse_unary());
      lhs = make(op, lhs, rhs);
    }
  }

  Result<NodePtr> parse_unary() {
    if (eat("-")) {
      KOPE_ASSIGN(NodePtr a, parse_unary());
      return make(Op::neg, a);
    }
    if (eat("+")) return parse_unary();
    return parse_atom();
  }

  Result<NodePtr> parse_atom() {
    skip_space();
    if (m_pos >= m_text.size()) return error("expected a number, a dim name or '(' but the expression ended");
    char c = m_text[m_pos];
    if (c == '(') {
      ++m_pos;
      KOPE_ASSIGN(NodePtr inner, parse_expr());
      if (!eat(")")) return error("expected ')'");
      return inner;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      std::string tmp(m_text.substr(m_pos));
      char* end = nullptr;
      double v = std::strtod(tmp.c_str(), &end);
      if (end == tmp.c_str()) return error("malformed number");
      m_pos += static_cast<size_t>(end - tmp.c_str());
      auto n = std::make_shared<Expr::Node>();
      n->op = Op::constant;
      n->value = v;
      return NodePtr(n);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = m_pos;
      while (m_pos < m_text.size() &&
             (std::isalnum(static_cast<unsigned char>(m_text[m_pos])) || m_text[m_pos] == '_')) {
        ++m_pos;
      }
      std::string name(m_text.substr(start, m_pos - start));
      skip_space();
      if (m_pos < m_text.size() && m_text[m_pos] == '(') {
        Op op;
        bool unary = false;
        if (name == "min") {
          op = Op::min;
        } else if (name == "max") {
          op = Op::max;
        } else if (name == "cdiv") {
          op = Op::cdiv;
        } else if (name == "pow") {
          op = Op::pow;
        } else if (name == "sqrt" || name == "exp" || name == "log") {
          op = name == "sqrt" ? Op::sqrt : name == "exp" ? Op::exp : Op::log;
          unary = true;
        } else {
          m_pos = start;
          return error("unknown function '{}' (expected min, max, cdiv, pow, sqrt, exp or log)", name);
        }
        ++m_pos;
        KOPE_ASSIGN(NodePtr a, parse_expr());
        if (unary) {
          if (!eat(")")) return error("expected ')' after {}(x)", name);
          return make(op, a);
        }
        if (!eat(",")) return error("expected ',' in {}(a, b)", name);
        KOPE_ASSIGN(NodePtr b, parse_expr());
        if (!eat(")")) return error("expected ')' after {}(a, b)", name);
        return make(op, a, b);
      }
      auto n = std::make_shared<Expr::Node>();
      n->op = Op::name;
      n->name = std::move(name);
      return NodePtr(n);
    }
    return error("unexpected '{}' (expected a number, a dim name or '(')", std::string(1, c));
  }

  std::string_view m_text;
  size_t m_pos = 0;
};

double eval_node(const Expr::Node& n, const DimValues& dims) {
  switch (n.op) {
    case Op::constant: return n.value;
    case Op::name: {
      auto it = dims.find(n.name);
      return it == dims.end() ? std::nan("") : static_cast<double>(it->second);
    }
    case Op::neg: return -eval_node(*n.a, dims);
    case Op::sqrt: return std::sqrt(eval_node(*n.a, dims));
    case Op::exp: return det_exp(eval_node(*n.a, dims));
    case Op::log: {
      double x = eval_node(*n.a, dims);
      if (x == 0) return -std::numeric_limits<double>::infinity();
      return det_log(x);  // NaN below 0
    }
    default: break;
  }
  double a = eval_node(*n.a, dims);
  double b = eval_node(*n.b, dims);
  switch (n.op) {
    case Op::add: return a + b;
    case Op::sub: return a - b;
    case Op::mul: return a * b;
    case Op::div: return a / b;
    case Op::floordiv: return std::floor(a / b);
    case Op::mod: return a - b * std::floor(a / b);
    case Op::min: return std::fmin(a, b);
    case Op::max: return std::fmax(a, b);
    case Op::cdiv: return std::ceil(a / b);
    case Op::pow: return det_pow(a, b);
    default: return std::nan("");
  }
}

void collect_names(const Expr::Node& n, std::set<std::string>& out) {
  if (n.op == Op::name) out.insert(n.name);
  if (n.a) collect_names(*n.a, out);
  if (n.b) collect_names(*n.b, out);
}

}  // namespace

Expr::Expr() : m_root(std::make_shared<Node>()), m_text("0") {}

Result<Expr> Expr::parse(std::string_view text, size_t* error_offset) {
  Parser p(text);
  auto root = p.parse_all();
  if (!root) {
    if (error_offset) *error_offset = p.pos();
    return std::unexpected(root.error());
  }
  Expr e;
  e.m_root = *root;
  e.m_text = std::string(text);
  return e;
}

Expr Expr::constant(double v) {
  Expr e;
  auto n = std::make_shared<Node>();
  n->value = v;
  e.m_root = n;
  e.m_text = fmt::format("{}", v);
  return e;
}

double Expr::eval(const DimValues& dims) const { return eval_node(*m_root, dims); }

Result<int64_t> Expr::eval_size(const DimValues& dims) const {
  double v = eval(dims);
  if (!std::isfinite(v)) return fail(ErrorKind::config, "'{}' is not finite", m_text);
  if (v < 0) return fail(ErrorKind::config, "'{}' = {} is negative", m_text, v);
  if (v != std::floor(v)) return fail(ErrorKind::config, "'{}' = {} is not an integer (use // for floor division)", m_text, v);
  if (v > 9.0e15) return fail(ErrorKind::config, "'{}' = {} is too large", m_text, v);
  return static_cast<int64_t>(v);
}

std::set<std::string> Expr::names() const {
  std::set<std::string> out;
  collect_names(*m_root, out);
  return out;
}

}  // namespace kope::spec
