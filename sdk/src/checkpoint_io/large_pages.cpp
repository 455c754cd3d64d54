// Checks whether a checkpoint's page-cache pages would map as 2 MiB pages, and has the cache drop
// a file it holds in small pages: decoding streams every weight once a step, and 4 KiB pages
// cost it a TLB miss per 4 KiB read (2 MiB pages read 11-23% faster on a Zen 3).
#include "large_pages.h"

#include "shardformer/log.h"
#include "shardformer/strings.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace shardformer::detail {
namespace {

constexpr uint64_t kMinBytes = uint64_t(64) << 20;

// The PMD page size when transparent huge pages may back file mappings given MADV_HUGEPAGE; 0
// where they may not ("never", or no such kernel).
uint64_t pmd_page_bytes() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(enabled, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos) return 0;
  std::ifstream size("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
  uint64_t bytes = 0;
  size >> bytes;
  return bytes;
}

// The address range [first, last) of an smaps line that opens a mapping ("7f12c0000000-7f12c0200000
// r--p ..."); false for a field of one ("Size:   2048 kB").
bool mapping_range(const std::string& line, uintptr_t& first, uintptr_t& last) {
  const size_t dash = line.find('-'), space = line.find(' ');
  if (dash == 0 || dash == std::string::npos || space == std::string::npos || dash > space ||
      line.find_first_not_of("0123456789abcdef-") != space) {
    return false;
  }
  first = std::stoull(line.substr(0, dash), nullptr, 16);
  last = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
  return true;
}

}  // namespace

int64_t pmd_mapped_bytes(const void* address) {
  const auto at = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_mapping = false;
  while (std::getline(smaps, line)) {
    uintptr_t first = 0, last = 0;
    if (mapping_range(line, first, last)) {
      if (in_mapping) return -1;  // the next mapping: no FilePmdMapped line in ours
      in_mapping = first <= at && at < last;
    } else if (in_mapping && line.rfind("FilePmdMapped:", 0) == 0) {
      return std::stoll(line.substr(14)) * 1024;  // "FilePmdMapped:   524288 kB"
    }
  }
  return -1;
}

bool drop_if_cached_in_small_pages(int fd, const std::byte* data, uint64_t size,
                                   const std::filesystem::path& path) {
  const uint64_t pmd = pmd_page_bytes();
  if (size < kMinBytes || pmd == 0 || reinterpret_cast<uintptr_t>(data) % pmd != 0) return false;
  // tmpfs and ramfs files live only in memory: their pages cannot be dropped and read again.
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0 || fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC) {
    return false;
  }
  // A probe of one PMD page past the header, wholly inside the file: is it cached, and does it
  // map as one page? (The mapping starts at file offset 0, so the address and the offset are
  // aligned alike.)
  auto* probe = const_cast<std::byte*>(data) + pmd;
  std::vector<unsigned char> resident(pmd / static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)));
  if (::mincore(probe, pmd, resident.data()) != 0) return false;
  for (unsigned char page : resident) {
    if ((page & 1) == 0) return false;  // read fresh from disk, it comes in large folios
  }
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
  if (::madvise(probe, pmd, MADV_POPULATE_READ) != 0) return false;
  if (pmd_mapped_bytes(data) != 0) return false;  // large pages already, or the kernel is silent
  ::munmap(probe, pmd);  // no mapping of ours may pin the pages the cache is to drop
  ::fdatasync(fd);       // dirty pages (a file just written) are not dropped
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  log::info(str(path.string(), ": the page cache held this file in 4 KiB pages; dropped it so ",
                "that it is read again in ", pmd >> 20, " MiB pages"));
  return true;
}

}  // namespace shardformer::detail
