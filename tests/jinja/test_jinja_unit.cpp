// Unit tests of the Jinja interpreter, one test per feature. Every expected string is what
// Python jinja2 3.1.2 renders for the template in transformers' configuration (the
// environment of ../shared/testdata/chat_templates/render_with_jinja2.py); "ERROR" marks
// templates jinja2 rejects, and "ERROR: msg" the message of raise_exception.
#include <gtest/gtest.h>

#include "api/chat_template_test_util.h"

namespace spillway::api {
namespace {

struct Case {
  const char* source;
  const char* expected;
  const char* vars = "{}";
};

void check(const std::vector<Case>& cases) {
  auto defaults = nlohmann::ordered_json::parse(R"({"s": "abc", "l": [1, 2, 3], "d": {"a": 1, "b": [1, 2]}, "n": null, "u": "héllo wörld"})");
  for (const Case& c : cases) {
    nlohmann::ordered_json vars = defaults;
    const auto extra = nlohmann::ordered_json::parse(c.vars);
    for (auto it = extra.begin(); it != extra.end(); ++it) vars[it.key()] = it.value();
    const std::string got = testing::render_or_error(c.source, vars);
    const std::string want = c.expected;
    if (want == "ERROR") {
      EXPECT_EQ(got.rfind("ERROR: ", 0), 0u) << c.source << "\n  rendered: " << got;
    } else {
      EXPECT_EQ(got, want) << c.source;
    }
  }
}

TEST(JinjaUnit, Whitespace) {
  check({
      {R"J(a
  {% if true %}
  x
  {% endif %}
b)J",
       R"J(a
  x
b)J"},
      {R"J({% for i in l %}
  {{ i }}
{% endfor %}
)J",
       R"J(  1
  2
  3
)J"},
      {R"J(x  {{- s -}}  y)J",
       R"J(xabcy)J"},
      {R"J(line1
{%- if true -%}
  mid  
{%- endif -%}
end)J",
       R"J(line1midend)J"},
      {R"J(  {%+ if true %}z{% endif +%}
q)J",
       R"J(  z
q)J"},
      {R"J( {# c #}
w {#- c -#}   v)J",
       R"J(wv)J"},
      {R"J({{ 'a' }}
  {% if true %}t{% endif %})J",
       R"J(a
t)J"},
      {R"J(x {% if true %}y{% endif %} z)J",
       R"J(x y z)J"},
      {R"J({% raw %}
{{ not parsed }}{% endraw %}
y)J",
       R"J(
{{ not parsed }}y)J"},
      {R"J(a
bc
)J",
       R"J(a
b
c)J"},
      {R"J({%- for x in l -%}
  [{{ x }}]
{%- endfor -%})J",
       R"J([1][2][3])J"},
      {R"J({% generation %}gen {{ s }}{% endgeneration %})J",
       R"J(gen abc)J"},
  });
}

TEST(JinjaUnit, Literals) {
  check({
      {R"J({{ 'it\'s' }}|{{ "q\"q" }}|{{ 'a\tb' }}|{{ '\x41\u00e9\U0001F600' }}|{{ '\101' }}|{{ 'unk\q' }})J",
       R"J(it's|q"q|a	b|Aé😀|A|unk\q)J"},
      {R"J({{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2.50 }} {{ 1e-7 }})J",
       R"J(1000 31 15 5 1500.0 2.5 1e-07)J"},
      {R"J({{ true }} {{ True }} {{ false }} {{ none }} {{ None }})J",
       R"J(True True False None None)J"},
      {R"J({{ [1, 'a', none, true, 1.5] }} {{ (1,) }} {{ (1, 2) }} {{ {} }} {{ {'a': 1, 2: 'b'} }} {{ 'a' 'b' }})J",
       R"J([1, 'a', None, True, 1.5] (1,) (1, 2) {} {'a': 1, 2: 'b'} ab)J"},
  });
}

TEST(JinjaUnit, Arithmetic) {
  check({
      {R"J({{ 1 + 2 }} {{ 1 - 2.5 }} {{ 2 * 3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }})J",
       R"J(3 -1.5 6 3.5 2.0 3 -4 1 2 1024 0.5)J"},
      {R"J({{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 5 - -3 }})J",
       R"J(3.0 0.5 64 4 8)J"},
      {R"J({{ 'ab' * 3 }}{{ 3 * 'x' }}{{ [1] * 2 }}{{ 'x' * -2 }}|{{ [1, 2] + [3] }}{{ 'a' + 'b' }})J",
       R"J(abababxxx[1, 1]|[1, 2, 3]ab)J"},
      {R"J({{ 'a' ~ 1 ~ none ~ true ~ 1.0 ~ [1] ~ undefined_thing }})J",
       R"J(a1NoneTrue1.0[1])J"},
      {R"J({{ 1 + true }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 1e16 }} {{ 1e15 }} {{ 0.000123 }} {{ 1e-5 }} {{ -0.0 }})J",
       R"J(2 0.30000000000000004 0.3333333333333333 1e+16 1000000000000000.0 0.000123 1e-05 -0.0)J"},
      {R"J({{ 1 / 0 }})J",
       R"J(ERROR)J"},
      {R"J({{ 'a' + 1 }})J",
       R"J(ERROR)J"},
      {R"J({{ undefined_thing + 1 }})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, Logic) {
  check({
      {R"J({{ 1 < 2 }} {{ 2 <= 2 }} {{ 1 == 1.0 }} {{ [1, 2] < [1, 3] }} {{ [1] == (1,) }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }})J",
       R"J(True True True True False True False)J"},
      {R"J({{ true and 'x' }} {{ false and 'x' }} {{ 0 or 'y' }} {{ none or [] }} {{ not 0 }} {{ not not 1 }})J",
       R"J(x False y [] True True)J"},
      {R"J({{ 'b' in 'abc' }} {{ 2 in l }} {{ 'a' in d }} {{ 'z' not in d }} {{ 'x' in undefined_thing }})J",
       R"J(True True True True False)J"},
      {R"J({{ 'yes' if s else 'no' }} {{ 'x' if false }}|{{ 1 if false else 2 if false else 3 }})J",
       R"J(yes |3)J"},
      {R"J({{ 'a' < 1 }})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, Access) {
  check({
      {R"J({{ d.a }} {{ d['a'] }} {{ d.b[1] }} {{ d.b.1 }} {{ d.zz }}|{{ d.zz is defined }}|{{ n.zz }}|)J",
       R"J(1 1 2 2 |False||)J"},
      {R"J({{ l[0] }}{{ l[-1] }}{{ l[5] }}|{{ l[1:] }}{{ l[:-1] }}{{ l[::-1] }}{{ l[::2] }})J",
       R"J(13|[2, 3][1, 2][3, 2, 1][1, 3])J"},
      {R"J({{ s[0] }}{{ s[1:] }}{{ s[::-1] }}{{ u[1] }}{{ u|length }}{{ u[::-1] }})J",
       R"J(abccbaé11dlröw olléh)J"},
      {R"J({{ n.zz.yy }})J",
       R"J(ERROR)J"},
      {R"J({{ undefined_thing.zz }})J",
       R"J(ERROR)J"},
      {R"J({% set r = range(5) %}{{ r[1:3] }}{{ r[::-1]|list }})J",
       R"J(range(1, 3)[4, 3, 2, 1, 0])J"},
  });
}

TEST(JinjaUnit, StringMethods) {
  check({
      {R"J({{ '  a  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a'.lstrip() }}|{{ 'a\n'.rstrip('\n') }})J",
       R"J(a|a|a|a)J"},
      {R"J({{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }})J",
       R"J(['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c'] ['a,b', 'c'])J"},
      {R"J({{ 'abc'.startswith('a') }} {{ 'abc'.startswith(('x', 'ab')) }} {{ 'abc'.endswith('bc') }})J",
       R"J(True True True)J"},
      {R"J({{ "they're bill's".title() }} {{ 'aBC dEF'.capitalize() }} {{ 'MiXeD'.lower() }} {{ 'MiXeD'.upper() }})J",
       R"J(They'Re Bill'S Abc def mixed MIXED)J"},
      {R"J({{ 'aaa'.replace('a', 'b', 2) }} {{ 'héllo'.find('l') }} {{ 'hello'.count('l') }} {{ ', '.join(['a', 'b']) }})J",
       R"J(bba 2 2 a, b)J"},
      {R"J({{ '{} and {name}'.format('a', name='b') }} {{ '{:.2f}'.format(3.14159) }} {{ '%s-%03d' % ('a', 7) }})J",
       R"J(a and b 3.14 a-007)J"},
      {R"J({% set c = '<think>x</think>\n\nanswer' %}{{ c.split('</think>')[-1].lstrip('\n') }})J",
       R"J(answer)J"},
  });
}

TEST(JinjaUnit, DictListMethods) {
  check({
      {R"J({{ d.get('a') }}{{ d.get('q') }}{{ d.get('q', 'dflt') }}|{{ d.keys()|list }}{{ d.items()|list }})J",
       R"J(1Nonedflt|['a', 'b'][('a', 1), ('b', [1, 2])])J"},
      {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.values() }})J",
       R"J(a=1;b=[1, 2];dict_values([1, [1, 2]]))J"},
      {R"J({{ l.index(2) }}{{ l.count(1) }}{{ l.copy() }})J",
       R"J(11[1, 2, 3])J"},
      {R"J({{ l.append(4) }})J",
       R"J(ERROR)J"},
      {R"J({{ d.update({}) }})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, Filters) {
  check({
      {R"J({{ '  x  '|trim }}|{{ 'hello world'|title }}|{{ 'HELLO'|capitalize }}|{{ 'aaa'|replace('a', 'b') }}|{{ 'ab'|upper }}{{ 'AB'|lower }})J",
       R"J(x|Hello World|Hello|bbb|ABab)J"},
      {R"J({{ l|join(', ') }}|{{ l|first }}|{{ l|last }}|{{ l|length }}|{{ 'abc'|list }}|{{ l|reverse|list }}|{{ 'abc'|reverse }})J",
       R"J(1, 2, 3|1|3|3|['a', 'b', 'c']|[3, 2, 1]|cba)J"},
      {R"J({{ [3, 1, 2]|sort }}|{{ ['b', 'A', 'a']|sort }}|{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}|{{ {'b': 1, 'a': 2}|dictsort }})J",
       R"J([1, 2, 3]|['A', 'a', 'b']|[{'n': 1}, {'n': 2}]|[('a', 2), ('b', 1)])J"},
      {R"J({{ ['a', 'A', 'b']|unique|list }}|{{ l|map('string')|list }}|{{ [{'a': 1}, {'b': 2}]|map(attribute='a', default=9)|list }})J",
       R"J(['a', 'b']|['1', '2', '3']|[1, 9])J"},
      {R"J({{ l|select('odd')|list }}|{{ l|reject('odd')|list }}|{{ l|select('gt', 1)|list }}|{{ [0, 1, '']|select|list }})J",
       R"J([1, 3]|[2]|[2, 3]|[1])J"},
      {R"J({{ msgs|selectattr('role', 'equalto', 'user')|list|length }}|{{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|join(',') }})J",
       R"J(1|b,c)J",
       R"J({"msgs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "tool", "content": "c"}]})J"},
      {R"J({{ l|min }}|{{ l|max }}|{{ l|sum }}|{{ [{'v': 2}, {'v': 3}]|sum(attribute='v') }})J",
       R"J(1|3|6|5)J"},
      {R"J({{ 3.7|int }}|{{ '3.7'|int }}|{{ 'x'|int(5) }}|{{ 3|float }}|{{ '3.5'|float }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ -3|abs }})J",
       R"J(3|3|5|3.0|3.5|2.0|3.14|3)J"},
      {R"J({{ 1|string }}|{{ none|string }}|{{ undefined_thing|default('d') }}|{{ n|default('d') }}|{{ ''|default('d', true) }}|{{ 0|d('z', true) }})J",
       R"J(1|None|d|None|d|z)J"},
      {R"J({{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a b-c d'|wordcount }}|{{ l|batch(2)|list }}|{{ l|slice(2)|list }})J",
       R"J(a
    b

    c|  a
  b|4|[[1, 2], [3]]|[[1, 2], [3]])J"},
      {R"J({{ d|items|list }}|{{ '%s, %s'|format('x', 3) }}|{{ '<b>'|e }}|{{ '<b>'|safe }}|{{ 'Lorem ipsum dolor sit amet'|truncate(12) }})J",
       R"J([('a', 1), ('b', [1, 2])]|x, 3|&lt;b&gt;|<b>|Lorem...)J"},
      {R"J({{ l|select('odd')|length }})J",
       R"J(ERROR)J"},
      {R"J({{ x|nosuchfilter }})J",
       R"J(ERROR)J"},
      {R"J({% if false %}{{ x|nosuchfilter }}{% endif %}ok)J",
       R"J(ok)J"},
  });
}

TEST(JinjaUnit, Tojson) {
  check({
      {R"J({{ l|tojson }}|{{ d|tojson }}|{{ {'a': 'é"\n<>&\'', 'b': [1.0, none, true]}|tojson }}|{{ (1, 2)|tojson }})J",
       R"J([1, 2, 3]|{"a": 1, "b": [1, 2]}|{"a": "é\"\n<>&'", "b": [1.0, null, true]}|[1, 2])J"},
      {R"J({{ {'a': {'b': [1, 2]}, 'c': [], 'd': {}}|tojson(indent=2) }})J",
       R"J({
  "a": {
    "b": [
      1,
      2
    ]
  },
  "c": [],
  "d": {}
})J"},
      {R"J({{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ {'a': 'é😀'}|tojson(ensure_ascii=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ {1: 2, none: 3}|tojson }})J",
       R"J({"a": 2, "b": 1}|{"a": "\u00e9\ud83d\ude00"}|[1,2]|{"1": 2, "null": 3})J"},
      {R"J({{ undefined_thing|tojson }})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, Tests) {
  check({
      {R"J({{ n is none }} {{ n is defined }} {{ x is defined }} {{ x is undefined }} {{ true is boolean }} {{ 1 is true }} {{ false is false }})J",
       R"J(True True False True True False True)J"},
      {R"J({{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ true is number }} {{ s is string }} {{ d is mapping }} {{ l is sequence }} {{ d is sequence }} {{ x is sequence }})J",
       R"J(True False True True True True True True True)J"},
      {R"J({{ l is iterable }} {{ s is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }})J",
       R"J(True True False True True True True)J"},
      {R"J({{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 2 is gt 1 }} {{ 2 is in l }} {{ range is callable }} {{ 'abc' is lower }} {{ 'upper' is filter }})J",
       R"J(True False True True True True True)J"},
  });
}

TEST(JinjaUnit, Statements) {
  check({
      {R"J({% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %})J",
       R"J(c)J"},
      {R"J({% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %})J",
       R"J(1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|)J"},
      {R"J({% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }};{% endfor %})J",
       R"J(-2-a;1-3-b;2--a;)J"},
      {R"J({% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}{{ loop.last }},{% else %}none{% endfor %}{% for x in [] %}a{% else %}empty{% endfor %})J",
       R"J(1/2False,2/2True,empty)J"},
      {R"J({% for x in l %}{% for y in l %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %})J",
       R"J(1231|1232|1233|)J"},
      {R"J({% for x in l %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x == 3 %}{% break %}{% endif %}{% endfor %})J",
       R"J(13)J"},
      {R"J({% for a, b in [(1, 2), (3, 4)] %}{{ a }}{{ b }}{% endfor %}{% for k, v in {'x': 1}.items() %}{{ k }}{{ v }}{% endfor %})J",
       R"J(1234x1)J"},
      {R"J({% for item in [{'c': [{'c': []}, {'c': []}]}] recursive %}<{{ loop.depth }}{{ loop(item.c) }}>{% endfor %})J",
       R"J(<1<2><2>>)J"},
      {R"J({% for x in l %}{{ loop.changed(x // 2) }}{% endfor %})J",
       R"J(TrueTrueFalse)J"},
      {R"J({% for a, b in [[1]] %}{% endfor %})J",
       R"J(ERROR)J"},
      {R"J({% break %})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, Scoping) {
  check({
      {R"J({% set x = 0 %}{% for i in range(3) %}{{ x }}{% set x = i %}{% endfor %}{{ x }})J",
       R"J(0000)J"},
      {R"J({% if true %}{% set y = 5 %}{% endif %}{{ y }}|{% for x in l %}{% set z = x %}{% endfor %}{{ z }}|)J",
       R"J(5||)J"},
      {R"J({% set ns = namespace(a=1) %}{% for x in l %}{% set ns.a = ns.a + x %}{% endfor %}{{ ns.a }}|{{ ns }})J",
       R"J(7|<Namespace {'a': 7}>)J"},
      {R"J({% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }})J",
       R"J(12(1, 2))J"},
      {R"J({% set x %}  a {{ 1 }} {% endset %}[{{ x }}]{% set y | upper | trim %}  abc  {% endset %}[{{ y }}])J",
       R"J([  a 1 ][ABC])J"},
      {R"J({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|)J",
       R"J(3|)J"},
      {R"J({% set x = 1 %}{% set x.y = 2 %})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, Macros) {
  check({
      {R"J({% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}|{{ m(1, c=3) }}|{{ m(a=5) }}|{{ m() }})J",
       R"J(1BNone|12None|1B3|5BNone|BNone)J"},
      {R"J({% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 2, 3, z=4) }})J",
       R"J(11!(){}|12(3,){'z': 4})J"},
      {R"J({% macro m(a) %}[{{ caller(a) }}]{% endmacro %}{% call(x) m(5) %}in{{ x }}{% endcall %})J",
       R"J([in5])J"},
      {R"J({% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }})J",
       R"J(12)J"},
      {R"J({% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }})J",
       R"J(120)J"},
      {R"J({% filter upper %}hello {{ s }}{% endfilter %})J",
       R"J(HELLO ABC)J"},
      {R"J({% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, UndefinedAndNone) {
  check({
      {R"J([{{ x }}][{{ none }}][{{ x|length }}][{{ x|list }}][{{ x == y }}][{{ x is none }}][{% for i in x %}i{% endfor %}])J",
       R"J([][None][0][[]][True][False][])J"},
      {R"J({{ x|trim }}|{{ x ~ 'a' }}|{{ n ~ 'a' }}|{{ n|string }}|{{ (x if false) is defined }})J",
       R"J(|a|Nonea|None|False)J"},
      {R"J({{ x.attr }})J",
       R"J(ERROR)J"},
      {R"J({{ x['k'] }})J",
       R"J(ERROR)J"},
  });
}

TEST(JinjaUnit, Printing) {
  check({
      {R"J({{ [1, [2, [3]]] }} {{ {'k': {'n': none}} }} {{ ["it's", 'say "hi"', 'both \' "'] }})J",
       R"J([1, [2, [3]]] {'k': {'n': None}} ["it's", 'say "hi"', 'both \' "'])J"},
      {R"J({{ ['\n', '\t', '\x00', 'é', '\u00a0', '😀', '\\'] }})J",
       R"J(['\n', '\t', '\x00', 'é', '\xa0', '😀', '\\'])J"},
      {R"J({{ 1.5e300 }} {{ 1e22 }} {{ 0.1 }} {{ 1/7 }} {{ 2.0**60 }} {{ 1e-4 }} {{ 100.0 }} {{ 3.0 * 2 }})J",
       R"J(1.5e+300 1e+22 0.1 0.14285714285714285 1.152921504606847e+18 0.0001 100.0 6.0)J"},
      {R"J({{ d.items() }} {{ d.keys() }} {{ range(3) }} {{ range(0, 10, 3) }} {{ (1,) }})J",
       R"J(dict_items([('a', 1), ('b', [1, 2])]) dict_keys(['a', 'b']) range(0, 3) range(0, 10, 3) (1,))J"},
  });
}

TEST(JinjaUnit, Globals) {
  check({
      {R"J({{ range(3)|list }} {{ range(1, 4)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=2) }} {{ dict([('x', 1)]) }})J",
       R"J([0, 1, 2] [1, 2, 3] [5, 3, 1] {'a': 1, 'b': 2} {'x': 1})J"},
      {R"J({% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{% set j = joiner('|') %}{{ j() }}x{{ j() }}y)J",
       R"J(abax|y)J"},
      {R"J({{ strftime_now('%Y-%m-%d %H:%M %d %b %Y') }})J",
       R"J(2024-07-26 12:00 26 Jul 2024)J"},
      {R"J({{ raise_exception('custom message') }})J",
       R"J(ERROR: custom message)J"},
      {R"J({{ range(100001) }})J",
       R"J(ERROR)J"},
      {R"J({{ messages|length }}{% for m in messages %}{{ m.role }}:{{ m['content'] }};{% endfor %}{{ add_generation_prompt }}{{ tools }}{{ documents }})J",
       R"J(2user:hi;assistant:yo;TrueNoneNone)J",
       R"J({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})J"},
  });
}

}  // namespace
}  // namespace spillway::api
