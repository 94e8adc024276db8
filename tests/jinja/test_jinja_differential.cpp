// Differential test: every template of jinja_corpus.txt renders exactly as Python jinja2
// renders it with transformers' configuration (or fails where jinja2 fails). Needs python3
// with jinja2 (Debian python3-jinja2; set SPILLWAY_PYTHON to pick the interpreter); skipped
// otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "api/chat_template_test_util.h"
#include "support/paths.h"

namespace spillway::api {
namespace {

using nlohmann::ordered_json;
using testing::chat_templates_dir;
using testing::read_file;
using testing::render_or_error;

// This folder of the source tree (not __FILE__: a compiler cache may pass a relative path).
std::string source_dir() { return spillway::test_paths::source() + "/tests/jinja"; }

std::string python() {
  const char* p = std::getenv("SPILLWAY_PYTHON");
  return p != nullptr ? p : "python3";
}

bool have_jinja2() { return std::system((python() + " -c 'import jinja2' >/dev/null 2>&1").c_str()) == 0; }

// Renders in = [{"template", "vars"}, ...] with jinja2 (jinja_reference.py).
ordered_json reference(const ordered_json& in, const std::string& tag) {
  const std::string base = "/tmp/spillway_jinja_" + tag + "_" + std::to_string(getpid());
  {
    std::ofstream f(base + "_in.json", std::ios::binary);
    f << in.dump();
  }
  const std::string cmd = python() + " '" + source_dir() + "/jinja_reference.py' '" + chat_templates_dir() + "' '" +
                          base + "_in.json' '" + base + "_out.json'";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  ordered_json out = rc == 0 ? ordered_json::parse(read_file(base + "_out.json")) : ordered_json::array();
  std::remove((base + "_in.json").c_str());
  std::remove((base + "_out.json").c_str());
  return out;
}

struct Case {
  std::string text;
  ordered_json vars;
};

std::vector<Case> load_corpus() {
  std::string all = read_file(source_dir() + "/jinja_corpus.txt");
  // Header comment lines.
  while (!all.empty() && all[0] == '#') {
    const size_t nl = all.find('\n');
    all = nl == std::string::npos ? "" : all.substr(nl + 1);
  }
  if (!all.empty() && all.back() == '\n') all.pop_back();
  const ordered_json defaults = ordered_json::parse(R"({
    "s": "abc", "l": [1, 2, 3], "d": {"a": 1, "b": [1, 2], "items": 5}, "n": null, "f": 1.5,
    "t": true, "u": "héllo wörld", "ws": "  padded \n ",
    "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
             {"role": "assistant", "content": "yo", "tool_calls": [{"id": "1"}]}]})");
  std::vector<Case> cases;
  const std::string sep = "\n%%%%\n";
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find(sep, pos);
    if (end == std::string::npos) end = all.size();
    Case c;
    c.text = all.substr(pos, end - pos);
    c.vars = defaults;
    if (c.text.rfind("vars: ", 0) == 0) {
      const size_t nl = c.text.find('\n');
      const auto extra = ordered_json::parse(c.text.substr(6, nl - 6));
      for (auto it = extra.begin(); it != extra.end(); ++it) c.vars[it.key()] = it.value();
      c.text = c.text.substr(nl + 1);
    }
    cases.push_back(std::move(c));
    pos = end + sep.size();
  }
  return cases;
}

TEST(JinjaDifferential, CorpusMatchesPythonJinja2) {
  if (!have_jinja2()) GTEST_SKIP() << "python3 with jinja2 not available (apt-get install python3-jinja2)";
  const std::vector<Case> cases = load_corpus();
  ASSERT_GT(cases.size(), 250u);
  ordered_json in = ordered_json::array();
  for (const Case& c : cases) in.push_back({{"template", c.text}, {"vars", c.vars}});
  const auto ref = reference(in, "corpus");
  ASSERT_EQ(ref.size(), cases.size());

  int mismatches = 0;
  int errors_matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string ours = render_or_error(cases[i].text, cases[i].vars);
    const bool ours_failed = ours.rfind("ERROR: ", 0) == 0;
    if (ref[i].contains("ok")) {
      const std::string want = ref[i]["ok"].get<std::string>();
      if (ours != want) {
        ++mismatches;
        ADD_FAILURE() << "case " << i << ":\n" << cases[i].text << "\n--- jinja2:\n" << want << "\n--- ours:\n" << ours;
      }
      continue;
    }
    const std::string err = ref[i]["error"].get<std::string>();
    if (!ours_failed) {
      ++mismatches;
      ADD_FAILURE() << "case " << i << ":\n" << cases[i].text << "\n--- jinja2 raised: " << err << "\n--- ours:\n" << ours;
      continue;
    }
    const std::string prefix = "TemplateError: ";
    if (err.rfind(prefix, 0) == 0 && ours != "ERROR: " + err.substr(prefix.size())) {
      ++mismatches;
      ADD_FAILURE() << "case " << i << ": raise_exception message differs\n--- jinja2: " << err << "\n--- ours: " << ours;
      continue;
    }
    ++errors_matched;
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(errors_matched, 30);
  std::printf("differential corpus: %zu cases, %d mismatches, %d expected errors\n", cases.size(), mismatches,
              errors_matched);
}

// The fallback templates render as jinja2 renders them, with and without bos/eos tokens.
TEST(JinjaDifferential, BuiltinTemplatesMatchPythonJinja2) {
  if (!have_jinja2()) GTEST_SKIP() << "python3 with jinja2 not available";
  const auto golden = ordered_json::parse(read_file(chat_templates_dir() + "qwen2.5.expected.json"));
  ordered_json in = ordered_json::array();
  for (const char* family : {"chatml", "llama3", "llama2", "mistral", "gemma", "phi3"}) {
    const auto source = builtin_chat_template(family);
    ASSERT_TRUE(source.has_value()) << family;
    for (const auto& c : golden) {
      if (!c["tools"].is_null()) continue;
      for (int variant = 0; variant < 3; ++variant) {
        ordered_json vars = {{"messages", c["messages"]}, {"add_generation_prompt", variant != 2}};
        if (variant > 0) {
          vars["bos_token"] = "<s>";
          vars["eos_token"] = "</s>";
        }
        in.push_back({{"template", *source}, {"vars", vars}});
      }
    }
  }
  const auto ref = reference(in, "builtin");
  ASSERT_EQ(ref.size(), in.size());
  int rendered = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string ours = render_or_error(in[i]["template"].get<std::string>(), in[i]["vars"]);
    if (ref[i].contains("ok")) {
      EXPECT_EQ(ours, ref[i]["ok"].get<std::string>()) << in[i].dump();
      ++rendered;
    } else {
      EXPECT_EQ(ours.rfind("ERROR", 0), 0u) << in[i].dump() << "\n" << ref[i].dump();
    }
  }
  EXPECT_GE(rendered, 48);
}

// Renders every *.jinja file of $SPILLWAY_EXTRA_CHAT_TEMPLATES (a folder of real models'
// templates, e.g. llama.cpp's models/templates) with the golden conversations and a few
// variants, through both jinja2 and spillway. Skipped when the variable is unset.
TEST(JinjaDifferential, ExtraTemplatesFolder) {
  const char* dir = std::getenv("SPILLWAY_EXTRA_CHAT_TEMPLATES");
  if (dir == nullptr) GTEST_SKIP() << "set SPILLWAY_EXTRA_CHAT_TEMPLATES to a folder of .jinja files";
  if (!have_jinja2()) GTEST_SKIP() << "python3 with jinja2 not available";
  const std::string list_file = "/tmp/spillway_jinja_extra_" + std::to_string(getpid()) + ".txt";
  ASSERT_EQ(std::system(("ls '" + std::string(dir) + "'/*.jinja > '" + list_file + "'").c_str()), 0);
  std::vector<std::string> files;
  {
    std::ifstream in(list_file);
    for (std::string line; std::getline(in, line);) files.push_back(line);
  }
  std::remove(list_file.c_str());
  // Conversations: the golden ones (qwen2.5 has all four) plus variants.
  const auto golden = ordered_json::parse(read_file(chat_templates_dir() + "qwen2.5.expected.json"));
  std::vector<ordered_json> convs;
  for (const auto& c : golden) {
    ordered_json v = {{"messages", c["messages"]}, {"tools", c["tools"]}};
    convs.push_back(v);
    ordered_json no_gen = v;
    no_gen["add_generation_prompt"] = false;
    convs.push_back(no_gen);
  }
  ordered_json openai = convs[6];  // tool call with content null and string arguments
  openai["messages"][1]["content"] = nullptr;
  openai["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{\"location\": \"Paris\"}";
  convs.push_back(openai);
  ordered_json parts = convs[0];
  parts["messages"][1]["content"] = ordered_json::parse(R"([{"type": "text", "text": " Hi there "}, {"type": "text", "text": "again"}])");
  convs.push_back(parts);
  ordered_json think = convs[4];
  think["messages"][1]["content"] = "<think>\nhmm\n</think>\n\nHello Ana!";
  convs.push_back(think);
  ordered_json in = ordered_json::array();
  std::vector<std::pair<std::string, ordered_json>> cases;
  for (const std::string& f : files) {
    const std::string text = read_file(f);
    for (const auto& conv : convs) {
      for (int tokens = 0; tokens < 2; ++tokens) {
        ordered_json vars = conv;
        if (tokens == 1) {
          vars["bos_token"] = "<s>";
          vars["eos_token"] = "</s>";
        }
        in.push_back({{"template", text}, {"vars", vars}});
        cases.emplace_back(f, vars);
      }
    }
  }
  const auto ref = reference(in, "extra");
  ASSERT_EQ(ref.size(), cases.size());
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string ours = render_or_error(in[i]["template"].get<std::string>(), cases[i].second);
    const bool ours_failed = ours.rfind("ERROR: ", 0) == 0;
    const bool same = ref[i].contains("ok") ? ours == ref[i]["ok"].get<std::string>() : ours_failed;
    if (!same) {
      ++mismatches;
      ADD_FAILURE() << cases[i].first << " with " << cases[i].second.dump() << "\n--- jinja2:\n"
                    << ref[i].dump() << "\n--- ours:\n" << ours;
    }
  }
  std::printf("extra templates: %zu files, %zu renders, %d mismatches\n", files.size(), cases.size(), mismatches);
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace spillway::api
