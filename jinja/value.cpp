#include "jinja/value.h"

#include <algorithm>
#include <cmath>

namespace spillway::jinja {

Value Value::undefined(std::string message, bool security) {
  return Value(UndefinedTag{std::make_shared<const std::string>(std::move(message)), security});
}

Value Value::string(std::string s) {
  return Value(StrPtr(std::make_shared<const std::string>(std::move(s))));
}

double Value::to_double() const {
  if (is_float()) return as_float();
  return static_cast<double>(to_int());
}

const std::string& Value::undefined_message() const {
  static const std::string kUnknown = "value is undefined";
  const auto& tag = std::get<UndefinedTag>(v_);
  return tag.message ? *tag.message : kUnknown;
}

uint32_t Value::depth() const {
  switch (kind()) {
    case Kind::kList: return as_list().depth;
    case Kind::kDict: return as_dict().depth;
    default: return 1;
  }
}

namespace {

// The hashable scalar keys Python treats as equal: 1 == 1.0 == True.
bool numeric_key_equal(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return false;
  if (a.is_float() || b.is_float()) return a.to_double() == b.to_double();
  return a.to_int() == b.to_int();
}

bool scalar_key_equal(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_none() && b.is_none()) return true;
  return numeric_key_equal(a, b);
}

}  // namespace

const Value* Dict::find(std::string_view key) const {
  auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? nullptr : &entries[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries) {
    if (!k.is_string() && scalar_key_equal(k, key)) return &v;
    if (k.is_list() && key.is_list() && k.list_ptr() == key.list_ptr()) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  depth = std::max(depth, value.depth() + 1);
  if (key.is_string()) {
    auto [it, inserted] = string_index_.emplace(key.as_string(), entries.size());
    if (inserted) {
      entries.emplace_back(std::move(key), std::move(value));
    } else {
      entries[it->second].second = std::move(value);
    }
  } else {
    for (auto& [k, v] : entries) {
      if (!k.is_string() && scalar_key_equal(k, key)) {
        v = std::move(value);
        return;
      }
    }
    entries.emplace_back(std::move(key), std::move(value));
  }
}

void Dict::set(std::string_view key, Value value) { set(Value::string(std::string(key)), std::move(value)); }

ListPtr make_list(std::vector<Value> items, ListFlavor flavor) {
  auto list = std::make_shared<List>();
  list->items = std::move(items);
  list->flavor = flavor;
  update_depth(*list);
  return list;
}

DictPtr make_dict() { return std::make_shared<Dict>(); }

void update_depth(List& list) {
  uint32_t d = 1;
  for (const Value& v : list.items) d = std::max(d, v.depth() + 1);
  list.depth = d;
}

void update_depth(Dict& dict) {
  uint32_t d = 1;
  for (const auto& [k, v] : dict.entries) d = std::max({d, v.depth() + 1, k.depth() + 1});
  dict.depth = d;
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.as_bool();
    case Kind::kInt: return v.as_int() != 0;
    case Kind::kFloat: return v.as_float() != 0.0;
    case Kind::kString: return !v.as_string().empty();
    case Kind::kList: {
      const List& l = v.as_list();
      if (l.is_iterator()) return true;
      return !l.items.empty();
    }
    case Kind::kDict: return v.as_dict().size() != 0;
    case Kind::kObject: return true;
  }
  return false;
}

std::string py_type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList:
      switch (v.as_list().flavor) {
        case ListFlavor::kList: return "list";
        case ListFlavor::kTuple: return "tuple";
        case ListFlavor::kGenerator: return "generator";
        case ListFlavor::kReverseIterator: return "list_reverseiterator";
        case ListFlavor::kDictKeys: return "dict_keys";
        case ListFlavor::kDictValues: return "dict_values";
        case ListFlavor::kDictItems: return "dict_items";
        case ListFlavor::kRange: return "range";
      }
      return "list";
    case Kind::kDict: return "dict";
    case Kind::kObject: return v.as_object().type_name();
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_object() && v.as_object().object_kind() == ObjectKind::kNamespace) {
    return "jinja2.utils.Namespace object";
  }
  if (v.is_object() && v.as_object().object_kind() == ObjectKind::kLoop) {
    return "jinja2.runtime.LoopContext object";
  }
  if (v.is_object() && v.as_object().object_kind() == ObjectKind::kMacro) {
    return "jinja2.runtime.Macro object";
  }
  return py_type_name(v) + " object";
}

namespace {

Error too_deep() { return Error{"value nested too deeply"}; }

bool is_sequence_flavor(ListFlavor f) {
  return f == ListFlavor::kList || f == ListFlavor::kTuple || f == ListFlavor::kRange;
}

Result<bool> equal_at(const Value& a, const Value& b, uint32_t depth);

Result<bool> contains_equal(const std::vector<Value>& items, const Value& x, uint32_t depth) {
  for (const Value& item : items) {
    auto eq = equal_at(item, x, depth);
    if (!eq.ok()) return eq.error();
    if (*eq) return true;
  }
  return false;
}

Result<bool> equal_at(const Value& a, const Value& b, uint32_t depth) {
  if (depth > kMaxValueDepth) return too_deep();
  if (a.is_number() && b.is_number()) return numeric_key_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.as_string() == b.as_string();
    case Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (&x == &y) return true;
      if (x.flavor != y.flavor || !(is_sequence_flavor(x.flavor) || x.flavor == ListFlavor::kDictKeys ||
                                    x.flavor == ListFlavor::kDictItems)) {
        return false;
      }
      if (x.items.size() != y.items.size()) return false;
      if (x.flavor == ListFlavor::kDictKeys || x.flavor == ListFlavor::kDictItems) {
        for (const Value& item : x.items) {
          auto found = contains_equal(y.items, item, depth + 1);
          if (!found.ok()) return found.error();
          if (!*found) return false;
        }
        return true;
      }
      for (size_t i = 0; i < x.items.size(); ++i) {
        auto eq = equal_at(x.items[i], y.items[i], depth + 1);
        if (!eq.ok()) return eq.error();
        if (!*eq) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (&x == &y) return true;
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (other == nullptr) return false;
        auto eq = equal_at(v, *other, depth + 1);
        if (!eq.ok()) return eq.error();
        if (!*eq) return false;
      }
      return true;
    }
    case Kind::kObject: return a.object_ptr() == b.object_ptr();
    default: return false;
  }
}

// -1, 0, 1, or 2 for unordered (NaN).
Result<int> compare_at(const Value& a, const Value& b, std::string_view op, uint32_t depth) {
  if (depth > kMaxValueDepth) return too_deep();
  if (a.is_undefined()) return Error{a.undefined_message()};
  if (b.is_undefined()) return Error{b.undefined_message()};
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.to_double();
      const double y = b.to_double();
      if (std::isnan(x) || std::isnan(y)) return 2;
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.to_int();
    const int64_t y = b.to_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.as_list().flavor == b.as_list().flavor &&
      (a.as_list().flavor == ListFlavor::kList || a.as_list().flavor == ListFlavor::kTuple)) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      auto eq = equal_at(x[i], y[i], depth + 1);
      if (!eq.ok()) return eq.error();
      if (!*eq) return compare_at(x[i], y[i], op, depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return Error{"'" + std::string(op) + "' not supported between instances of '" + py_type_name(a) +
               "' and '" + py_type_name(b) + "'"};
}

}  // namespace

Result<bool> py_equal(const Value& a, const Value& b) { return equal_at(a, b, 0); }

Result<bool> py_less(const Value& a, const Value& b, std::string_view op) {
  auto c = compare_at(a, b, op, 0);
  if (!c.ok()) return c.error();
  return *c == -1;
}

Result<int> py_compare(const Value& a, const Value& b, std::string_view op) { return compare_at(a, b, op, 0); }

namespace {

Result<Value> from_json_at(const nlohmann::ordered_json& j, uint32_t depth) {
  if (depth > kMaxValueDepth) return Error{"JSON input nested too deeply"};
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null:
    case T::discarded: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case T::number_float: return Value::number(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::binary: return Value::none();
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        auto v = from_json_at(e, depth + 1);
        if (!v.ok()) return v.error();
        items.push_back(std::move(v).value());
      }
      return Value::list(make_list(std::move(items)));
    }
    case T::object: {
      DictPtr d = make_dict();
      for (auto it = j.begin(); it != j.end(); ++it) {
        auto v = from_json_at(it.value(), depth + 1);
        if (!v.ok()) return v.error();
        d->set(std::string_view(it.key()), std::move(v).value());
      }
      return Value::dict(std::move(d));
    }
  }
  return Value::none();
}

}  // namespace

Result<Value> from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

}  // namespace spillway::jinja
