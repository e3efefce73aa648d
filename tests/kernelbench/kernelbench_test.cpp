// PyTorch references and the KernelBench import (docs/design.md §2, "PyTorch references").
//
// - A PyTorch reference of an existing op (gelu) computes what its C++ reference computes.
// - Every imported problem of ops-kernelbench/ is judged `correct` with its own reference as the
//   candidate and `wrong_result` with a perturbed one, through the evaluator's verification
//   (generate_case_data, compute_expected, verify_case): the candidate is a second runner of the
//   reference, checked against the expected outputs like any kernel.
// - `kope eval` judges C++ kernels against a PyTorch reference, timing included.
// - The importer refuses malformed problems naming file, line and construct, and writes what is
//   committed under ops-kernelbench/.
// Every test that needs torch skips, saying so, without Debian's python3-torch.
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "eval/arena.h"
#include "eval/kernelbench.h"
#include "eval/measure.h"
#include "eval/native.h"
#include "eval/pytorch_reference.h"
#include "eval/session.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

const fs::path k_suite = fs::path(KOPE_SOURCE_DIR) / "ops-kernelbench";

#define SKIP_WITHOUT_TORCH()                                                                 \
  do {                                                                                       \
    auto py = eval::python_embed();                                                          \
    if (!py) GTEST_SKIP() << "PyTorch references cannot run here: " << py.error().message;   \
  } while (0)

// A trusted runner for `so`, with room for every case of `op`.
std::unique_ptr<eval::Session> start_runner(const spec::OpSpec& op, const fs::path& so) {
  auto runner = eval::find_runner();
  EXPECT_TRUE(runner) << runner.error().message;
  if (!runner) return nullptr;
  eval::RunnerOptions ro;
  ro.runner = *runner;
  ro.mode = eval::proto::Mode::trusted;
  ro.threads = 2;
  uint64_t in = 0, out = 0;
  for (const auto& c : op.cases) {
    auto l = eval::layout_case(op, c, eval::k_rotating_sets, eval::k_rotating_sets, 4096);
    in = std::max(in, l.in_bytes);
    out = std::max(out, l.out_bytes);
  }
  ro.memory_bytes = in + out + (8ull << 30);
  ro.processes = 64;
  ro.cpu_seconds = 3600;
  auto s = eval::Session::start(so, ro, in, out);
  EXPECT_TRUE(s) << s.error().message;
  if (!s) return nullptr;
  EXPECT_FALSE((*s)->failure()) << (*s)->failure()->message;
  return std::move(*s);
}

fs::path build(const spec::OpSpec& op, const fs::path& source) {
  auto tc = eval::cpu_toolchain();
  EXPECT_TRUE(tc) << tc.error().message;
  auto so = eval::build_trusted(op, source, *tc);
  EXPECT_TRUE(so) << so.error().message;
  return so ? *so : fs::path();
}

// The evaluator's verification of `candidate` against `reference` on every case of `op` (the
// rule of evaluator.cpp: a violation is its verdict, a mismatch wrong_result) and its message.
std::pair<eval::Verdict, std::string> judge(const spec::OpSpec& op, eval::Session& reference, eval::Session& candidate,
                                            uint64_t seed) {
  for (const auto& c : op.cases) {
    eval::CaseData data = eval::generate_case_data(op, c, seed + static_cast<uint64_t>(c.index), eval::k_rotating_sets);
    auto st = eval::compute_expected(reference, op, c, data, seconds(600));
    if (!st) return {eval::Verdict::runtime_error, "the reference failed: " + st.error().message};
    auto v = eval::verify_case(candidate, op, c, data, seconds(600), seed);
    if (!v) return {eval::Verdict::runtime_error, v.error().message};
    if (v->violation) return {v->violation->verdict, v->violation->message};
    if (!v->check.ok) return {eval::Verdict::wrong_result, fmt::format("case {}: {}", op.case_label(c), v->check.first_mismatch)};
  }
  return {eval::Verdict::correct, ""};
}

// A copy of an op folder under parent/<category>/<name>.
fs::path copy_op(const spec::OpSpec& op, const fs::path& parent) {
  fs::path dir = parent / op.category / op.name;
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(op.dir)) fs::copy_file(e.path(), dir / e.path().filename());
  return dir;
}

util::RunResult kope(const std::vector<std::string>& args) {
  util::RunOptions o;
  o.spawn.argv = {KOPE_EXE};
  for (const auto& a : args) o.spawn.argv.push_back(a);
  o.timeout = std::chrono::minutes(25);
  auto r = util::run(o);
  EXPECT_TRUE(r) << r.error().message;
  return r ? *r : util::RunResult{};
}

// The PyTorch reference of gelu computes the C++ reference's outputs (within gelu's own
// tolerance, on its own cases, specials included), read back through the same runner path.
TEST(PytorchReference, GeluAgreesWithTheCppReference) {
  SKIP_WITHOUT_TORCH();
  auto cpp_op = spec::load_op(fs::path(KOPE_SOURCE_DIR) / "ops/elementwise/gelu");
  ASSERT_TRUE(cpp_op) << cpp_op.error().message;
  auto tmp = util::TempDir::create("kope-pyref-", fs::path(KOPE_BINARY_DIR));
  ASSERT_TRUE(tmp);
  fs::path dir = tmp->path() / "gelu";
  fs::create_directories(dir);
  auto toml = util::read_file(cpp_op->spec_path);
  ASSERT_TRUE(toml);
  // The same op with the other kind of reference; the big timed cases are left out (each costs
  // seconds in both references on a shared machine and adds nothing the others do not test).
  std::string text = "reference = \"reference.py\"\n" + toml->substr(0, toml->find("  { N = 4096, D = 4096, timed = true },")) + "]\n";
  ASSERT_TRUE(util::write_file_atomic(dir / "op.toml", text));
  ASSERT_TRUE(util::write_file_atomic(dir / "reference.py", R"(import torch

def kope_reference(dims, attrs):
    # Exact GELU (erf form) in double, as the C++ reference computes it.
    return lambda x: torch.nn.functional.gelu(x.double()).float()
)"));
  auto py_op = spec::load_op(dir);
  ASSERT_TRUE(py_op) << py_op.error().message;
  EXPECT_TRUE(eval::has_pytorch_reference(*py_op));
  EXPECT_EQ(py_op->cases.size(), cpp_op->cases.size() - 3);
  auto py = start_runner(*py_op, build(*py_op, py_op->reference_path));
  auto cpp = start_runner(*cpp_op, build(*cpp_op, cpp_op->reference_path));
  ASSERT_TRUE(py && cpp);
  auto [verdict, message] = judge(*py_op, *py, *cpp, 0x9e1u);
  EXPECT_EQ(verdict, eval::Verdict::correct) << message;
}

// Each imported KernelBench problem: its own reference, run again as the candidate, is
// correct; the same reference with one output element moved by 1 is wrong_result.
TEST(KernelbenchSuite, EachProblemIsCorrectWithItsOwnReferenceAndWrongPerturbed) {
  SKIP_WITHOUT_TORCH();
  auto suite = spec::load_suite(k_suite);
  ASSERT_TRUE(suite) << suite.error().message;
  ASSERT_EQ(suite->ops.size(), 10u);
  auto tmp = util::TempDir::create("kope-kb-", fs::path(KOPE_BINARY_DIR));
  ASSERT_TRUE(tmp);
  for (const auto& op : suite->ops) {
    SCOPED_TRACE(op.name);
    EXPECT_TRUE(eval::has_pytorch_reference(op));
    auto toml = util::read_file(op.spec_path);
    ASSERT_TRUE(toml);
    EXPECT_NE(toml->find("\nsource = \"KernelBench level "), std::string::npos) << *toml;
    fs::path so = build(op, op.reference_path);
    auto reference = start_runner(op, so);
    auto candidate = start_runner(op, so);
    ASSERT_TRUE(reference && candidate);
    auto [verdict, message] = judge(op, *reference, *candidate, 0x5eed);
    EXPECT_EQ(verdict, eval::Verdict::correct) << message;

    fs::path dir = copy_op(op, tmp->path());
    auto ref = util::read_file(dir / "reference.py");
    ASSERT_TRUE(ref);
    ASSERT_TRUE(util::write_file_atomic(dir / "reference.py", *ref + R"(

_kope_honest = kope_reference


def kope_reference(dims, attrs):  # the perturbed candidate: one element of each output off by 1
    honest = _kope_honest(dims, attrs)

    def perturbed(*tensors):
        results = honest(*tensors)
        results = (results,) if isinstance(results, torch.Tensor) else tuple(results)
        out = []
        for r in results:
            r = r.clone()
            flat = r.view(-1)
            if flat.numel():
                flat[flat.numel() // 2] += 1
            out.append(r)
        return tuple(out)

    return perturbed
)"));
    auto bad_op = spec::load_op(dir);
    ASSERT_TRUE(bad_op) << bad_op.error().message;
    auto bad = start_runner(*bad_op, build(*bad_op, bad_op->reference_path));
    ASSERT_TRUE(bad);
    auto [bad_verdict, bad_message] = judge(op, *reference, *bad, 0x5eed);
    EXPECT_EQ(bad_verdict, eval::Verdict::wrong_result) << bad_message;
  }
}

// `kope eval` on a PyTorch-reference op: an honest C++ ReLU is correct and timed against the
// PyTorch model; a kernel that drops the sign test is wrong_result.
TEST(KernelbenchSuite, KopeEvalJudgesCppKernelsAgainstThePytorchReference) {
  SKIP_WITHOUT_TORCH();
  auto tmp = util::TempDir::create("kope-kbeval-", fs::path(KOPE_BINARY_DIR));
  ASSERT_TRUE(tmp);
  auto kernel = [&](const char* name, const char* body) {
    fs::path p = tmp->path() / name;
    EXPECT_TRUE(util::write_file_atomic(p, fmt::format(R"(#include <cstdint>
extern "C" void kope_kernel(const float* x, float* out, int64_t BATCH_SIZE, int64_t DIM) {{
  for (int64_t i = 0; i < BATCH_SIZE * DIM; ++i) out[i] = {};
}}
)", body)));
    return p.string();
  };
  std::string op = "kb1_19_relu";
  auto good = kope({"eval", "--suite", k_suite.string(), "--op", op, kernel("relu.cpp", "x[i] > 0 ? x[i] : 0.0f"), "--json",
                    "--max-seconds", "0.5", "--target-ci", "0.2", "--threads", "1"});
  auto j = nlohmann::json::parse(good.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << good.out << good.err;
  EXPECT_EQ(j.value("verdict", ""), "correct") << good.out << good.err;
  EXPECT_GT(j.value("speedup_vs_reference", 0.0), 0.0) << good.out;
  auto bad = kope({"eval", "--suite", k_suite.string(), "--op", op, kernel("abs.cpp", "x[i] > 0 ? x[i] : -x[i]"), "--json",
                   "--no-time"});
  auto jb = nlohmann::json::parse(bad.out, nullptr, false);
  ASSERT_FALSE(jb.is_discarded()) << bad.out << bad.err;
  EXPECT_EQ(jb.value("verdict", ""), "wrong_result") << bad.out << bad.err;
}

// What the command writes is what ops-kernelbench/ holds (for the cheapest problem).
TEST(KernelbenchImport, TheCommittedSuiteIsWhatTheCommandWrites) {
  SKIP_WITHOUT_TORCH();
  auto tmp = util::TempDir::create("kope-kbimport-", fs::path(KOPE_BINARY_DIR));
  ASSERT_TRUE(tmp);
  fs::path file = k_suite / "src/level1/19_ReLU.py";
  auto r = kope({"ops", "import", "kernelbench", file.string(), "--out", tmp->path().string()});
  ASSERT_TRUE(r.status.success()) << r.out << r.err;
  EXPECT_NE(r.out.find("imported"), std::string::npos) << r.out;
  for (const char* name : {"op.toml", "reference.py"}) {
    auto written = util::read_file(tmp->path() / "elementwise/kb1_19_relu" / name);
    auto committed = util::read_file(k_suite / "elementwise/kb1_19_relu" / name);
    ASSERT_TRUE(written && committed) << name;
    EXPECT_EQ(*written, *committed) << name << " differs: run `kope ops import kernelbench` again";
  }
  auto readme = util::read_file(tmp->path() / "README.md");
  ASSERT_TRUE(readme);
  EXPECT_NE(readme->find("- `elementwise/kb1_19_relu` (ReLU, level 1): KernelBench level 1 problem 19: 19_ReLU.py"), std::string::npos)
      << *readme;
  auto check = kope({"ops", "check", "--suite", k_suite.string()});
  EXPECT_TRUE(check.status.success()) << check.err;
  EXPECT_NE(check.out.find("10 operator specs valid"), std::string::npos) << check.out;
}

// The flops of an imported op count the multiply-adds of its matrix products and convolutions
// (two each), as the model ran every case, then one per output element: without them a matmul
// reads as memory-bound at a few percent of its roof. Exact on every case, on non-square
// shapes, a transposed convolution and the committed convolution; an op with no product keeps
// one per output element.
TEST(KernelbenchImport, FlopsCountTheMultiplyAddsOfProductsAndConvolutions) {
  SKIP_WITHOUT_TORCH();
  auto tmp = util::TempDir::create("kope-kbflops-", fs::path(KOPE_BINARY_DIR));
  ASSERT_TRUE(tmp);
  const std::string problem = R"(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.ConvTranspose1d(in_channels, out_channels, 3, stride=2)

    def forward(self, a, b, x):
        return torch.relu(a @ b), self.up(x)

batch = 4
M, K, N = 96, 160, 72
in_channels, out_channels, length = 6, 10, 50

def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N), torch.randn(batch, in_channels, length)]

def get_init_inputs():
    return [in_channels, out_channels]
)";
  fs::path file = tmp->path() / "7_Products.py";
  ASSERT_TRUE(util::write_file_atomic(file, problem));
  auto r = kope({"ops", "import", "kernelbench", file.string(), "--out", tmp->path().string(), "--level", "2"});
  ASSERT_TRUE(r.status.success()) << r.out << r.err;
  std::optional<spec::OpSpec> op;
  for (const auto& e : fs::recursive_directory_iterator(tmp->path())) {
    if (e.path().filename() == "op.toml") {
      auto loaded = spec::load_op(e.path().parent_path());
      ASSERT_TRUE(loaded) << loaded.error().message;
      op = *loaded;
    }
  }
  ASSERT_TRUE(op);
  ASSERT_GE(op->cases.size(), 3u) << "the variants make the fit exact on more than one shape";
  for (const auto& c : op->cases) {
    auto d = op->dim_values(c);
    double m = d.at("M"), k = d.at("K"), n = d.at("N"), b = d.at("BATCH"), ci = d.at("IN_CHANNELS"), co = d.at("OUT_CHANNELS");
    double len = d.at("LENGTH");
    double up_len = (len - 1) * 2 + 3;
    double want = 2 * m * k * n + 2 * (b * ci * len) * (co * 3) + m * n + b * co * up_len;
    EXPECT_EQ(op->flops_for(c), want) << op->case_label(c);
  }
  auto conv = spec::load_op(k_suite / "conv/kb1_63_conv_standard_2d_square_input_square_ker");
  ASSERT_TRUE(conv) << conv.error().message;
  for (const auto& c : conv->cases) {
    auto d = conv->dim_values(c);
    double out = d.at("BATCH_SIZE") * d.at("OUT_CHANNELS") * d.at("OUT_D2") * d.at("OUT_D3");
    double want = 2 * out * d.at("IN_CHANNELS") * d.at("KERNEL_SIZE") * d.at("KERNEL_SIZE") + out;
    EXPECT_EQ(conv->flops_for(c), want) << conv->case_label(c);
  }
  auto relu = spec::load_op(k_suite / "elementwise/kb1_19_relu");
  ASSERT_TRUE(relu) << relu.error().message;
  for (const auto& c : relu->cases) {
    auto d = relu->dim_values(c);
    EXPECT_EQ(relu->flops_for(c), d.at("BATCH_SIZE") * d.at("DIM"));
  }
}

// Malformed or unsupported problems are refused with "FILE:LINE: what".
TEST(KernelbenchImport, MalformedProblemsAreRefusedWithFileLineAndConstruct) {
  SKIP_WITHOUT_TORCH();
  auto tmp = util::TempDir::create("kope-kbbad-", fs::path(KOPE_BINARY_DIR));
  ASSERT_TRUE(tmp);
  const std::string model = R"(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x):
        return torch.relu(x)
)";
  const std::string rest = R"(
batch_size = 16

def get_inputs():
    return [torch.randn(batch_size, 8)]

def get_init_inputs():
    return []
)";
  struct Bad {
    const char* file;
    std::string text;
    std::string message;
  };
  std::vector<Bad> cases = {
      {"syntax.py", "import torch\n\nclass Model(nn.Module:\n    pass\n", "syntax.py:3: syntax error"},
      {"no_inputs.py", model + "\nbatch_size = 16\n\ndef get_init_inputs():\n    return []\n", "no_inputs.py: no function get_inputs()"},
      {"loop.py", model + rest + "\nfor i in range(3):\n    pass\n", "loop.py:19: unsupported top-level statement (For)"},
      {"no_forward.py", "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" + rest,
       "no_forward.py:4: class Model has no forward method"},
      {"scalar.py", model + "\nbatch_size = 16\n\ndef get_inputs():\n    return [torch.randn(batch_size, 8), 0.5]\n\ndef get_init_inputs():\n    return []\n",
       "scalar.py:13: get_inputs() returns a float at position 1; kope passes only tensors"},
      {"dropout.py", R"(import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x)
)" + rest, "dropout.py:4: forward() is not deterministic"},
      {"raises.py", model.substr(0, model.find("        return")) + "        return x.view(3, -1, 5)\n" + rest,
       "raises.py:9: running the problem failed: RuntimeError"},
  };
  for (const auto& b : cases) {
    SCOPED_TRACE(b.file);
    fs::path p = tmp->path() / b.file;
    ASSERT_TRUE(util::write_file_atomic(p, b.text));
    eval::KernelbenchImport o;
    o.file = p;
    o.out = tmp->path() / "ops";
    auto r = eval::import_kernelbench(o);
    ASSERT_FALSE(r) << "imported " << b.file;
    EXPECT_EQ(r.error().kind, ErrorKind::config) << r.error().message;
    EXPECT_NE(r.error().message.find(p.string() + b.message.substr(b.message.find(':'))), std::string::npos)
        << r.error().message;
  }
}

TEST(KernelbenchImport, FileNamesGiveLevelNumberAndTitle) {
  auto n = eval::parse_kernelbench_name("KernelBench/level2/12_Gemm_Multiply_LeakyReLU.py");
  EXPECT_EQ(n.level, 2);
  EXPECT_EQ(n.number, 12);
  EXPECT_EQ(n.title, "Gemm_Multiply_LeakyReLU");
  n = eval::parse_kernelbench_name("x/1_Square_matrix_multiplication_.py");
  EXPECT_EQ(n.level, 0);
  EXPECT_EQ(n.number, 1);
  EXPECT_EQ(n.title, "Square_matrix_multiplication");
  n = eval::parse_kernelbench_name("mine.py");
  EXPECT_EQ(n.number, 0);
  EXPECT_EQ(n.title, "mine");
}

}  // namespace
}  // namespace kope
