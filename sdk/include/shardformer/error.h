// Exception types of the SDK. Every message names what is wrong and where (file, key, rank).
#pragma once

#include <stdexcept>
#include <string>

namespace shardformer {

// Base of every error the SDK and host raise on bad input or a failed job.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A safetensors file, index or config.json that is malformed or inconsistent.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

// A job config (TOML) with an unknown key, a wrong type or an out-of-range value.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A plugin library that cannot be used, or an architecture no plugin serves.
class PluginError : public Error {
 public:
  using Error::Error;
};

// A model that cannot be built from its config (unsupported option, bad shape).
class ModelError : public Error {
 public:
  using Error::Error;
};

}  // namespace shardformer
