// tools/kope/run_services.h — how `kope run` obtains its model profile and evaluator.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "kope/error.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/llm.h"

namespace kope::cli {

struct ModelChoice {
  std::optional<llm::Profile> profile;  // nullopt: no model is configured at all
  std::string how_to_configure;         // what to set, for the message when there is none
};

// The profile `name` ("" = the default one). A missing configuration is not an error (the
// caller falls back to replay); a broken one, or an unknown name, is.
Result<ModelChoice> resolve_model_profile(const std::string& name);

// The evaluator of `backend` on this machine.
// `library_config`: eval::EvaluatorOptions::library_config ("environment" or "best").
Result<std::unique_ptr<eval::Evaluator>> make_run_evaluator(const std::string& backend, const HardwareProfile& hw,
                                                            const std::string& library_config = "environment");

}  // namespace kope::cli
