// memory/text.h — text normalisation for the memory: tokens, near-duplicate similarity, FTS5
// query building, search tags, stored verdicts and quarantine codes. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"
#include "kope/memory.h"
#include "kope/verdict.h"

namespace kope::memory {

// Lower-case word tokens ([a-z0-9_]+, at least 2 characters, common English stop words
// dropped), in order of appearance.
std::vector<std::string> text_tokens(std::string_view text);
std::set<std::string> token_set(std::string_view text);
// |a ∩ b| / |a ∪ b|; 1 for two empty sets.
double jaccard(const std::set<std::string>& a, const std::set<std::string>& b);
// The tokens joined by single spaces: equal for texts that differ in case, punctuation or
// spacing only (exact-duplicate key of lessons).
std::string normalised_text(std::string_view text);
// An FTS5 MATCH expression ORing up to `max_terms` distinct quoted tokens of `text`; empty when
// the text has no usable token.
std::string fts_or_query(std::string_view text, size_t max_terms = 12);
// The tokens FTS5's unicode61 tokenizer (with '_' a token character) makes of `text`: lower-case
// runs of ASCII letters, digits, '_' and non-ASCII bytes, however short, stop words kept.
std::vector<std::string> fts_tokens(std::string_view text);
// Okapi BM25 (k1 = 1.2, b = 0.75) of a document of `length` tokens among `docs` documents of
// `average_length`: over the query terms, idf(df)·tf·(k1 + 1) / (tf + k1·(1 − b + b·length/avg))
// with idf = ln((docs − df + 0.5)/(df + 0.5) + 1); a term with df < 0 or tf = 0 adds nothing.
// The one scoring rule of both stores' lexical search.
double okapi_bm25(const std::vector<int>& tf, const std::vector<double>& df, double docs, double length,
                  double average_length);
// A search tag "prefix_value" with everything outside [a-z0-9_] mapped to '_'.
std::string search_tag(std::string_view prefix, std::string_view value);
// The verdict a database column names; corrupt naming it when kope does not know it.
Result<eval::Verdict> stored_verdict(std::string_view name);
// The status a case_derived.quarantine code denotes; nullopt for a code kope does not know.
std::optional<QuarantineStatus> stored_quarantine(int64_t code);
// The code a database stores for `s`.
int64_t quarantine_code(QuarantineStatus s);
// Shortens `text` to at most `max_bytes` bytes at a UTF-8 boundary, appending "…" when cut.
std::string clip_text(std::string_view text, size_t max_bytes);

}  // namespace kope::memory
