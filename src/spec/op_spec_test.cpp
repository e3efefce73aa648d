#include <gtest/gtest.h>

#include "kope/spec.h"
#include "util/strings.h"

namespace kope::spec {
namespace {

const char* k_good = R"TOML(name = "softmax"
category = "normalization"
level = 1
summary = "Row-wise softmax over the last axis."
dims = ["N", "D"]
inputs  = [{ name = "x", dtype = "f32", shape = ["N", "D"], init = "normal(0, 3)" }]
outputs = [{ name = "y", dtype = "f32", shape = ["N", "D"] }]
attrs   = []
flops = "5*N*D"
bytes = "8*N*D"
tolerance = { atol = 1e-5, rtol = 1e-4 }
cases = [
  { N = 1, D = 1 }, { N = 3, D = 17 }, { N = 64, D = 1000 },
  { N = 4096, D = 1024, timed = true },
]
)TOML";

TEST(OpSpec, ParsesTheDesignExample) {
  auto op = parse_op(k_good, "ops/normalization/softmax/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  EXPECT_EQ(op->name, "softmax");
  EXPECT_EQ(op->category, "normalization");
  EXPECT_EQ(op->level, 1);
  ASSERT_EQ(op->dims.size(), 2u);
  ASSERT_EQ(op->cases.size(), 4u);
  EXPECT_TRUE(op->cases[3].timed);
  EXPECT_EQ(op->timed_case_count(), 1);
  EXPECT_EQ(op->case_buffer_bytes(op->cases[2]), 2u * 64 * 1000 * 4);
  EXPECT_DOUBLE_EQ(op->flops_for(op->cases[3]), 5.0 * 4096 * 1024);
  EXPECT_EQ(render_signature(*op), "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D);");
}

TEST(OpSpec, SignatureOrderIsInputsOutputsDimsAttrs) {
  std::string text = R"TOML(name = "ln"
category = "normalization"
level = 1
dims = ["N", "D"]
inputs  = [{ name = "x", dtype = "f32", shape = ["N", "D"] }, { name = "g", dtype = "f32", shape = ["D"] }]
outputs = [{ name = "y", dtype = "f32", shape = ["N", "D"] }, { name = "idx", dtype = "i64", shape = ["N"] }]
attrs   = [{ name = "eps", dtype = "f32", value = 1e-5 }, { name = "k", dtype = "i32", value = 3 }]
flops = "8*N*D"
bytes = "4*(2*N*D + D)"
tolerance = { atol = 1e-5, rtol = 1e-4 }
cases = [{ N = 2, D = 3 }]
)TOML";
  auto op = parse_op(text, "x/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  EXPECT_EQ(render_signature(*op),
            "extern \"C\" void kope_kernel(const float* x, const float* g, float* y, int64_t* idx, int64_t N, int64_t D, float eps, int32_t k);");
  std::string shim = render_entry_shim(*op);
  EXPECT_NE(shim.find("kope_entry"), std::string::npos);
  EXPECT_NE(shim.find("static_cast<float>(0x1.4f8b588e368f1p-17)"), std::string::npos) << shim;
  EXPECT_NE(shim.find("static_cast<int32_t>(3LL)"), std::string::npos);
}

TEST(OpSpec, ShapeExpressions) {
  std::string text = R"TOML(name = "conv"
category = "conv"
level = 1
dims = ["H", "K", "S"]
inputs  = [{ name = "x", dtype = "f32", shape = ["H"] }]
outputs = [{ name = "y", dtype = "f32", shape = ["(H - K)//S + 1"] }]
flops = "2*K*((H-K)//S + 1)"
bytes = 4
tolerance = { atol = 0, rtol = 0 }
cases = [{ H = 10, K = 3, S = 2 }]
)TOML";
  auto op = parse_op(text, "x/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  EXPECT_EQ(op->shape_of(op->outputs[0], op->cases[0]), std::vector<int64_t>{4});
  EXPECT_DOUBLE_EQ(op->flops_for(op->cases[0]), 24.0);
}

struct Bad {
  const char* what;
  std::string from;   // substring of k_good to replace
  std::string to;
  std::string expect; // substring of the message
  int line;           // expected line in "path:line:"; 0 = don't check
};

std::string mutate(const Bad& b) {
  std::string s = k_good;
  auto pos = s.find(b.from);
  EXPECT_NE(pos, std::string::npos) << b.what;
  return s.replace(pos, b.from.size(), b.to);
}

class Malformed : public ::testing::TestWithParam<Bad> {};

TEST_P(Malformed, GivesAClearMessage) {
  const Bad& b = GetParam();
  auto op = parse_op(mutate(b), "bad/op.toml", false);
  ASSERT_FALSE(op) << b.what;
  const std::string& msg = op.error().message;
  EXPECT_EQ(op.error().kind, ErrorKind::config);
  EXPECT_NE(msg.find(b.expect), std::string::npos) << b.what << ": " << msg;
  EXPECT_TRUE(msg.starts_with("bad/op.toml:")) << msg;
  if (b.line) {
    EXPECT_TRUE(msg.starts_with(fmt::format("bad/op.toml:{}:", b.line))) << b.what << ": " << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Specs, Malformed,
    ::testing::Values(
        Bad{"unknown top-level key", "attrs   = []", "attrs = []\nspeed = 3", "unknown key 'speed'", 9},
        Bad{"missing name", "name = \"softmax\"\n", "", "missing the required key 'name'", 0},
        Bad{"missing cases", "cases = [", "kases = [", "unknown key 'kases'", 12},
        Bad{"undeclared dim in shape", "shape = [\"N\", \"D\"], init", "shape = [\"N\", \"E\"], init", "'E', which is not a declared dim", 6},
        Bad{"flops does not parse", "flops = \"5*N*D\"", "flops = \"5*N*\"", "cannot parse 'flops' expression", 9},
        Bad{"bytes uses unknown dim", "bytes = \"8*N*D\"", "bytes = \"8*N*Q\"", "'Q', which is not a declared dim", 10},
        Bad{"case misses a dim", "{ N = 1, D = 1 }", "{ N = 1 }", "misses dim 'D'", 13},
        Bad{"case sets unknown dim", "{ N = 3, D = 17 }", "{ N = 3, D = 17, M = 2 }", "sets 'M', which is not a declared dim", 13},
        Bad{"dtype outside the list", "outputs = [{ name = \"y\", dtype = \"f32\"", "outputs = [{ name = \"y\", dtype = \"f16\"", "unknown dtype 'f16'", 7},
        Bad{"negative tolerance", "atol = 1e-5", "atol = -1e-5", "tolerance atol is -1e-05", 11},
        Bad{"level out of range", "level = 1", "level = 7", "expected 1..4", 3},
        Bad{"level wrong type", "level = 1", "level = \"one\"", "'level' must be an integer", 3},
        Bad{"TOML syntax", "summary = \"Row-wise", "summary = Row-wise", "TOML syntax error", 4},
        Bad{"bad init generator", "init = \"normal(0, 3)\"", "init = \"gauss(0, 3)\"", "unknown generator 'gauss'", 6},
        Bad{"init wrong arity", "init = \"normal(0, 3)\"", "init = \"normal(0)\"", "takes 2 arguments", 6},
        Bad{"unknown key in tensor", "outputs = [{ name = \"y\",", "outputs = [{ name = \"y\", layout = \"nchw\",", "unknown key 'layout' in output #1", 7},
        Bad{"dim zero", "{ N = 1, D = 1 }", "{ N = 0, D = 1 }", "dims must be at least 1", 13},
        Bad{"duplicate names", "name = \"y\", dtype", "name = \"x\", dtype", "name 'x' is used twice", 7},
        Bad{"timed not boolean", "timed = true", "timed = 1", "'timed' in case #4 must be true or false", 14},
        Bad{"tensor name not an identifier", "name = \"y\", dtype", "name = \"my y\", dtype", "not a valid C identifier", 7},
        Bad{"no outputs", "outputs = [{ name = \"y\", dtype = \"f32\", shape = [\"N\", \"D\"] }]", "outputs = []", "at least one output", 7},
        Bad{"specials on integer", "inputs  = [{ name = \"x\", dtype = \"f32\", shape = [\"N\", \"D\"], init = \"normal(0, 3)\" }]",
            "inputs  = [{ name = \"x\", dtype = \"i32\", shape = [\"N\", \"D\"], init = \"randint(0, 5) | specials(0.1)\" }]", "specials() needs a float dtype", 6},
        Bad{"non-integer shape", "shape = [\"N\", \"D\"] }]", "shape = [\"N\", \"D/2\"] }]", "is not an integer", 13},
        Bad{"unknown function", "flops = \"5*N*D\"", "flops = \"pow(N, 2)\"", "unknown function 'pow'", 9},
        Bad{"tolerance missing rtol", "tolerance = { atol = 1e-5, rtol = 1e-4 }", "tolerance = { atol = 1e-5 }", "tolerance is missing 'rtol'", 11}));

TEST(OpSpec, ColumnPointsIntoTheExpression) {
  std::string s = k_good;
  s.replace(s.find("bytes = \"8*N*D\""), 15, "bytes = \"8*N*Q\"");
  auto op = parse_op(s, "bad/op.toml", false);
  ASSERT_FALSE(op);
  // 'Q' is at column 14 of line 10: bytes = "8*N*Q"
  EXPECT_TRUE(op.error().message.starts_with("bad/op.toml:10:14:")) << op.error().message;
}

TEST(Expr, EvaluatesWithPrecedence) {
  DimValues d{{"N", 7}, {"K", 3}};
  EXPECT_DOUBLE_EQ(Expr::parse("2 + 3 * N")->eval(d), 23);
  EXPECT_DOUBLE_EQ(Expr::parse("(2 + 3) * N")->eval(d), 35);
  EXPECT_DOUBLE_EQ(Expr::parse("N // K")->eval(d), 2);
  EXPECT_DOUBLE_EQ(Expr::parse("N / 2")->eval(d), 3.5);
  EXPECT_DOUBLE_EQ(Expr::parse("N % K")->eval(d), 1);
  EXPECT_DOUBLE_EQ(Expr::parse("-N + 1")->eval(d), -6);
  EXPECT_DOUBLE_EQ(Expr::parse("cdiv(N, K)")->eval(d), 3);
  EXPECT_DOUBLE_EQ(Expr::parse("max(N, K) - min(N, K)")->eval(d), 4);
  EXPECT_DOUBLE_EQ(Expr::parse("1e3")->eval(d), 1000);
  EXPECT_FALSE(Expr::parse("N +"));
  EXPECT_FALSE(Expr::parse("(N"));
  EXPECT_FALSE(Expr::parse("N $ 2"));
  EXPECT_EQ(Expr::parse("N*K+N")->names(), (std::set<std::string>{"K", "N"}));
}

TEST(Suite, LoadsAndSelects) {
  auto suite = load_suite();
  ASSERT_TRUE(suite) << suite.error().message;
  ASSERT_FALSE(suite->ops.empty());
  auto all = select_ops({});
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), suite->ops.size());
  auto none = select_ops({"no_such_op_xyz"});
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("matches no operator"), std::string::npos);
  auto by_path = resolve_op(suite->ops[0].dir.string());
  ASSERT_TRUE(by_path) << by_path.error().message;
  EXPECT_EQ(by_path->name, suite->ops[0].name);
  auto by_name = resolve_op(suite->ops[0].name);
  ASSERT_TRUE(by_name);
  EXPECT_EQ(by_name->spec_hash, suite->ops[0].spec_hash);
}

}  // namespace
}  // namespace kope::spec
