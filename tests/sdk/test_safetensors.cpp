// Tests of the safetensors reader and writer: strict header validation on hand-made broken
// files, a write/read round trip, read_slice, and files written by the Python library.
#include "checkpoint_io/large_pages.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/dtype.h"
#include "shardformer/strings.h"
#include "test_util.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>

namespace shardformer {
namespace {

namespace fs = std::filesystem;
using testing::expect_checkpoint_error;

// Writes a safetensors file by hand: an 8-byte little-endian `header_length`, `header`, and
// `data_bytes` zero bytes.
void write_raw(const fs::path& path, uint64_t header_length, const std::string& header,
               size_t data_bytes) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(char((header_length >> (8 * i)) & 0xff));
  bytes += header;
  bytes.append(data_bytes, '\0');
  testing::write_text(path, bytes);
}

void write_raw(const fs::path& path, const std::string& header, size_t data_bytes) {
  write_raw(path, header.size(), header, data_bytes);
}

// True when both tensors have the same dtype, shape and bytes.
bool same_tensor(const at::Tensor& actual, const at::Tensor& expected) {
  at::Tensor a = actual.contiguous();
  at::Tensor b = expected.contiguous();
  // An empty tensor's data pointer may be null, which memcmp must not get even for 0 bytes.
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         (a.nbytes() == 0 || std::memcmp(a.const_data_ptr(), b.const_data_ptr(), a.nbytes()) == 0);
}

// ---- Validation of hand-made broken files ----------------------------------------------

class SafetensorsValidation : public testing::TempDirTest<> {};

TEST_F(SafetensorsValidation, MissingFile) {
  fs::path path = dir_ / "absent.safetensors";
  expect_checkpoint_error([&] { SafetensorsFile file(path); },
                          {path.string(), "cannot open the file"});
}

TEST_F(SafetensorsValidation, FileShorterThanLengthPrefix) {
  fs::path path = dir_ / "short.safetensors";
  testing::write_text(path, "abcde");
  expect_checkpoint_error([&] { SafetensorsFile file(path); },
                          {path.string(), "5 bytes, shorter than the 8-byte header length"});
}

TEST_F(SafetensorsValidation, HeaderLongerThanFile) {
  fs::path path = dir_ / "long_header.safetensors";
  write_raw(path, 1000, "{}", 0);
  expect_checkpoint_error([&] { SafetensorsFile file(path); },
                          {path.string(), "header length 1000 exceeds the 2 bytes"});
}

TEST_F(SafetensorsValidation, HeaderOverLimit) {
  fs::path path = dir_ / "huge_header.safetensors";
  write_raw(path, kMaxSafetensorsHeaderBytes + 1, "{}", 0);
  expect_checkpoint_error([&] { SafetensorsFile file(path); },
                          {path.string(), "exceeds the limit of 104857600 bytes"});
}

// A header that must be rejected, the data section size, and the expected reason.
struct BrokenHeader {
  const char* name;
  std::string header;
  size_t data_bytes;
  std::string reason;
};

class SafetensorsBrokenHeader
    : public testing::TempDirTest<::testing::TestWithParam<BrokenHeader>> {};

TEST_P(SafetensorsBrokenHeader, IsRejectedNamingFileAndReason) {
  const BrokenHeader& broken = GetParam();
  fs::path path = dir_ / (std::string(broken.name) + ".safetensors");
  write_raw(path, broken.header, broken.data_bytes);
  expect_checkpoint_error([&] { SafetensorsFile file(path); }, {path.string(), broken.reason});
}

const std::string kF32 = R"("dtype": "F32", "shape": [1], "data_offsets": [0, 4])";

INSTANTIATE_TEST_SUITE_P(
    Validation, SafetensorsBrokenHeader,
    ::testing::Values(
        BrokenHeader{"InvalidJson", R"({"w": )", 0, "invalid JSON at line 1"},
        BrokenHeader{"TopLevelNotObject", "[1, 2]", 0, "the header must be a JSON object"},
        BrokenHeader{"EntryNotObject", R"({"w": 3})", 0, "tensor 'w': the entry must be an object"},
        BrokenHeader{"MissingDtype", R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4,
                     "tensor 'w': missing 'dtype'"},
        BrokenHeader{"MissingShape", R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4,
                     "tensor 'w': missing 'shape'"},
        BrokenHeader{"MissingDataOffsets", R"({"w": {"dtype": "F32", "shape": [1]}})", 4,
                     "tensor 'w': missing 'data_offsets'"},
        BrokenHeader{"DtypeNotString",
                     R"({"w": {"dtype": 32, "shape": [1], "data_offsets": [0, 4]}})", 4,
                     "tensor 'w': 'dtype' must be a string"},
        BrokenHeader{"ShapeNotArray",
                     R"({"w": {"dtype": "F32", "shape": "1", "data_offsets": [0, 4]}})", 4,
                     "tensor 'w': 'shape' must be an array of integers"},
        BrokenHeader{"ShapeFloat",
                     R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4,
                     "tensor 'w': 'shape' must be an array of integers"},
        BrokenHeader{"DataOffsetsOneNumber",
                     R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4]}})", 4,
                     "tensor 'w': 'data_offsets' must be two non-negative integers"},
        BrokenHeader{"DataOffsetsNegative",
                     R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4,
                     "tensor 'w': 'data_offsets' must be two non-negative integers"},
        BrokenHeader{"UnknownDtype",
                     R"({"w": {"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}})", 4,
                     "tensor 'w': unknown dtype 'F99'"},
        BrokenHeader{"PackedFourBitDtype",
                     R"({"w": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}})", 1,
                     "tensor 'w': dtype 'F4' packs several values per byte and is not supported"},
        BrokenHeader{"NegativeDimension",
                     R"({"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 4]}})", 4,
                     "tensor 'w': negative dimension -1"},
        BrokenHeader{"ShapeTooLarge",
                     R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296],
                         "data_offsets": [0, 4]}})",
                     4, "tensor 'w': shape [4294967296, 4294967296] is too large"},
        BrokenHeader{"OffsetsOutsideData",
                     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4,
                     "tensor 'w': data_offsets [0, 8] lie outside the data section of 4 bytes"},
        BrokenHeader{"BeginAfterEnd",
                     R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4,
                     "tensor 'w': data_offsets begin 4 > end 0"},
        BrokenHeader{"SizeMismatch",
                     R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8,
                     "tensor 'w': shape [3] of dtype F32 needs 12 bytes but data_offsets [0, 8] "
                     "span 8 bytes"},
        BrokenHeader{"Overlap",
                     R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                     12, "tensors 'a' [0, 8) and 'b' [4, 12) overlap"},
        BrokenHeader{"DuplicateName", "{\"w\": {" + kF32 + "}, \"w\": {" + kF32 + "}}", 4,
                     "duplicate tensor name 'w'"},
        BrokenHeader{"MetadataNotObject", R"({"__metadata__": 3})", 0,
                     "'__metadata__' must be an object of strings"},
        BrokenHeader{"MetadataValueNotString", R"({"__metadata__": {"k": 1}})", 0,
                     "'__metadata__' must be an object of strings"},
        // Found by fuzzing (tests/fuzz): a float overflowing a double escaped as nlohmann's
        // out_of_range, naming no file.
        BrokenHeader{"NumberOverflow",
                     R"({"__metadata__": {"k": "v"}, "w": {"dtype": "F32", "shape": [1e999],
                         "data_offsets": [0, 4]}})",
                     4, "invalid JSON: [json.exception.out_of_range.406] number overflow"},
        // Found by fuzzing: an entry nested this deep overflowed the stack when printed.
        BrokenHeader{"NestedTooDeep", "{\"w\": " + std::string(100000, '[') + "}", 0,
                     "invalid JSON at line 1, column 134 (byte 134): nested deeper than 128"},
        // Found by fuzzing: 2^63 bytes fit in 64 bits, but LibTorch's element count and strides
        // overflow int64 (undefined behaviour in numel(), c10::Error in read()).
        BrokenHeader{"ZeroSizedShapeTooLarge",
                     R"({"w": {"dtype": "U8", "shape": [4294967296, 2147483648, 0],
                         "data_offsets": [0, 0]}})",
                     0, "tensor 'w': shape [4294967296, 2147483648, 0] is too large"}),
    [](const auto& info) { return std::string(info.param.name); });

// F8_E8M0 (power-of-two scales of MX formats), which the Python library cannot write yet.
TEST_F(SafetensorsValidation, F8E8M0ReadsAsPowersOfTwo) {
  fs::path path = dir_ / "e8m0.safetensors";
  write_raw(path, R"({"scale": {"dtype": "F8_E8M0", "shape": [3], "data_offsets": [0, 3]}})", 0);
  {
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out | std::ios::ate);
    const char bytes[3] = {char(127), char(128), char(120)};  // 2^0, 2^1, 2^-7
    out.write(bytes, 3);
  }
  SafetensorsFile file(path);
  EXPECT_EQ(file.info("scale").dtype, c10::ScalarType::Float8_e8m0fnu);
  EXPECT_TRUE(at::equal(file.read("scale").to(at::kFloat), at::tensor({1.0f, 2.0f, 0.0078125f})));
}

TEST_F(SafetensorsValidation, ZeroElementTensorsAreValid) {
  fs::path path = dir_ / "empty.safetensors";
  write_raw(path,
            R"({"empty": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]},
                "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
            4);
  SafetensorsFile file(path);
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.info("empty").numel(), 0);
  EXPECT_EQ(file.read("empty").sizes(), at::IntArrayRef({0, 3}));
  EXPECT_EQ(file.read_slice("empty", 1, 1, 2).sizes(), at::IntArrayRef({0, 2}));
}

TEST_F(SafetensorsValidation, UnknownTensorNamesFile) {
  fs::path path = dir_ / "one.safetensors";
  write_raw(path, "{\"w\": {" + kF32 + "}}", 4);
  SafetensorsFile file(path);
  EXPECT_FALSE(file.contains("v"));
  expect_checkpoint_error([&] { file.info("v"); }, {path.string(), "tensor 'v'"});
  expect_checkpoint_error([&] { file.read("v"); }, {path.string(), "tensor 'v'"});
}

// ---- Round trip through save_safetensors ---------------------------------------------------

class SafetensorsRoundTrip : public testing::TempDirTest<> {};

// One tensor per dtype the writer supports, plus a scalar, an empty and a transposed tensor.
std::map<std::string, at::Tensor> round_trip_tensors() {
  at::Tensor values = at::arange(-6, 6, at::kDouble).reshape({3, 4}) * 0.5;  // [3, 4]
  std::map<std::string, at::Tensor> tensors;
  for (auto type : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong, at::kInt,
                    at::kShort, at::kChar, at::kBool, at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
    tensors["t_" + safetensors_dtype_name(type)] = values.to(type);
  }
  tensors["t_U8"] = at::arange(12, at::kByte).reshape({3, 4}) * 20;
  tensors["scalar"] = at::scalar_tensor(2.5, at::kFloat);                  // []
  tensors["empty"] = at::empty({0, 3}, at::kFloat);                        // [0, 3]
  tensors["transposed"] = at::arange(6, at::kFloat).reshape({2, 3}).t();   // [3, 2]
  tensors["cube"] = at::arange(4 * 6 * 5, at::kFloat).reshape({4, 6, 5});  // [4, 6, 5]
  tensors["cube_bf16"] = tensors["cube"].to(at::kBFloat16);                // [4, 6, 5]
  return tensors;
}

TEST_F(SafetensorsRoundTrip, EveryDtypeReadsBackBitExact) {
  auto tensors = round_trip_tensors();
  fs::path path = dir_ / "model.safetensors";
  save_safetensors(path, tensors);
  SafetensorsFile file(path);
  ASSERT_EQ(file.tensors().size(), tensors.size());
  EXPECT_TRUE(file.metadata().empty());
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(file.contains(name));
    EXPECT_EQ(file.info(name).dtype_name, safetensors_dtype_name(tensor.scalar_type()));
    at::Tensor read = file.read(name);
    EXPECT_TRUE(read.is_contiguous());
    EXPECT_TRUE(same_tensor(read, tensor));
  }
}

TEST_F(SafetensorsRoundTrip, LayoutIsTheFormatsAligned8ByteHeaderAndContiguousData) {
  fs::path path = dir_ / "model.safetensors";
  save_safetensors(path, round_trip_tensors(), {{"format", "pt"}});
  for (const auto& entry : fs::directory_iterator(dir_)) {  // no temporary left behind
    EXPECT_EQ(entry.path().filename(), "model.safetensors");
  }

  std::ifstream in(path, std::ios::binary);
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | prefix[i];
  EXPECT_EQ(header_length % 8, 0u);

  // Entries sorted by name with contiguous offsets covering the whole data section.
  SafetensorsFile file(path);
  uint64_t offset = 0;
  for (const TensorInfo& info : file.tensors()) {
    EXPECT_EQ(info.begin, offset) << info.name;
    offset = info.end;
  }
  EXPECT_EQ(8 + header_length + offset, fs::file_size(path));
  EXPECT_EQ(file.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
}

// The reference implementation reads what we write: tools/check_safetensors_file.py loads the
// file with the Python safetensors library and compares each tensor with its float64 copy.
TEST_F(SafetensorsRoundTrip, ThePythonLibraryReadsOurFilesExactly) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, tensor] : round_trip_tensors()) {
    tensors[name] = tensor;
    if (tensor.is_floating_point() || tensor.scalar_type() == at::kLong) {
      tensors[name + ".expected"] = tensor.to(at::kDouble);
    }
  }
  const fs::path path = dir_ / "ours.safetensors";
  save_safetensors(path, tensors, {{"format", "pt"}, {"writer", "shardformer"}});
  const std::string command = str(testing::python().string(), " ",
                                  (testing::tools_dir() / "check_safetensors_file.py").string(),
                                  " ", path.string(), " > ", (dir_ / "out.json").string());
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream in(dir_ / "out.json");
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(output.find(R"("writer": "shardformer")"), std::string::npos) << output;
  EXPECT_NE(output.find(R"("mismatched": [])"), std::string::npos) << output;
  for (const auto& [name, tensor] : tensors) {
    EXPECT_NE(output.find('"' + name + '"'), std::string::npos) << name << " not read: " << output;
  }
}

// Strided tensors are written as their values: a slice of the last dimension (tp logits narrowed
// past their vocabulary padding) row by row without a copy, any other layout through one.
TEST_F(SafetensorsRoundTrip, StridedTensorsAreWrittenAsTheirValues) {
  const fs::path path = dir_ / "strided.safetensors";
  const at::Tensor padded = at::randn({2, 3, 10});
  const std::map<std::string, at::Tensor> tensors{
      {"narrowed", padded.narrow(-1, 0, 7)},                       // rows 10 apart
      {"middle", padded.narrow(-1, 2, 5)},                         // rows start at an offset
      {"transposed", padded.transpose(0, 2)},                      // no row layout: copied
      {"expanded", at::randn({1, 4}).expand({3, 4})},              // stride 0: copied
      {"row", padded.select(0, 1).select(0, 2).narrow(0, 1, 4)}};  // 1-D
  save_safetensors(path, tensors);
  const SafetensorsFile file(path);
  for (const auto& [name, tensor] : tensors) {
    EXPECT_TRUE(at::equal(file.read(name), tensor.contiguous())) << name;
  }
}

TEST_F(SafetensorsRoundTrip, OverwritesAnExistingFile) {
  fs::path path = dir_ / "model.safetensors";
  save_safetensors(path, {{"a", at::ones({8}, at::kFloat)}});
  save_safetensors(path, {{"b", at::zeros({2}, at::kInt)}});
  SafetensorsFile file(path);
  EXPECT_FALSE(file.contains("a"));
  EXPECT_TRUE(same_tensor(file.read("b"), at::zeros({2}, at::kInt)));
}

TEST_F(SafetensorsRoundTrip, RejectsReservedName) {
  fs::path path = dir_ / "model.safetensors";
  expect_checkpoint_error(
      [&] {
        save_safetensors(path, {{"__metadata__", at::ones({1})}});
      },
      {path.string(), "'__metadata__'"});
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(SafetensorsRoundTrip, ReadSliceMatchesNarrowAlongEveryDim) {
  fs::path path = dir_ / "model.safetensors";
  save_safetensors(path, round_trip_tensors());
  SafetensorsFile file(path);
  for (const char* name : {"cube", "cube_bf16"}) {
    at::Tensor full = file.read(name);  // [4, 6, 5]
    for (int64_t dim = 0; dim < 3; ++dim) {
      const int64_t size = full.size(dim);
      for (auto [start, length] :
           {std::pair<int64_t, int64_t>{0, size}, {1, 2}, {size - 1, 1}, {2, 0}}) {
        at::Tensor slice = file.read_slice(name, dim, start, length);
        EXPECT_TRUE(same_tensor(slice, full.narrow(dim, start, length)))
            << name << " dim " << dim << " start " << start << " length " << length;
      }
    }
  }
}

TEST_F(SafetensorsRoundTrip, ReadSliceRejectsBadRanges) {
  fs::path path = dir_ / "model.safetensors";
  save_safetensors(path, round_trip_tensors());
  SafetensorsFile file(path);
  expect_checkpoint_error([&] { file.read_slice("cube", 3, 0, 1); },
                          {path.string(), "tensor 'cube'", "slice dimension 3 is out of range"});
  expect_checkpoint_error([&] { file.read_slice("cube", -1, 0, 1); },
                          {path.string(), "slice dimension -1 is out of range"});
  expect_checkpoint_error([&] { file.read_slice("cube", 1, 4, 3); },
                          {path.string(), "slice [4, 7) of dimension 1 is out of range"});
  expect_checkpoint_error([&] { file.read_slice("cube", 0, 1, -1); },
                          {path.string(), "of dimension 0 is out of range"});
  expect_checkpoint_error([&] { file.read_slice("scalar", 0, 0, 1); },
                          {path.string(), "tensor 'scalar'", "slice dimension 0"});
  // Found by fuzzing: the message computed start + length, which overflowed.
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  expect_checkpoint_error(
      [&] { file.read_slice("cube", 1, kMax, 1); },
      {path.string(), "slice [9223372036854775807, 9223372036854775807 + 1) of dimension 1"});
  // Found by fuzzing: read_slice allocated its output before checking the length.
  expect_checkpoint_error([&] { file.read_slice("cube", 0, 0, kMax); },
                          {path.string(), "slice [0, 9223372036854775807) of dimension 0"});
}

// ---- Files written by the Python safetensors library ---------------------------------------

class SafetensorsPythonFixtures : public testing::PythonFixturesTest {};

TEST_F(SafetensorsPythonFixtures, EveryDtypeMatchesItsFloat64Copy) {
  SafetensorsFile file(dir_ / "dtypes.safetensors");
  EXPECT_EQ(file.metadata().at("source"), "python");
  std::vector<std::string> checked;
  for (const TensorInfo& info : file.tensors()) {
    const std::string expected_name = info.name + ".expected";
    if (!file.contains(expected_name)) continue;
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.dtype_name, info.name);
    EXPECT_EQ(info.dtype, *scalar_type_from_safetensors(info.name));
    at::Tensor tensor = file.read(info.name);  // [3, 5]
    EXPECT_EQ(tensor.scalar_type(), info.dtype);
    EXPECT_TRUE(at::equal(tensor.to(at::kDouble), file.read(expected_name)));
    checked.push_back(info.name);
  }
  for (const char* name : {"BF16", "BOOL", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ",
                           "F8_E5M2FNUZ", "I16", "I32", "I64", "I8", "U8", "U16", "U32", "U64"}) {
    EXPECT_NE(std::find(checked.begin(), checked.end(), name), checked.end())
        << name << " missing from " << file.path();
  }
}

// C64 as the Python library writes complex64: real and imaginary parts kept.
TEST_F(SafetensorsPythonFixtures, ReadsComplex64) {
  SafetensorsFile file(dir_ / "dtypes.safetensors");
  ASSERT_TRUE(file.contains("C64")) << file.path();
  const at::Tensor tensor = file.read("C64");  // [3, 5] complex64
  EXPECT_EQ(tensor.scalar_type(), at::kComplexFloat);
  EXPECT_TRUE(at::equal(at::real(tensor).to(at::kDouble), file.read("C64.expected_real")));
  EXPECT_TRUE(at::equal(at::imag(tensor).to(at::kDouble), file.read("C64.expected_imag")));
  EXPECT_TRUE(at::equal(file.read_slice("C64", 1, 2, 3), tensor.narrow(1, 2, 3)));
}

TEST_F(SafetensorsPythonFixtures, ReadSliceOfThreeDimensionalTensor) {
  SafetensorsFile file(dir_ / "slice3d.safetensors");
  at::Tensor expected = at::arange(120, at::kFloat).reshape({4, 6, 5});  // [4, 6, 5]
  ASSERT_TRUE(at::equal(file.read("slice3d"), expected));
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (int64_t start = 0; start < expected.size(dim); ++start) {
      for (int64_t length = 0; start + length <= expected.size(dim); ++length) {
        EXPECT_TRUE(at::equal(file.read_slice("slice3d", dim, start, length),
                              expected.narrow(dim, start, length)))
            << "dim " << dim << " start " << start << " length " << length;
      }
    }
  }
}

// The first read of an aligned tensor uses the mapping in place: written, it changes neither
// the file nor a second read; it outlives the SafetensorsFile that made it.
TEST_F(SafetensorsRoundTrip, InPlaceReadsAreCopyOnWriteAndOutliveTheFile) {
  const fs::path path = dir_ / "in_place.safetensors";
  const at::Tensor original = at::arange(4096, at::kFloat).reshape({64, 64});
  save_safetensors(path, {{"w", original}, {"b", at::ones({3}, at::kFloat)}});
  at::Tensor first;
  {
    SafetensorsFile file(path);
    first = file.read("w");
    EXPECT_EQ(first.data_ptr(), static_cast<const void*>(file.data(file.info("w"))));
    first.mul_(-1);  // copy-on-write: this process's pages only
    const at::Tensor second = file.read("w");
    EXPECT_NE(second.data_ptr(), first.data_ptr());
    EXPECT_TRUE(at::equal(second, original));
  }
  EXPECT_TRUE(at::equal(first, -original));  // the mapping lives with the tensor
  EXPECT_TRUE(at::equal(SafetensorsFile(path).read("w"), original));  // the file is unchanged
}

// A tensor-parallel rank's block of rows is used in place the same way (no copy; copy-on-write);
// once the tensor was handed out in place, further blocks are copies read from the file.
TEST_F(SafetensorsRoundTrip, RowBlocksAreReadInPlaceOnceThenCopied) {
  const fs::path path = dir_ / "rows.safetensors";
  const at::Tensor original = at::arange(4096, at::kFloat).reshape({64, 64});
  save_safetensors(path, {{"w", original}});
  SafetensorsFile file(path);
  at::Tensor top = file.read_rows("w", 32, 32);
  EXPECT_EQ(top.data_ptr(), static_cast<const void*>(file.data(file.info("w")) + 32 * 64 * 4));
  EXPECT_TRUE(at::equal(top, original.narrow(0, 32, 32)));
  top.mul_(-1);                                          // this process's pages only
  const at::Tensor again = file.read_rows("w", 16, 32);  // overlaps the block written above
  EXPECT_NE(again.data_ptr(), top.data_ptr());
  EXPECT_TRUE(at::equal(again, original.narrow(0, 16, 32)));
  EXPECT_TRUE(at::equal(file.read("w"), original));
  EXPECT_THROW(file.read_rows("w", 60, 5), CheckpointError);
}

// The VmFlags line of this process's mapping of `path` in /proc/self/smaps; empty if none.
std::string mapping_flags(const fs::path& path) {
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const bool header = !line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
                        line.find('-') != std::string::npos && line.find(':') > line.find(' ');
    if (header) inside = line.size() >= path.string().size() && line.ends_with(path.string());
    if (inside && line.starts_with("VmFlags:")) return line;
  }
  return {};
}

// The mapping asks for transparent huge pages: the weights a decode step streams are then
// read from disk into 2 MiB folios and mapped whole (docs/benchmarks.md).
TEST_F(SafetensorsRoundTrip, TheMappingAsksForHugePages) {
  if (!fs::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  const fs::path path = fs::canonical(dir_) / "huge.safetensors";
  save_safetensors(path, {{"w", at::ones({64}, at::kFloat)}});
  const SafetensorsFile file(path);
  const std::string flags = mapping_flags(path);
  ASSERT_FALSE(flags.empty()) << "no mapping of " << path << " in /proc/self/smaps";
  EXPECT_NE((flags + " ").find(" hg "), std::string::npos) << flags;
}

// This process's resident memory in MiB (file-backed mapped pages included).
double resident_mib() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
}

// A tensor used in place that its reader drops (a family keeps a converted copy of it) takes
// its file pages out of the process's resident memory, as a copied tensor's read does: they
// are not counted twice beside the copy.
TEST_F(SafetensorsRoundTrip, AnInPlaceTensorDroppedLeavesResidentMemory) {
  const fs::path path = dir_ / "large.safetensors";
  save_safetensors(path, {{"w", at::ones({16384, 1024}, at::kFloat)}});  // 64 MiB
  const SafetensorsFile file(path);
  at::Tensor copy;
  double held = 0;
  {
    const at::Tensor in_place = file.read("w");
    ASSERT_EQ(in_place.data_ptr(), static_cast<const void*>(file.data(file.info("w"))));
    copy = in_place.t().contiguous();  // touches every page of the mapping
    held = resident_mib();
  }
  const double after = resident_mib();
  EXPECT_GT(held - after, 60.0) << "resident " << held << " MiB with the in-place tensor, " << after
                                << " MiB after it was dropped";
  EXPECT_TRUE(at::equal(file.read("w"), copy.t()));  // read again from the file
}

// Whether this kernel and the file system of `dir` map a file read fresh from disk in PMD-size
// pages (transparent huge pages for file mappings given MADV_HUGEPAGE): the control for the
// test below, which has nothing to check where they never do.
bool maps_fresh_files_in_large_pages(const fs::path& dir) {
  const fs::path path = dir / "control.bin";
  testing::write_text(path, std::string(size_t(8) << 20, 'x'));
  const int fd = ::open(path.c_str(), O_RDONLY);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  const size_t size = size_t(8) << 20;
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) return false;
  ::madvise(data, size, MADV_HUGEPAGE);
  ::madvise(data, size, 22);  // MADV_POPULATE_READ
  const bool large = detail::pmd_mapped_bytes(data) > 0;
  ::munmap(data, size);
  return large;
}

// Copies a file in 4 KiB writes, as some converters write: the page cache then holds the copy in
// 4 KiB pages (large writes may get it large folios).
void copy_in_small_writes(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  std::vector<char> page(4096);
  while (in.read(page.data(), static_cast<std::streamsize>(page.size())) || in.gcount() > 0) {
    out.write(page.data(), in.gcount());
    out.flush();
  }
}

// A checkpoint just written in small pieces sits in the page cache in 4 KiB pages, where a
// decoding step would take a TLB miss every 4 KiB of weights it streams. The reader has the
// cache drop such a file and maps it again, so its in-place tensors sit in 2 MiB pages and read
// back the same values.
TEST_F(SafetensorsRoundTrip, ALargeFileJustWrittenIsMappedInLargePages) {
  if (!maps_fresh_files_in_large_pages(dir_)) {
    GTEST_SKIP() << "this kernel or the file system of " << dir_
                 << " maps even a file read fresh from disk in 4 KiB pages";
  }
  const fs::path path = dir_ / "large.safetensors";
  const at::Tensor w = at::arange(17 << 20, at::kFloat).reshape({17 << 10, 1024});  // 68 MiB
  save_safetensors(dir_ / "written.safetensors", {{"w", w}});
  copy_in_small_writes(dir_ / "written.safetensors", path);
  const SafetensorsFile file(path);
  const at::Tensor in_place = file.read("w");
  ASSERT_EQ(in_place.data_ptr(), static_cast<const void*>(file.data(file.info("w"))));
  EXPECT_GE(detail::pmd_mapped_bytes(in_place.data_ptr()), int64_t(60) << 20);
  EXPECT_TRUE(at::equal(in_place, w));
}

}  // namespace
}  // namespace shardformer
