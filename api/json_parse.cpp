#include "api/json_parse.h"

#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace spillway::api {

namespace {

using json = nlohmann::ordered_json;
using ObjectVector = std::vector<std::pair<const std::string, json>>;

// Builds the value on a stack of open containers; each open object keeps a hash set of its
// keys. The stack holds pointers to the containers' json nodes: a node lives in its parent's
// vector, which does not grow while the node is open (values are only added to the innermost
// open container).
class LinearBuilder final : public nlohmann::json_sax<json> {
 public:
  LinearBuilder(json& root, size_t max_values) : root_(root), max_values_(max_values) {}

  bool null() override { return add(json(nullptr)); }
  bool boolean(bool v) override { return add(json(v)); }
  bool number_integer(number_integer_t v) override { return add(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return add(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return add(json(v)); }
  bool string(string_t& v) override { return add(json(std::move(v))); }
  bool binary(binary_t& v) override { return add(json::binary(std::move(v))); }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool key(string_t& k) override {
    pending_key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error_ = fmt::format("{} (byte {})", ex.what(), position);
    return false;
  }

  const std::string& error() const { return error_; }
  bool limit() const { return limit_; }

 private:
  struct Open {
    json* value;
    std::unordered_set<std::string> keys;  // objects only
  };

  // Places v in the innermost open container (or as the root); returns where it went.
  json* place(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Open& top = stack_.back();
    if (top.value->is_array()) {
      auto& array = top.value->get_ref<json::array_t&>();
      array.push_back(std::move(v));
      return &array.back();
    }
    auto& members = static_cast<ObjectVector&>(top.value->get_ref<json::object_t&>());
    if (!top.keys.insert(pending_key_).second) {
      // Duplicate key: the last value wins, in the first occurrence's place (as json::parse).
      for (auto& member : members) {
        if (member.first == pending_key_) {
          member.second = std::move(v);
          return &member.second;
        }
      }
    }
    members.emplace_back(std::move(pending_key_), std::move(v));
    return &members.back().second;
  }

  bool count_value() {
    if (++values_ <= max_values_) return true;
    error_ = fmt::format("more than {} JSON values (this server's limit for one document)", max_values_);
    limit_ = true;
    return false;
  }

  bool add(json&& v) {
    if (!count_value()) return false;
    place(std::move(v));
    return true;
  }

  bool open(json&& container) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      error_ = fmt::format("nesting deeper than {} levels", kMaxJsonDepth);
      limit_ = true;
      return false;
    }
    if (!count_value()) return false;
    json* placed = place(std::move(container));
    stack_.push_back({placed, {}});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  const size_t max_values_;
  size_t values_ = 0;
  std::vector<Open> stack_;
  std::string pending_key_;
  std::string error_;
  bool limit_ = false;
};

}  // namespace

std::optional<json> parse_json_linear(std::string_view text, JsonParseError* error, size_t max_values) {
  const size_t nul = text.find('\0');
  if (nul != std::string_view::npos) {
    if (error) error->message = fmt::format("a NUL byte at byte {}", nul);
    return std::nullopt;
  }
  json root;
  LinearBuilder builder(root, max_values);
  const bool ok = json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                                  /*strict=*/true);
  if (!ok) {
    if (error) {
      error->message = builder.error().empty() ? "not valid JSON" : builder.error();
      error->limit = builder.limit();
    }
    return std::nullopt;
  }
  return root;
}

}  // namespace spillway::api
