#include "agent/prompt.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "eval/registry.h"
#include "hw/cpu_id.h"
#include "util/strings.h"

// The hot tier's text blocks (agent/prompt.h): the hardware guide, the op spec, the incumbent,
// the latest feedback and the tried-table.

namespace kope::agent {

namespace {

std::string fmt_us(double us) {
  if (us >= 10000) return fmt::format("{:.1f} ms", us / 1000);
  if (us >= 100) return fmt::format("{:.0f} us", us);
  if (us >= 1) return fmt::format("{:.2f} us", us);
  return fmt::format("{:.3f} us", us);
}

// One line of text: line breaks become spaces; longer than `max` bytes, it is cut at a word
// boundary and marked with "...".
std::string one_line(std::string_view s, size_t max = SIZE_MAX) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  out = std::string(util::trim(out));
  if (out.size() > max) {
    size_t cut = out.rfind(' ', max - 3);
    if (cut == std::string::npos || cut < max / 2) cut = max - 3;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out = std::string(util::trim(std::string_view(out).substr(0, cut))) + "...";
  }
  return out;
}

// A markdown table cell: one line, `|` escaped so it cannot end the cell.
std::string cell(std::string_view s, size_t max = SIZE_MAX) { return util::replace_all(one_line(s, max), "|", "\\|"); }

}  // namespace

// --- hot-tier blocks -------------------------------------------------------------------------

HardwareGuide describe_hardware_guide(std::string_view backend) {
  HardwareGuide g;
  g.backend = std::string(backend);
  hw::CpuIdentity id = hw::cpu_identity();
  g.microarchitecture = hw::microarchitecture(id);
  g.cpu_family = id.family;
  g.cpu_model = id.model;
  eval::backend_row_or_default(backend).describe_device(g);
  return g;
}

std::string render_hardware(const HardwareProfile& hw, std::string_view toolchain, const HardwareGuide& guide) {
  std::string out;
  out += fmt::format("- target: {}\n", hw.target.str());
  // The backend's device, whole: the host CPU's lines only where kernels run on it.
  out += eval::backend_row_or_default(guide.backend).device_section(hw, guide);
  out += fmt::format("- compiler: {}\n", toolchain);
  return out;
}

namespace {

// How the dtypes whose C type does not say what they hold are stored (docs/design.md §2).
std::string dtype_storage_note(spec::DType t) {
  switch (t) {
    case spec::DType::f16: return " (uint16_t bits of IEEE binary16)";
    case spec::DType::bf16: return " (uint16_t: the upper 16 bits of an f32, rounded to nearest even)";
    case spec::DType::boolean: return " (uint8_t, 0 or 1)";
    default: return "";
  }
}

bool uses_randint(const spec::InitSpec& init) {
  if (init.kind == spec::InitSpec::Kind::randint) return true;
  return std::any_of(init.parts.begin(), init.parts.end(), uses_randint);
}

}  // namespace

std::string render_op_spec(const spec::OpSpec& op) {
  std::string out;
  out += fmt::format("- name: {} (category {}, level {})\n", op.name, op.category, op.level);
  if (!op.summary.empty()) out += fmt::format("- what it computes: {}\n", op.summary);
  out += fmt::format("- dims: {}\n", util::join(op.dims, ", "));
  auto tensor = [&](const spec::Tensor& t, bool input) {
    std::vector<std::string> shape;
    for (const auto& e : t.shape) shape.push_back(e.text());
    std::string s = fmt::format("  - {} {}[{}]", t.name, spec::dtype_name(t.dtype), util::join(shape, ", "));
    if ((input || t.inout) && t.init) s += fmt::format(", filled with {}", t.init->text);
    s += dtype_storage_note(t.dtype);
    if (!input && t.tolerance) {
      s += fmt::format(", its own tolerance: atol {}, rtol {}", t.tolerance->atol ? t.tolerance->atol->text() : "as the op's",
                       t.tolerance->rtol ? t.tolerance->rtol->text() : "as the op's");
    }
    if (!input && !spec::dtype_is_float(t.dtype) && t.dtype != spec::DType::i32 && t.dtype != spec::DType::i64) {
      s += ", compared exactly";
    }
    return s + "\n";
  };
  out += "- inputs (read-only):\n";
  bool specials = false, randint = false;
  for (const auto& t : op.inputs) {
    if (!t.inout) out += tensor(t, true);
    specials = specials || (t.init && t.init->specials > 0);
    randint = randint || (t.init && uses_randint(*t.init));
  }
  if (randint) out += "  (`randint(lo, hi)`: integers drawn uniformly from lo to hi, both bounds inclusive)\n";
  if (specials) {
    out += "  (`specials(p)`: a fraction p of the elements, at random positions, is NaN, +Inf, -Inf, -0.0 or a subnormal, in "
           "equal shares)\n";
  }
  out += "- outputs (garbage on entry; write every element):\n";
  for (const auto& t : op.outputs) {
    if (!t.inout) out += tensor(t, false);
  }
  if (!op.inout_pairs().empty()) {
    out += "- inouts (after the outputs; their initial contents on entry; updated in place and checked like outputs):\n";
    for (const auto& t : op.outputs) {
      if (t.inout) out += tensor(t, false);
    }
  }
  if (!op.attrs.empty()) {
    out += "- attributes (passed by value):\n";
    for (const auto& a : op.attrs) {
      if (a.per_case) {
        out += fmt::format("  - {} {}{}, set by each case (see the cases)\n", a.name, spec::dtype_name(a.dtype), dtype_storage_note(a.dtype));
        continue;
      }
      out += spec::dtype_is_float(a.dtype) ? fmt::format("  - {} {} = {}\n", a.name, spec::dtype_name(a.dtype), a.value)
                                           : fmt::format("  - {} {} = {}\n", a.name, spec::dtype_name(a.dtype), a.ivalue);
    }
  }
  // With an output's own tolerance above, this is the op's: it holds for the other outputs and
  // for the part an output's own leaves "as the op's" (an answerer could not tell which applied).
  bool own = std::any_of(op.outputs.begin(), op.outputs.end(), [](const spec::Tensor& t) { return t.tolerance.has_value(); });
  out += fmt::format("- tolerance{}: |got − expected| <= {} + {}·|expected| (NaN/Inf positions must match)\n",
                     own ? " (the op's: for outputs without their own, and where their own says \"as the op's\")" : "",
                     op.tolerance.atol, op.tolerance.rtol);
  out += fmt::format("- work: flops = {}, bytes = {}\n", op.flops.text(), op.bytes.text());
  std::vector<std::string> checked, timed;
  for (const auto& c : op.cases) (c.timed ? timed : checked).push_back(op.case_label(c));
  out += "- cases are named by their dims (and per-case attributes) everywhere, e.g. in the evaluator's messages\n";
  out += fmt::format("- cases checked: {}\n", util::join(checked, "; "));
  out += fmt::format("- cases checked and timed: {}\n", util::join(timed, "; "));
  return out;
}

std::string code_language(std::string_view backend) { return std::string(eval::backend_row_or_default(backend).fence); }

std::string fence_code(std::string_view code, std::string_view lang) {
  std::string out = "```" + std::string(lang) + "\n";
  out += code;
  if (!code.empty() && code.back() != '\n') out += '\n';
  return out + "```\n";
}

LinePrefix whole_lines_within(std::string_view text, size_t max_bytes, size_t max_lines) {
  size_t end = 0, kept = 0;
  while (end < text.size() && kept < max_lines) {
    size_t nl = text.find('\n', end);
    size_t next = nl == std::string_view::npos ? text.size() : nl + 1;
    if (next > max_bytes) break;
    end = next;
    ++kept;
  }
  std::string_view rest = text.substr(end);
  size_t left = rest.empty() ? 0 : static_cast<size_t>(std::count(rest.begin(), rest.end(), '\n')) + (rest.ends_with('\n') ? 0 : 1);
  return {end, left};
}

std::string cut_at_lines(std::string_view text, size_t max_bytes, size_t max_lines) {
  LinePrefix p = whole_lines_within(text, max_bytes, max_lines);
  if (p.lines_left == 0) return std::string(text);
  return fmt::format("{}[... {} more line{} not shown ...]\n", text.substr(0, p.bytes), p.lines_left, p.lines_left == 1 ? "" : "s");
}

// "memory: 120 GB/s at a 16.0 MiB working set" / "compute: 576 GFLOP/s" for a timed case; "-"
// when unknown. The working set is the one the bandwidth was read at (both timed data sets), not
// the bytes of one call: a model told "2 x bytes" must not double it again.
// A bandwidth measured beside the timing says so: it is not the hardware guide's figure.
static std::string roof_text(const TimingSummary& t) {
  if (t.roofline_bound == "memory") {
    return fmt::format("memory: {:.0f} GB/s at a {} working set{}", t.roofline_gbps,
                       util::human_bytes(static_cast<double>(t.roofline_working_set_bytes)),
                       t.roofline_gbps_profile > 0 ? ", measured beside the timing" : "");
  }
  if (t.roofline_bound == "compute") return fmt::format("compute: {:.0f} GFLOP/s", t.roofline_gflops);
  return "-";
}

std::string render_timings(const Attempt& inc) {
  if (inc.timings.empty()) return "";
  std::string out = "| timed case | kernel | reference | library | roofline | bound by | fraction of roofline |\n|---|---|---|---|---|---|---|\n";
  for (const auto& t : inc.timings) {
    out += fmt::format("| {} | {} ± {:.1f}% | {} | {} | {} | {} | {:.0f}%{} |\n", cell(t.label), fmt_us(t.median_us),
                       t.median_us > 0 ? 100 * t.ci95_us / t.median_us : 0.0, fmt_us(t.reference_us),
                       t.library_us ? fmt_us(*t.library_us) : std::string("-"), fmt_us(t.roofline_us), cell(roof_text(t)),
                       100 * t.fraction_of_roofline,
                       t.beyond_roofline ? fmt::format(" (beyond the roof: the kernel does less work than the spec's `{}` count (the op's "
                                                       "`work` line) assumes, or the hardware profile is low)",
                                                       t.roofline_bound == "memory" ? "bytes" : "flops")
                                         : std::string());
  }
  return out;
}

std::string render_incumbent(const Attempt& inc, std::string_view code, std::string_view lang) {
  std::string out;
  out += fmt::format("From attempt {} ({}): {}\n", inc.iteration, memory::stage_name(inc.stage), inc.optimisation);
  out += fmt::format("Speedup vs reference {:.2f}x", inc.speedup_vs_reference.value_or(0));
  if (inc.speedup_vs_library) {
    out += fmt::format(", vs library {:.2f}x{}", *inc.speedup_vs_library,
                       inc.library_config ? inc.library_config->forced_note() : std::string());
  }
  if (inc.fraction_of_roofline) out += fmt::format(", {:.0f}% of the roofline", 100 * *inc.fraction_of_roofline);
  out += ".\n";
  out += render_timings(inc);
  out += fence_code(code, lang);
  return out;
}

// Whether the incumbent decision came from timing the two kernels side by side (the
// evaluator's interleaved comparison) rather than from the incumbent's recorded timings.
bool compared_side_by_side(const Attempt& a) { return run::incumbent_decision(a.decision).has_value(); }

// Why a correct attempt compared with the incumbent did not replace it, in a few words.
std::string replacement_outcome(const Attempt& a) {
  if (!compared_side_by_side(a)) return "not faster than its recorded timings";
  switch (run::incumbent_decision(a.decision).value_or(eval::IncumbentDecision::undecided)) {
    case eval::IncumbentDecision::faster: return "faster, but below the margin it had to exceed";
    case eval::IncumbentDecision::slower: return "slower";
    case eval::IncumbentDecision::not_faster: return "not faster by the margin";
    case eval::IncumbentDecision::unavailable: return "not compared";
    case eval::IncumbentDecision::undecided: break;
  }
  return "undecided";
}

std::string describe_outcome(const Attempt& a) {
  if (a.correct()) {
    std::string s = fmt::format("correct, {:.2f}x vs reference", a.speedup_vs_reference.value_or(0));
    if (a.speedup_vs_incumbent) {
      s += fmt::format(", {:.2f}x vs incumbent{}", *a.speedup_vs_incumbent, compared_side_by_side(a) ? " timed beside it" : "");
    }
    if (a.improved) {
      s += " (new incumbent)";
    } else if (a.speedup_vs_incumbent) {
      s += fmt::format(" ({}; the incumbent stays)", replacement_outcome(a));
    }
    return s;
  }
  // The cause is never trimmed: it is what the next attempt needs.
  std::string msg = one_line(a.message);
  std::string verdict(eval::verdict_name(a.verdict));
  return msg.empty() ? verdict : verdict + ": " + msg;
}

// What gain the comparison of an undecided attempt could have decided, from its interval: a
// kernel is decided faster once the interval's lower end clears 1 (or the margin a disturbed
// comparison demanded), so at this noise it needed about that plus the interval's lower half.
namespace {
std::string decidable_gain(const Attempt& a) {
  if (a.decision_lower && a.decision_upper && std::isfinite(*a.decision_upper) && a.speedup_vs_incumbent) {
    double below = std::max(0.0, *a.speedup_vs_incumbent - *a.decision_lower);
    double needed = a.margin_demanded.value_or(1.0) + below;
    return fmt::format("At this comparison's noise (its interval reaches {:.2f} below its ratio), only a kernel about {:.2f}x "
                       "the incumbent's speed or more would have been decided faster; a change expected to gain less is "
                       "likely to come out undecided again.\n",
                       below, needed);
  }
  return "A timed case ran too few pairs for an interval in the comparison's time (a long case or a loaded machine; "
         "the interval over the cases needs one from each), so only a large gain can be decided: prefer a change with a "
         "large expected effect.\n";
}
}  // namespace

// How the incumbent decision was reached, in the numbers it used. The table beside it shows the
// incumbent's recorded timing, measured at another time and perhaps under other load; without
// this a reader sees "1.08x vs incumbent" next to "+200%" and "not faster" and cannot tell which
// figure decided, or why.
std::string render_decision(const Attempt& a) {
  if (!a.speedup_vs_incumbent) return "";
  std::string out;
  if (compared_side_by_side(a)) {
    std::string interval = a.decision_lower && a.decision_upper && std::isfinite(*a.decision_upper)
                               ? fmt::format(" (95% interval {:.2f}x to {:.2f}x)", *a.decision_lower, *a.decision_upper)
                               : " (no interval: a timed case ran too few pairs for one)";
    std::string verdict = "undecided within the comparison's time, and an undecided kernel does not replace the incumbent";
    auto d = run::incumbent_decision(a.decision);
    if (d == eval::IncumbentDecision::faster) verdict = "faster";
    if (d == eval::IncumbentDecision::slower) verdict = "slower";
    if (d == eval::IncumbentDecision::not_faster) verdict = "not faster by more than the required margin";
    out += fmt::format("Timed in alternating batches beside the incumbent (the same load for both): {:.2f}x the incumbent's speed{}, "
                       "geometric mean over the timed cases, {} pairs: {}.\n",
                       *a.speedup_vs_incumbent, interval, a.decision_pairs, verdict);
    if (!d || d == eval::IncumbentDecision::undecided) out += decidable_gain(a);
  } else {
    out += fmt::format("Compared with the incumbent's recorded timings: {:.2f}x its speed (geometric mean over the timed cases).\n",
                       *a.speedup_vs_incumbent);
  }
  if (a.decided_by) {
    // The rule that decided, by name, and its figures (eval::decide_replacement).
    out += fmt::format("Decided by the rule `{}`: {}.\n", eval::replacement_rule_name(*a.decided_by), a.decided_by_reason);
  } else if (a.margin_demanded) {
    out += fmt::format("Its timing was disturbed by other load, so it had to exceed {:.2f}x to replace the incumbent{}.\n",
                       *a.margin_demanded, a.improved ? "" : ", and did not");
  }
  return out;
}

std::string render_feedback(const Attempt& a, const Attempt* inc, std::string_view lang) {
  std::string out;
  out += fmt::format("Attempt {} ({}; \"{}\") ended: {}.\n", a.iteration, memory::stage_name(a.stage),
                     util::shorten_at_clause(one_line(a.optimisation), 120), describe_outcome(a));
  if (a.verdict == eval::Verdict::bad_answer && inc) {
    out += fmt::format("Nothing was evaluated and the incumbent's source is unchanged: {}. Copy each SEARCH part exactly "
                       "from the incumbent's source as shown, or reply with the whole kernel in one ```{} block.\n",
                       a.message, lang);
  } else if (a.verdict == eval::Verdict::bad_answer) {
    out += fmt::format("Nothing was evaluated: {}. Reply with the whole kernel in one ```{} block.\n", a.message, lang);
  } else if (!a.has_code) {
    out += fmt::format("The answer held no usable code: reply with one ```{} block that defines kope_kernel.\n", lang);
  }
  if (!a.correct() && !a.message.empty() && a.verdict != eval::Verdict::bad_answer) out += "Evaluator: " + a.message + "\n";
  if (a.wrong_cases.size() > 1) {
    int wrong = a.cases_total - a.cases_passed;
    out += fmt::format("Wrong cases (the first mismatching element of each{}):\n",
                       wrong > static_cast<int>(a.wrong_cases.size()) ? fmt::format("; the first {} of {}", a.wrong_cases.size(), wrong) : "");
    for (const auto& w : a.wrong_cases) out += "- " + w + "\n";
  } else if (!a.first_mismatch.empty()) {
    out += "First mismatch: " + a.first_mismatch + "\n";
  }
  if (a.cases_total > 0 && !a.correct()) out += fmt::format("Cases passed: {} of {}.\n", a.cases_passed, a.cases_total);
  if (!a.diagnostics.empty()) {
    out += "Diagnostics (trimmed):\n```\n" + cut_at_lines(a.diagnostics, 2500, 40);
    if (out.back() != '\n') out += '\n';
    out += "```\n";
  }
  if (a.correct() && !a.timings.empty()) {
    // The recorded column only when another attempt is the incumbent: an attempt that became
    // the incumbent has no other recorded times to show, and a column of "-" beside the
    // side-by-side times of the kernel it replaced read as missing figures.
    bool other_incumbent = inc && inc->iteration != a.iteration;
    bool side = std::any_of(a.timings.begin(), a.timings.end(), [](const TimingSummary& t) { return t.side_ratio.has_value(); });
    std::string side_other = other_incumbent || !a.improved ? "incumbent" : "the incumbent it replaced";
    out += "| timed case | this attempt |";
    if (side) out += fmt::format(" side by side: this attempt / {}, speed ratio |", side_other);
    if (other_incumbent) out += fmt::format(" incumbent as recorded (attempt {}) |", inc->iteration);
    out += fmt::format(" reference | fraction of roofline |\n|---|---|{}{}---|---|\n", side ? "---|" : "", other_incumbent ? "---|" : "");
    for (const auto& t : a.timings) {
      out += fmt::format("| {} | {} |", cell(t.label), fmt_us(t.median_us));
      if (side) {
        std::string pair = "-";
        if (t.side_ratio) {
          pair = t.side_candidate_us && t.side_incumbent_us
                     ? fmt::format("{} / {}, {:.2f}x", fmt_us(*t.side_candidate_us), fmt_us(*t.side_incumbent_us), *t.side_ratio)
                     : fmt::format("{:.2f}x", *t.side_ratio);
        }
        out += fmt::format(" {} |", pair);
      }
      if (other_incumbent) {
        std::string inc_time = "-";
        for (const auto& it : inc->timings) {
          if (it.case_index == t.case_index) {
            inc_time = fmt::format("{} ({:+.0f}%)", fmt_us(it.median_us), 100 * (t.median_us / it.median_us - 1));
          }
        }
        out += fmt::format(" {} |", inc_time);
      }
      out += fmt::format(" {} | {:.0f}% |\n", fmt_us(t.reference_us), 100 * t.fraction_of_roofline);
    }
    // Which figures to reason from when they disagree (the real-model run of 2026-12-07 saw one
    // kernel's recorded and side-by-side times 2x apart, and nothing said which held).
    constexpr std::string_view k_reason_from =
        " When the figures disagree, reason from the side-by-side ones: times from different evaluations on a shared machine "
        "have differed by up to 2x for the same kernel.";
    if (side) {
      out += fmt::format("The side-by-side column timed both kernels in alternating batches of this evaluation (the same load for "
                         "both): each kernel's median time per call there, and the median of the paired ratios {} time / this "
                         "attempt's time (above 1: this attempt is faster); the decision rests on these.",
                         side_other == "incumbent" ? "incumbent" : "replaced kernel");
      if (other_incumbent) {
        out += fmt::format(" The recorded column is the incumbent's own timing from attempt {}, taken at another time and load.{}",
                           inc->iteration, k_reason_from);
      }
      out += "\n";
    } else if (other_incumbent && compared_side_by_side(a)) {
      out += fmt::format("The recorded column is the incumbent's own timing from attempt {}, taken at another time and load; the "
                         "decision rests on the side-by-side comparison.{}\n",
                         inc->iteration, k_reason_from);
    }
    out += render_decision(a);
    if (!a.improved && other_incumbent) {
      out += "It was not faster than the incumbent, so the incumbent stays.\n";
    }
  }
  return out;
}

// A tried row's description, at most: enough for the approach and its main parameters (blocking,
// threads, stores), which the next attempt must not repeat blindly.
constexpr size_t k_tried_description_bytes = 160;

std::string render_tried(const std::vector<Attempt>& attempts, size_t max_rows) {
  if (attempts.empty()) return "";
  std::string out = "| # | stage | optimisation | result |\n|---|---|---|---|\n";
  size_t start = attempts.size() > max_rows ? attempts.size() - max_rows : 0;
  if (start > 0) out += fmt::format("| ... | | {} earlier attempts omitted | |\n", start);
  for (size_t i = start; i < attempts.size(); ++i) {
    const Attempt& a = attempts[i];
    // The description gives way, never the cause.
    out += fmt::format("| {} | {} | {} | {} |\n", a.iteration, memory::stage_name(a.stage), cell(util::shorten_at_clause(one_line(a.optimisation), k_tried_description_bytes)),
                       cell(describe_outcome(a)));
  }
  return out;
}

std::string render_learned(const std::vector<memory::Lesson>& lessons) {
  std::string out;
  for (const memory::Lesson& l : lessons) {
    out += fmt::format("- [lesson {} · {}] {}{}{}\n", l.id, memory::lesson_kind_name(l.kind), l.title, l.text.empty() ? "" : ": ",
                       util::shorten_at_clause(one_line(l.text), k_learned_text_bytes));
  }
  return out;
}

}  // namespace kope::agent
