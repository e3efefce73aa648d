// report/tables.h — an Analysis as the report's records (table.h): every figure the console,
// markdown, CSV, JSON and HTML outputs show comes from these tables.
//
// Tables (ids): runs (what each run was), summary (run-level figures over the set), levels and
// categories (breakdowns), ops (per operator and run), comparison (paired differences with
// bootstrap intervals) and comparison_ops (per operator, baseline vs each run) when there are
// several runs, and memory_* when a memory overview is attached. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/figures.h"
#include "report/table.h"

namespace kope::report {

std::vector<Table> build_tables(const Analysis& an);

// The whole report as one JSON document: the set, the runs, the bootstrap settings, every table
// (table_json) and the notes.
nlohmann::json report_json(const Analysis& an, const std::vector<Table>& tables);

// Console or markdown text: a header naming the set and the runs, the tables, then the notes.
std::string report_text(const Analysis& an, const std::vector<Table>& tables, bool markdown,
                        int width = 100);

// The bootstrap method in words ("95% percentile bootstrap over operators, 10000 resamples,
// seed 1").
std::string bootstrap_words(const BootstrapOptions& b);

}  // namespace kope::report
