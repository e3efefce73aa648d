#include "run_services.h"

namespace kope::cli {

Result<ModelChoice> resolve_model_profile(const std::string& name) {
  ModelChoice choice;
  choice.how_to_configure =
      "To let a model write kernels, set KOPE_MODEL (and OPENAI_BASE_URL / OPENAI_API_KEY for an OpenAI-compatible "
      "endpoint), or define a profile in kope.toml; see README.md, \"Configuring a model\", and `kope llm profiles`.";
  KOPE_ASSIGN(llm::ProfileSet set, llm::load_profiles());
  bool any_model = false;
  for (const auto& p : set.profiles) any_model = any_model || !p.model.empty();
  if (name.empty() && !any_model) return choice;  // nothing configured: replay
  auto profile = llm::resolve_profile(name);
  if (!profile) return std::unexpected(std::move(profile.error()));
  choice.profile = std::move(*profile);
  return choice;
}

Result<std::unique_ptr<eval::Evaluator>> make_run_evaluator(const std::string& backend, const HardwareProfile& hw,
                                                            const std::string& library_config) {
  // Every backend with prompt templates (prompts/<backend>/) can run; make_evaluator says why
  // one cannot run here (no OpenCL platform, no GPU, no CANN).
  eval::EvaluatorOptions options;
  options.library_config = library_config;
  return eval::make_evaluator(backend, hw, options);
}

}  // namespace kope::cli
