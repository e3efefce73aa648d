// Profiles: TOML files (project and user), merging, defaults, the environment profile,
// overrides, and error messages that name file, line and key.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kope/llm.h"
#include "llm/provider.h"
#include "util/fs.h"

namespace kope::llm {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Sets environment variables for one test and restores them afterwards.
class EnvGuard {
 public:
  void set(const char* name, const char* value) {
    save(name);
    ::setenv(name, value, 1);
  }
  void unset(const char* name) {
    save(name);
    ::unsetenv(name);
  }
  ~EnvGuard() {
    for (auto& [name, value] : m_saved) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  void save(const char* name) {
    for (auto& [n, _] : m_saved) {
      if (n == name) return;
    }
    const char* v = std::getenv(name);
    m_saved.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> m_saved;
};

class ProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"OPENAI_BASE_URL", "OPENAI_API_KEY", "KOPE_MODEL", "KOPE_PROVIDER",
                          "KOPE_PROFILE", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"}) {
      env.unset(v);
    }
    auto d = util::TempDir::create("kope-profile-test");
    ASSERT_TRUE(d) << d.error().message;
    dir.emplace(std::move(*d));
    project = dir->path() / "proj";
    fs::create_directories(project / "sub");
    user = dir->path() / "user" / "config.toml";
    fs::create_directories(user.parent_path());
  }
  ProfileSources sources() const { return ProfileSources{project, user, true}; }
  void write(const fs::path& p, std::string_view text) {
    ASSERT_TRUE(util::write_file_atomic(p, text));
  }

  EnvGuard env;
  std::optional<util::TempDir> dir;
  fs::path project;
  fs::path user;
};

TEST_F(ProfileTest, NothingConfiguredSaysHowToConfigure) {
  auto set = load_profiles(sources());
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_TRUE(set->profiles.empty());
  auto p = resolve_profile("", {}, sources());
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().kind, ErrorKind::config);
  EXPECT_NE(p.error().message.find("no model is configured"), std::string::npos);
  EXPECT_NE(p.error().message.find("KOPE_MODEL"), std::string::npos);
  EXPECT_NE(p.error().message.find("kope.toml"), std::string::npos);
  env.set("OPENAI_BASE_URL", "http://localhost:8000/v1");
  p = resolve_profile("", {}, sources());
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("KOPE_MODEL is not"), std::string::npos);
}

TEST_F(ProfileTest, EnvironmentProfileWhenNoFile) {
  env.set("OPENAI_BASE_URL", "http://localhost:8000/v1");
  env.set("KOPE_MODEL", "qwen2.5-coder");
  auto p = resolve_profile("", {}, sources());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "default");
  EXPECT_EQ(p->provider, "openai");
  EXPECT_EQ(p->base_url, "http://localhost:8000/v1");
  EXPECT_EQ(p->model, "qwen2.5-coder");
  EXPECT_EQ(p->api_key_env, "OPENAI_API_KEY");
  EXPECT_EQ(p->source, "environment");
  env.unset("OPENAI_BASE_URL");
  p = resolve_profile("", {}, sources());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->base_url, "https://api.openai.com/v1");
  env.set("KOPE_PROVIDER", "anthropic");
  p = resolve_profile("", {}, sources());
  ASSERT_TRUE(p);
  EXPECT_EQ(p->base_url, "https://api.anthropic.com");
  EXPECT_EQ(p->api_key_env, "ANTHROPIC_API_KEY");
}

TEST_F(ProfileTest, FlagsAloneDescribeAModel) {
  ProfileOverrides o;
  o.model = "llama3";
  o.base_url = "http://127.0.0.1:11434/v1";
  auto p = resolve_profile("", o, sources());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->model, "llama3");
  EXPECT_EQ(p->base_url, "http://127.0.0.1:11434/v1");
  EXPECT_EQ(p->source, "command line");
}

TEST_F(ProfileTest, ProjectFileInAParentDirectoryWithAllKeys) {
  write(project / "kope.toml", R"(
[agent]
whatever = 1   # other modules' tables are not ours to judge

[llm]
default = "local"

[llm.local]
provider = "openai"
base_url = "http://localhost:8080/v1"
model = "qwen2.5-coder-32b"
api_key_env = ""
context_window = 32768
max_output_tokens = 4096
temperature = 0.7
price_input_per_mtok = 0
price_output_per_mtok = 0
price_cached_input_per_mtok = 0
cached_price_ratio = 0.25
requests_per_minute = 120
tokens_per_minute = 100000
concurrency = 2
stream = true
connect_timeout_s = 2.5
idle_timeout_s = 30
total_timeout_s = 900
max_retries = 3
retry_base_delay_s = 0.5
retry_max_delay_s = 20
retry_after_cap_s = 60
extra_body = { top_k = 20, chat_template_kwargs = { enable_thinking = false } }
omit_params = ["seed"]

[llm.gpt]
model = "gpt-4o"
price_input_per_mtok = 2.5
price_output_per_mtok = 10
)");
  ProfileSources s = sources();
  s.project_dir = project / "sub";  // found by walking up
  auto set = load_profiles(s);
  ASSERT_TRUE(set) << set.error().message;
  ASSERT_EQ(set->profiles.size(), 2u);
  EXPECT_EQ(set->default_name, "local");
  ASSERT_EQ(set->files.size(), 1u);
  auto p = resolve_profile("", {}, s);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "local");
  EXPECT_EQ(p->api_key_env, "");
  EXPECT_EQ(p->context_window, 32768);
  EXPECT_EQ(p->max_output_tokens, 4096);
  EXPECT_DOUBLE_EQ(p->temperature, 0.7);
  ASSERT_TRUE(p->cached_price_ratio);
  EXPECT_DOUBLE_EQ(*p->cached_price_ratio, 0.25);
  EXPECT_DOUBLE_EQ(cached_price_ratio(*p), 0.25);
  EXPECT_DOUBLE_EQ(p->requests_per_minute, 120);
  EXPECT_DOUBLE_EQ(p->tokens_per_minute, 100000);
  EXPECT_EQ(p->concurrency, 2);
  EXPECT_TRUE(p->stream);
  EXPECT_EQ(p->connect_timeout, 2500ms);
  EXPECT_EQ(p->idle_timeout, 30000ms);
  EXPECT_EQ(p->total_timeout, 900000ms);
  EXPECT_EQ(p->max_retries, 3);
  EXPECT_EQ(p->retry_base_delay, 500ms);
  EXPECT_EQ(p->retry_max_delay, 20000ms);
  EXPECT_EQ(p->retry_after_cap, 60000ms);
  EXPECT_EQ(
      nlohmann::json::parse(p->extra_body_json),
      nlohmann::json::parse(R"({"top_k":20,"chat_template_kwargs":{"enable_thinking":false}})"));
  ASSERT_EQ(p->omit_params.size(), 1u);
  EXPECT_NE(p->source.find("kope.toml:8"), std::string::npos) << p->source;
  auto gpt = resolve_profile("gpt", {}, s);
  ASSERT_TRUE(gpt) << gpt.error().message;
  EXPECT_EQ(gpt->provider, "openai");
  EXPECT_EQ(gpt->base_url, "https://api.openai.com/v1");  // provider default
  EXPECT_EQ(gpt->api_key_env, "OPENAI_API_KEY");
  EXPECT_DOUBLE_EQ(gpt->price_output_per_mtok, 10);
  auto missing = resolve_profile("nope", {}, s);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::not_found);
  EXPECT_NE(missing.error().message.find("gpt, local"), std::string::npos)
      << missing.error().message;
}

TEST_F(ProfileTest, UserAndProjectMergeKeyByKeyAndDotKopeConfigIsFound) {
  write(user, R"(
[llm.claude]
provider = "anthropic"
model = "claude-sonnet-4-5"
price_input_per_mtok = 3
price_output_per_mtok = 15
)");
  fs::create_directories(project / ".kope");
  write(project / ".kope" / "config.toml", R"(
[llm.claude]
max_output_tokens = 2000
)");
  auto p = resolve_profile("", {}, sources());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->provider, "anthropic");
  EXPECT_EQ(p->model, "claude-sonnet-4-5");
  EXPECT_EQ(p->base_url, "https://api.anthropic.com");
  EXPECT_EQ(p->api_key_env, "ANTHROPIC_API_KEY");
  EXPECT_EQ(p->max_output_tokens, 2000);
  EXPECT_DOUBLE_EQ(p->price_output_per_mtok, 15);
  EXPECT_NE(p->source.find("config.toml"), std::string::npos);
}

TEST_F(ProfileTest, OverridesAndDefaultSelection) {
  write(project / "kope.toml", R"(
[llm.a]
model = "m-a"
[llm.b]
model = "m-b"
)");
  auto none = resolve_profile("", {}, sources());
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("pass --profile NAME"), std::string::npos)
      << none.error().message;
  env.set("KOPE_PROFILE", "b");
  ProfileOverrides o;
  o.model = "m-override";
  o.temperature = 0.0;
  o.provider = "anthropic";
  o.max_retries = 0;
  auto p = resolve_profile("", o, sources());
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "b");
  EXPECT_EQ(p->model, "m-override");
  EXPECT_EQ(p->provider, "anthropic");
  EXPECT_EQ(p->base_url, "https://api.anthropic.com");  // the default followed the provider
  EXPECT_EQ(p->api_key_env, "ANTHROPIC_API_KEY");
  EXPECT_EQ(p->max_retries, 0);
  EXPECT_NE(p->source.find("command line"), std::string::npos);
}

// Each bad file must fail with "path:line:column:" and name the key.
TEST_F(ProfileTest, ErrorsNameFileLineAndKey) {
  struct Case {
    std::string toml;
    std::string line_col;
    std::string words;
  };
  std::vector<Case> cases = {
      {"[llm.x]\nmodle = \"m\"\n", ":2:1:", "unknown key 'modle' in [llm.x]"},
      {"[llm.x]\nmodel = \"m\"\ntemperature = \"hot\"\n",
       ":3:15:", "'temperature' in [llm.x] must be a number"},
      {"[llm.x]\nmodel = \"m\"\ntemperature = 3.5\n", ":3:15:", "between 0 and 2"},
      {"[llm.x]\nprovider = \"gemini\"\n", ":2:12:", "'provider' in [llm.x] must be \"openai\""},
      {"[llm.x]\nbase_url = \"localhost:8080\"\n", ":2:12:", "must start with http://"},
      {"[llm.x]\nconcurrency = 0\n", ":2:15:", "'concurrency' in [llm.x] must be between 1"},
      {"[llm.x]\nidle_timeout_s = 0\n",
       ":2:18:", "'idle_timeout_s' in [llm.x] must be more than 0"},
      {"[llm.x]\napi_key_env = \"sk-abcdefghijklmnopqrstuvwxyz\"\n",
       ":2:15:", "must name an environment variable"},
      {"[llm.x]\nstream = \"yes\"\n", ":2:10:", "'stream' in [llm.x] must be true or false"},
      {"[llm]\nmodel = \"m\"\n", ":2:1:", "unknown key 'model' in [llm]"},
      {"[llm]\ndefault = \"zz\"\n[llm.x]\nmodel = \"m\"\n",
       ":2:11:", "default = \"zz\" names no profile"},
      {"[llm.x]\nmodel = \"m\"\nmax_retries = -1\n",
       ":3:15:", "'max_retries' in [llm.x] must be between 0 and 100"},
      {"[llm.x]\nmodel = \"m\"\ncached_price_ratio = 1.5\n",
       ":3:22:", "'cached_price_ratio' in [llm.x] must be between 0 and 1"},
      {"[llm.x\nmodel = 1\n", ":1:", ""},  // TOML syntax error
  };
  for (const auto& c : cases) {
    write(project / "kope.toml", c.toml);
    auto set = load_profiles(sources());
    ASSERT_FALSE(set) << c.toml;
    EXPECT_EQ(set.error().kind, ErrorKind::config);
    const std::string& m = set.error().message;
    EXPECT_NE(m.find((project / "kope.toml").string() + c.line_col), std::string::npos) << m;
    EXPECT_NE(m.find(c.words), std::string::npos) << m;
    EXPECT_EQ(m.find("sk-abcdefghijklmnopqrstuvwxyz"), std::string::npos) << m;
  }
}

TEST_F(ProfileTest, ValidateProfileNamesTheProblem) {
  Profile p;
  p.name = "x";
  p.base_url = "http://localhost:1";
  auto st = validate_profile(p);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("no model set"), std::string::npos);
  p.model = "m";
  p.concurrency = 0;
  st = validate_profile(p);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("concurrency"), std::string::npos);
  p.concurrency = 1;
  EXPECT_TRUE(validate_profile(p));
}

TEST_F(ProfileTest, MakeClientNeedsAKeyForHostedApisOnly) {
  Profile p;
  p.name = "hosted";
  p.model = "gpt-4o";
  p.base_url = "https://api.openai.com/v1";
  auto c = make_client(p);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().kind, ErrorKind::config);
  EXPECT_NE(c.error().message.find("set $OPENAI_API_KEY"), std::string::npos) << c.error().message;
  p.base_url = "http://localhost:8080/v1";
  EXPECT_TRUE(make_client(p));
  p.base_url = "http://192.168.1.20:8000/v1";
  EXPECT_TRUE(make_client(p));
  p.base_url = "https://api.openai.com/v1";
  p.api_key_env = "";
  EXPECT_TRUE(make_client(p));
  p.model.clear();
  EXPECT_FALSE(make_client(p));
}

}  // namespace
}  // namespace kope::llm
