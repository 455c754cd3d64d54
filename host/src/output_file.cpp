// OutputFile: a temporary file renamed into place once every line is written.
#include "output_file.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

namespace shardformer::host {

OutputFile::OutputFile(std::filesystem::path path, bool enabled) : path_(std::move(path)) {
  if (!enabled || path_.empty()) return;
  partial_ = path_.string() + ".partial";
  file_.open(partial_, std::ios::binary | std::ios::trunc);
}

void OutputFile::write_line(const std::string& line) {
  if (file_.is_open()) file_ << line << "\n";
}

void OutputFile::commit() {
  if (!file_.is_open()) return;
  file_.flush();
  if (!file_) throw Error(str("cannot write ", partial_.string()));
  file_.close();
  std::filesystem::rename(partial_, path_);
}

}  // namespace shardformer::host
