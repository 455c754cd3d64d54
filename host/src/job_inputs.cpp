// Checks of a job's inputs against the model that runs them (token ids inside its vocabulary,
// sequences within its positions) and of its output paths, made before any work: every error
// names the job config file and the key.
#include "job_modes.h"
#include "jobs.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <unistd.h>

#include <system_error>

namespace shardformer::host {

namespace fs = std::filesystem;

void check_token_ids(const JobConfig& config, const std::vector<std::vector<int64_t>>& sequences,
                     const std::string& key, int64_t vocab_size) {
  for (size_t row = 0; row < sequences.size(); ++row) {
    for (size_t column = 0; column < sequences[row].size(); ++column) {
      const int64_t id = sequences[row][column];
      if (id < 0 || id >= vocab_size) {
        throw ConfigError(str(config.source.string(), ": ", key, "[", row, "][", column, "] = ", id,
                              " is outside the model's vocabulary [0, ", vocab_size, ")"));
      }
    }
  }
}

size_t longest_sequence(const std::vector<std::vector<int64_t>>& sequences) {
  size_t longest = 0;
  for (size_t row = 0; row < sequences.size(); ++row) {
    if (sequences[row].size() > sequences[longest].size()) longest = row;
  }
  return longest;
}

void check_output_path(const JobConfig& config, const fs::path& output, const std::string& key) {
  const fs::path folder = output.parent_path().empty() ? fs::path(".") : output.parent_path();
  std::error_code error;
  const fs::file_status status = fs::status(folder, error);
  std::string problem;
  if (status.type() == fs::file_type::not_found) {
    problem = "does not exist";
  } else if (error) {
    problem = str("cannot be looked up: ", error.message());
  } else if (!fs::is_directory(status)) {
    problem = "is not a folder";
  } else if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    problem = "is not writable";
  }
  if (!problem.empty()) {
    throw ConfigError(str(config.source.string(), ": ", key, ": cannot write '", output.string(),
                          "': the folder '", folder.string(), "' ", problem));
  }
}

JobInputs check_job_inputs(const JobConfig& config) {
  JobInputs inputs;
  if (config.mode == JobMode::kClassify || config.mode == JobMode::kSegment ||
      config.mode == JobMode::kCaption) {
    const auto decoding = std::chrono::steady_clock::now();
    inputs.images = read_job_images(config);
    inputs.decode_seconds = seconds_since(decoding);
  }
  return inputs;
}

}  // namespace shardformer::host
