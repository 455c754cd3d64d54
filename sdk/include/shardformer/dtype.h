// The safetensors dtype names ("F32", "BF16", ...) and their LibTorch scalar types.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace shardformer {

// The LibTorch type of a safetensors dtype name, or nullopt for an unknown name.
std::optional<c10::ScalarType> scalar_type_from_safetensors(std::string_view name);
// Whether `name` is a safetensors dtype that packs several values per byte (F4, F6_*): known
// to the format, refused by this reader.
bool is_packed_safetensors_dtype(std::string_view name);

// The safetensors dtype name of a LibTorch type; throws Error for a type safetensors lacks.
std::string safetensors_dtype_name(c10::ScalarType type);

// Parses a model dtype as written in configs and config.json: "float32", "fp32", "float16",
// "half", "bfloat16", "bf16", "float64". Throws ConfigError naming `where` otherwise.
c10::ScalarType parse_model_dtype(std::string_view name, std::string_view where);

}  // namespace shardformer
