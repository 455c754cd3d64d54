// Grey PNG files written with libpng (SAM's masks), atomically.
#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "shardformer/vision/image.h"

#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <memory>
#include <string>

namespace shardformer::vision {

namespace {

struct WriteError {
  std::string message;
};

void png_write_fail(png_structp png, png_const_charp message) {
  static_cast<WriteError*>(png_get_error_ptr(png))->message = message;
  png_longjmp(png, 1);
}

void png_write_warning(png_structp, png_const_charp) {}

}  // namespace

void write_grey_png(const std::filesystem::path& path, std::span<const uint8_t> pixels,
                    int64_t width, int64_t height) {
  if (width <= 0 || height <= 0 || static_cast<int64_t>(pixels.size()) != width * height) {
    throw Error(str(path.string(), ": a grey PNG of ", width, " x ", height, " needs ",
                    width * height, " pixels, not ", pixels.size()));
  }
  const std::filesystem::path partial = path.string() + ".partial";
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(partial.c_str(), "wb"), &std::fclose);
  if (!file) throw Error(str("cannot write ", partial.string()));
  WriteError error;
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &error, png_write_fail, png_write_warning);
  png_infop info = png != nullptr ? png_create_info_struct(png) : nullptr;
  if (png == nullptr || info == nullptr) {
    png_destroy_write_struct(&png, &info);
    throw Error(str("cannot write ", path.string(), ": libpng could not start"));
  }
  if (setjmp(png_jmpbuf(png)) != 0) {
    png_destroy_write_struct(&png, &info);
    file.reset();
    std::filesystem::remove(partial);
    throw Error(str("cannot write ", path.string(), ": ", error.message));
  }
  png_init_io(png, file.get());
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < height; ++y) {
    png_write_row(png, pixels.data() + y * width);
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fflush(file.get()) != 0 || std::ferror(file.get()) != 0) {
    file.reset();
    std::filesystem::remove(partial);
    throw Error(str("cannot write ", path.string()));
  }
  file.reset();
  std::filesystem::rename(partial, path);
}

}  // namespace shardformer::vision
