// agent/memory_items.h — the prompt text of what memory retrieval returns (docs/design.md §4,
// §5). Retrieval (memory::Store::retrieve) returns facts only; the wording a prompt, the
// reflector and `kope memory retrieve` show is written here, from those facts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kope/hw.h"
#include "kope/memory.h"

namespace kope::agent {

// A kernel's source is shown whole or not at all (a listing cut mid-line is worse than none):
// longer than this, an item says how long it is instead.
inline constexpr size_t k_item_kernel_bytes = 24000;
// A case's journal is shown by whole lines within this many bytes, then how many were left out.
inline constexpr size_t k_item_journal_bytes = 600;

// The text of a retrieved item, made from its facts alone; the same for the same facts, and
// never fails. A lesson: "[lesson ID · KIND · SCOPE] TITLE: TEXT", marked as feasibility only when
// foreign, with the error a fix is for. A best kernel: its header (op, category, target, speedup
// vs the reference, case), its change, its lineage, whether it is the query's incumbent, and
// its source fenced in its backend's code-fence language (eval::backend_code_fences(); "cpp" for
// a backend kope does not know). A fix: the failed and the fixing case, the error and message,
// the change, the journal. A case summary: the verdict with its outcome and ratio (native and
// correct only), quarantine, lineage, parent, change, error, journal. An item without the part
// its kind needs (RetrievedItem::lesson, ::kase) renders as "".
std::string render_item(const memory::RetrievedItem& item);

// A speed lesson (a strategy or a recipe) whose source cases were timed to a relative 95%
// interval wider than this (their median), or were mostly marked disturbed, was learned under
// load: a contended machine makes threads, prefetching and streaming stores look better or worse
// than they are, and an interval of ±50% is no measurement of speed at all. In the shipped
// starter (recorded with up to eight operators in flight on two cores) 12 of its 77 speed
// lessons are past it, among them all three that say "one thread" for streaming ops (±57% to
// ±78%); the median lesson's sources were timed to ±18%, quiet timings to ±1% to ±5%.
inline constexpr double k_noisy_evidence_spread = 0.5;

// Why `lesson` is not evidence of speed here (its source cases' timing, in words), or nullopt
// when it is (or says nothing about speed: pitfalls and fixes, lessons without timed sources).
// Active selection (the op pack, the active forms) leaves such a lesson out; a prompt that shows
// it anyway (passive, random) says so beside it.
std::optional<std::string> noisy_evidence(const memory::RetrievedLesson& lesson);

// Two ops do different kinds of work on this machine when their arithmetic intensities (flops
// per byte) lie on either side of its balance point (peak FLOP/s over bandwidth) and at least
// k_other_work_factor apart: one is limited by memory, the other by arithmetic, so what made one
// fast (register tiles and packing; streaming and fewer passes) says little about the other. In
// the shipped starter's fused category this separates the norms and activations (0.3 to 2.3
// flops per byte) from the GEMM- and conv-based blocks (8 to 276) on a machine of balance 2.7,
// while ops near the balance point, on either side of it, stay together. An unknown intensity or
// balance (0) never separates.
inline constexpr double k_other_work_factor = 4.0;
// The machine's balance point: peak FP32 FLOP/s over DRAM bandwidth (flops per byte); 0 when
// the bandwidth is unknown.
inline double machine_balance(const HardwareProfile& hw) { return hw.peak_gbps > 0 ? hw.peak_gflops / hw.peak_gbps : 0; }
bool other_kind_of_work(double a, double b, double balance);
// Whether every op `lesson` was drawn from does another kind of work than an op of intensity
// `intensity` (other_kind_of_work; false when no source intensity is known). Active selection
// leaves such a lesson out, as it leaves out the cases and kernels of such ops.
bool lesson_from_other_work(const memory::RetrievedLesson& lesson, double intensity, double balance);

// The estimated tokens of render_item(item) (context::estimate_tokens, unscaled: what `kope
// memory retrieve` shows; a prompt estimates its own lines with its calibrated estimator).
int64_t item_tokens(const memory::RetrievedItem& item);

}  // namespace kope::agent
