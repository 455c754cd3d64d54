// Mapping between safetensors dtype names, config.json dtype names and LibTorch scalar types.
#include "shardformer/dtype.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <array>
#include <utility>

namespace shardformer {
namespace {

using DtypeName = std::pair<std::string_view, c10::ScalarType>;

// Every dtype of the safetensors format that has a LibTorch type; the packed sub-byte ones
// (F4, F6_E2M3, F6_E3M2) are refused by name (kPackedSafetensorsDtypes).
constexpr std::array<DtypeName, 19> kSafetensorsDtypes{{
    {"F64", c10::ScalarType::Double},
    {"F32", c10::ScalarType::Float},
    {"F16", c10::ScalarType::Half},
    {"BF16", c10::ScalarType::BFloat16},
    {"I64", c10::ScalarType::Long},
    {"I32", c10::ScalarType::Int},
    {"I16", c10::ScalarType::Short},
    {"I8", c10::ScalarType::Char},
    {"U64", c10::ScalarType::UInt64},
    {"U32", c10::ScalarType::UInt32},
    {"U16", c10::ScalarType::UInt16},
    {"U8", c10::ScalarType::Byte},
    {"BOOL", c10::ScalarType::Bool},
    {"F8_E4M3", c10::ScalarType::Float8_e4m3fn},
    {"F8_E5M2", c10::ScalarType::Float8_e5m2},
    {"F8_E4M3FNUZ", c10::ScalarType::Float8_e4m3fnuz},
    {"F8_E5M2FNUZ", c10::ScalarType::Float8_e5m2fnuz},
    {"F8_E8M0", c10::ScalarType::Float8_e8m0fnu},
    {"C64", c10::ScalarType::ComplexFloat},
}};

constexpr std::array<std::string_view, 3> kPackedSafetensorsDtypes{"F4", "F6_E2M3", "F6_E3M2"};

constexpr std::array<DtypeName, 10> kModelDtypes{{
    {"float32", c10::ScalarType::Float},
    {"fp32", c10::ScalarType::Float},
    {"float", c10::ScalarType::Float},
    {"float16", c10::ScalarType::Half},
    {"fp16", c10::ScalarType::Half},
    {"half", c10::ScalarType::Half},
    {"bfloat16", c10::ScalarType::BFloat16},
    {"bf16", c10::ScalarType::BFloat16},
    {"float64", c10::ScalarType::Double},
    {"double", c10::ScalarType::Double},
}};

template <size_t N>
std::optional<c10::ScalarType> find_type(const std::array<DtypeName, N>& table,
                                         std::string_view name) {
  for (const auto& [entry, type] : table) {
    if (entry == name) return type;
  }
  return std::nullopt;
}

}  // namespace

std::optional<c10::ScalarType> scalar_type_from_safetensors(std::string_view name) {
  return find_type(kSafetensorsDtypes, name);
}

bool is_packed_safetensors_dtype(std::string_view name) {
  for (std::string_view packed : kPackedSafetensorsDtypes) {
    if (packed == name) return true;
  }
  return false;
}

std::string safetensors_dtype_name(c10::ScalarType type) {
  for (const auto& [name, entry] : kSafetensorsDtypes) {
    if (entry == type) return std::string(name);
  }
  throw Error(str("safetensors has no dtype for the LibTorch type ", c10::toString(type)));
}

c10::ScalarType parse_model_dtype(std::string_view name, std::string_view where) {
  if (auto type = find_type(kModelDtypes, name)) return *type;
  std::vector<std::string_view> known;
  for (const auto& entry : kModelDtypes) known.push_back(entry.first);
  throw ConfigError(
      str(where, ": unknown dtype '", name, "' (expected one of ", join(known, ", "), ")"));
}

}  // namespace shardformer
