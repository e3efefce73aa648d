// report/html.h — the report as one self-contained HTML file.
//
// Inline CSS, inline SVG plots (charts.h), the tables from the record schema (table.h) with
// sortable columns, the lineage view (lineage.h) and the memory section; data the page's
// script needs is embedded as JSON. Nothing is loaded from anywhere: no CDN, no fonts, no
// images, so the file works offline and can be mailed around. Text written by models (strategy
// names, journals, code) is escaped in C++ and inserted with textContent in the page.
// Opening the file as report.html#selftest runs the page's self-test (assets.h).
#pragma once

#include <string>
#include <vector>

#include "report/figures.h"
#include "report/table.h"

namespace kope::report {

// The names of the charts (data-chart attributes) the page holds for this analysis.
std::vector<std::string> expected_charts(const Analysis& an);

// One table as an HTML block: title, caption, a column toggle when some columns are hidden by
// default (those not `brief`), and a sortable <table> whose cells carry their raw values.
std::string html_table(const Table& t);

std::string render_html(const Analysis& an, const std::vector<Table>& tables);

}  // namespace kope::report
