// Model profiles: [llm.<name>] tables in kope.toml / .kope/config.toml / the user config,
// the environment default, and command-line overrides (kope/llm.h).
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kope/llm.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::llm {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view k_openai_default_url = "https://api.openai.com/v1";
constexpr std::string_view k_anthropic_default_url = "https://api.anthropic.com";
constexpr std::string_view k_openai_key_env = "OPENAI_API_KEY";
constexpr std::string_view k_anthropic_key_env = "ANTHROPIC_API_KEY";
constexpr int k_max_retries_limit = 100;

const std::vector<std::string_view> k_profile_keys = {"provider",
                                                      "base_url",
                                                      "model",
                                                      "api_key_env",
                                                      "context_window",
                                                      "max_output_tokens",
                                                      "temperature",
                                                      "price_input_per_mtok",
                                                      "price_output_per_mtok",
                                                      "price_cached_input_per_mtok",
                                                      "cached_price_ratio",
                                                      "requests_per_minute",
                                                      "tokens_per_minute",
                                                      "concurrency",
                                                      "stream",
                                                      "connect_timeout_s",
                                                      "idle_timeout_s",
                                                      "total_timeout_s",
                                                      "max_retries",
                                                      "retry_base_delay_s",
                                                      "retry_max_delay_s",
                                                      "retry_after_cap_s",
                                                      "extra_body",
                                                      "omit_params"};

std::string default_base_url(std::string_view provider) {
  if (provider == "anthropic") {
    return util::get_env("ANTHROPIC_BASE_URL").value_or(std::string(k_anthropic_default_url));
  }
  return util::get_env("OPENAI_BASE_URL").value_or(std::string(k_openai_default_url));
}

std::string default_key_env(std::string_view provider) {
  return std::string(provider == "anthropic" ? k_anthropic_key_env : k_openai_key_env);
}

std::string no_model_message() {
  std::string why;
  if (util::get_env("OPENAI_BASE_URL") || util::get_env("OPENAI_API_KEY") ||
      util::get_env("ANTHROPIC_API_KEY")) {
    why = " (an endpoint or key is set in the environment, but KOPE_MODEL is not)";
  }
  return fmt::format(
      "no model is configured{}: add an [llm.<name>] table with provider, base_url and model to "
      "kope.toml (or "
      "~/.config/kope/config.toml; see README, \"Configuring a model\"), or set KOPE_MODEL (with "
      "OPENAI_BASE_URL and "
      "OPENAI_API_KEY, or KOPE_PROVIDER=anthropic and ANTHROPIC_API_KEY), or pass --model and "
      "--base-url",
      why);
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

// "path:line:column: message" errors.
class FileContext {
 public:
  explicit FileContext(fs::path path) : m_path(std::move(path)) {}
  template <class... Args>
  std::unexpected<Error> at(const toml::source_region& where, fmt::format_string<Args...> f,
                            Args&&... args) const {
    return fail(ErrorKind::config, "{}:{}:{}: {}", m_path.string(), where.begin.line,
                where.begin.column, fmt::format(f, std::forward<Args>(args)...));
  }
  const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

nlohmann::ordered_json toml_to_json(const toml::node& n) {
  if (auto s = n.as_string()) return s->get();
  if (auto i = n.as_integer()) return i->get();
  if (auto f = n.as_floating_point()) return f->get();
  if (auto b = n.as_boolean()) return b->get();
  if (auto a = n.as_array()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& e : *a) out.push_back(toml_to_json(e));
    return out;
  }
  if (auto t = n.as_table()) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (auto&& [k, v] : *t) out[std::string(k.str())] = toml_to_json(v);
    return out;
  }
  std::ostringstream os;
  if (auto d = n.as_date())
    os << d->get();
  else if (auto tm = n.as_time())
    os << tm->get();
  else if (auto dt = n.as_date_time())
    os << dt->get();
  return os.str();
}

// A profile being assembled from one or more files: the values and which keys were given.
struct Draft {
  Profile profile;
  std::set<std::string> keys;
};

Result<double> number(const FileContext& ctx, const toml::node& n, std::string_view key,
                      std::string_view where) {
  if (auto i = n.as_integer()) return static_cast<double>(i->get());
  if (auto f = n.as_floating_point()) {
    if (!std::isfinite(f->get()))
      return ctx.at(n.source(), "'{}' in {} must be a finite number", key, where);
    return f->get();
  }
  return ctx.at(n.source(), "'{}' in {} must be a number, not {}", key, where, type_name(n));
}

Result<double> number_at_least(const FileContext& ctx, const toml::node& n, std::string_view key,
                               std::string_view where, double min, bool exclusive) {
  KOPE_ASSIGN(double v, number(ctx, n, key, where));
  if (exclusive ? !(v > min) : !(v >= min)) {
    return ctx.at(n.source(), "'{}' in {} must be {} {:g}, not {:g}", key, where,
                  exclusive ? "more than" : "at least", min, v);
  }
  return v;
}

Result<int64_t> integer(const FileContext& ctx, const toml::node& n, std::string_view key,
                        std::string_view where, int64_t min, int64_t max) {
  auto i = n.as_integer();
  if (i == nullptr)
    return ctx.at(n.source(), "'{}' in {} must be an integer, not {}", key, where, type_name(n));
  if (i->get() < min || i->get() > max) {
    return ctx.at(n.source(), "'{}' in {} must be between {} and {}, not {}", key, where, min, max,
                  i->get());
  }
  return i->get();
}

Result<std::string> string(const FileContext& ctx, const toml::node& n, std::string_view key,
                           std::string_view where) {
  auto s = n.as_string();
  if (s == nullptr)
    return ctx.at(n.source(), "'{}' in {} must be a string, not {}", key, where, type_name(n));
  return std::string(s->get());
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(seconds * 1000.0)));
}

// Applies one [llm.<name>] table of one file onto `d`.
Status apply_table(const FileContext& ctx, const toml::table& t, std::string_view name, Draft& d) {
  const std::string where = fmt::format("[llm.{}]", name);
  for (auto&& [key, node] : t) {
    const std::string k(key.str());
    if (std::find(k_profile_keys.begin(), k_profile_keys.end(), k) == k_profile_keys.end()) {
      std::vector<std::string> names(k_profile_keys.begin(), k_profile_keys.end());
      return ctx.at(key.source(), "unknown key '{}' in {} (expected one of: {})", k, where,
                    util::join(names, ", "));
    }
    Profile& p = d.profile;
    if (k == "provider") {
      KOPE_ASSIGN(std::string v, string(ctx, node, k, where));
      if (v != "openai" && v != "anthropic") {
        return ctx.at(node.source(),
                      "'provider' in {} must be \"openai\" (any OpenAI-compatible server) or "
                      "\"anthropic\", not \"{}\"",
                      where, v);
      }
      p.provider = v;
    } else if (k == "base_url") {
      KOPE_ASSIGN(std::string v, string(ctx, node, k, where));
      if (!util::starts_with(v, "http://") && !util::starts_with(v, "https://")) {
        return ctx.at(node.source(),
                      "'base_url' in {} must start with http:// or https://, not \"{}\"", where,
                      redact(v));
      }
      p.base_url = v;
    } else if (k == "model") {
      KOPE_ASSIGN(std::string v, string(ctx, node, k, where));
      if (v.empty()) return ctx.at(node.source(), "'model' in {} is empty", where);
      p.model = v;
    } else if (k == "api_key_env") {
      KOPE_ASSIGN(std::string v, string(ctx, node, k, where));
      bool ok = std::all_of(v.begin(), v.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
      });
      if (!ok || (!v.empty() && std::isdigit(static_cast<unsigned char>(v[0])))) {
        return ctx.at(node.source(),
                      "'api_key_env' in {} must name an environment variable (like OPENAI_API_KEY; "
                      "the key itself never goes into a config file), or be \"\" for no key",
                      where);
      }
      p.api_key_env = v;
    } else if (k == "context_window") {
      KOPE_ASSIGN(p.context_window, integer(ctx, node, k, where, 1, int64_t{1} << 40));
    } else if (k == "max_output_tokens") {
      KOPE_ASSIGN(p.max_output_tokens, integer(ctx, node, k, where, 1, int64_t{1} << 31));
    } else if (k == "temperature") {
      KOPE_ASSIGN(double v, number(ctx, node, k, where));
      if (v < 0 || v > 2)
        return ctx.at(node.source(), "'temperature' in {} must be between 0 and 2, not {:g}", where,
                      v);
      p.temperature = v;
    } else if (k == "price_input_per_mtok") {
      KOPE_ASSIGN(p.price_input_per_mtok, number_at_least(ctx, node, k, where, 0, false));
    } else if (k == "price_output_per_mtok") {
      KOPE_ASSIGN(p.price_output_per_mtok, number_at_least(ctx, node, k, where, 0, false));
    } else if (k == "price_cached_input_per_mtok") {
      KOPE_ASSIGN(double v, number_at_least(ctx, node, k, where, 0, false));
      p.price_cached_input_per_mtok = v;
    } else if (k == "cached_price_ratio") {
      KOPE_ASSIGN(double v, number(ctx, node, k, where));
      if (!(v >= 0 && v <= 1))
        return ctx.at(node.source(), "'cached_price_ratio' in {} must be between 0 and 1, not {:g}",
                      where, v);
      p.cached_price_ratio = v;
    } else if (k == "requests_per_minute") {
      KOPE_ASSIGN(p.requests_per_minute, number_at_least(ctx, node, k, where, 0, false));
    } else if (k == "tokens_per_minute") {
      KOPE_ASSIGN(p.tokens_per_minute, number_at_least(ctx, node, k, where, 0, false));
    } else if (k == "concurrency") {
      KOPE_ASSIGN(int64_t v, integer(ctx, node, k, where, 1, 4096));
      p.concurrency = static_cast<int>(v);
    } else if (k == "stream") {
      auto b = node.as_boolean();
      if (b == nullptr)
        return ctx.at(node.source(), "'stream' in {} must be true or false, not {}", where,
                      type_name(node));
      p.stream = b->get();
    } else if (k == "connect_timeout_s") {
      KOPE_ASSIGN(double v, number_at_least(ctx, node, k, where, 0, true));
      p.connect_timeout = to_ms(v);
    } else if (k == "idle_timeout_s") {
      KOPE_ASSIGN(double v, number_at_least(ctx, node, k, where, 0, true));
      p.idle_timeout = to_ms(v);
    } else if (k == "total_timeout_s") {
      KOPE_ASSIGN(double v, number_at_least(ctx, node, k, where, 0, true));
      p.total_timeout = to_ms(v);
    } else if (k == "max_retries") {
      KOPE_ASSIGN(int64_t v, integer(ctx, node, k, where, 0, k_max_retries_limit));
      p.max_retries = static_cast<int>(v);
    } else if (k == "retry_base_delay_s") {
      KOPE_ASSIGN(double v, number_at_least(ctx, node, k, where, 0, false));
      p.retry_base_delay = to_ms(v);
    } else if (k == "retry_max_delay_s") {
      KOPE_ASSIGN(double v, number_at_least(ctx, node, k, where, 0, false));
      p.retry_max_delay = to_ms(v);
    } else if (k == "retry_after_cap_s") {
      KOPE_ASSIGN(double v, number_at_least(ctx, node, k, where, 0, false));
      p.retry_after_cap = to_ms(v);
    } else if (k == "extra_body") {
      if (!node.is_table()) {
        return ctx.at(node.source(), "'extra_body' in {} must be a table of request fields, not {}",
                      where, type_name(node));
      }
      // Merged key by key over what earlier files gave.
      nlohmann::ordered_json merged = p.extra_body_json.empty()
                                          ? nlohmann::ordered_json::object()
                                          : nlohmann::ordered_json::parse(p.extra_body_json);
      const nlohmann::ordered_json given = toml_to_json(node);
      for (const auto& [ek, ev] : given.items()) merged[ek] = ev;
      p.extra_body_json = merged.dump();
    } else if (k == "omit_params") {
      auto a = node.as_array();
      if (a == nullptr)
        return ctx.at(node.source(), "'omit_params' in {} must be an array of strings, not {}",
                      where, type_name(node));
      p.omit_params.clear();
      for (const auto& e : *a) {
        if (!e.is_string())
          return ctx.at(e.source(), "'omit_params' in {} must hold strings, not {}", where,
                        type_name(e));
        p.omit_params.emplace_back(e.as_string()->get());
      }
    }
    d.keys.insert(k);
  }
  if (d.profile.source.empty() || d.profile.source.find(ctx.path().string()) == std::string::npos) {
    std::string here = fmt::format("{}:{}", ctx.path().string(), t.source().begin.line);
    d.profile.source = d.profile.source.empty() ? here : d.profile.source + ", " + here;
  }
  return {};
}

bool valid_profile_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// Reads one config file into `drafts`; returns the file's `default` (or "").
Result<std::string> read_file_into(const fs::path& path, std::map<std::string, Draft>& drafts) {
  KOPE_ASSIGN(std::string text, util::read_file(path));
  toml::table root;
  try {
    root = toml::parse(text, path.string());
  } catch (const toml::parse_error& e) {
    return fail(ErrorKind::config, "{}:{}:{}: {}", path.string(), e.source().begin.line,
                e.source().begin.column, e.description());
  }
  FileContext ctx(path);
  const toml::node* llm = root.get("llm");
  if (llm == nullptr) return std::string();
  const toml::table* lt = llm->as_table();
  if (lt == nullptr)
    return ctx.at(llm->source(), "'llm' must be a table ([llm]), not {}", type_name(*llm));
  std::string default_name;
  for (auto&& [key, node] : *lt) {
    const std::string k(key.str());
    if (k == "default") {
      KOPE_ASSIGN(default_name, string(ctx, node, "default", "[llm]"));
      continue;
    }
    const toml::table* pt = node.as_table();
    if (pt == nullptr) {
      return ctx.at(
          key.source(),
          "unknown key '{}' in [llm] (profiles are tables [llm.<name>]; the only other key is "
          "'default')",
          k);
    }
    if (!valid_profile_name(k)) {
      return ctx.at(key.source(),
                    "profile name '{}' may use only letters, digits, '_', '-' and '.'", k);
    }
    Draft& d = drafts[k];
    d.profile.name = k;
    KOPE_TRY(apply_table(ctx, *pt, k, d));
  }
  if (!default_name.empty()) {
    const toml::node* dn = lt->get("default");
    if (!drafts.contains(default_name)) {
      std::vector<std::string> names;
      for (const auto& [n, _] : drafts) names.push_back(n);
      return ctx.at(dn->source(), "default = \"{}\" names no profile (profiles: {})", default_name,
                    names.empty() ? "none" : util::join(names, ", "));
    }
  }
  return default_name;
}

std::optional<fs::path> project_file(fs::path dir) {
  std::error_code ec;
  if (dir.empty()) dir = fs::current_path(ec);
  dir = fs::absolute(dir, ec);
  while (!dir.empty()) {
    for (const char* name : {"kope.toml", ".kope/config.toml"}) {
      fs::path p = dir / name;
      if (fs::is_regular_file(p, ec)) return p;
    }
    fs::path parent = dir.parent_path();
    if (parent == dir) break;
    dir = parent;
  }
  return std::nullopt;
}

std::optional<fs::path> user_config_file(const ProfileSources& sources) {
  fs::path p;
  if (sources.user_config) {
    if (sources.user_config->empty()) return std::nullopt;
    p = *sources.user_config;
  } else if (auto xdg = util::get_env("XDG_CONFIG_HOME")) {
    p = fs::path(*xdg) / "kope" / "config.toml";
  } else if (auto home = util::get_env("HOME")) {
    p = fs::path(*home) / ".config" / "kope" / "config.toml";
  } else {
    return std::nullopt;
  }
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  return p;
}

std::optional<Profile> environment_profile() {
  auto model = util::get_env("KOPE_MODEL");
  if (!model) return std::nullopt;
  Profile p;
  p.name = "default";
  p.provider = util::get_env("KOPE_PROVIDER").value_or("openai");
  p.model = *model;
  p.base_url = default_base_url(p.provider);
  p.api_key_env = default_key_env(p.provider);
  p.source = "environment";
  return p;
}

}  // namespace

const Profile* ProfileSet::find(std::string_view name) const {
  for (const auto& p : profiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

bool ProfileOverrides::empty() const {
  return !provider && !base_url && !model && !api_key_env && !context_window &&
         !max_output_tokens && !temperature && !stream && !connect_timeout && !idle_timeout &&
         !total_timeout && !max_retries && !concurrency;
}

Result<ProfileSet> load_profiles(const ProfileSources& sources) {
  ProfileSet set;
  std::map<std::string, Draft> drafts;
  std::string default_name;
  std::vector<fs::path> files;
  if (auto user = user_config_file(sources)) files.push_back(*user);
  if (auto project = project_file(sources.project_dir)) {
    std::error_code ec;
    if (files.empty() || !fs::equivalent(files.front(), *project, ec)) files.push_back(*project);
  }
  for (const auto& f : files) {
    KOPE_ASSIGN(std::string d, read_file_into(f, drafts));
    if (!d.empty()) default_name = d;  // the project's default wins
  }
  set.files = files;
  for (auto& [name, d] : drafts) {
    Profile p = std::move(d.profile);
    if (!d.keys.contains("api_key_env")) p.api_key_env = default_key_env(p.provider);
    if (!d.keys.contains("base_url")) p.base_url = default_base_url(p.provider);
    set.profiles.push_back(std::move(p));
  }
  if (set.profiles.empty() && sources.environment) {
    if (auto env = environment_profile()) set.profiles.push_back(std::move(*env));
  }
  if (auto chosen = util::get_env("KOPE_PROFILE")) {
    default_name = *chosen;
  } else if (default_name.empty()) {
    if (set.profiles.size() == 1) {
      default_name = set.profiles.front().name;
    } else if (set.find("default") != nullptr) {
      default_name = "default";
    }
  }
  set.default_name = default_name;
  return set;
}

Status validate_profile(const Profile& p) {
  const std::string where = p.source.empty() ? fmt::format("profile '{}'", p.name)
                                             : fmt::format("profile '{}' ({})", p.name, p.source);
  if (p.provider != "openai" && p.provider != "anthropic") {
    return fail(ErrorKind::config, "{}: provider must be \"openai\" or \"anthropic\", not \"{}\"",
                where, p.provider);
  }
  if (p.model.empty()) {
    return fail(ErrorKind::config,
                "{}: no model set (set model = \"...\" in the profile, KOPE_MODEL, or --model)",
                where);
  }
  if (p.base_url.empty()) {
    return fail(ErrorKind::config, "{}: no base_url set (e.g. {} or http://localhost:8080/v1)",
                where, p.provider == "anthropic" ? k_anthropic_default_url : k_openai_default_url);
  }
  if (!util::starts_with(p.base_url, "http://") && !util::starts_with(p.base_url, "https://")) {
    return fail(ErrorKind::config, "{}: base_url must start with http:// or https://, not \"{}\"",
                where, redact(p.base_url));
  }
  auto positive = [&](std::string_view key, double v) -> Status {
    if (!(v > 0))
      return fail(ErrorKind::config, "{}: {} must be positive, not {:g}", where, key, v);
    return {};
  };
  auto non_negative = [&](std::string_view key, double v) -> Status {
    if (!(v >= 0) || !std::isfinite(v))
      return fail(ErrorKind::config, "{}: {} must be 0 or more, not {:g}", where, key, v);
    return {};
  };
  KOPE_TRY(positive("context_window", static_cast<double>(p.context_window)));
  KOPE_TRY(positive("max_output_tokens", static_cast<double>(p.max_output_tokens)));
  if (!(p.temperature >= 0 && p.temperature <= 2)) {
    return fail(ErrorKind::config, "{}: temperature must be between 0 and 2, not {:g}", where,
                p.temperature);
  }
  KOPE_TRY(non_negative("price_input_per_mtok", p.price_input_per_mtok));
  KOPE_TRY(non_negative("price_output_per_mtok", p.price_output_per_mtok));
  if (p.price_cached_input_per_mtok)
    KOPE_TRY(non_negative("price_cached_input_per_mtok", *p.price_cached_input_per_mtok));
  if (p.cached_price_ratio && !(*p.cached_price_ratio >= 0 && *p.cached_price_ratio <= 1)) {
    return fail(ErrorKind::config, "{}: cached_price_ratio must be between 0 and 1, not {:g}",
                where, *p.cached_price_ratio);
  }
  KOPE_TRY(non_negative("requests_per_minute", p.requests_per_minute));
  KOPE_TRY(non_negative("tokens_per_minute", p.tokens_per_minute));
  if (p.concurrency < 1)
    return fail(ErrorKind::config, "{}: concurrency must be at least 1, not {}", where,
                p.concurrency);
  KOPE_TRY(positive("connect_timeout", static_cast<double>(p.connect_timeout.count())));
  KOPE_TRY(positive("idle_timeout", static_cast<double>(p.idle_timeout.count())));
  KOPE_TRY(positive("total_timeout", static_cast<double>(p.total_timeout.count())));
  if (p.max_retries < 0 || p.max_retries > k_max_retries_limit) {
    return fail(ErrorKind::config, "{}: max_retries must be between 0 and {}, not {}", where,
                k_max_retries_limit, p.max_retries);
  }
  KOPE_TRY(non_negative("retry_base_delay", static_cast<double>(p.retry_base_delay.count())));
  KOPE_TRY(non_negative("retry_max_delay", static_cast<double>(p.retry_max_delay.count())));
  KOPE_TRY(non_negative("retry_after_cap", static_cast<double>(p.retry_after_cap.count())));
  if (!p.api_key_env.empty()) {
    bool ok = std::all_of(p.api_key_env.begin(), p.api_key_env.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!ok)
      return fail(ErrorKind::config, "{}: api_key_env must name an environment variable", where);
  }
  return {};
}

Result<Profile> resolve_profile(std::string_view name, const ProfileOverrides& o,
                                const ProfileSources& sources) {
  KOPE_ASSIGN(ProfileSet set, load_profiles(sources));
  Profile p;
  if (set.profiles.empty()) {
    if (!name.empty()) {
      return fail(ErrorKind::not_found, "no profile named '{}': no profile is configured. {}", name,
                  no_model_message());
    }
    if (!o.model) return fail(ErrorKind::config, "{}", no_model_message());
    // Flags alone describe a model: start from the environment's defaults.
    p.provider = o.provider.value_or(util::get_env("KOPE_PROVIDER").value_or("openai"));
    p.base_url = default_base_url(p.provider);
    p.api_key_env = default_key_env(p.provider);
    p.source = "command line";
  } else {
    std::string chosen(name.empty() ? set.default_name : name);
    if (chosen.empty()) {
      std::vector<std::string> names;
      for (const auto& q : set.profiles) names.push_back(q.name);
      return fail(ErrorKind::config,
                  "{} profiles are configured ({}) and none is the default: pass --profile NAME or "
                  "set default = "
                  "\"{}\" under [llm]",
                  names.size(), util::join(names, ", "), names.front());
    }
    const Profile* found = set.find(chosen);
    if (found == nullptr) {
      std::vector<std::string> names;
      for (const auto& q : set.profiles) names.push_back(q.name);
      std::vector<std::string> files;
      for (const auto& f : set.files) files.push_back(f.string());
      return fail(ErrorKind::not_found, "no profile named '{}' (profiles: {}; read from {})",
                  chosen, util::join(names, ", "),
                  files.empty() ? "the environment" : util::join(files, ", "));
    }
    p = *found;
    if (o.provider && *o.provider != p.provider) {
      // Defaults that came from the old provider follow the new one.
      if (p.base_url == default_base_url(p.provider)) p.base_url = default_base_url(*o.provider);
      if (p.api_key_env == default_key_env(p.provider))
        p.api_key_env = default_key_env(*o.provider);
      p.provider = *o.provider;
    }
  }
  if (o.base_url) p.base_url = *o.base_url;
  if (o.model) p.model = *o.model;
  if (o.api_key_env) p.api_key_env = *o.api_key_env;
  if (o.context_window) p.context_window = *o.context_window;
  if (o.max_output_tokens) p.max_output_tokens = *o.max_output_tokens;
  if (o.temperature) p.temperature = *o.temperature;
  if (o.stream) p.stream = *o.stream;
  if (o.connect_timeout) p.connect_timeout = *o.connect_timeout;
  if (o.idle_timeout) p.idle_timeout = *o.idle_timeout;
  if (o.total_timeout) p.total_timeout = *o.total_timeout;
  if (o.max_retries) p.max_retries = *o.max_retries;
  if (o.concurrency) p.concurrency = *o.concurrency;
  if (!o.empty() && p.source != "command line") p.source += " + command line";
  KOPE_TRY(validate_profile(p));
  return p;
}

}  // namespace kope::llm
