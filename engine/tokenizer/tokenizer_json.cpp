// import_tokenizer_json: a Hugging Face tokenizer.json (+ tokenizer_config.json beside it)
// turned into GGUF tokenizer.* metadata, so Tokenizer::from_metadata serves both formats.
//
// The JSON is untrusted: every access checks the type first and a mismatch is an Error naming
// the file and the key (nlohmann::json is used without exceptions).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace spillway::engine {

namespace {

using nlohmann::json;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

Result<json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{fmt::format("{}: cannot open", path)};
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{fmt::format("{}: not valid JSON", path)};
  if (!j.is_object()) return Error{fmt::format("{}: the top level is not a JSON object", path)};
  return j;
}

const json* member(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::optional<std::string> string_member(const json& obj, std::string_view key) {
  const json* v = member(obj, key);
  if (v && v->is_string()) return v->get<std::string>();
  return std::nullopt;
}

std::optional<bool> bool_member(const json& obj, std::string_view key) {
  const json* v = member(obj, key);
  if (v && v->is_boolean()) return v->get<bool>();
  return std::nullopt;
}

// tokenizer_config.json writes special tokens as "<s>" or {"content": "<s>", ...}.
std::optional<std::string> token_content(const json& config, std::string_view key) {
  const json* v = member(config, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object()) return string_member(*v, "content");
  return std::nullopt;
}

struct Converted {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  std::vector<bool> filled;
};

// --- pre-tokenizer: every step becomes one regex split (or nothing), as the PreTokenizer
// table spells them; see PreTokenizer::name_for_hf_regexes.
struct PreTokenizerShape {
  bool byte_level = false;
  bool metaspace = false;
  bool metaspace_prefix = false;
  std::vector<std::string> regexes;
};

std::string escape_regex_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view(R"(\^$.|?*+()[]{}-)").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

Status read_pre_step(const json& step, const std::string& path, PreTokenizerShape& shape) {
  const std::string where = fmt::format("{}: pre_tokenizer", path);
  const auto type = string_member(step, "type");
  if (!type) return Error{fmt::format("{}: a step has no \"type\"", where)};
  if (*type == "Sequence") {
    const json* steps = member(step, "pretokenizers");
    if (!steps || !steps->is_array()) {
      return Error{fmt::format("{}: Sequence without a \"pretokenizers\" array", where)};
    }
    for (const json& s : *steps) SPILLWAY_TRY(read_pre_step(s, path, shape));
    return Status::Ok();
  }
  if (*type == "ByteLevel") {
    shape.byte_level = true;
    if (bool_member(step, "add_prefix_space").value_or(false)) {
      return Error{fmt::format("{}: ByteLevel with add_prefix_space = true is not supported", where)};
    }
    if (bool_member(step, "use_regex").value_or(true)) {
      shape.regexes.push_back(PreTokenizer::gpt2_regex());
    }
    return Status::Ok();
  }
  if (*type == "Split") {
    const json* pattern = member(step, "pattern");
    std::optional<std::string> regex;
    if (pattern) {
      if (auto r = string_member(*pattern, "Regex")) regex = *r;
      else if (auto s = string_member(*pattern, "String")) regex = escape_regex_literal(*s);
    }
    if (!regex) return Error{fmt::format("{}: Split without a \"pattern\"", where)};
    const auto behavior = string_member(step, "behavior").value_or("Isolated");
    if (behavior != "Isolated" || bool_member(step, "invert").value_or(false)) {
      return Error{fmt::format("{}: Split with behavior '{}'{} is not supported (only Isolated)",
                               where, behavior,
                               bool_member(step, "invert").value_or(false) ? " and invert" : "")};
    }
    shape.regexes.push_back(*regex);
    return Status::Ok();
  }
  if (*type == "Digits") {
    shape.regexes.push_back(bool_member(step, "individual_digits").value_or(false) ? R"(\p{N})"
                                                                                    : R"(\p{N}+)");
    return Status::Ok();
  }
  if (*type == "Punctuation") {
    const auto behavior = string_member(step, "behavior").value_or("Isolated");
    if (behavior == "Contiguous") {
      shape.regexes.push_back(R"([\p{P}\$\+<=>\^~\|`]+)");
    } else if (behavior == "Isolated") {
      shape.regexes.push_back(R"([\p{P}\$\+<=>\^~\|`])");
    } else {
      return Error{fmt::format("{}: Punctuation with behavior '{}' is not supported", where,
                               behavior)};
    }
    return Status::Ok();
  }
  if (*type == "Metaspace") {
    shape.metaspace = true;
    const auto scheme = string_member(step, "prepend_scheme");
    shape.metaspace_prefix = scheme ? *scheme != "never"
                                    : bool_member(step, "add_prefix_space").value_or(true);
    return Status::Ok();
  }
  return Error{fmt::format("{}: step type '{}' is not supported", where, *type)};
}

// SentencePiece-style normalizers: Prepend("▁") adds the space prefix, Replace(" " -> "▁").
void read_normalizer(const json& n, bool& prepends_marker, bool& replaces_spaces) {
  const auto type = string_member(n, "type");
  if (!type) return;
  if (*type == "Sequence") {
    if (const json* list = member(n, "normalizers"); list && list->is_array()) {
      for (const json& s : *list) read_normalizer(s, prepends_marker, replaces_spaces);
    }
  } else if (*type == "Prepend") {
    if (string_member(n, "prepend") == std::string(kSpaceMarker)) prepends_marker = true;
  } else if (*type == "Replace") {
    const json* pattern = member(n, "pattern");
    if (pattern && string_member(*pattern, "String") == std::string(" ") &&
        string_member(n, "content") == std::string(kSpaceMarker)) {
      replaces_spaces = true;
    }
  }
}

int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

MetaArray string_array(std::vector<std::string> values) {
  MetaArray a;
  a.kind = MetaArray::Kind::String;
  a.strings = std::move(values);
  return a;
}

// The bos / eos a TemplateProcessing post-processor adds around a single sequence.
void read_template(const json& post, std::optional<std::string>& first_special,
                   std::optional<std::string>& last_special) {
  const auto type = string_member(post, "type");
  if (!type) return;
  if (*type == "Sequence") {
    if (const json* list = member(post, "processors"); list && list->is_array()) {
      for (const json& p : *list) read_template(p, first_special, last_special);
    }
    return;
  }
  if (*type != "TemplateProcessing") return;
  const json* single = member(post, "single");
  if (!single || !single->is_array() || single->empty()) return;
  auto special_of = [](const json& item) -> std::optional<std::string> {
    const json* st = member(item, "SpecialToken");
    return st ? string_member(*st, "id") : std::nullopt;
  };
  first_special = special_of(single->front());
  if (single->size() > 1) last_special = special_of(single->back());
}

}  // namespace

Status import_tokenizer_json(const std::string& tokenizer_json_path, Metadata& meta) {
  const std::string& path = tokenizer_json_path;
  auto parsed = read_json(path);
  if (!parsed.ok()) return parsed.error();
  const json& root = *parsed;

  const json* model = member(root, "model");
  if (!model || !model->is_object()) return Error{fmt::format("{}: key 'model' is missing", path)};
  const auto model_type = string_member(*model, "type");
  if (model_type ? *model_type != "BPE" : !member(*model, "merges")) {
    return Error{fmt::format("{}: model.type '{}' is not supported (only BPE)", path,
                             model_type.value_or("?"))};
  }
  const json* vocab = member(*model, "vocab");
  if (!vocab || !vocab->is_object()) {
    return Error{fmt::format("{}: key 'model.vocab' is missing or not an object", path)};
  }
  const json* merges = member(*model, "merges");
  if (!merges || !merges->is_array()) {
    return Error{fmt::format("{}: key 'model.merges' is missing or not an array", path)};
  }

  // --- tokens: model.vocab plus added_tokens, by id
  std::map<int64_t, std::pair<std::string, int64_t>> by_id;  // id -> (text, type)
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0) {
      return Error{fmt::format("{}: model.vocab['{}'] is not a non-negative integer id", path,
                               it.key())};
    }
    by_id[it.value().get<int64_t>()] = {it.key(), kTypeNormal};
  }
  if (const json* added = member(root, "added_tokens")) {
    if (!added->is_array()) return Error{fmt::format("{}: key 'added_tokens' is not an array", path)};
    for (size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const json* id = member(a, "id");
      const auto content = string_member(a, "content");
      if (!id || !id->is_number_integer() || id->get<int64_t>() < 0 || !content) {
        return Error{fmt::format("{}: added_tokens[{}] needs an integer 'id' and a string 'content'",
                                 path, i)};
      }
      const bool special = bool_member(a, "special").value_or(false);
      by_id[id->get<int64_t>()] = {*content, special ? kTypeControl : kTypeUserDefined};
    }
  }
  if (by_id.empty()) return Error{fmt::format("{}: model.vocab is empty", path)};
  const int64_t n_tokens = by_id.rbegin()->first + 1;
  if (n_tokens > (int64_t{1} << 24)) {
    return Error{fmt::format("{}: token id {} is implausibly large", path, n_tokens - 1)};
  }
  std::vector<std::string> tokens(static_cast<size_t>(n_tokens));
  std::vector<int64_t> types(static_cast<size_t>(n_tokens), kTypeUnused);
  for (int64_t id = 0; id < n_tokens; ++id) tokens[id] = fmt::format("[PAD{}]", id);
  for (auto& [id, entry] : by_id) {
    tokens[id] = entry.first;
    types[id] = entry.second;
  }
  auto id_of = [&](const std::string& text) -> std::optional<int64_t> {
    for (auto& [id, entry] : by_id) {
      if (entry.first == text) return id;
    }
    return std::nullopt;
  };

  // --- merges: "a b" or ["a", "b"]
  std::vector<std::string> merge_strings;
  merge_strings.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    if (m.is_string()) {
      merge_strings.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merge_strings.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      return Error{fmt::format("{}: model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", path, i)};
    }
  }

  // --- byte-level or SentencePiece-style
  PreTokenizerShape shape;
  if (const json* pre = member(root, "pre_tokenizer")) SPILLWAY_TRY(read_pre_step(*pre, path, shape));
  bool prepends_marker = false, replaces_spaces = false;
  if (const json* norm = member(root, "normalizer")) {
    read_normalizer(*norm, prepends_marker, replaces_spaces);
  }
  const bool byte_fallback = bool_member(*model, "byte_fallback").value_or(false);
  const auto unk_token = string_member(*model, "unk_token");

  if (shape.byte_level) {
    const auto pre_name = PreTokenizer::name_for_hf_regexes(shape.regexes);
    if (!pre_name) {
      return Error{fmt::format(
          "{}: pre_tokenizer splits with [{}], which is none of the known pre-tokenizers ({})",
          path, fmt::join(shape.regexes, " ; "), fmt::join(PreTokenizer::known_pre_names(), ", "))};
    }
    meta.set("tokenizer.ggml.model", std::string("gpt2"));
    meta.set("tokenizer.ggml.pre", *pre_name);
    meta.set("tokenizer.ggml.merges", string_array(std::move(merge_strings)));
  } else if (byte_fallback || shape.metaspace || replaces_spaces) {
    if (!shape.regexes.empty()) {
      return Error{fmt::format("{}: pre_tokenizer: regex splits are not supported with a "
                               "SentencePiece-style (Metaspace / byte_fallback) model", path)};
    }
    // SentencePiece merges by the score of the merged token: the earlier its first merge,
    // the higher. Tokens no merge makes rank below all of them.
    MetaArray scores;
    scores.kind = MetaArray::Kind::Float;
    scores.floats.assign(static_cast<size_t>(n_tokens),
                         -static_cast<double>(merge_strings.size()) - 1.0);
    std::vector<bool> scored(static_cast<size_t>(n_tokens), false);
    std::unordered_map<std::string, int64_t> index;
    for (int64_t id = 0; id < n_tokens; ++id) index.emplace(tokens[id], id);
    for (size_t rank = 0; rank < merge_strings.size(); ++rank) {
      const std::string& m = merge_strings[rank];
      const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
      if (space == std::string::npos) {
        return Error{fmt::format("{}: model.merges[{}] = '{}' is not two tokens", path, rank, m)};
      }
      auto it = index.find(m.substr(0, space) + m.substr(space + 1));
      if (it == index.end()) {
        return Error{fmt::format("{}: model.merges[{}] = '{}' makes a token that is not in "
                                 "model.vocab", path, rank, m)};
      }
      if (!scored[it->second]) {
        scored[it->second] = true;
        scores.floats[it->second] = -static_cast<double>(rank);
      }
    }
    for (int64_t id = 0; id < n_tokens; ++id) {
      if (types[id] == kTypeNormal && byte_fallback && parse_byte_token(tokens[id]) >= 0) {
        types[id] = kTypeByte;
      }
    }
    meta.set("tokenizer.ggml.model", std::string("llama"));
    meta.set("tokenizer.ggml.pre", std::string("default"));
    meta.set("tokenizer.ggml.scores", std::move(scores));
    meta.set("tokenizer.ggml.add_space_prefix",
             shape.metaspace ? shape.metaspace_prefix : prepends_marker);
  } else {
    return Error{fmt::format("{}: pre_tokenizer / normalizer: neither byte-level (ByteLevel) nor "
                             "SentencePiece-style (Metaspace, byte_fallback); not supported", path)};
  }
  if (unk_token) {
    if (auto id = id_of(*unk_token)) {
      types[*id] = kTypeUnknown;
      meta.set("tokenizer.ggml.unknown_token_id", *id);
    }
  }
  meta.set("tokenizer.ggml.tokens", string_array(std::move(tokens)));
  MetaArray type_array;
  type_array.kind = MetaArray::Kind::Int;
  type_array.ints = std::move(types);
  meta.set("tokenizer.ggml.token_type", std::move(type_array));

  // --- tokenizer_config.json: bos / eos / pad, add_bos_token / add_eos_token, chat_template
  const std::filesystem::path config_path =
      std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  json config = json::object();
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    auto c = read_json(config_path.string());
    if (!c.ok()) return c.error();
    config = std::move(*c);
  }
  const std::string config_name = config_path.string();
  std::optional<std::string> template_first, template_last;
  if (const json* post = member(root, "post_processor")) {
    read_template(*post, template_first, template_last);
  }
  auto set_id = [&](std::string_view config_key, std::optional<std::string> fallback,
                    const char* meta_key) -> Status {
    std::optional<std::string> content = token_content(config, config_key);
    const bool from_config = content.has_value();
    if (!content) content = std::move(fallback);
    if (!content) return Status::Ok();
    const auto id = id_of(*content);
    if (!id) {
      if (!from_config) return Status::Ok();
      return Error{fmt::format("{}: {} '{}' is not a token of {}", config_name, config_key,
                               *content, path)};
    }
    meta.set(meta_key, *id);
    return Status::Ok();
  };
  SPILLWAY_TRY(set_id("bos_token", template_first, "tokenizer.ggml.bos_token_id"));
  SPILLWAY_TRY(set_id("eos_token", template_last, "tokenizer.ggml.eos_token_id"));
  SPILLWAY_TRY(set_id("pad_token", std::nullopt, "tokenizer.ggml.padding_token_id"));

  if (const json* v = member(config, "add_bos_token")) {
    if (!v->is_boolean()) return Error{fmt::format("{}: add_bos_token is not a bool", config_name)};
    meta.set("tokenizer.ggml.add_bos_token", v->get<bool>());
  } else if (template_first) {
    meta.set("tokenizer.ggml.add_bos_token", true);
  }
  if (const json* v = member(config, "add_eos_token")) {
    if (!v->is_boolean()) return Error{fmt::format("{}: add_eos_token is not a bool", config_name)};
    meta.set("tokenizer.ggml.add_eos_token", v->get<bool>());
  } else if (template_last) {
    meta.set("tokenizer.ggml.add_eos_token", true);
  }
  if (const json* t = member(config, "chat_template")) {
    if (t->is_string()) {
      meta.set("tokenizer.chat_template", t->get<std::string>());
    } else if (t->is_array()) {  // [{"name": "default", "template": "..."}, ...]
      std::optional<std::string> chosen;
      for (const json& entry : *t) {
        const auto name = string_member(entry, "name");
        const auto text = string_member(entry, "template");
        if (text && (!chosen || name == std::string("default"))) chosen = text;
        if (text && name == std::string("default")) break;
      }
      if (chosen) meta.set("tokenizer.chat_template", *chosen);
    } else {
      return Error{fmt::format("{}: chat_template is neither a string nor a list", config_name)};
    }
  }
  return Status::Ok();
}

}  // namespace spillway::engine
