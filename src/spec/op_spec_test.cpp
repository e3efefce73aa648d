#include <cstring>

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
        Bad{"dtype outside the list", "outputs = [{ name = \"y\", dtype = \"f32\"", "outputs = [{ name = \"y\", dtype = \"f8\"", "unknown dtype 'f8'", 7},
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
        Bad{"unknown function", "flops = \"5*N*D\"", "flops = \"tan(N, 2)\"", "unknown function 'tan'", 9},
        Bad{"tolerance missing rtol", "tolerance = { atol = 1e-5, rtol = 1e-4 }", "tolerance = { atol = 1e-5 }", "tolerance is missing 'rtol'", 11},
        // Dtypes of format v2.
        Bad{"f16 attr", "attrs   = []", "attrs   = [{ name = \"s\", dtype = \"f16\", value = 1.0 }]", "a storage format; attrs are passed by value", 8},
        Bad{"i8 attr out of range", "attrs   = []", "attrs   = [{ name = \"s\", dtype = \"i8\", value = 200 }]", "does not fit in i8 (-128..127)", 8},
        Bad{"bool attr not a boolean", "attrs   = []", "attrs   = [{ name = \"s\", dtype = \"bool\", value = 1.5 }]", "must be true or false (dtype bool)", 8},
        Bad{"u8 init below zero", "dtype = \"f32\", shape = [\"N\", \"D\"], init = \"normal(0, 3)\"",
            "dtype = \"u8\", shape = [\"N\", \"D\"], init = \"randint(-1, 10)\"", "randint() gives values outside u8 (0..255)", 6},
        Bad{"bool init normal", "dtype = \"f32\", shape = [\"N\", \"D\"], init = \"normal(0, 3)\"",
            "dtype = \"bool\", shape = [\"N\", \"D\"], init = \"normal(0, 3)\"", "integer dtype bool needs randint", 6},
        Bad{"specials on bool", "dtype = \"f32\", shape = [\"N\", \"D\"], init = \"normal(0, 3)\"",
            "dtype = \"bool\", shape = [\"N\", \"D\"], init = \"randint(0, 1) | specials(0.1)\"", "specials() needs a float dtype", 6},
        // Per-output tolerances.
        Bad{"output tolerance not a table", "shape = [\"N\", \"D\"] }]", "shape = [\"N\", \"D\"], tolerance = 1e-3 }]",
            "'tolerance' of output 'y' must be a table", 7},
        Bad{"output tolerance unknown key", "shape = [\"N\", \"D\"] }]", "shape = [\"N\", \"D\"], tolerance = { eps = 1 } }]",
            "unknown key 'eps' in the tolerance of output 'y'", 7},
        Bad{"output tolerance empty", "shape = [\"N\", \"D\"] }]", "shape = [\"N\", \"D\"], tolerance = {} }]",
            "sets neither atol nor rtol", 7},
        Bad{"output tolerance undeclared dim", "shape = [\"N\", \"D\"] }]", "shape = [\"N\", \"D\"], tolerance = { atol = \"1e-5 * K\" } }]",
            "uses 'K', which is not a declared dim", 7},
        Bad{"output tolerance negative on a case", "shape = [\"N\", \"D\"] }]", "shape = [\"N\", \"D\"], tolerance = { atol = \"1e-5 * (N - 2)\" } }]",
            "case #1 (N=1 D=1): the tolerance of output 'y' evaluates to -1e-05", 7},
        Bad{"output tolerance on an integer output", "outputs = [{ name = \"y\", dtype = \"f32\", shape = [\"N\", \"D\"] }]",
            "outputs = [{ name = \"y\", dtype = \"i8\", shape = [\"N\", \"D\"], tolerance = { atol = 1 } }]",
            "output 'y' has dtype i8, which is compared exactly; remove its tolerance", 7},
        // Structured generators.
        Bad{"triangular on a non-square tensor", "init = \"normal(0, 3)\"", "init = \"triangular(lower)\"",
            "case #2 (N=3 D=17): init of 'x': triangular(lower) fills square matrices", 6},
        Bad{"triangular without a side", "init = \"normal(0, 3)\"", "init = \"triangular(diag = const(1))\"", "needs lower or upper first", 6},
        Bad{"structured generator uses an undeclared dim", "init = \"normal(0, 3)\"", "init = \"index(i * Q)\"",
            "uses 'Q', which is not a declared dim", 6},
        Bad{"index axis beyond the rank", "init = \"normal(0, 3)\"", "init = \"index(i + k)\"", "uses axis 'k' but the tensor has 2 axes", 6},
        Bad{"mask probability out of range", "init = \"normal(0, 3)\"", "init = \"mask(2)\"", "constant probability in [0, 1]", 6},
        // Inouts.
        Bad{"inout with an unknown key", "attrs   = []", "inouts  = [{ name = \"c\", dtype = \"f32\", shape = [\"N\"], role = 1 }]\nattrs = []",
            "unknown key 'role' in inout #1", 8},
        Bad{"inout named like an input", "attrs   = []", "inouts  = [{ name = \"x\", dtype = \"f32\", shape = [\"N\"] }]\nattrs = []",
            "name 'x' is used twice", 8},
        Bad{"inouts not an array", "attrs   = []", "inouts  = 3\nattrs = []", "'inouts' must be an array of tables", 8},
        // Per-case attrs and zero dims.
        Bad{"zero dim not allowed", "{ N = 1, D = 1 }", "{ N = 0, D = 1 }", "list the dim in zero_dims to allow 0", 13},
        Bad{"zero_dims names an unknown dim", "dims = [\"N\", \"D\"]", "dims = [\"N\", \"D\"]\nzero_dims = [\"Q\"]",
            "each entry of 'zero_dims' must name a declared dim", 6},
        // The reference's kind (PyTorch references) and the problem's source.
        Bad{"reference outside the folder", "level = 1", "level = 1\nreference = \"../gelu/reference.py\"",
            "'reference' is '../gelu/reference.py'; expected a file name in the op folder", 4},
        Bad{"reference of an unknown kind", "level = 1", "level = 1\nreference = \"reference.rs\"",
            "expected a .cpp (C++ ABI) or a .py (PyTorch) file", 4},
        Bad{"source not a string", "level = 1", "level = 1\nsource = 12", "'source' in op.toml must be a string", 4}));

// `reference = "reference.py"` names the reference file (its kind: eval/pytorch_reference.h);
// the default stays reference.cpp.
TEST(OpSpec, ReferenceKeyNamesTheReferenceFile) {
  auto cpp = parse_op(k_good, "ops/normalization/softmax/op.toml", false);
  ASSERT_TRUE(cpp) << cpp.error().message;
  EXPECT_EQ(cpp->reference_path, fs::path("ops/normalization/softmax/reference.cpp"));
  std::string text = std::string(k_good) + "reference = \"reference.py\"\nsource = \"KernelBench level 1 problem 23: 23_Softmax.py\"\n";
  auto py = parse_op(text, "ops/normalization/softmax/op.toml", false);
  ASSERT_TRUE(py) << py.error().message;
  EXPECT_EQ(py->reference_path, fs::path("ops/normalization/softmax/reference.py"));
}

// Cases that set attrs, and a dim that may be 0.
TEST(OpSpec, CasesMaySetAttrsAndZeroDims) {
  std::string text = R"TOML(name = "scale"
category = "elementwise"
level = 1
dims = ["N"]
zero_dims = ["N"]
inputs  = [{ name = "x", dtype = "f32", shape = ["N"] }]
outputs = [{ name = "y", dtype = "f32", shape = ["N"] }]
attrs   = [{ name = "alpha", dtype = "f32", value = 1.0 }, { name = "k", dtype = "i16", value = 0 },
           { name = "fixed", dtype = "i32", value = 9 }]
flops = "N"
bytes = "8*N"
tolerance = { atol = 0, rtol = 0 }
cases = [{ N = 0 }, { N = 5, alpha = 0.5, k = -3 }, { N = 2, fixed = 9 }]
)TOML";
  auto op = parse_op(text, "x/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  EXPECT_TRUE(op->attrs[0].per_case);
  EXPECT_TRUE(op->attrs[1].per_case);
  EXPECT_FALSE(op->attrs[2].per_case);  // set to its own value only
  EXPECT_EQ(op->cases[0].dims[0], 0);
  EXPECT_EQ(op->case_buffer_bytes(op->cases[0]), 0u);
  EXPECT_EQ(op->case_label(op->cases[1]), "N=5 alpha=0.5 k=-3");
  std::vector<int64_t> args = op->call_args(op->cases[1]);
  ASSERT_EQ(args.size(), 3u);
  double alpha;
  std::memcpy(&alpha, &args[1], sizeof alpha);
  EXPECT_EQ(alpha, 0.5);
  EXPECT_EQ(args[2], -3);
  std::string shim = render_entry_shim(*op);
  EXPECT_NE(shim.find("static_cast<float>(kope_attr_f64(dims[1]))"), std::string::npos) << shim;
  EXPECT_NE(shim.find("static_cast<int16_t>(dims[2])"), std::string::npos) << shim;
  EXPECT_NE(shim.find("static_cast<int32_t>(9LL)"), std::string::npos) << shim;
  auto bad = parse_op(util::replace_all(text, "alpha = 0.5", "alpha = \"half\""), "x/op.toml", false);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("x/op.toml:13:"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("attr 'alpha' in case #2 must be a number"), std::string::npos) << bad.error().message;
  auto range = parse_op(util::replace_all(text, "k = -3", "k = 40000"), "x/op.toml", false);
  ASSERT_FALSE(range);
  EXPECT_NE(range.error().message.find("attr 'k' in case #2 is 40000, which does not fit in i16"), std::string::npos)
      << range.error().message;
  auto negative = parse_op(util::replace_all(text, "{ N = 0 }", "{ N = -1 }"), "x/op.toml", false);
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("dims must be at least 0"), std::string::npos) << negative.error().message;
}

TEST(OpSpec, InoutsAreAnInputAndAnOutput) {
  std::string text = R"TOML(name = "axpy"
category = "matmul"
level = 1
dims = ["N"]
inputs  = [{ name = "x", dtype = "f32", shape = ["N"] }]
inouts  = [{ name = "y", dtype = "bf16", shape = ["N"], init = "uniform(-1, 1)", tolerance = { rtol = "1e-3" } }]
attrs   = [{ name = "a", dtype = "f32", value = 2.0 }]
flops = "2*N"
bytes = "8*N"
tolerance = { atol = 1e-6, rtol = 1e-6 }
cases = [{ N = 5 }]
)TOML";
  auto op = parse_op(text, "x/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  ASSERT_EQ(op->inputs.size(), 2u);
  ASSERT_EQ(op->outputs.size(), 1u);
  EXPECT_TRUE(op->inputs[1].inout);
  EXPECT_TRUE(op->outputs[0].inout);
  EXPECT_EQ(op->inout_pairs(), (std::vector<std::pair<size_t, size_t>>{{1, 0}}));
  EXPECT_EQ(render_signature(*op), "extern \"C\" void kope_kernel(const float* x, uint16_t* y /* bf16, inout */, int64_t N, float a);");
  std::string shim = render_entry_shim(*op);
  // The kernel gets the output buffer (index 2); the inout's input buffer (1) is not passed.
  EXPECT_NE(shim.find("static_cast<uint16_t*>(buffers[2])"), std::string::npos) << shim;
  EXPECT_EQ(shim.find("buffers[1]"), std::string::npos) << shim;
  EXPECT_DOUBLE_EQ(op->tolerance_for(op->outputs[0], op->cases[0]).rtol, 1e-3);
  EXPECT_EQ(op->case_buffer_bytes(op->cases[0]), 5u * 4 + 2 * 5u * 2);
}

TEST(OpSpec, NarrowDtypesRenderFixedWidthTypes) {
  std::string text = R"TOML(name = "q"
category = "matmul"
level = 1
dims = ["N"]
inputs  = [{ name = "a", dtype = "i8", shape = ["N"] }, { name = "b", dtype = "u8", shape = ["N"] },
           { name = "h", dtype = "f16", shape = ["N"] }, { name = "m", dtype = "bool", shape = ["N"] }]
outputs = [{ name = "y", dtype = "bf16", shape = ["N"] }, { name = "s", dtype = "i16", shape = ["N"] }]
attrs   = [{ name = "on", dtype = "bool", value = true }, { name = "z", dtype = "u8", value = 255 }]
flops = "N"
bytes = "N"
tolerance = { atol = 0, rtol = 0 }
cases = [{ N = 2 }]
)TOML";
  auto op = parse_op(text, "x/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  EXPECT_EQ(render_signature(*op),
            "extern \"C\" void kope_kernel(const int8_t* a, const uint8_t* b, const uint16_t* h /* f16 */, const uint8_t* m /* bool */, "
            "uint16_t* y /* bf16 */, int16_t* s, int64_t N, uint8_t on /* bool */, uint8_t z);");
  EXPECT_EQ(op->attrs[0].ivalue, 1);
  EXPECT_EQ(op->byte_size(op->inputs[2], op->cases[0]), 4u);
  EXPECT_EQ(op->byte_size(op->inputs[3], op->cases[0]), 2u);
  EXPECT_NE(render_entry_shim(*op).find("static_cast<uint8_t>(255LL)"), std::string::npos);
}

TEST(OpSpec, PerOutputToleranceIsAnExpressionOverDims) {
  std::string text = R"TOML(name = "mm"
category = "matmul"
level = 1
dims = ["K"]
inputs  = [{ name = "a", dtype = "f32", shape = ["K"] }]
outputs = [{ name = "y", dtype = "f32", shape = ["1"], tolerance = { atol = "1e-5 * K" } },
           { name = "z", dtype = "f32", shape = ["1"], tolerance = { rtol = 0.5 } },
           { name = "w", dtype = "f32", shape = ["1"] }]
flops = "K"
bytes = "K"
tolerance = { atol = 1e-6, rtol = 1e-4 }
cases = [{ K = 10 }, { K = 1000 }]
)TOML";
  auto op = parse_op(text, "x/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  EXPECT_DOUBLE_EQ(op->tolerance_for(op->outputs[0], op->cases[0]).atol, 1e-4);
  EXPECT_DOUBLE_EQ(op->tolerance_for(op->outputs[0], op->cases[1]).atol, 1e-2);
  EXPECT_DOUBLE_EQ(op->tolerance_for(op->outputs[0], op->cases[1]).rtol, 1e-4);  // the op's
  EXPECT_DOUBLE_EQ(op->tolerance_for(op->outputs[1], op->cases[0]).atol, 1e-6);  // the op's
  EXPECT_DOUBLE_EQ(op->tolerance_for(op->outputs[1], op->cases[0]).rtol, 0.5);
  EXPECT_DOUBLE_EQ(op->tolerance_for(op->outputs[2], op->cases[1]).atol, 1e-6);
}

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
