// Whether a file mapping sits in 2 MiB pages, and dropping a file that the page cache holds in
// 4 KiB pages so that the next mapping reads it again in 2 MiB ones (docs/benchmarks.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace shardformer::detail {

// Bytes of the file mapping holding `address` that the page table maps in PMD-size pages
// (/proc/self/smaps' FilePmdMapped); -1 where the kernel does not say.
int64_t pmd_mapped_bytes(const void* address);

// For a file mapped whole at `data` (MAP_PRIVATE, MADV_HUGEPAGE) through `fd`: true when the
// page cache already holds it in pages smaller than the PMD size, so that its weights would be
// read through 4 KiB page-table entries on every decoding step, and the cache has been told to
// drop it (posix_fadvise DONTNEED, after fdatasync for a file still being written back). The
// caller then maps it again, and the pages come back from disk in PMD-size folios. False, and
// nothing done, for files under 64 MiB, files in memory (tmpfs, ramfs), kernels without
// transparent huge pages, mappings not aligned to the PMD size, files not wholly cached (what is
// read fresh comes in large folios) and files already in large pages.
bool drop_if_cached_in_small_pages(int fd, const std::byte* data, uint64_t size,
                                   const std::filesystem::path& path);

}  // namespace shardformer::detail
