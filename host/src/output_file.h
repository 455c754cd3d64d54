// A job's text output (JSON lines) written atomically: the lines go to PATH.partial, which
// commit() renames to PATH, so a job that fails leaves no half-written file under PATH.
#pragma once

#include <filesystem>
#include <fstream>

namespace shardformer::host {

class OutputFile {
 public:
  // Opens PATH.partial when `enabled` and `path` is not empty; otherwise writes nothing.
  OutputFile(std::filesystem::path path, bool enabled = true);
  bool is_open() const { return file_.is_open(); }
  // Appends `line` and a newline (nothing when not open).
  void write_line(const std::string& line);
  // Flushes, checks and renames the file to PATH; throws Error naming PATH.partial when it
  // could not be written. Does nothing when not open.
  void commit();

 private:
  std::filesystem::path path_, partial_;
  std::ofstream file_;
};

}  // namespace shardformer::host
