// report/lineage.h — the lineage view of one operator in one run: the tree of its attempts
// (the "began-from" edges the agent recorded: a repair began from the failed attempt, a
// refinement from the incumbent, a draft or a replay from nothing in this run), coloured by
// outcome label, with failed verdicts drawn distinctly, plus each attempt's details (strategy,
// verdict, timings, tokens, journal) and the line diff to its parent, for the page to show when
// a node is selected. Pure apart from reading candidate sources from the run directory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "report/figures.h"

namespace kope::report {

struct LineageView {
  std::string key;        // "<run index>/<op name>", unique in a report
  std::string svg;        // the tree; every node is <g class="node mark" data-node="<key>/<k>">
  nlohmann::json detail;  // {"run","op","nodes":{"<k>":{...}}}
  int attempts = 0;
};

struct LineageOptions {
  size_t max_diff_lines = 400;  // per attempt, in the page
};

LineageView lineage_view(const Analysis& an, size_t run, const OpFigures& op,
                         const LineageOptions& options = {});

// The colour key of the lineage view, as HTML.
std::string lineage_legend();

}  // namespace kope::report
