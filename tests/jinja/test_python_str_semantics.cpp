// Python's str semantics beyond ASCII, as the interpreter takes them from ICU's Unicode
// data: full case mapping (ß -> SS, final sigma, İ -> i + U+0307), and the character
// classes of isdigit / isalpha / isalnum / isspace / isprintable / isupper / islower.
// Every expected string is what Python 3.11's jinja2 renders for the same template.
#include <gtest/gtest.h>

#include "api/chat_template_test_util.h"

namespace spillway::api {
namespace {

struct Case {
  const char* source;
  const char* expected;
};

TEST(JinjaPythonStr, CaseMappingAndCharacterClassesFollowUnicode) {
  const Case cases[] = {
      {R"J({{ "straße".upper() }})J", "STRASSE"},
      {R"J({{ "ΣΑΣ ΟΔΟΣ".lower() }})J", "σας οδος"},
      {R"J({{ "İ".lower()|length }})J", "2"},
      {R"J({{ "ⓐﬁ".upper() }})J", "ⒶFI"},
      {R"J({{ "١٢٣".isdigit() }})J", "True"},
      {R"J({{ "ǅ".isupper() }} {{ "ǅ".islower() }})J", "False False"},
      {R"J({{ "日本".isalpha() }})J", "True"},
      {R"J({{ "Ⅻ".isalnum() }})J", "True"},
      {"{{ \"\u3000\x1f\".isspace() }}", "True"},
      {"{{ \"a\u00adb\".isprintable() }}", "False"},
      {R"J({{ "hello wörld"|upper }})J", "HELLO WÖRLD"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(testing::render_or_error(c.source), c.expected) << c.source;
  }
}

}  // namespace
}  // namespace spillway::api
