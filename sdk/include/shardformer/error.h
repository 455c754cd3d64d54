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

// The exit status of shardformer-host for each class of failure (docs/config.md lists them).
// A multi-rank job exits with the status of the rank whose failure ended it (128 + signal for
// a rank killed by a signal).
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntime = 1,  // the job failed while running (a peer died, a collective timed out, ...)
  kExitUsage = 2,    // bad command line
  kExitConfig = 3,   // ConfigError: the job config
  kExitModel = 4,    // CheckpointError, ModelError: the checkpoint or the model built from it
  kExitPlugin = 5,   // PluginError: no usable plugin for the architecture
};

// The ExitCode of an exception: by its class, kExitRuntime for any other.
inline int exit_code_for(const std::exception& e) {
  if (dynamic_cast<const ConfigError*>(&e)) return kExitConfig;
  if (dynamic_cast<const CheckpointError*>(&e) || dynamic_cast<const ModelError*>(&e)) {
    return kExitModel;
  }
  if (dynamic_cast<const PluginError*>(&e)) return kExitPlugin;
  return kExitRuntime;
}

}  // namespace shardformer
