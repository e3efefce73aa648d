#include "agent/memory_items.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "context/context.h"

namespace kope::agent {
namespace {

using memory::CaseLineage;
using memory::RetrievedCase;
using memory::RetrievedItem;
using memory::RetrievedLesson;

constexpr const char* k_here = "x86_64-avx2-fma";
constexpr const char* k_there = "cuda-sm90";
constexpr const char* k_elsewhere = " (other hardware or toolchain: shows what compiles and passes there, not what is fast here)";

RetrievedItem lesson_item(RetrievedLesson l, bool foreign = false) {
  RetrievedItem it;
  it.kind = RetrievedItem::Kind::lesson;
  it.id = "lesson:" + l.id;
  it.foreign = foreign;
  it.target = l.scope.target;
  it.category = l.scope.category;
  it.lesson = std::move(l);
  return it;
}

RetrievedItem case_item(RetrievedItem::Kind kind, int64_t id, std::string op, std::string target, RetrievedCase k) {
  RetrievedItem it;
  it.kind = kind;
  it.id = fmt::format("{}:{}", kind == RetrievedItem::Kind::best_kernel ? "kernel" : "case", id);
  it.case_id = id;
  it.op = std::move(op);
  it.category = "normalization";
  it.target = std::move(target);
  it.foreign = it.target != k_here;
  it.kase = std::move(k);
  return it;
}

TEST(MemoryItems, ALesson) {
  RetrievedLesson l;
  l.id = "L0001";
  l.title = "Subtract the row max";
  l.text = "exp overflows otherwise";
  l.scope.category = "normalization";
  l.scope.backend = "cpu";
  EXPECT_EQ(render_item(lesson_item(l)),
            "[lesson L0001 · strategy · normalization/cpu] Subtract the row max: exp overflows otherwise");
  // A fix from other hardware, without a text: feasibility only, with the error it fixes.
  RetrievedLesson fix;
  fix.id = "L2";
  fix.kind = memory::LessonKind::fix;
  fix.title = "Declare helpers first";
  fix.scope.target = k_there;
  fix.error_signature = "compile_error: undeclared";
  EXPECT_EQ(render_item(lesson_item(fix, true)),
            "[lesson L2 · fix · any op on cuda-sm90 · not confirmed on this machine: feasibility only] Declare helpers first "
            "(fixes: compile_error: undeclared)");
}

TEST(MemoryItems, ABestKernelWithItsCodeInItsBackendsFence) {
  RetrievedCase k;
  k.verdict = eval::Verdict::correct;
  k.speedup_ref = 3.0;
  k.optimisation = "one pass per row";
  k.backend = "opencl";
  k.lineage = CaseLineage::ancestor;
  k.ancestor = 2;
  k.other_incumbent = 9;
  k.code = "__kernel void k() {}";  // no last newline: the fence still closes on its own line
  RetrievedItem it = case_item(RetrievedItem::Kind::best_kernel, 7, "softmax", k_here, k);
  EXPECT_EQ(render_item(it),
            "[best kernel · softmax (normalization) on x86_64-avx2-fma · 3.00x vs reference · case 7]\n"
            "change: one pass per row\n"
            "lineage: ancestor 2 of the incumbent\n"
            "not the incumbent (case 9): it was not promoted (a candidate replaces the incumbent when timed beside it, "
            "and a quarantined win waits for re-verification)\n"
            "```c\n__kernel void k() {}\n```\n");
  EXPECT_EQ(item_tokens(it), context::estimate_tokens(render_item(it)));
}

TEST(MemoryItems, ABestKernelOfASimilarOpAndOneTooLongToShow) {
  RetrievedCase k;
  k.verdict = eval::Verdict::correct;
  k.speedup_ref = 1.5;
  k.optimisation = "fused the row pass\nsecond line of the description";
  k.backend = "a-backend-kope-does-not-know";
  k.similar_op = true;
  k.lineage = CaseLineage::incumbent;
  k.code = "void f() {}\n";
  RetrievedItem it = case_item(RetrievedItem::Kind::best_kernel, 22, "log1p_rows", k_here, k);
  EXPECT_EQ(render_item(it),
            "[best kernel · log1p_rows (normalization, a similar op) on x86_64-avx2-fma · 1.50x vs reference · case 22]\n"
            "change: fused the row pass\n"
            "lineage: the incumbent\n"
            "```cpp\nvoid f() {}\n```\n");
  it.kase->code = std::string(k_item_kernel_bytes + 1, 'x');
  it.kase->lineage = CaseLineage::none;
  it.kase->speedup_ref.reset();
  EXPECT_EQ(render_item(it),
            "[best kernel · log1p_rows (normalization, a similar op) on x86_64-avx2-fma · 0.00x vs reference · case 22]\n"
            "change: fused the row pass\n"
            "(its source, 24001 bytes, is too long to show whole)\n");
  it.kase->code.reset();  // none stored
  EXPECT_EQ(render_item(it).find("```"), std::string::npos);
}

TEST(MemoryItems, ACaseSummaryWithItsJournal) {
  RetrievedCase k;
  k.stage = memory::Stage::refine;
  k.verdict = eval::Verdict::correct;
  k.outcome = memory::Outcome::effective;
  k.ratio = 1.234;
  k.speedup_ref = 2.5;
  k.parent_id = 11;
  k.optimisation = "blocked rows by 16\nthe rest of the description";
  k.lineage = CaseLineage::tried_from;
  k.journal = "strategy: blocked rows\nreading: bandwidth bound\n";
  RetrievedItem it = case_item(RetrievedItem::Kind::case_summary, 12, "softmax", k_here, k);
  it.quarantined = true;
  EXPECT_EQ(render_item(it),
            "[case 12 · softmax on x86_64-avx2-fma · refine · correct · effective r=1.23 · 2.50x vs reference · "
            "QUARANTINED: awaiting re-verification, not evidence]\n"
            "lineage: tried from the incumbent\n"
            "began from: case 11\n"
            "change: blocked rows by 16\n"
            "journal: strategy: blocked rows\nreading: bandwidth bound\n");
  // A long journal is shown by whole lines within k_item_journal_bytes, then what was left out.
  std::string journal, shown;
  for (int i = 0; i < 100; ++i) {
    std::string line = fmt::format("step {:02}: a line of thirty bytes\n", i).substr(0, 30) + "\n";
    journal += line;
    if (i < 19) shown += line;  // 19 lines of 31 bytes fit in 600
  }
  it.kase->journal = journal;
  std::string text = render_item(it);
  EXPECT_TRUE(text.ends_with("journal: " + shown + "(81 more lines of the journal not shown)\n")) << text;
}

TEST(MemoryItems, ForeignCasesShowFeasibilityNotSpeed) {
  RetrievedCase fix;
  fix.stage = memory::Stage::repair;
  fix.verdict = eval::Verdict::correct;
  fix.outcome = memory::Outcome::effective;
  fix.ratio = 4.0;
  fix.speedup_ref = 4.0;
  fix.optimisation = "declared the helper before kope_kernel";
  fix.failed_signature = "compile_error: 'X' was not declared";
  fix.failed_message = "compilation failed\ncandidate.cpp:12:5: error";
  RetrievedItem it = case_item(RetrievedItem::Kind::case_summary, 30, "softmax", k_there, fix);
  it.failed_case = 29;
  EXPECT_EQ(render_item(it), fmt::format("[fix · case 29 -> case 30 · softmax on cuda-sm90{}]\n"
                                         "error: compile_error: 'X' was not declared\n"
                                         "message: compilation failed\n"
                                         "fixed by: declared the helper before kope_kernel\n",
                                         k_elsewhere));
  it.kase->failed_signature.reset();  // the failed case could not be read: nothing of it is known
  it.kase->failed_message.clear();
  EXPECT_EQ(render_item(it), fmt::format("[fix · case 29 -> case 30 · softmax on cuda-sm90{}]\nerror: ?\n"
                                         "fixed by: declared the helper before kope_kernel\n",
                                         k_elsewhere));
  // A correct foreign case: no outcome, ratio or speedup.
  RetrievedCase ok = fix;
  ok.failed_signature.reset();
  ok.stage = memory::Stage::draft;
  ok.optimisation = "vectorised the row loop";
  it = case_item(RetrievedItem::Kind::case_summary, 5, "relu", k_there, ok);
  EXPECT_EQ(render_item(it), fmt::format("[case 5 · relu on cuda-sm90{} · draft · correct]\nchange: vectorised the row loop\n",
                                         k_elsewhere));
  RetrievedCase failed;
  failed.verdict = eval::Verdict::compile_error;
  failed.error_signature = "compile_error: 'X' was not declared";
  failed.journal = "reading: the helper was used before its declaration";
  it = case_item(RetrievedItem::Kind::case_summary, 6, "relu", k_there, failed);
  EXPECT_EQ(render_item(it), fmt::format("[case 6 · relu on cuda-sm90{} · draft · compile_error]\n"
                                         "error: compile_error: 'X' was not declared\n"
                                         "journal: reading: the helper was used before its declaration\n",
                                         k_elsewhere));
}

TEST(MemoryItems, ADescriptionStoredCutMidWordIsShortenedAtAClause) {
  RetrievedCase k;
  k.verdict = eval::Verdict::correct;
  k.optimisation = "Flat padded rows, so every tap is one contiguous load; AVX2/FMA register micro-k...";
  std::string text = render_item(case_item(RetrievedItem::Kind::best_kernel, 3, "conv2d", k_here, k));
  EXPECT_EQ(text.find("micro-k..."), std::string::npos) << text;
  EXPECT_NE(text.find("change: Flat padded rows, so every tap is one contiguous load"), std::string::npos) << text;
}

TEST(MemoryItems, AnItemWithoutItsPartRendersEmpty) {
  RetrievedItem it;
  it.kind = RetrievedItem::Kind::lesson;
  EXPECT_EQ(render_item(it), "");
  it.kind = RetrievedItem::Kind::best_kernel;
  EXPECT_EQ(render_item(it), "");
  EXPECT_EQ(item_tokens(it), context::estimate_tokens(""));
}

}  // namespace
}  // namespace kope::agent
