// GGUF reader and writer: every metadata type round trips, alignment is honoured, and every
// kind of broken file is an Error that names the file (and the key or tensor), never a
// crash or a huge allocation (these tests run under ASan/UBSan in CI).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "engine/format/gguf.h"
#include "engine/format/gguf_writer.h"
#include "engine/model/model.h"
#include "engine/format/model_source.h"

namespace spillway::engine {
namespace {

namespace fs = std::filesystem;
using kernels::DType;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() /
          ("spillway-test-gguf-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
  ASSERT_TRUE(f.good()) << path;
}

// Writes bytes to a temporary file and opens it; the file is removed again.
Result<std::unique_ptr<ModelSource>> open_bytes(const std::vector<uint8_t>& bytes,
                                                const std::string& path,
                                                size_t size = SIZE_MAX) {
  write_file(path, bytes, std::min(size, bytes.size()));
  auto source = open_gguf(path);
  fs::remove(path);
  return source;
}

// An error whose message names the file and `what` (a key or a tensor).
void expect_error_naming(const Result<std::unique_ptr<ModelSource>>& r, const std::string& path,
                         const std::string& what) {
  ASSERT_FALSE(r.ok()) << "expected an error naming " << what;
  EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
}

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <class T>
void poke(std::vector<uint8_t>& bytes, size_t offset, T value) {
  ASSERT_LE(offset, bytes.size());
  ASSERT_LE(sizeof(T), bytes.size() - offset);
  std::copy_n(reinterpret_cast<const uint8_t*>(&value), sizeof(T), bytes.begin() + offset);
}

// Offset of the first byte after the length-prefixed string `s` in the file (the key's type
// field, or a tensor info's n_dims field).
size_t after_string(const std::vector<uint8_t>& bytes, const std::string& s) {
  const uint64_t len = s.size();
  std::vector<uint8_t> needle(8);
  std::memcpy(needle.data(), &len, 8);
  needle.insert(needle.end(), s.begin(), s.end());
  auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << s;
  return static_cast<size_t>(it - bytes.begin()) + needle.size();
}

// Field offsets of a tensor info (name, n_dims, dims..., type, offset).
struct TensorInfoFields {
  size_t n_dims, dims, type, offset;
};
TensorInfoFields tensor_fields(const std::vector<uint8_t>& bytes, const std::string& name,
                               uint32_t n_dims) {
  const size_t at = after_string(bytes, name);
  return {at, at + 4, at + 4 + 8 * n_dims, at + 4 + 8 * n_dims + 4};
}

constexpr size_t kTensorCountOffset = 8, kKvCountOffset = 16;

// A small valid file: two keys and two tensors whose data ends exactly at the end of the
// file (no trailing padding), so every proper prefix is missing something.
GgufWriter small_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("test.answer", 42);
  w.add_tensor("a", DType::F32, {4, 2}, as_bytes(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}));
  w.add_tensor("b", DType::F32, {8}, as_bytes(std::vector<float>(8, 0.5f)));
  return w;
}

TEST(GgufRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.set_uint8("u8", 255);
  w.set_int8("i8", -128);
  w.set_uint16("u16", 65535);
  w.set_int16("i16", -32768);
  w.set_uint32("u32", std::numeric_limits<uint32_t>::max());
  w.set_int32("i32", std::numeric_limits<int32_t>::min());
  w.set_uint64("u64", static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  w.set_uint64("u64_zero", 0);
  w.set_int64("i64_min", std::numeric_limits<int64_t>::min());
  w.set_int64("i64_max", std::numeric_limits<int64_t>::max());
  w.set_float32("f32", -1.25f);
  w.set_float32("f32_tiny", std::numeric_limits<float>::denorm_min());
  w.set_float64("f64", 3.141592653589793);
  w.set_bool("yes", true);
  w.set_bool("no", false);
  w.set_string("s", "h\xC3\xA9llo \xE2\x96\x81world");
  w.set_string("empty", "");
  w.set_string("nul", std::string("a\0b", 3));
  const std::string path = temp_path("scalars.gguf");
  auto src = open_bytes(w.serialize(), path);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const Metadata& m = (*src)->metadata();
  EXPECT_EQ(m.all().size(), 18u);
  EXPECT_EQ(*m.get_int("u8").value(), 255);
  EXPECT_EQ(*m.get_int("i8").value(), -128);
  EXPECT_EQ(*m.get_int("u16").value(), 65535);
  EXPECT_EQ(*m.get_int("i16").value(), -32768);
  EXPECT_EQ(*m.get_int("u32").value(), 4294967295);
  EXPECT_EQ(*m.get_int("i32").value(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*m.get_int("u64").value(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*m.get_int("u64_zero").value(), 0);
  EXPECT_EQ(*m.get_int("i64_min").value(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*m.get_int("i64_max").value(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*m.get_float("f32").value(), -1.25);
  EXPECT_EQ(*m.get_float("f32_tiny").value(),
            static_cast<double>(std::numeric_limits<float>::denorm_min()));
  EXPECT_EQ(*m.get_float("f64").value(), 3.141592653589793);
  EXPECT_EQ(*m.get_bool("yes").value(), true);
  EXPECT_EQ(*m.get_bool("no").value(), false);
  EXPECT_EQ(*m.get_string("s").value(), "h\xC3\xA9llo \xE2\x96\x81world");
  EXPECT_EQ(*m.get_string("empty").value(), "");
  EXPECT_EQ(*m.get_string("nul").value(), std::string("a\0b", 3));
  // Typed look-ups: absent -> nullopt, wrong kind -> an error naming the key.
  EXPECT_FALSE(m.get_int("absent").value().has_value());
  ASSERT_FALSE(m.get_int("s").ok());
  EXPECT_NE(m.get_int("s").error().message.find("'s'"), std::string::npos);
  ASSERT_FALSE(m.get_string("u8").ok());
  EXPECT_EQ(*m.get_float("u32").value(), 4294967295.0);  // integers widen to float
}

TEST(GgufRoundTrip, ArraysOfEveryType) {
  GgufWriter w;
  w.set_array<uint8_t>("a.u8", GgufValueType::Uint8, {0, 1, 255});
  w.set_array<int8_t>("a.i8", GgufValueType::Int8, {-128, 0, 127});
  w.set_array<uint16_t>("a.u16", GgufValueType::Uint16, {0, 65535});
  w.set_array<int16_t>("a.i16", GgufValueType::Int16, {-32768, 32767});
  w.set_array<uint32_t>("a.u32", GgufValueType::Uint32, {0, 4294967295u});
  w.set_int32_array("a.i32", {std::numeric_limits<int32_t>::min(), -1, 7});
  w.set_array<uint64_t>("a.u64", GgufValueType::Uint64,
                        {0, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())});
  w.set_array<int64_t>("a.i64", GgufValueType::Int64,
                       {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()});
  w.set_float32_array("a.f32", {0.5f, -2.0f, 1e-30f});
  w.set_array<double>("a.f64", GgufValueType::Float64, {1e300, -0.125});
  w.set_bool_array("a.bool", {true, false, true});
  w.set_string_array("a.str", {"<s>", "", "\xE2\x96\x81the"});
  w.set_string_array("a.empty", {});
  w.set_array<uint64_t>("a.empty_u64", GgufValueType::Uint64, {});
  const std::string path = temp_path("arrays.gguf");
  auto src = open_bytes(w.serialize(), path);
  ASSERT_TRUE(src.ok()) << src.error().message;
  const Metadata& m = (*src)->metadata();
  auto ints = [&](const char* key) {
    const MetaArray* a = m.get_array(key).value();
    EXPECT_NE(a, nullptr) << key;
    EXPECT_EQ(a->kind, MetaArray::Kind::Int) << key;
    return a->ints;
  };
  EXPECT_EQ(ints("a.u8"), (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(ints("a.i8"), (std::vector<int64_t>{-128, 0, 127}));
  EXPECT_EQ(ints("a.u16"), (std::vector<int64_t>{0, 65535}));
  EXPECT_EQ(ints("a.i16"), (std::vector<int64_t>{-32768, 32767}));
  EXPECT_EQ(ints("a.u32"), (std::vector<int64_t>{0, 4294967295}));
  EXPECT_EQ(ints("a.i32"), (std::vector<int64_t>{std::numeric_limits<int32_t>::min(), -1, 7}));
  EXPECT_EQ(ints("a.u64"), (std::vector<int64_t>{0, std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(ints("a.i64"), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(),
                                                 std::numeric_limits<int64_t>::max()}));
  EXPECT_EQ(ints("a.empty_u64"), std::vector<int64_t>{});
  const MetaArray* f32 = m.get_array("a.f32").value();
  ASSERT_EQ(f32->kind, MetaArray::Kind::Float);
  EXPECT_EQ(f32->floats, (std::vector<double>{0.5, -2.0, static_cast<double>(1e-30f)}));
  const MetaArray* f64 = m.get_array("a.f64").value();
  ASSERT_EQ(f64->kind, MetaArray::Kind::Float);
  EXPECT_EQ(f64->floats, (std::vector<double>{1e300, -0.125}));
  const MetaArray* bools = m.get_array("a.bool").value();
  ASSERT_EQ(bools->kind, MetaArray::Kind::Bool);
  EXPECT_EQ(bools->bools, (std::vector<uint8_t>{1, 0, 1}));
  const MetaArray* strs = m.get_array("a.str").value();
  ASSERT_EQ(strs->kind, MetaArray::Kind::String);
  EXPECT_EQ(strs->strings, (std::vector<std::string>{"<s>", "", "\xE2\x96\x81the"}));
  EXPECT_EQ(m.get_array("a.empty").value()->size(), 0u);
  EXPECT_EQ(m.get_array("absent").value(), nullptr);
  EXPECT_FALSE(m.get_array("a.u8").value() == nullptr);
  EXPECT_FALSE(m.get_int("a.u8").ok());  // an array is not an integer
}

TEST(GgufRoundTrip, Uint64AboveInt64MaxIsAnErrorNamingTheKey) {
  const std::string path = temp_path("u64max.gguf");
  {
    GgufWriter w;
    w.set_uint64("too.big", std::numeric_limits<uint64_t>::max());
    expect_error_naming(open_bytes(w.serialize(), path), path, "too.big");
  }
  {
    GgufWriter w;
    w.set_array<uint64_t>("too.big.array", GgufValueType::Uint64,
                          {1, uint64_t{1} << 63});
    expect_error_naming(open_bytes(w.serialize(), path), path, "too.big.array");
  }
}

TEST(GgufRoundTrip, TensorsKeepTypeShapeAndBytes) {
  GgufWriter w;
  std::vector<uint8_t> f32 = as_bytes(std::vector<float>{1, -2, 3.5f, 4, 5, 6});
  std::vector<uint8_t> f16(2 * 5 * 3), bf16(2 * 7), q8(34 * 2);
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = static_cast<uint8_t>(200 - i);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 13);
  w.add_tensor("t.f32", DType::F32, {3, 2}, f32);
  w.add_tensor("t.f16", DType::F16, {5, 3}, f16);
  w.add_tensor("t.bf16", DType::BF16, {7}, bf16);
  w.add_tensor("t.q8", DType::Q8_0, {64}, q8);
  const std::string path = temp_path("tensors.gguf");
  ASSERT_TRUE(w.write(path).ok());
  auto src = open_gguf(path);
  ASSERT_TRUE(src.ok()) << src.error().message;
  EXPECT_EQ((*src)->path(), path);
  EXPECT_EQ((*src)->files(), std::vector<std::string>{path});
  ASSERT_EQ((*src)->tensors().size(), 4u);
  struct Expected {
    const char* name;
    DType type;
    std::vector<int64_t> shape;
    const std::vector<uint8_t>* bytes;
  } expected[] = {{"t.f32", DType::F32, {3, 2}, &f32},
                  {"t.f16", DType::F16, {5, 3}, &f16},
                  {"t.bf16", DType::BF16, {7}, &bf16},
                  {"t.q8", DType::Q8_0, {64}, &q8}};
  std::ifstream file(path, std::ios::binary);
  const std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(file)),
                                     std::istreambuf_iterator<char>());
  for (const Expected& e : expected) {
    const TensorInfo* t = (*src)->find_tensor(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->type, e.type) << e.name;
    EXPECT_EQ(t->shape, e.shape) << e.name;
    ASSERT_EQ(t->n_bytes, e.bytes->size()) << e.name;
    EXPECT_EQ(std::memcmp(t->data, e.bytes->data(), t->n_bytes), 0) << e.name;
    EXPECT_EQ(t->file_index, 0);
    EXPECT_EQ(t->file_offset % kGgufDefaultAlignment, 0u) << e.name;
    ASSERT_LE(t->file_offset + t->n_bytes, on_disk.size());
    EXPECT_EQ(std::memcmp(on_disk.data() + t->file_offset, e.bytes->data(), t->n_bytes), 0);
  }
  EXPECT_EQ((*src)->find_tensor("t.f32")->rows(), 2);
  EXPECT_EQ((*src)->find_tensor("t.f16")->n_elements(), 15);
  EXPECT_EQ((*src)->find_tensor("absent"), nullptr);
  fs::remove(path);
}

TEST(GgufAlignment, NonDefaultAlignmentIsHonouredByWriterAndReader) {
  for (uint32_t alignment : {1u, 8u, 64u, 4096u}) {
    GgufWriter w;
    w.set_uint32("general.alignment", alignment);
    w.add_tensor("x", DType::F16, {3}, {1, 2, 3, 4, 5, 6});
    w.add_tensor("y", DType::F16, {5}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
    w.add_tensor("z", DType::F32, {1}, as_bytes(std::vector<float>{42.0f}));
    const std::vector<uint8_t> bytes = w.serialize();
    const std::string path = temp_path("align.gguf");
    auto src = open_bytes(bytes, path);
    ASSERT_TRUE(src.ok()) << alignment << ": " << src.error().message;
    uint64_t previous_end = 0;
    for (const TensorInfo& t : (*src)->tensors()) {
      EXPECT_EQ(t.file_offset % alignment, 0u) << alignment << " " << t.name;
      EXPECT_GE(t.file_offset, previous_end);
      previous_end = t.file_offset + t.n_bytes;
    }
    const TensorInfo* y = (*src)->find_tensor("y");
    EXPECT_EQ(static_cast<const uint8_t*>(y->data)[0], 9);
    float z = 0;
    std::memcpy(&z, (*src)->find_tensor("z")->data, 4);
    EXPECT_EQ(z, 42.0f);
  }
}

TEST(GgufAlignment, InvalidAlignmentIsAnError) {
  const std::string path = temp_path("bad-align.gguf");
  for (uint32_t alignment : {0u, 3u, 48u, 1u << 21, 1u << 31}) {
    GgufWriter w;
    w.set_uint32("general.alignment", alignment);
    w.add_tensor("x", DType::F32, {1}, as_bytes(std::vector<float>{1}));
    expect_error_naming(open_bytes(w.serialize(), path), path, "general.alignment");
  }
  GgufWriter w;
  w.set_string("general.alignment", "32");
  expect_error_naming(open_bytes(w.serialize(), path), path, "general.alignment");
}

TEST(GgufAlignment, MisalignedTensorOffsetIsAnError) {
  std::vector<uint8_t> bytes = small_writer().serialize();
  poke<uint64_t>(bytes, tensor_fields(bytes, "b", 1).offset, 8);
  const std::string path = temp_path("misaligned.gguf");
  expect_error_naming(open_bytes(bytes, path), path, "'b'");
}

TEST(GgufCorrupt, TruncatedAtEveryByteIsAnError) {
  const std::vector<uint8_t> bytes = small_writer().serialize();
  const std::string path = temp_path("truncated.gguf");
  // The last tensor's data ends exactly at the end of the file.
  auto whole = open_bytes(bytes, path);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  const TensorInfo* b = (*whole)->find_tensor("b");
  ASSERT_EQ(b->file_offset + b->n_bytes, bytes.size());
  for (size_t size = 0; size < bytes.size(); ++size) {
    auto src = open_bytes(bytes, path, size);
    ASSERT_FALSE(src.ok()) << "a file truncated to " << size << " of " << bytes.size()
                           << " bytes opened";
    EXPECT_NE(src.error().message.find(path), std::string::npos) << src.error().message;
  }
}

TEST(GgufCorrupt, BadMagic) {
  std::vector<uint8_t> bytes = small_writer().serialize();
  bytes[0] = 'X';
  const std::string path = temp_path("magic.gguf");
  expect_error_naming(open_bytes(bytes, path), path, "not a GGUF file");
}

TEST(GgufCorrupt, UnsupportedVersion) {
  const std::string path = temp_path("version.gguf");
  for (uint32_t version : {0u, 1u, 4u, 0x03000000u}) {
    std::vector<uint8_t> bytes = small_writer().serialize();
    poke<uint32_t>(bytes, 4, version);
    expect_error_naming(open_bytes(bytes, path), path, "version " + std::to_string(version));
  }
  std::vector<uint8_t> v2 = small_writer().serialize();
  poke<uint32_t>(v2, 4, 2);  // version 2 has the same layout as 3
  EXPECT_TRUE(open_bytes(v2, path).ok());
}

TEST(GgufCorrupt, TensorDataPastTheEnd) {
  std::vector<uint8_t> bytes = small_writer().serialize();
  poke<uint64_t>(bytes, tensor_fields(bytes, "a", 2).offset, 4096);
  const std::string path = temp_path("past-end.gguf");
  expect_error_naming(open_bytes(bytes, path), path, "'a'");
  poke<uint64_t>(bytes, tensor_fields(bytes, "a", 2).offset, ~uint64_t{31});  // would wrap
  expect_error_naming(open_bytes(bytes, path), path, "'a'");
}

TEST(GgufCorrupt, UnknownTensorType) {
  const std::string path = temp_path("type.gguf");
  for (uint32_t type : {16u /* IQ2_XXS: real but unsupported */, 99u, 0xFFFFFFFFu}) {
    std::vector<uint8_t> bytes = small_writer().serialize();
    poke<uint32_t>(bytes, tensor_fields(bytes, "a", 2).type, type);
    auto src = open_bytes(bytes, path);
    expect_error_naming(src, path, "'a'");
    if (!src.ok()) {
      EXPECT_NE(src.error().message.find("type " + std::to_string(type)), std::string::npos);
    }
  }
}

TEST(GgufCorrupt, DimensionCountZeroOrAboveFour) {
  const std::string path = temp_path("ndims.gguf");
  for (uint32_t n_dims : {0u, 5u, 1000u}) {
    std::vector<uint8_t> bytes = small_writer().serialize();
    poke<uint32_t>(bytes, tensor_fields(bytes, "a", 2).n_dims, n_dims);
    expect_error_naming(open_bytes(bytes, path), path, "'a'");
  }
}

TEST(GgufCorrupt, ZeroAndOverflowingDimensions) {
  const std::string path = temp_path("dims.gguf");
  const std::vector<std::vector<uint64_t>> bad = {
      {0, 2},                                // empty
      {4, 0},                                // empty
      {uint64_t{1} << 41, 1},                // one huge dimension
      {uint64_t{1} << 32, uint64_t{1} << 32}, // element count overflows int64
      {uint64_t{1} << 40, uint64_t{1} << 22}, // 2^62 F32 elements: byte count overflows
      {~uint64_t{0}, 1},
  };
  for (const auto& dims : bad) {
    std::vector<uint8_t> bytes = small_writer().serialize();
    const TensorInfoFields f = tensor_fields(bytes, "a", 2);
    poke<uint64_t>(bytes, f.dims, dims[0]);
    poke<uint64_t>(bytes, f.dims + 8, dims[1]);
    expect_error_naming(open_bytes(bytes, path), path, "'a'");
  }
}

TEST(GgufCorrupt, QuantizedRowNotAMultipleOfTheBlock) {
  GgufWriter w;
  w.add_tensor("q", DType::Q8_0, {48}, std::vector<uint8_t>(51));
  const std::string path = temp_path("block.gguf");
  expect_error_naming(open_bytes(w.serialize(), path), path, "'q'");
}

TEST(GgufCorrupt, DuplicateKey) {
  GgufWriter w;
  w.set_uint32("general.answer", 1);
  w.set_string("general.answer", "again");
  const std::string path = temp_path("dup-key.gguf");
  expect_error_naming(open_bytes(w.serialize(), path), path, "general.answer");
}

TEST(GgufCorrupt, DuplicateTensor) {
  GgufWriter w;
  w.add_tensor("same", DType::F32, {1}, as_bytes(std::vector<float>{1}));
  w.add_tensor("same", DType::F32, {1}, as_bytes(std::vector<float>{2}));
  const std::string path = temp_path("dup-tensor.gguf");
  expect_error_naming(open_bytes(w.serialize(), path), path, "'same'");
}

TEST(GgufCorrupt, UnknownValueTypeAndArrayOfArrays) {
  const std::string path = temp_path("value-type.gguf");
  {
    std::vector<uint8_t> bytes = small_writer().serialize();
    poke<uint32_t>(bytes, after_string(bytes, "test.answer"), 13);
    expect_error_naming(open_bytes(bytes, path), path, "test.answer");
  }
  {
    GgufWriter w;
    w.set_array<uint32_t>("nested", GgufValueType::Uint32, {1, 2});
    std::vector<uint8_t> bytes = w.serialize();
    // key, type (Array), element type, count: make the element type Array.
    poke<uint32_t>(bytes, after_string(bytes, "nested") + 4,
                   static_cast<uint32_t>(GgufValueType::Array));
    expect_error_naming(open_bytes(bytes, path), path, "nested");
  }
}

// Counts that would allocate far more than the file holds are rejected up front (ASan's
// allocator would abort on a multi-exabyte reserve).
TEST(GgufCorrupt, AbsurdCountsAreRejectedBeforeAllocating) {
  const std::string path = temp_path("counts.gguf");
  for (uint64_t count : {uint64_t{1} << 63, ~uint64_t{0}, uint64_t{1} << 40}) {
    std::vector<uint8_t> tensors = small_writer().serialize();
    poke<uint64_t>(tensors, kTensorCountOffset, count);
    EXPECT_FALSE(open_bytes(tensors, path).ok());
    std::vector<uint8_t> kvs = small_writer().serialize();
    poke<uint64_t>(kvs, kKvCountOffset, count);
    EXPECT_FALSE(open_bytes(kvs, path).ok());
  }
  // An array element count and a string length.
  GgufWriter w;
  w.set_string_array("strings", {"x"});
  w.set_string("text", "hello");
  std::vector<uint8_t> array_count = w.serialize();
  poke<uint64_t>(array_count, after_string(array_count, "strings") + 8, uint64_t{1} << 63);
  expect_error_naming(open_bytes(array_count, path), path, "strings");
  std::vector<uint8_t> string_length = w.serialize();
  poke<uint64_t>(string_length, after_string(string_length, "text") + 4, uint64_t{1} << 62);
  expect_error_naming(open_bytes(string_length, path), path, "text");
}

TEST(GgufCorrupt, MissingAndEmptyFiles) {
  const std::string path = temp_path("missing.gguf");
  expect_error_naming(open_gguf(path), path, "cannot open");
  expect_error_naming(open_model_source(path), path, "cannot open");
  expect_error_naming(open_bytes({}, path), path, "truncated");
}

// ---- Model::load on structurally valid files with the wrong tensors -------------------

// A tiny llama: 1 layer, dim 8, 2 heads of 4, 1 KV head, ffn 16, vocab 10, all F32.
GgufWriter tiny_llama(const std::string& skip = "", const std::string& reshape = "") {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 1);
  w.set_uint32("llama.embedding_length", 8);
  w.set_uint32("llama.feed_forward_length", 16);
  w.set_uint32("llama.attention.head_count", 2);
  w.set_uint32("llama.attention.head_count_kv", 1);
  w.set_uint32("llama.context_length", 64);
  struct Spec {
    std::string name;
    std::vector<int64_t> shape;
  };
  const std::vector<Spec> specs = {
      {"token_embd.weight", {8, 10}},     {"output_norm.weight", {8}},
      {"blk.0.attn_norm.weight", {8}},    {"blk.0.attn_q.weight", {8, 8}},
      {"blk.0.attn_k.weight", {8, 4}},    {"blk.0.attn_v.weight", {8, 4}},
      {"blk.0.attn_output.weight", {8, 8}}, {"blk.0.ffn_norm.weight", {8}},
      {"blk.0.ffn_gate.weight", {8, 16}}, {"blk.0.ffn_up.weight", {8, 16}},
      {"blk.0.ffn_down.weight", {16, 8}},
  };
  for (Spec s : specs) {
    if (s.name == skip) continue;
    if (s.name == reshape) s.shape.back() += 1;
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    w.add_tensor(s.name, DType::F32, s.shape, as_bytes(std::vector<float>(n, 0.25f)));
  }
  return w;
}

Result<std::unique_ptr<Model>> load_model(const GgufWriter& w, const std::string& path) {
  EXPECT_TRUE(w.write(path).ok());
  auto model = Model::open(path);
  fs::remove(path);
  return model;
}

TEST(GgufModelLoad, ValidTinyModelLoads) {
  const std::string path = temp_path("tiny.gguf");
  auto model = load_model(tiny_llama(), path);
  ASSERT_TRUE(model.ok()) << model.error().message;
  EXPECT_EQ((*model)->config().n_vocab, 10);
  EXPECT_EQ((*model)->config().head_dim, 4);
  EXPECT_EQ((*model)->config().rope_style, kernels::RopeStyle::Interleaved);
}

TEST(GgufModelLoad, MissingTensorIsAnErrorNamingFileAndTensor) {
  const std::string path = temp_path("tiny-missing.gguf");
  for (const char* name : {"blk.0.ffn_up.weight", "output_norm.weight", "token_embd.weight",
                           "blk.0.attn_norm.weight"}) {
    auto model = load_model(tiny_llama(name), path);
    ASSERT_FALSE(model.ok()) << name;
    EXPECT_NE(model.error().message.find(path), std::string::npos) << model.error().message;
    EXPECT_NE(model.error().message.find(name), std::string::npos) << model.error().message;
  }
}

TEST(GgufModelLoad, WrongShapeIsAnErrorNamingFileAndTensor) {
  const std::string path = temp_path("tiny-shape.gguf");
  for (const char* name : {"blk.0.attn_k.weight", "blk.0.ffn_down.weight", "output_norm.weight",
                           "blk.0.ffn_norm.weight"}) {
    auto model = load_model(tiny_llama("", name), path);
    ASSERT_FALSE(model.ok()) << name;
    EXPECT_NE(model.error().message.find(path), std::string::npos) << model.error().message;
    EXPECT_NE(model.error().message.find(name), std::string::npos) << model.error().message;
  }
}

TEST(GgufModelLoad, MissingHyperparameterIsAnErrorNamingTheKey) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.embedding_length", 8);
  const std::string path = temp_path("tiny-nokey.gguf");
  auto model = load_model(w, path);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("llama.block_count"), std::string::npos)
      << model.error().message;
}

}  // namespace
}  // namespace spillway::engine
