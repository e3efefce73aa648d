#include <gtest/gtest.h>

#include "kope/spec.h"

namespace kope::spec {
namespace {

using Kind = SignatureParam::Kind;

OpSpec source_op(const std::string& dir) {
  auto op = load_op(fs::path(KOPE_SOURCE_DIR) / dir);
  EXPECT_TRUE(op) << op.error().message;
  return op ? *op : OpSpec{};
}

TEST(SignatureShape, ElementwiseOp) {
  OpSpec relu = source_op("ops/elementwise/relu");
  SignatureShape s = signature_shape(relu);
  EXPECT_EQ(s.str(), "in:f32,out:f32,dim,dim");
  EXPECT_EQ(s.inputs(), 1);
  EXPECT_EQ(s.outputs(), 1);
  EXPECT_EQ(s.dims(), 2);
  EXPECT_EQ(s.scalars(), 0);
  EXPECT_EQ(s.dtypes(), std::set<DType>{DType::f32});
}

TEST(SignatureShape, MatmulWithAnInoutDimsAndScalars) {
  // ssyrk: `const float* A, float* C /* inout */, int64_t N, int64_t K, float alpha, float beta`.
  SignatureShape s = signature_shape(source_op("ops/matmul/ssyrk"));
  EXPECT_EQ(s.str(), "in:f32,inout:f32,dim,dim,attr:f32,attr:f32");
  EXPECT_EQ(s.inputs(), 1);
  EXPECT_EQ(s.outputs(), 1);  // the inout, once
  EXPECT_EQ(s.dims(), 2);
  EXPECT_EQ(s.scalars(), 2);
  // sgemm: three dims, no attrs, two inputs.
  EXPECT_EQ(signature_shape(source_op("ops/matmul/sgemm")).str(), "in:f32,in:f32,out:f32,dim,dim,dim");
  // Mixed integer dtypes, each tensor its own.
  SignatureShape q = signature_shape(source_op("ops/matmul/gemm_u8s8_requant"));
  EXPECT_EQ(q.str(), "in:u8,in:i8,in:f32,out:i8,dim,dim,dim");
  EXPECT_EQ(q.dtypes(), (std::set<DType>{DType::u8, DType::i8, DType::f32}));
}

TEST(SignatureShape, HalfAndBoolDtypesComeFromTheSpecNotTheCType) {
  // Both render as uint16_t / uint8_t; the shape keeps what they hold.
  SignatureShape bf16 = signature_shape(source_op("ops/elementwise/silu_bf16"));
  EXPECT_EQ(bf16.str(), "in:bf16,out:bf16,dim,dim");
  EXPECT_EQ(bf16.dtypes(), std::set<DType>{DType::bf16});
  SignatureShape masked = signature_shape(source_op("ops-kernelbench/scan/kb1_93_masked_cumsum"));
  EXPECT_EQ(masked.str(), "in:f32,in:bool,out:f32,dim,dim,attr:i64");
  EXPECT_EQ(masked.dims(), 2);
  EXPECT_EQ(masked.scalars(), 1);  // `int64_t dim` is an attr, though its C type is a dim's
  EXPECT_NE(bf16, signature_shape(source_op("tests/ops/elementwise/select_f16")));
}

TEST(SignatureShape, AnInoutWithACommaNoteIsOneParameter) {
  // render_signature writes `uint16_t* y /* bf16, inout */` and `uint8_t on /* bool */`.
  std::string text = R"TOML(name = "axpy"
category = "matmul"
level = 1
dims = ["N"]
inputs  = [{ name = "x", dtype = "f32", shape = ["N"] }]
inouts  = [{ name = "y", dtype = "bf16", shape = ["N"], init = "uniform(-1, 1)" }]
attrs   = [{ name = "a", dtype = "f32", value = 2.0 }, { name = "on", dtype = "bool", value = true }]
flops = "2*N"
bytes = "8*N"
tolerance = { atol = 1e-2, rtol = 1e-2 }
cases = [{ N = 5 }]
)TOML";
  auto op = parse_op(text, "x/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  ASSERT_EQ(render_signature(*op),
            "extern \"C\" void kope_kernel(const float* x, uint16_t* y /* bf16, inout */, int64_t N, float a, uint8_t on /* bool */);");
  SignatureShape s = signature_shape(*op);
  ASSERT_EQ(s.params.size(), 5u);
  EXPECT_EQ(s.params[1], (SignatureParam{Kind::inout, DType::bf16}));
  EXPECT_EQ(s.params[4], (SignatureParam{Kind::attr, DType::boolean}));
  EXPECT_EQ(s.str(), "in:f32,inout:bf16,dim,attr:f32,attr:bool");
  EXPECT_EQ(s.inputs(), 1);
  EXPECT_EQ(s.outputs(), 1);
  EXPECT_EQ(s.scalars(), 2);
  EXPECT_EQ(s.dtypes(), (std::set<DType>{DType::f32, DType::bf16}));  // tensors only
}

TEST(SignatureShape, TextRoundTripsForEveryOpKopeShips) {
  int ops = 0;
  for (const char* root : {"ops", "ops-kernelbench", "tests/ops"}) {
    auto suite = load_suite(fs::path(KOPE_SOURCE_DIR) / root);
    ASSERT_TRUE(suite) << suite.error().message;
    for (const auto& op : suite->ops) {
      SignatureShape s = signature_shape(op);
      auto back = SignatureShape::parse(s.str());
      ASSERT_TRUE(back) << op.name << ": " << back.error().message;
      EXPECT_EQ(*back, s) << op.name << ": " << s.str();
      EXPECT_TRUE(same_parameters(*back, s));
      ++ops;
    }
  }
  EXPECT_GT(ops, 50);
  EXPECT_EQ(SignatureShape::parse("")->params.size(), 0u);
  EXPECT_EQ(SignatureShape::parse("in:?,out:f16")->str(), "in:?,out:f16");
}

TEST(SignatureShape, ParseNamesTheParameterItCannotRead) {
  for (auto [text, says] : std::initializer_list<std::pair<const char*, const char*>>{
           {"in:f33,dim", "unknown dtype 'f33'"},
           {"in:f32,,dim", "parameter ''"},
           {"tensor:f32", "parameter 'tensor:f32'"},
           {"in", "has no dtype"},
           {"dim:i64", "a dim has no dtype"}}) {
    auto s = SignatureShape::parse(text);
    ASSERT_FALSE(s) << text;
    EXPECT_EQ(s.error().kind, ErrorKind::config);
    EXPECT_NE(s.error().message.find(says), std::string::npos) << s.error().message;
  }
}

TEST(SignatureShape, SameParametersCountsADimAndAnI64AttrAlike) {
  auto shape = [](const char* text) { return *SignatureShape::parse(text); };
  EXPECT_TRUE(same_parameters(shape("in:f32,out:f32,dim,dim,dim"), shape("in:f32,out:f32,dim,dim,attr:i64")));
  EXPECT_FALSE(same_parameters(shape("in:f32,out:f32,dim,dim"), shape("in:f32,out:f32,dim,attr:i32")));
  EXPECT_FALSE(same_parameters(shape("in:f16,out:f16,dim"), shape("in:bf16,out:bf16,dim")));
  EXPECT_FALSE(same_parameters(shape("in:f32,out:f32,dim"), shape("in:f32,inout:f32,dim")));
  EXPECT_FALSE(same_parameters(shape("in:f32,out:f32,dim"), shape("in:f32,out:f32,dim,dim")));
  EXPECT_FALSE(same_parameters(shape("in:f32,in:i32,out:f32"), shape("in:i32,in:f32,out:f32")));
}

}  // namespace
}  // namespace kope::spec
