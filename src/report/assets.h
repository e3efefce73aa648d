// report/assets.h — the stylesheet and scripts the HTML report inlines (no external files, no
// fonts, no libraries: the page works offline from a single file).
#pragma once

#include <string_view>

namespace kope::report {

// Installed first in <head>: records uncaught errors, unhandled rejections and console.error
// calls into window.__kopeErrors, which the self-test writes into the DOM.
extern const std::string_view k_error_hook_js;
extern const std::string_view k_report_css;
// Sortable tables, column toggles, the lineage view (selection, details, diff) and the
// self-test (report.html#selftest): it checks every expected chart has marks, dispatches a real
// click on a lineage node, sorts a table, and writes the results as JSON into #kope-selftest.
extern const std::string_view k_report_js;

}  // namespace kope::report
