// Values of the Jinja interpreter, with Python semantics: undefined, None, bool, int,
// float, str, list (and tuple, generator, dict views, range), dict (insertion ordered)
// and objects (namespace, loop, macro, builtin function, bound method, ...).
//
// Lists, dicts and objects are shared by reference as in Python (list.pop() in one
// variable is seen through another). Strings are immutable and shared.
// Thread contract: a Value and what it references belong to one render (one thread),
// except constants in a parsed template, which are never mutated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace spillway::jinja {

// How deeply values may nest (lists in dicts in ...); bounds every recursion over values.
inline constexpr uint32_t kMaxValueDepth = 512;

enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kObject };

struct List;
struct Dict;
class Object;

using StrPtr = std::shared_ptr<const std::string>;
using ListPtr = std::shared_ptr<List>;
using DictPtr = std::shared_ptr<Dict>;
using ObjPtr = std::shared_ptr<Object>;

class Value {
 public:
  struct UndefinedTag {
    StrPtr message;         // the error raised when the undefined value is used
    bool security = false;  // a sandbox refusal (SecurityError), not an UndefinedError
  };
  struct NoneTag {};

  Value() : v_(UndefinedTag{}) {}
  static Value undefined(std::string message, bool security = false);
  static Value none() { return Value(NoneTag{}); }
  static Value boolean(bool b) { return Value(b); }
  static Value integer(int64_t i) { return Value(i); }
  static Value number(double d) { return Value(d); }
  static Value string(std::string s);
  static Value string(StrPtr s) { return Value(std::move(s)); }
  static Value list(ListPtr l) { return Value(std::move(l)); }
  static Value dict(DictPtr d) { return Value(std::move(d)); }
  static Value object(ObjPtr o) { return Value(std::move(o)); }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_object() const { return kind() == Kind::kObject; }
  // bool, int or float (Python numbers; bool is an int subclass).
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_integral() const { return is_bool() || is_int(); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  // Numbers as int (bool) or double (any number).
  int64_t to_int() const { return is_bool() ? (as_bool() ? 1 : 0) : as_int(); }
  double to_double() const;
  const std::string& as_string() const { return *std::get<StrPtr>(v_); }
  const StrPtr& string_ptr() const { return std::get<StrPtr>(v_); }
  List& as_list() const { return *std::get<ListPtr>(v_); }
  const ListPtr& list_ptr() const { return std::get<ListPtr>(v_); }
  Dict& as_dict() const { return *std::get<DictPtr>(v_); }
  const DictPtr& dict_ptr() const { return std::get<DictPtr>(v_); }
  Object& as_object() const { return *std::get<ObjPtr>(v_); }
  const ObjPtr& object_ptr() const { return std::get<ObjPtr>(v_); }
  const std::string& undefined_message() const;
  bool undefined_is_security() const { return std::get<UndefinedTag>(v_).security; }

  // Nesting depth of a container (1 for scalars and empty containers).
  uint32_t depth() const;

 private:
  template <class T>
  explicit Value(T v) : v_(std::move(v)) {}
  std::variant<UndefinedTag, NoneTag, bool, int64_t, double, StrPtr, ListPtr, DictPtr, ObjPtr> v_;
};

// What a list-like value is in Python: it decides repr, len, truthiness, indexing, JSON.
enum class ListFlavor : uint8_t {
  kList,
  kTuple,
  kGenerator,        // single pass, no len, always true, not subscriptable
  kReverseIterator,  // list_reverseiterator: like a generator
  kDictKeys,
  kDictValues,
  kDictItems,
  kRange,
};

struct List {
  std::vector<Value> items;
  ListFlavor flavor = ListFlavor::kList;
  uint32_t depth = 1;  // 1 + the deepest item; computed by make_list
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // kRange only
  std::string generator_name;                               // kGenerator only, for repr

  bool is_iterator() const {
    return flavor == ListFlavor::kGenerator || flavor == ListFlavor::kReverseIterator;
  }
};

struct Dict {
  std::vector<std::pair<Value, Value>> entries;  // insertion order
  uint32_t depth = 1;

  const Value* find(std::string_view key) const;
  // Python dict lookup: 1, 1.0 and True are the same key. Unhashable keys never match.
  const Value* find(const Value& key) const;
  // Inserts or replaces (a replaced key keeps its position).
  void set(Value key, Value value);
  void set(std::string_view key, Value value);
  size_t size() const { return entries.size(); }

 private:
  std::unordered_map<std::string, size_t> string_index_;
};

enum class ObjectKind : uint8_t { kNamespace, kLoop, kMacro, kBuiltin, kBoundMethod, kCycler, kJoiner };

class Object {
 public:
  virtual ~Object() = default;
  virtual ObjectKind object_kind() const = 0;
  virtual std::string type_name() const = 0;  // Python's type(x).__name__
  virtual std::string repr() const = 0;
  virtual bool is_callable() const { return false; }
};

// Namespace: jinja2.utils.Namespace, the only object a template may assign attributes to.
class Namespace final : public Object {
 public:
  ObjectKind object_kind() const override { return ObjectKind::kNamespace; }
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override { return "<Namespace>"; }  // jinja_print.cpp prints attrs
  Dict attrs;
};

ListPtr make_list(std::vector<Value> items, ListFlavor flavor = ListFlavor::kList);
DictPtr make_dict();
// Recomputes a container's depth after it was filled item by item.
void update_depth(List& list);
void update_depth(Dict& dict);

bool truthy(const Value& v);
// type(v).__name__ in Python: "str", "int", "NoneType", "list", "dict", "Undefined", ...
std::string py_type_name(const Value& v);
// jinja2's object_type_repr, used in undefined messages: "None", "dict object", ...
std::string object_type_repr(const Value& v);

// Python ==. Containers compare by content; depth-bounded.
Result<bool> py_equal(const Value& a, const Value& b);
// Python <, for sorting and comparisons: numbers, strings, lists/tuples of the same type.
// TypeError text (as Python's) for other pairs.
Result<bool> py_less(const Value& a, const Value& b, std::string_view op = "<");
// Three-way: -1, 0, 1, or 2 when unordered (NaN); op names the operator in TypeErrors.
Result<int> py_compare(const Value& a, const Value& b, std::string_view op);

// Converts request JSON (messages, tools, kwargs) into values. Errors past kMaxValueDepth.
Result<Value> from_json(const nlohmann::ordered_json& j);

}  // namespace spillway::jinja
