#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "grammar/regex.h"

namespace spillway::grammar {

namespace {

using ojson = nlohmann::ordered_json;

const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$comment", "deprecated", "readOnly",
    "writeOnly", "$schema", "contentMediaType", "contentEncoding", "$defs", "definitions"};
const std::set<std::string> kHandled = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items",
    "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minProperties", "maxProperties", "nullable", "uniqueItems"};
const std::vector<std::string> kAllTypes = {"null", "boolean", "object", "array", "string", "number"};

std::string pointer_token(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

struct IntBound { int64_t v; bool excl; };

// Canonical text of a JSON value: compact, keys in byte order when sorted.
std::string dump_value(const ojson& v, bool sorted) {
  if (sorted) return nlohmann::json::parse(v.dump()).dump();
  return v.dump();
}

class SchemaCompiler {
 public:
  SchemaCompiler(const ojson& root, const JsonSchemaOptions& o) : root_(root), opts_(o), draft7_(o.draft7) {
    if (root.is_object() && root.contains("$schema") && root["$schema"].is_string()) {
      const std::string s = root["$schema"];
      draft7_ = draft7_ || s.find("draft-07") != std::string::npos || s.find("draft-06") != std::string::npos;
    }
  }

  Result<Grammar> run() {
    p_ = add_json_pieces(g_);
    auto root = ref_call("");
    if (!root) return root.error();
    g_.set_root(g_.add_rule("root", *root));
    return std::move(g_);
  }

  SchemaIssue issue;

 private:
  Error unsupported(const std::string& keyword, const std::string& ptr, const std::string& why = "") {
    issue = {keyword, keyword.empty() ? ptr : ptr + "/" + pointer_token(keyword)};
    std::string msg = keyword.empty() ? "invalid JSON Schema" : "unsupported JSON Schema keyword '" + keyword + "'";
    msg += " at '" + (issue.pointer.empty() ? std::string("/") : issue.pointer) + "'";
    if (!why.empty()) msg += ": " + why;
    return Error{msg};
  }

  Result<const ojson*> resolve(const std::string& ref, const std::string& ptr) {
    if (ref.empty() || ref[0] != '#') return unsupported("$ref", ptr, "only local references (#/...) are supported, not '" + ref + "'");
    std::string frag;
    for (size_t i = 1; i < ref.size(); ++i) {
      if (ref[i] == '%' && i + 2 < ref.size()) {
        frag += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        frag += ref[i];
      }
    }
    if (!frag.empty() && frag[0] != '/') return unsupported("$ref", ptr, "anchor references are not supported ('" + ref + "')");
    try {
      ojson::json_pointer jp(frag);
      if (!root_.contains(jp)) return unsupported("$ref", ptr, "'" + ref + "' does not resolve");
      return &root_.at(jp);
    } catch (const std::exception&) {
      return unsupported("$ref", ptr, "'" + ref + "' is not a valid JSON pointer");
    }
  }

  Result<ExprId> ref_call(const std::string& pointer) {
    auto it = ref_rules_.find(pointer);
    if (it != ref_rules_.end()) return g_.call(it->second);
    RuleId r = g_.declare_rule("ref" + std::to_string(ref_rules_.size()));
    ref_rules_[pointer] = r;
    const ojson* target = &root_;
    if (!pointer.empty()) {
      auto t = resolve("#" + pointer, pointer);
      if (!t) return t.error();
      target = *t;
    }
    auto body = gen(*target, pointer);
    if (!body) return body.error();
    g_.define_rule(r, *body);
    return g_.call(r);
  }

  Result<ExprId> ref_target_call(const std::string& ref, const std::string& ptr) {
    if (ref.empty() || ref[0] != '#') return unsupported("$ref", ptr, "only local references (#/...) are supported, not '" + ref + "'");
    auto t = resolve(ref, ptr);
    if (!t) return t.error();
    std::string frag = ref.substr(1);
    // Canonical pointer text for the cache: decode %xx the same way resolve() does.
    std::string canon;
    for (size_t i = 0; i < frag.size(); ++i) {
      if (frag[i] == '%' && i + 2 < frag.size()) { canon += static_cast<char>(std::stoi(frag.substr(i + 1, 2), nullptr, 16)); i += 2; }
      else canon += frag[i];
    }
    return ref_call(canon);
  }

  static bool is_annotation_only(const ojson& s) {
    if (!s.is_object()) return false;
    for (auto& [k, v] : s.items()) if (!kAnnotations.count(k)) return false;
    return true;
  }

  // Replaces a top-level $ref by its target merged with the siblings (2020-12) or by the
  // target alone (draft 7).
  Result<ojson> inline_ref(ojson s, const std::string& ptr) {
    for (int guard = 0; s.is_object() && s.contains("$ref"); ++guard) {
      if (guard > 32) return unsupported("$ref", ptr, "reference chain too long");
      if (!s["$ref"].is_string()) return unsupported("$ref", ptr, "not a string");
      auto t = resolve(s["$ref"].get<std::string>(), ptr);
      if (!t) return t.error();
      ojson rest = s;
      rest.erase("$ref");
      if (draft7_ || is_annotation_only(rest)) { s = **t; continue; }
      ojson merged = **t;
      SPILLWAY_TRY(merge_into(merged, rest, ptr));
      s = std::move(merged);
    }
    return s;
  }

  static std::vector<std::string> type_list(const ojson& t) {
    std::vector<std::string> out;
    if (t.is_string()) out.push_back(t.get<std::string>());
    else if (t.is_array()) for (auto& x : t) if (x.is_string()) out.push_back(x.get<std::string>());
    return out;
  }

  Status merge_into(ojson& a, ojson b, const std::string& ptr) {
    if (b.is_boolean()) { if (!b.get<bool>()) a = false; return {}; }
    if (a.is_boolean()) { if (a.get<bool>()) a = ojson::object(); else return {}; }
    if (!b.is_object()) return unsupported("allOf", ptr, "a member is not a schema");
    if (b.contains("$ref")) {
      auto r = inline_ref(b, ptr);
      if (!r) return r.error();
      b = std::move(*r);
      if (b.is_boolean()) return merge_into(a, b, ptr);
    }
    if (b.contains("allOf")) {
      ojson parts = b["allOf"];
      b.erase("allOf");
      SPILLWAY_TRY(merge_into(a, b, ptr));
      for (auto& p : parts) SPILLWAY_TRY(merge_into(a, p, ptr));
      return {};
    }
    auto has_props = [](const ojson& s) { return s.is_object() && (s.contains("properties") || s.contains("additionalProperties")); };
    auto closed = [](const ojson& s) { return s.is_object() && s.contains("additionalProperties") && s["additionalProperties"] != ojson(true); };
    if ((closed(a) && has_props(b)) || (closed(b) && has_props(a)))
      return unsupported("allOf", ptr, "additionalProperties combined with properties of another member");
    for (auto& [k, v] : b.items()) {
      if (kAnnotations.count(k)) { if (!a.contains(k)) a[k] = v; continue; }
      if (!a.contains(k)) { a[k] = v; continue; }
      ojson& av = a[k];
      if (k == "properties") {
        for (auto& [pk, pv] : v.items()) {
          if (av.contains(pk)) av[pk] = ojson{{"allOf", ojson::array({av[pk], pv})}};
          else av[pk] = pv;
        }
      } else if (k == "required") {
        for (auto& r : v) if (std::find(av.begin(), av.end(), r) == av.end()) av.push_back(r);
      } else if (k == "type") {
        auto ta = type_list(av), tb = type_list(v);
        ojson out = ojson::array();
        for (auto& t : ta) {
          bool in_b = std::find(tb.begin(), tb.end(), t) != tb.end();
          if (in_b) out.push_back(t);
          else if (t == "integer" && std::find(tb.begin(), tb.end(), "number") != tb.end()) out.push_back(t);
          else if (t == "number" && std::find(tb.begin(), tb.end(), "integer") != tb.end()) out.push_back("integer");
        }
        if (out.empty()) { a = false; return {}; }
        av = out;
      } else if (k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum" || k == "minProperties") {
        if (v.is_number() && av.is_number() && v.get<double>() > av.get<double>()) av = v;
      } else if (k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum" || k == "maxProperties") {
        if (v.is_number() && av.is_number() && v.get<double>() < av.get<double>()) av = v;
      } else if (av != v) {
        return unsupported("allOf", ptr, "members disagree on '" + k + "'");
      }
    }
    return {};
  }

  Result<ExprId> gen(const ojson& s, const std::string& ptr) {
    if (++depth_ > 200) return unsupported("", ptr, "schema nested too deeply");
    struct Guard { int& d; ~Guard() { --d; } } guard{depth_};
    if (s.is_boolean()) return s.get<bool>() ? g_.call(p_.value) : g_.nothing();
    if (!s.is_object()) return unsupported("", ptr, "a schema must be an object or a boolean");
    for (auto& [k, v] : s.items()) {
      if (kAnnotations.count(k) || kHandled.count(k)) continue;
      if (k == "$id" && ptr.empty()) continue;
      if (k == "additionalItems" && draft7_) continue;
      if (k == "prefixItems" && !draft7_) continue;
      return unsupported(k, ptr);
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return unsupported("$ref", ptr, "not a string");
      ojson rest = s;
      rest.erase("$ref");
      if (draft7_ || is_annotation_only(rest)) return ref_target_call(s["$ref"].get<std::string>(), ptr);
      auto merged = inline_ref(s, ptr);
      if (!merged) return merged.error();
      return gen(*merged, ptr);
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array()) return unsupported("allOf", ptr, "not an array");
      ojson merged = s;
      merged.erase("allOf");
      for (auto& part : s["allOf"]) SPILLWAY_TRY(merge_into(merged, part, ptr));
      return gen(merged, ptr);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) {
      if (s.contains("anyOf") && s.contains("oneOf")) return unsupported("oneOf", ptr, "together with anyOf");
      const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
      if (!s[key].is_array()) return unsupported(key, ptr, "not an array");
      ojson rest = s;
      rest.erase(key);
      std::vector<ExprId> alts;
      for (size_t i = 0; i < s[key].size(); ++i) {
        const std::string bptr = ptr + "/" + key + "/" + std::to_string(i);
        Result<ExprId> e = Error{};
        if (is_annotation_only(rest)) {
          e = gen(s[key][i], bptr);
        } else {
          ojson merged = rest;
          SPILLWAY_TRY(merge_into(merged, s[key][i], bptr));
          e = gen(merged, bptr);
        }
        if (!e) return e.error();
        alts.push_back(*e);
      }
      return g_.alt(std::move(alts));
    }
    return gen_plain(s, ptr);
  }

  Result<ExprId> gen_plain(const ojson& s, const std::string& ptr) {
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (!s["type"].is_string() && !s["type"].is_array()) return unsupported("type", ptr, "not a string or array");
      types = type_list(s["type"]);
      for (auto& t : types)
        if (t != "integer" && std::find(kAllTypes.begin(), kAllTypes.end(), t) == kAllTypes.end())
          return unsupported("type", ptr, "unknown type '" + t + "'");
    } else {
      types = kAllTypes;
    }
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) return unsupported("nullable", ptr, "not a boolean");
      if (s["nullable"].get<bool>()) types.push_back("null");
    }
    bool has_number = std::find(types.begin(), types.end(), "number") != types.end();
    if (s.contains("enum") || s.contains("const")) {
      std::vector<ojson> values;
      if (s.contains("const")) values.push_back(s["const"]);
      if (s.contains("enum")) {
        if (!s["enum"].is_array()) return unsupported("enum", ptr, "not an array");
        for (auto& v : s["enum"]) {
          if (s.contains("const") && v != s["const"]) continue;
          values.push_back(v);
        }
        if (s.contains("const")) values.erase(values.begin());
      }
      for (auto& [k, v] : s.items())
        if (!kAnnotations.count(k) && k != "enum" && k != "const" && k != "type" && k != "$id")
          return unsupported(k, ptr, "together with enum/const");
      std::vector<ExprId> alts;
      for (auto& v : values) {
        std::string t = v.is_null() ? "null" : v.is_boolean() ? "boolean" : v.is_object() ? "object"
                      : v.is_array() ? "array" : v.is_string() ? "string" : v.is_number_integer() || v.is_number_unsigned() ? "integer" : "number";
        bool ok = std::find(types.begin(), types.end(), t) != types.end() ||
                  (t == "integer" && has_number) ||
                  (t == "number" && std::find(types.begin(), types.end(), "integer") != types.end() &&
                   std::floor(v.get<double>()) == v.get<double>());
        if (!ok) continue;
        alts.push_back(g_.literal(dump_value(v, opts_.sorted_properties)));
        if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 1e15)
          alts.push_back(g_.literal(std::to_string(static_cast<int64_t>(v.get<double>()))));
        if (v.is_number_integer() || v.is_number_unsigned()) alts.push_back(g_.literal(v.dump() + ".0"));
      }
      return g_.alt(std::move(alts));
    }
    std::vector<ExprId> alts;
    for (const auto& t : types) {
      Result<ExprId> e = Error{};
      if (t == "null") e = g_.literal("null");
      else if (t == "boolean") e = g_.alt({g_.literal("true"), g_.literal("false")});
      else if (t == "string") e = gen_string(s, ptr);
      else if (t == "number") e = gen_number(s, ptr, false);
      else if (t == "integer") { if (has_number) continue; e = gen_number(s, ptr, true); }
      else if (t == "array") e = gen_array(s, ptr);
      else if (t == "object") e = gen_object(s, ptr);
      if (!e) return e.error();
      alts.push_back(*e);
    }
    return g_.alt(std::move(alts));
  }

  Result<std::optional<uint32_t>> count(const ojson& s, const char* key, const std::string& ptr) {
    if (!s.contains(key)) return std::optional<uint32_t>{};
    const ojson& v = s[key];
    if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>())
      return unsupported(key, ptr, "not a non-negative integer");
    double d = v.get<double>();
    return std::optional<uint32_t>{d > 1e9 ? 1000000000u : static_cast<uint32_t>(d)};
  }

  Result<ExprId> gen_string(const ojson& s, const std::string& ptr) {
    auto mn = count(s, "minLength", ptr);
    if (!mn) return mn.error();
    auto mx = count(s, "maxLength", ptr);
    if (!mx) return mx.error();
    ExprId body;
    if (s.contains("pattern") || s.contains("format")) {
      std::string re, key = s.contains("pattern") ? "pattern" : "format";
      if (s.contains("pattern") && s.contains("format")) return unsupported("format", ptr, "together with pattern");
      if (*mn || *mx) return unsupported(key, ptr, "together with minLength/maxLength");
      if (!s[key].is_string()) return unsupported(key, ptr, "not a string");
      if (key == "pattern") {
        re = s["pattern"].get<std::string>();
      } else {
        // Calendar-exact dates (30-day months, February 29 in leap years only).
        static const std::string leap = R"((\d\d(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00))";
        static const std::string date =
            R"((\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|02-(0[1-9]|1\d|2[0-8]))|)" +
            leap + "-02-29)";
        static const std::string time = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([zZ]|[+-]([01]\d|2[0-3]):[0-5]\d))";
        static const std::string label = R"([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)";
        static const std::string octet = R"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
        static const std::map<std::string, std::string> formats = {
            {"date", "^" + date + "$"},
            {"time", "^" + time + "$"},
            {"date-time", "^" + date + "[Tt]" + time + "$"},  // leap seconds (:60) not generated
            {"uuid", R"(^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$)"},
            {"email", R"(^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@)" + label + R"((\.)" + label + ")*$"},
            {"hostname", "^" + label + R"((\.)" + label + ")*$"},
            {"ipv4", "^(" + octet + R"(\.){3})" + octet + "$"},
            {"uri", R"(^[a-zA-Z][a-zA-Z0-9+.-]*:[^\s"<>\\^`{|}]*$)"},
        };
        auto it = formats.find(s["format"].get<std::string>());
        if (it == formats.end()) return unsupported("format", ptr, "format '" + s["format"].get<std::string>() + "' is not supported");
        re = it->second;
      }
      auto e = compile_regex(g_, re, RegexMode::kJsonString, p_.string_char);
      if (!e) return unsupported(key, ptr, e.error().message);
      body = *e;
    } else {
      body = g_.repeat(p_.string_char, mn->value_or(0), mx->value_or(kUnbounded));
      if (!*mn && !*mx) body = p_.string_body;
    }
    return g_.seq({g_.literal("\""), body, g_.literal("\"")});
  }

  // ---- numbers -------------------------------------------------------------------
  ExprId digits(uint32_t n) { return g_.repeat(g_.byte_range('0', '9'), n, n); }
  ExprId ge(const std::string& s) {  // same-length digit strings >= s
    if (s.empty()) return g_.empty();
    std::vector<ExprId> alts{g_.seq({g_.literal(s.substr(0, 1)), ge(s.substr(1))})};
    if (s[0] < '9') alts.push_back(g_.seq({g_.byte_range(static_cast<uint8_t>(s[0] + 1), '9'), digits(static_cast<uint32_t>(s.size() - 1))}));
    return g_.alt(std::move(alts));
  }
  ExprId le(const std::string& s) {
    if (s.empty()) return g_.empty();
    std::vector<ExprId> alts{g_.seq({g_.literal(s.substr(0, 1)), le(s.substr(1))})};
    if (s[0] > '0') alts.push_back(g_.seq({g_.byte_range('0', static_cast<uint8_t>(s[0] - 1)), digits(static_cast<uint32_t>(s.size() - 1))}));
    return g_.alt(std::move(alts));
  }
  ExprId same_len(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return g_.empty();
    if (lo[0] == hi[0]) return g_.seq({g_.literal(lo.substr(0, 1)), same_len(lo.substr(1), hi.substr(1))});
    std::vector<ExprId> alts{g_.seq({g_.literal(lo.substr(0, 1)), ge(lo.substr(1))}),
                             g_.seq({g_.literal(hi.substr(0, 1)), le(hi.substr(1))})};
    if (hi[0] - lo[0] > 1)
      alts.push_back(g_.seq({g_.byte_range(static_cast<uint8_t>(lo[0] + 1), static_cast<uint8_t>(hi[0] - 1)), digits(static_cast<uint32_t>(lo.size() - 1))}));
    return g_.alt(std::move(alts));
  }
  // Canonical decimal integers in [a, b] (b < 0: unbounded), a >= 0.
  ExprId uint_range(int64_t a, int64_t b) {
    std::string as = std::to_string(a);
    if (b < 0) {
      int64_t top = 1;
      for (size_t i = 0; i < as.size(); ++i) top *= 10;
      return g_.alt({uint_range(a, top - 1),
                     g_.seq({g_.byte_range('1', '9'), g_.repeat(g_.byte_range('0', '9'), static_cast<uint32_t>(as.size()), kUnbounded)})});
    }
    if (a > b) return g_.nothing();
    std::string bs = std::to_string(b);
    std::vector<ExprId> alts;
    int64_t p = 1;
    for (size_t len = 1; len <= bs.size(); ++len, p *= 10) {
      if (len < as.size()) continue;
      int64_t lo = std::max(a, len == 1 ? int64_t{0} : p), hi = std::min(b, p * 10 - 1);
      if (lo > hi) continue;
      alts.push_back(same_len(std::to_string(lo), std::to_string(hi)));
    }
    return g_.alt(std::move(alts));
  }
  // Non-negative decimals "I(.F)?" with v >= 0 within the bounds (integer-valued limits).
  ExprId nonneg_decimal(std::optional<IntBound> lo, std::optional<IntBound> hi) {
    ExprId digit = g_.byte_range('0', '9');
    ExprId any_frac = g_.optional(g_.seq({g_.literal("."), g_.plus(digit)}));
    ExprId zero_frac = g_.optional(g_.seq({g_.literal("."), g_.plus(g_.literal("0"))}));
    ExprId nonzero_frac = g_.seq({g_.literal("."), g_.star(digit), g_.byte_range('1', '9'), g_.star(digit)});
    if (hi && (hi->v < 0 || (hi->v == 0 && hi->excl))) return g_.nothing();
    int64_t a = 0;
    if (lo && lo->v >= 0) a = lo->excl ? lo->v + 1 : lo->v;
    int64_t b = hi ? hi->v - 1 : -1;  // -1: unbounded
    std::vector<ExprId> alts;
    if (!hi || a <= b) alts.push_back(g_.seq({uint_range(a, b), any_frac}));
    if (lo && lo->excl && lo->v >= 0 && (!hi || lo->v < hi->v))
      alts.push_back(g_.seq({g_.literal(std::to_string(lo->v)), nonzero_frac}));
    if (hi && !hi->excl && (!lo || (lo->excl ? hi->v > lo->v : hi->v >= lo->v)))
      alts.push_back(g_.seq({g_.literal(std::to_string(hi->v)), zero_frac}));
    return g_.alt(std::move(alts));
  }

  Result<ExprId> gen_number(const ojson& s, const std::string& ptr, bool integer) {
    std::optional<double> lo, hi;
    bool lo_ex = false, hi_ex = false;
    for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_number()) return unsupported(k, ptr, "not a number");
      double v = s[k].get<double>();
      if (std::fabs(v) > 1e15) return unsupported(k, ptr, "bound too large");
      std::string key = k;
      bool ex = key.rfind("exclusive", 0) == 0;
      if (key.find("inimum") != std::string::npos) {
        if (!lo || v > *lo || (v == *lo && ex)) { lo = v; lo_ex = ex; }
      } else {
        if (!hi || v < *hi || (v == *hi && ex)) { hi = v; hi_ex = ex; }
      }
    }
    if (integer) {
      std::optional<IntBound> ilo, ihi;
      if (lo) ilo = IntBound{lo_ex ? static_cast<int64_t>(std::floor(*lo)) + 1 : static_cast<int64_t>(std::ceil(*lo)), false};
      if (hi) ihi = IntBound{hi_ex ? static_cast<int64_t>(std::ceil(*hi)) - 1 : static_cast<int64_t>(std::floor(*hi)), false};
      if (!ilo && !ihi)
        return g_.seq({g_.optional(g_.literal("-")), g_.alt({g_.literal("0"), g_.seq({g_.byte_range('1', '9'), g_.star(g_.byte_range('0', '9'))})})});
      std::vector<ExprId> alts;
      if (!ilo || ilo->v < 0) {  // negative values
        int64_t m_lo = ihi && ihi->v < 0 ? -ihi->v : 1;
        int64_t m_hi = ilo ? -ilo->v : -1;
        if (m_hi < 0 || m_lo <= m_hi) alts.push_back(g_.seq({g_.literal("-"), uint_range(m_lo, m_hi)}));
      }
      if (!ihi || ihi->v >= 0) alts.push_back(uint_range(ilo ? std::max<int64_t>(0, ilo->v) : 0, ihi ? ihi->v : -1));
      return g_.alt(std::move(alts));
    }
    if (!lo && !hi) {
      JsonPieces tmp{};
      ExprId digit = g_.byte_range('0', '9');
      ByteSet e_set, sign;
      e_set.set('e'); e_set.set('E'); sign.set('+'); sign.set('-');
      (void)tmp;
      return g_.seq({g_.optional(g_.literal("-")),
                     g_.alt({g_.literal("0"), g_.seq({g_.byte_range('1', '9'), g_.star(digit)})}),
                     g_.optional(g_.seq({g_.literal("."), g_.plus(digit)})),
                     g_.optional(g_.seq({g_.bytes(e_set), g_.optional(g_.bytes(sign)), g_.repeat(digit, 1, 2)}))});  // as json_value: exponent <= 99
    }
    if ((lo && std::floor(*lo) != *lo) || (hi && std::floor(*hi) != *hi))
      return unsupported(lo && std::floor(*lo) != *lo ? (lo_ex ? "exclusiveMinimum" : "minimum") : (hi_ex ? "exclusiveMaximum" : "maximum"),
                         ptr, "a non-integer bound on a number");
    std::optional<IntBound> blo, bhi, nlo, nhi;
    if (lo) { blo = IntBound{static_cast<int64_t>(*lo), lo_ex}; nhi = IntBound{-static_cast<int64_t>(*lo), lo_ex}; }
    if (hi) { bhi = IntBound{static_cast<int64_t>(*hi), hi_ex}; nlo = IntBound{-static_cast<int64_t>(*hi), hi_ex}; }
    return g_.alt({nonneg_decimal(blo, bhi), g_.seq({g_.literal("-"), nonneg_decimal(nlo, nhi)})});
  }

  // ---- arrays --------------------------------------------------------------------
  Result<ExprId> gen_array(const ojson& s, const std::string& ptr) {
    if (s.contains("uniqueItems") && s["uniqueItems"] != ojson(false)) {
      auto mx = count(s, "maxItems", ptr);
      if (!mx || !*mx || **mx > 1) return unsupported("uniqueItems", ptr);
    }
    std::vector<ExprId> prefix;
    ExprId rest = g_.call(p_.value);
    const char* prefix_key = draft7_ ? "items" : "prefixItems";
    const char* rest_key = draft7_ ? "additionalItems" : "items";
    if (s.contains(prefix_key) && s[prefix_key].is_array()) {
      for (size_t i = 0; i < s[prefix_key].size(); ++i) {
        auto e = gen(s[prefix_key][i], ptr + "/" + prefix_key + "/" + std::to_string(i));
        if (!e) return e.error();
        prefix.push_back(*e);
      }
      if (s.contains(rest_key)) {
        auto e = gen(s[rest_key], ptr + "/" + rest_key);
        if (!e) return e.error();
        rest = *e;
      }
    } else if (s.contains("items")) {
      if (s["items"].is_array()) return unsupported("items", ptr, "an array of schemas (use prefixItems)");
      auto e = gen(s["items"], ptr + "/items");
      if (!e) return e.error();
      rest = *e;
    }
    auto mn = count(s, "minItems", ptr);
    if (!mn) return mn.error();
    auto mx = count(s, "maxItems", ptr);
    if (!mx) return mx.error();
    const uint32_t min = mn->value_or(0), max = mx->value_or(kUnbounded);
    if (min > 10000 || (max != kUnbounded && max > 10000 && rest != g_.nothing()))
      return unsupported(min > 10000 ? "minItems" : "maxItems", ptr, "too large");
    ExprId comma = g_.seq({g_.literal(","), p_.ws});
    std::function<ExprId(uint32_t)> tail = [&](uint32_t i) -> ExprId {
      if (max != kUnbounded && i >= max) return g_.empty();
      if (i < prefix.size()) {
        ExprId t = g_.seq({i ? comma : g_.empty(), prefix[i], p_.ws, tail(i + 1)});
        return i < min ? t : g_.optional(t);
      }
      uint32_t need = min > i ? min - i : 0;
      uint32_t cap = max == kUnbounded ? kUnbounded : max - i;
      ExprId more = g_.seq({comma, rest, p_.ws});
      if (i > 0) return g_.repeat(more, need, cap);
      ExprId first = g_.seq({rest, p_.ws});
      ExprId after = g_.repeat(more, need ? need - 1 : 0, cap == kUnbounded ? kUnbounded : cap - 1);
      return need ? g_.seq({first, after}) : g_.optional(g_.seq({first, after}));
    };
    return g_.seq({g_.literal("["), p_.ws, tail(0), g_.literal("]")});
  }

  // ---- objects -------------------------------------------------------------------
  static bool at_char_boundary(const std::string& p) {
    size_t i = 0;
    while (i < p.size()) {
      unsigned char c = static_cast<unsigned char>(p[i]);
      size_t len = c == '\\' ? (i + 1 < p.size() && p[i + 1] == 'u' ? 6 : 2) : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (i + len > p.size()) return false;
      i += len;
    }
    return true;
  }

  // The rest of a JSON string whose text is not one of `keys` (escaped forms), from after
  // `prefix` to the closing quote included. Once the text leaves the keys' trie it calls
  // the shared rule string_tail (string_body '"'), so the key trie costs a few states per
  // key byte, and the parse stack inside the tail is a plain string loop (fast path).
  ExprId other_key_body(const std::vector<std::string>& keys, const std::string& prefix) {
    if (!string_tail_) string_tail_ = g_.add_rule("json_string_tail", g_.seq({p_.string_body, g_.literal("\"")}));
    ExprId tail = g_.call(*string_tail_);
    std::vector<ExprId> alts;
    std::set<unsigned char> children;
    bool terminal = false;
    for (auto& k : keys) {
      if (k.compare(0, prefix.size(), prefix) != 0) continue;
      if (k.size() == prefix.size()) terminal = true;
      else children.insert(static_cast<unsigned char>(k[prefix.size()]));
    }
    if (at_char_boundary(prefix)) {
      if (!terminal) alts.push_back(g_.literal("\""));
      ByteSet safe;
      for (int b = 0x20; b < 0x80; ++b)
        if (b != '"' && b != '\\' && !children.count(static_cast<unsigned char>(b))) safe.set(static_cast<size_t>(b));
      alts.push_back(g_.seq({g_.bytes(safe), tail}));
      if (!children.count('\\')) {
        ByteSet esc, hex;
        for (char c : std::string("\"\\/bfnrt")) esc.set(static_cast<unsigned char>(c));
        for (char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<unsigned char>(c));
        alts.push_back(g_.seq({g_.literal("\\"), g_.alt({g_.bytes(esc), g_.seq({g_.literal("u"), g_.repeat(g_.bytes(hex), 4, 4)})}), tail}));
      }
      // A multi-byte character whose lead byte no key continues with.
      ExprId cont = g_.byte_range(0x80, 0xBF);
      auto lead = [&](int lo, int hi) {
        ByteSet s;
        for (int b = lo; b <= hi; ++b) if (!children.count(static_cast<unsigned char>(b))) s.set(static_cast<size_t>(b));
        return g_.bytes(s);
      };
      alts.push_back(g_.seq({lead(0xC2, 0xDF), cont, tail}));
      alts.push_back(g_.seq({lead(0xE0, 0xE0), g_.byte_range(0xA0, 0xBF), cont, tail}));
      alts.push_back(g_.seq({lead(0xE1, 0xEC), cont, cont, tail}));
      alts.push_back(g_.seq({lead(0xED, 0xED), g_.byte_range(0x80, 0x9F), cont, tail}));
      alts.push_back(g_.seq({lead(0xEE, 0xEF), cont, cont, tail}));
      alts.push_back(g_.seq({lead(0xF0, 0xF0), g_.byte_range(0x90, 0xBF), cont, cont, tail}));
      alts.push_back(g_.seq({lead(0xF1, 0xF3), cont, cont, cont, tail}));
      alts.push_back(g_.seq({lead(0xF4, 0xF4), g_.byte_range(0x80, 0x8F), cont, cont, tail}));
    }
    for (unsigned char c : children)
      alts.push_back(g_.seq({g_.literal(std::string(1, static_cast<char>(c))), other_key_body(keys, prefix + static_cast<char>(c))}));
    return g_.alt(std::move(alts));
  }

  Result<ExprId> gen_object(const ojson& s, const std::string& ptr) {
    struct Prop { std::string key; std::string ptr; const ojson* schema; bool required; };
    std::vector<Prop> props;
    static const ojson kTrue = true;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return unsupported("required", ptr, "not an array");
      for (auto& r : s["required"]) if (r.is_string()) required.insert(r.get<std::string>());
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return unsupported("properties", ptr, "not an object");
      for (auto& [k, v] : s["properties"].items())
        props.push_back({k, ptr + "/properties/" + pointer_token(k), &v, required.count(k) > 0});
    }
    const ojson* extra = nullptr;
    std::string extra_ptr = ptr + "/additionalProperties";
    if (s.contains("additionalProperties")) {
      const ojson& ap = s["additionalProperties"];
      if (!(ap.is_boolean() && !ap.get<bool>())) extra = &ap;
    } else if (!opts_.strict) {
      extra = &kTrue;
    }
    for (auto& r : required) {
      bool found = std::any_of(props.begin(), props.end(), [&](const Prop& p) { return p.key == r; });
      if (!found) props.push_back({r, extra_ptr, extra ? extra : nullptr, true});
    }
    if (opts_.sorted_properties)
      std::stable_sort(props.begin(), props.end(), [](const Prop& a, const Prop& b) { return a.key < b.key; });
    auto mnp = count(s, "minProperties", ptr);
    if (!mnp) return mnp.error();
    auto mxp = count(s, "maxProperties", ptr);
    if (!mxp) return mxp.error();
    if (*mnp && **mnp > required.size()) return unsupported("minProperties", ptr, "more than the required properties");
    if (*mxp && (extra || **mxp < props.size())) return unsupported("maxProperties", ptr, "fewer than the possible properties");
    if (props.size() > 256) return unsupported("properties", ptr, "more than 256 properties");

    const std::string base = "obj" + std::to_string(obj_counter_++);
    std::vector<ExprId> members;
    std::vector<std::string> keys;
    for (size_t i = 0; i < props.size(); ++i) {
      ExprId value = g_.nothing();
      if (props[i].schema) {
        auto e = gen(*props[i].schema, props[i].ptr);
        if (!e) return e.error();
        value = g_.call(g_.add_rule(base + "_v" + std::to_string(i), *e));
      }
      std::string key_json = nlohmann::json(props[i].key).dump();
      keys.push_back(key_json.substr(1, key_json.size() - 2));
      members.push_back(g_.seq({g_.literal(key_json), p_.ws, g_.literal(":"), p_.ws, value, p_.ws}));
    }
    ExprId other = g_.nothing();
    if (extra) {
      auto e = gen(*extra, extra_ptr);
      if (!e) return e.error();
      RuleId key_rule = g_.add_rule(base + "_key", g_.seq({g_.literal("\""), other_key_body(keys, "")}));
      RuleId val_rule = g_.add_rule(base + "_extra", *e);
      other = g_.call(g_.add_rule(base + "_other", g_.seq({g_.call(key_rule), p_.ws, g_.literal(":"), p_.ws,
                                                           g_.call(val_rule), p_.ws})));
    }
    ExprId comma = g_.seq({g_.literal(","), p_.ws});
    ExprId extras = g_.star(g_.seq({comma, other}));
    // rest[j]: members j.. after at least one member was written (each with a leading comma).
    std::vector<RuleId> rest(props.size() + 1);
    // Up to 32 properties each rest[j] spells out members j.. inline, so that one
    // deterministic automaton covers the object (one parse stack); beyond, a chain of rules.
    const bool inline_rest = props.size() <= (extra ? 12u : 32u);
    for (size_t j = props.size() + 1; j-- > 0;) {
      std::vector<ExprId> items{extras};
      for (size_t i = j; i < props.size(); ++i) {
        ExprId m = g_.seq({comma, members[i]});
        items.push_back(props[i].required ? m : g_.optional(m));
        if (!inline_rest) { items.push_back(g_.call(rest[i + 1])); break; }
        items.push_back(extras);
      }
      rest[j] = g_.add_rule(base + "_rest" + std::to_string(j), g_.seq(std::move(items)));
    }
    std::vector<ExprId> first;
    bool all_optional = true;
    for (size_t j = 0; j < props.size() && all_optional; ++j) {
      first.push_back(g_.seq({members[j], g_.call(rest[j + 1])}));
      if (props[j].required) all_optional = false;
    }
    first.push_back(g_.seq({other, g_.call(rest[0])}));
    if (all_optional) first.push_back(g_.empty());
    return g_.seq({g_.literal("{"), p_.ws, g_.alt(std::move(first)), g_.literal("}")});
  }

  Grammar g_;
  JsonPieces p_{};
  const ojson& root_;
  JsonSchemaOptions opts_;
  bool draft7_;
  std::map<std::string, RuleId> ref_rules_;
  int depth_ = 0;
  int obj_counter_ = 0;
  std::optional<RuleId> string_tail_;
};

}  // namespace

Result<Grammar> json_schema_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options,
                                    SchemaIssue* issue) {
  SchemaCompiler c(schema, options);
  auto r = c.run();
  if (!r && issue) *issue = c.issue;
  return r;
}

Grammar json_object_grammar() {
  Grammar g;
  JsonPieces p = add_json_pieces(g);
  (void)p;
  auto r = json_schema_grammar(nlohmann::ordered_json{{"type", "object"}});
  return std::move(r.value());
}

}  // namespace spillway::grammar
