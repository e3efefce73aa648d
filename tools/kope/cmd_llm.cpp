// `kope llm`: check the configured model endpoint (ping) and list the model profiles.
#include <nlohmann/json.hpp>

#include "cli.h"
#include "kope/llm.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::cli {

namespace {

using namespace std::chrono_literals;

// A ping should answer quickly or say why not; the profile's own total timeout (minutes, for
// long generations) would make a dead server look like a hang.
constexpr std::chrono::milliseconds k_ping_default_timeout{60000};
constexpr int k_ping_max_tokens = 32;

std::string key_status(const llm::Profile& p) {
  if (p.api_key_env.empty()) return "none (api_key_env = \"\")";
  return fmt::format("${} ({})", p.api_key_env,
                     util::get_env(p.api_key_env.c_str()) ? "set" : "unset");
}

// What the user should check, by failure class.
std::string diagnosis(const llm::LlmError& e, const llm::Profile& p) {
  using llm::FailureClass;
  const std::string url = llm::redact(llm::endpoint_url(p));
  switch (e.cls) {
    case FailureClass::transport:
      return fmt::format(
          "unreachable: nothing answered at {} — is the server running, and is base_url right?",
          url);
    case FailureClass::timeout:
      return "timeout: the server did not answer in time — a local model may still be loading (try "
             "--timeout 300), "
             "or a firewall drops the connection";
    case FailureClass::unauthorized:
      if (p.api_key_env.empty())
        return "unauthorized: this profile sends no key, but the server wants one (set "
               "api_key_env)";
      if (!util::get_env(p.api_key_env.c_str()))
        return fmt::format("unauthorized: no key was sent — set ${}", p.api_key_env);
      return fmt::format("unauthorized: the server rejected the key in ${}", p.api_key_env);
    case FailureClass::not_found:
      return fmt::format(
          "unknown model or endpoint: the server has no model '{}' at {} — check `model` (a local "
          "server lists its models at <base_url>/models) and base_url",
          p.model, url);
    case FailureClass::rate_limited:
      return "rate limited: the provider asks to slow down (429); wait, or lower "
             "requests_per_minute";
    case FailureClass::server_error:
      return "server error: the provider failed (5xx); try again later";
    case FailureClass::bad_request:
      return fmt::format(
          "bad request: the server refused the request — is provider = \"{}\" the API it speaks?",
          p.provider);
    case FailureClass::provider_error:
      return "provider error: the provider answered with an error (see detail; an exhausted quota "
             "needs credit)";
    case FailureClass::context_length:
      return "context length exceeded, even for a tiny prompt: check context_window and the "
             "server's context size";
    case FailureClass::content_filtered:
      return "content filtered: the provider's filter refused the ping";
    case FailureClass::malformed:
      return fmt::format(
          "malformed answer: the reply is not a valid {} response — does base_url point at the "
          "right "
          "API (OpenAI-compatible vs Anthropic), or is a proxy answering?",
          p.provider == "anthropic" ? "Anthropic Messages" : "OpenAI chat completion");
    case FailureClass::http_status:
      return fmt::format("unexpected HTTP status {}", e.http_status);
    case FailureClass::cancelled:
      return "cancelled";
  }
  return "failed";
}

// Where a profile's cached price ratio comes from, in words.
std::string cached_ratio_source(const llm::Profile& p) {
  if (p.cached_price_ratio) return "cached_price_ratio";
  if (p.price_cached_input_per_mtok && p.price_input_per_mtok > 0)
    return "price_cached_input_per_mtok / price_input_per_mtok";
  return fmt::format("{} default", p.provider == "anthropic" ? "anthropic" : "openai");
}

nlohmann::ordered_json profile_json(const llm::Profile& p, bool is_default) {
  return {
      {"name", p.name},
      {"default", is_default},
      {"provider", p.provider},
      {"model", p.model},
      {"base_url", llm::redact(p.base_url)},
      {"endpoint", llm::redact(llm::endpoint_url(p))},
      {"api_key_env", p.api_key_env},
      {"api_key_set", !p.api_key_env.empty() && util::get_env(p.api_key_env.c_str()).has_value()},
      {"context_window", p.context_window},
      {"max_output_tokens", p.max_output_tokens},
      {"temperature", p.temperature},
      {"price_input_per_mtok", p.price_input_per_mtok},
      {"price_output_per_mtok", p.price_output_per_mtok},
      {"cached_price_ratio", llm::cached_price_ratio(p)},
      {"cached_price_ratio_source", cached_ratio_source(p)},
      {"requests_per_minute", p.requests_per_minute},
      {"tokens_per_minute", p.tokens_per_minute},
      {"concurrency", p.concurrency},
      {"stream", p.stream},
      {"source", p.source}};
}

struct PingOptions {
  std::string profile;
  bool json = false;
  std::string model, base_url, provider, api_key_env, transcript;
  bool stream = false;
  double timeout_s = 0;
  int retries = 0;
};

// The profile to ping: the named (or default) one with the command line's overrides, a ping's
// retries and a short timeout unless --timeout says otherwise.
Result<llm::Profile> ping_profile(const PingOptions& o) {
  llm::ProfileOverrides ov;
  if (!o.model.empty()) ov.model = o.model;
  if (!o.base_url.empty()) ov.base_url = o.base_url;
  if (!o.provider.empty()) ov.provider = o.provider;
  if (!o.api_key_env.empty())
    ov.api_key_env = o.api_key_env == "none" ? std::string() : o.api_key_env;
  if (o.stream) ov.stream = true;
  KOPE_ASSIGN(llm::Profile p, llm::resolve_profile(o.profile, ov));
  p.max_retries = o.retries;
  if (o.timeout_s > 0) {
    p.total_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
    p.idle_timeout = std::min(p.idle_timeout, p.total_timeout);
  } else {
    p.total_timeout = std::min(p.total_timeout, k_ping_default_timeout);
  }
  return p;
}

// --json: the call's outcome as one object (the answer and its usage, or the failure diagnosed).
std::string ping_json(const llm::LlmResult<llm::ChatResponse>& r, const llm::Profile& p, const std::string& endpoint) {
  nlohmann::ordered_json j;
  j["ok"] = r.has_value();
  j["profile"] = p.name;
  j["provider"] = p.provider;
  j["endpoint"] = endpoint;
  j["model"] = p.model;
  if (r) {
    j["answered_by"] = r->model;
    j["latency_s"] = r->latency_seconds;
    j["first_byte_s"] = r->first_byte_seconds;
    j["attempts"] = r->attempts;
    j["usage"] = {{"prompt_tokens", r->usage.prompt_tokens},
                  {"completion_tokens", r->usage.completion_tokens},
                  {"cached_tokens", r->usage.cached_tokens},
                  {"cache_write_tokens", r->usage.cache_write_tokens},
                  {"estimated", r->usage.estimated}};
    j["cost_usd"] = r->cost_usd;
    j["finish_reason"] = r->finish_reason;
    j["text"] = r->text;
    j["request_id"] = r->request_id;
  } else {
    j["class"] = llm::failure_class_name(r.error().cls);
    j["http_status"] = r.error().http_status;
    j["attempts"] = r.error().attempts;
    j["diagnosis"] = diagnosis(r.error(), p);
    j["message"] = r.error().message;
  }
  return llm::redact(j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)) + "\n";
}

// The call's outcome as the console shows it, one fact per line.
std::string ping_text(const llm::LlmResult<llm::ChatResponse>& r, const llm::Profile& p, const std::string& endpoint) {
  std::string out;
  out += fmt::format("profile    {} ({})\n", p.name, p.source);
  out += fmt::format("endpoint   {} ({})\n", endpoint, p.provider);
  out += fmt::format("key        {}\n", key_status(p));
  if (!r) {
    out += fmt::format("model      {}\n", p.model);
    out += fmt::format("result     FAILED: {}\n", diagnosis(r.error(), p));
    out += fmt::format("detail     [{}] {}\n", llm::failure_class_name(r.error().cls),
                       r.error().message);
    return llm::redact(out);
  }
  out += fmt::format("model      {}{}\n", p.model,
                     r->model != p.model ? fmt::format(" (answered as {})", r->model) : "");
  out += fmt::format("latency    {:.3f} s (first byte {:.3f} s{})\n", r->latency_seconds,
                     r->first_byte_seconds,
                     r->attempts > 1 ? fmt::format(", {} attempts", r->attempts) : "");
  out += fmt::format("usage      prompt {}, completion {}, cached {}{}{}\n", r->usage.prompt_tokens,
                     r->usage.completion_tokens, r->usage.cached_tokens,
                     r->usage.cache_write_tokens > 0
                         ? fmt::format(", cache write {}", r->usage.cache_write_tokens)
                         : "",
                     r->usage.estimated ? " (estimated: the server reported no usage)" : "");
  out += fmt::format("cost       ${:.6f}\n", r->cost_usd);
  out += fmt::format("answer     \"{}\" (finish_reason {})\n", util::truncate_text(r->text, 200, 3),
                     r->finish_reason.empty() ? "-" : r->finish_reason);
  if (!r->request_id.empty()) out += fmt::format("request id {}\n", r->request_id);
  out += "result     ok\n";
  return llm::redact(out);
}

Result<int> ping(const PingOptions& o) {
  KOPE_ASSIGN(llm::Profile p, ping_profile(o));
  llm::ClientOptions copts;
  copts.transcript = o.transcript;
  copts.share_limits = false;
  KOPE_ASSIGN(auto client, llm::make_client(p, copts));

  std::vector<llm::Message> messages = {
      {llm::Message::Role::system, "You are a connectivity check. Answer with one word."},
      {llm::Message::Role::user, "Reply with the single word: pong"}};
  llm::ChatParams params;
  params.max_output_tokens = k_ping_max_tokens;
  params.temperature = 0.0;
  params.purpose = "ping";
  auto r = client->chat(messages, params);

  const std::string endpoint = llm::redact(llm::endpoint_url(p));
  print(o.json ? ping_json(r, p, endpoint) : ping_text(r, p, endpoint));
  return r ? 0 : 1;
}

Result<int> list_profiles(bool json) {
  KOPE_ASSIGN(llm::ProfileSet set, llm::load_profiles());
  if (json) {
    nlohmann::ordered_json j;
    j["default"] = set.default_name;
    j["files"] = nlohmann::ordered_json::array();
    for (const auto& f : set.files) j["files"].push_back(f.string());
    j["profiles"] = nlohmann::ordered_json::array();
    for (const auto& p : set.profiles)
      j["profiles"].push_back(profile_json(p, p.name == set.default_name));
    print(llm::redact(j.dump(2)) + "\n");
    return 0;
  }
  if (set.profiles.empty()) {
    print(
        "no model profiles are configured.\nAdd an [llm.<name>] table to kope.toml (see README, "
        "\"Configuring a "
        "model\"), or set KOPE_MODEL with OPENAI_BASE_URL / OPENAI_API_KEY.\n");
    return 0;
  }
  std::string out;
  for (const auto& p : set.profiles) {
    const bool is_default = p.name == set.default_name;
    out += fmt::format("{}{}\n", p.name, is_default ? " (default)" : "");
    out += fmt::format("  provider   {}\n", p.provider);
    out += fmt::format("  model      {}\n", p.model.empty() ? "(not set)" : p.model);
    out += fmt::format("  endpoint   {}\n", llm::redact(llm::endpoint_url(p)));
    out += fmt::format("  key        {}\n", key_status(p));
    out += fmt::format(
        "  limits     context {} tokens, output {} tokens, {} concurrent, {} req/min, {} tok/min\n",
        p.context_window, p.max_output_tokens, p.concurrency,
        p.requests_per_minute > 0 ? fmt::format("{:g}", p.requests_per_minute) : "unlimited",
        p.tokens_per_minute > 0 ? fmt::format("{:g}", p.tokens_per_minute) : "unlimited");
    out += fmt::format("  price      ${:g} / ${:g} per million input / output tokens\n",
                       p.price_input_per_mtok, p.price_output_per_mtok);
    out += fmt::format("  cached     prompt tokens billed at {:g}x ({})\n",
                       llm::cached_price_ratio(p), cached_ratio_source(p));
    out += fmt::format("  source     {}\n", p.source);
  }
  if (set.default_name.empty() && set.profiles.size() > 1) {
    out += "no default profile: pass --profile NAME or set default = \"<name>\" under [llm]\n";
  }
  print(llm::redact(out));
  return 0;
}

}  // namespace

void register_llm(CLI::App& app, Action& action) {
  auto* llm = app.add_subcommand("llm", "Check and list the model endpoints the agent uses");
  llm->require_subcommand(1);

  auto o = std::make_shared<PingOptions>();
  auto* ping_cmd = llm->add_subcommand(
      "ping", "Send one tiny request; print model, latency and usage, or a diagnosis");
  ping_cmd->add_option("--profile", o->profile, "Profile name (default: the default profile)");
  ping_cmd->add_flag("--json", o->json, "Print JSON");
  ping_cmd->add_option("--model", o->model, "Override the model");
  ping_cmd->add_option("--base-url", o->base_url, "Override the base URL");
  ping_cmd->add_option("--provider", o->provider, "Override the provider")
      ->check(CLI::IsMember({"openai", "anthropic"}));
  ping_cmd->add_option("--api-key-env", o->api_key_env,
                       "Environment variable holding the key ('none': send no key)");
  ping_cmd->add_flag("--stream", o->stream, "Stream the answer (server-sent events)");
  ping_cmd
      ->add_option("--timeout", o->timeout_s,
                   "Total timeout in seconds (default: min(profile, 60))")
      ->check(CLI::PositiveNumber);
  ping_cmd
      ->add_option("--retries", o->retries,
                   "Retries of transient failures (default 0: one request)")
      ->check(CLI::Range(0, 100));
  ping_cmd->add_option("--transcript", o->transcript,
                       "Append the request and response to this JSONL file");
  ping_cmd->callback([&action, o] { action = [o]() { return ping(*o); }; });

  auto json = std::make_shared<bool>(false);
  auto* profiles_cmd =
      llm->add_subcommand("profiles", "List the model profiles (keys shown as set/unset only)");
  profiles_cmd->add_flag("--json", *json, "Print JSON");
  profiles_cmd->callback([&action, json] { action = [json]() { return list_profiles(*json); }; });
}

}  // namespace kope::cli
