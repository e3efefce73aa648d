#include "agent/op_context.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "agent/prompt.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/system.h"

namespace kope::agent {

OpContext::OpContext(const OpEnvironment& e, const spec::OpSpec& o, OpState& s)
    : env(e), cfg(*e.config), op(o), state(s), op_dir(op_dir_name(o.name)), m_state(s),
      m_data_seed(cfg.seed ? derived_seed(0, "eval-data") : util::random_seed()) {}

bool OpContext::cancelled() const {
  return (env.cancel && env.cancel->load()) || (env.abort && env.abort->load());
}

std::string OpContext::key(int k) const { return fmt::format("{}/{}/{}", env.run_id, op.name, k); }

uint64_t OpContext::derived_seed(int k, std::string_view salt) const {
  return util::fnv1a64(fmt::format("{}/{}/{}/{}", *cfg.seed, op.name, k, salt));
}

void OpContext::phase(int k, memory::Stage stage, std::string_view what) const {
  if (env.progress) env.progress->phase(op.name, k, stage, what);
}

void OpContext::note(std::string_view line) const {
  if (env.progress) env.progress->note(op.name, line);
}

Status OpContext::emit(run::Event e) const {
  KOPE_TRY(env.events->append(e, op.name));
  KOPE_TRY(run::apply(m_state, e, op.name));
  if (env.on_event) env.on_event(op.name, m_state);
  return {};
}

Result<std::string> OpContext::write_run_file(const std::string& rel, std::string_view content) const {
  std::filesystem::path p = env.run_dir / rel;
  KOPE_TRY(util::make_dirs(p.parent_path()));
  KOPE_TRY(util::write_file_atomic(p, content));
  return rel;
}

Status OpContext::write_transcript(const std::string& rel, std::string_view content) const {
  std::filesystem::path p = env.run_dir / rel;
  KOPE_TRY(util::make_dirs(p.parent_path()));
  std::FILE* f = std::fopen(p.c_str(), "wb");
  if (!f) return fail(ErrorKind::io, "cannot write {}: {}", p.string(), std::strerror(errno));
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return fail(ErrorKind::io, "cannot write {} (disk full?)", p.string());
  return {};
}

std::string OpContext::lang() const { return code_language(env.evaluator->backend()); }

Result<std::string> OpContext::reference_source() {
  if (!m_reference) {
    KOPE_ASSIGN(std::string src, util::read_file(op.reference_path));
    m_reference = std::move(src);
  }
  return *m_reference;
}

Result<std::string> OpContext::code_of(const Attempt& a) const {
  if (!a.has_code) return std::string();
  if (a.code) return *a.code;
  return util::read_file(env.run_dir / a.code_file);  // made by an earlier process
}

std::optional<int64_t> OpContext::case_id(int k) const {
  auto it = state.case_ids.find(k);
  if (it == state.case_ids.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> OpContext::error_signature(int k) const {
  auto it = state.error_signatures.find(k);
  if (it == state.error_signatures.end()) return std::nullopt;
  return it->second;
}

}  // namespace kope::agent
