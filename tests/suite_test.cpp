// The operator suite as a whole: every spec loads, the suite meets its coverage contract, and
// every reference agrees with its vendor-library baseline on every case.
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "eval/compare.h"
#include "eval/native.h"
#include "kope/spec.h"
#include "spec/generate.h"

namespace kope {
namespace {

using spec::OpSpec;

const spec::Suite& suite() {
  static spec::Suite s = [] {
    auto r = spec::load_suite();
    if (!r) {
      ADD_FAILURE() << r.error().message;
      return spec::Suite{};
    }
    return *r;
  }();
  return s;
}

TEST(Suite, EveryOpHasItsFilesAndCases) {
  for (const auto& op : suite().ops) {
    SCOPED_TRACE(op.name);
    EXPECT_TRUE(std::filesystem::exists(op.reference_path));
    EXPECT_FALSE(op.summary.empty());
    EXPECT_EQ(op.dir.filename().string(), op.name) << "folder name must be the op name";
  }
}

// One aligned buffer per tensor.
struct Buffers {
  std::vector<void*> ptrs;
  std::vector<size_t> sizes;
  Buffers(const OpSpec& op, const spec::Case& c) {
    for (const auto* list : {&op.inputs, &op.outputs}) {
      for (const auto& t : *list) {
        size_t bytes = std::max<size_t>(64, (op.byte_size(t, c) + 63) / 64 * 64);
        void* p = std::aligned_alloc(64, bytes);
        std::memset(p, 0xA5, bytes);
        ptrs.push_back(p);
        sizes.push_back(op.byte_size(t, c));
      }
    }
  }
  ~Buffers() {
    for (void* p : ptrs) std::free(p);
  }
};

std::vector<std::string> ops_with_library() {
  std::vector<std::string> names;
  for (const auto& op : suite().ops) {
    if (op.library_path) names.push_back(op.name);
  }
  return names;
}

class ReferenceVsLibrary : public ::testing::TestWithParam<std::string> {};

// Both sides are checked: a wrong reference and a misused library both show up here.
TEST_P(ReferenceVsLibrary, AgreeOnEveryCase) {
  const OpSpec* op = suite().find(GetParam());
  ASSERT_NE(op, nullptr);
  auto tc = eval::cpu_toolchain();
  ASSERT_TRUE(tc) << tc.error().message;
  auto ref_so = eval::build_trusted(*op, op->reference_path, *tc);
  ASSERT_TRUE(ref_so) << ref_so.error().message;
  auto lib_so = eval::build_trusted(*op, *op->library_path, *tc, eval::library_link_flags());
  ASSERT_TRUE(lib_so) << lib_so.error().message;
  auto ref = eval::NativeKernel::load(*ref_so);
  auto lib = eval::NativeKernel::load(*lib_so);
  ASSERT_TRUE(ref && lib);
  for (const auto& c : op->cases) {
    SCOPED_TRACE(op->case_label(c));
    Buffers a(*op, c), b(*op, c);
    spec::generate_inputs(*op, c, 1234, a.ptrs.data());
    spec::generate_inputs(*op, c, 1234, b.ptrs.data());
    ref->call(a.ptrs.data(), c.dims.data());
    lib->call(b.ptrs.data(), c.dims.data());
    for (size_t o = 0; o < op->outputs.size(); ++o) {
      size_t k = op->inputs.size() + o;
      const auto& out = op->outputs[o];
      auto r = eval::compare_tensor(out.dtype, b.ptrs[k], a.ptrs[k], op->element_count(out, c), op->tolerance);
      EXPECT_TRUE(r.ok) << out.name << ": " << r.mismatches << " mismatches, max abs err " << r.max_abs_err
                        << ", first at "
                        << (r.first ? eval::format_index(r.first->index, op->shape_of(out, c)) + " library " +
                                          r.first->got_text + " reference " + r.first->expected_text
                                    : "");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, ReferenceVsLibrary, ::testing::ValuesIn(ops_with_library()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace kope
