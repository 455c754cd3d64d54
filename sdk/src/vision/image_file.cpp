// Image files to RGB: JPEG through libjpeg-turbo, PNG through libpng, each colour mode converted
// as PIL's Image.convert("RGB") does, then the EXIF orientation applied as ImageOps.exif_transpose.
#include "shardformer/vision/image.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

namespace shardformer::vision {
namespace {

ConfigError bad_image(const std::string& name, const std::string& why) {
  return ConfigError(str(name, ": ", why));
}

void check_pixels(const std::string& name, int64_t width, int64_t height, int64_t max_pixels) {
  if (width <= 0 || height <= 0) throw bad_image(name, "the image has no pixels");
  if (width * height > max_pixels) {
    throw bad_image(
        name, str("declares ", width, " x ", height, " pixels, more than the limit of ", max_pixels,
                  max_pixels == kMaxImagePixels ? " (PIL's decompression-bomb limit)" : ""));
  }
}

// ---- JPEG ----

struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings are ignored as PIL ignores them, except data that ends early: PIL refuses a truncated
// file ("image file is truncated") where libjpeg would fill the rest with grey.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
}

// PIL's MULDIV255 and its CMYK -> RGB: channel = (255 - K) - C (255 - K) / 255, of CMYK values
// as PIL holds them (inverted from the file when an Adobe marker says the file stores them so).
uint8_t cmyk_channel(int c, int k) {
  const int nk = 255 - k;
  const int tmp = c * nk + 128;
  const int v = nk - (((tmp >> 8) + tmp) >> 8);
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

Image decode_jpeg(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels) {
  jpeg_decompress_struct cinfo{};
  JpegErrors errors{};
  Image image;
  std::vector<uint8_t> row;
  int orientation = 1;
  int64_t too_large_width = 0, too_large_height = 0;
  cinfo.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  errors.manager.emit_message = jpeg_message;
  // Objects with destructors are all declared above: a longjmp back here skips none.
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&cinfo);
    throw bad_image(name, str("not a whole JPEG image: ", errors.message));
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&cinfo, TRUE);
  const int64_t width = cinfo.image_width, height = cinfo.image_height;
  if (width <= 0 || height <= 0 || width * height > max_pixels) {
    too_large_width = width;
    too_large_height = height;
  } else {
    for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
      if (m->marker == JPEG_APP0 + 1 && m->data_length > 6 &&
          std::memcmp(m->data, "Exif\0\0", 6) == 0) {
        orientation = exif_orientation({m->data + 6, m->data_length - 6});
        break;
      }
    }
    const bool grey = cinfo.jpeg_color_space == JCS_GRAYSCALE;
    const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = grey ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    const int channels = cinfo.output_components;
    image.width = width;
    image.height = height;
    image.rgb.resize(static_cast<size_t>(width * height * 3));
    row.resize(static_cast<size_t>(width * channels));
    const bool inverted = cmyk && cinfo.saw_Adobe_marker;
    while (cinfo.output_scanline < cinfo.output_height) {
      const int64_t y = cinfo.output_scanline;
      JSAMPROW rows[1] = {row.data()};
      jpeg_read_scanlines(&cinfo, rows, 1);
      uint8_t* out = image.rgb.data() + y * width * 3;
      for (int64_t x = 0; x < width; ++x) {
        const uint8_t* in = row.data() + x * channels;
        if (channels == 1) {
          out[x * 3] = out[x * 3 + 1] = out[x * 3 + 2] = in[0];
        } else if (channels == 3) {
          std::memcpy(out + x * 3, in, 3);
        } else {
          const auto value = [&](int i) { return inverted ? 255 - in[i] : int(in[i]); };
          for (int c = 0; c < 3; ++c) out[x * 3 + c] = cmyk_channel(value(c), value(3));
        }
      }
    }
    jpeg_finish_decompress(&cinfo);
  }
  jpeg_destroy_decompress(&cinfo);
  if (too_large_width != 0 || too_large_height != 0 || image.width == 0) {
    check_pixels(name, too_large_width, too_large_height, max_pixels);
  }
  return apply_orientation(image, orientation);
}

// ---- PNG ----

struct PngSource {
  std::span<const uint8_t> bytes;
  size_t offset = 0;
  char message[256] = {};
};

void png_read_bytes(png_structp png, png_bytep data, png_size_t length) {
  auto* source = static_cast<PngSource*>(png_get_io_ptr(png));
  if (source->bytes.size() - source->offset < length) {
    png_error(png, "the file ends early (truncated)");
  }
  std::memcpy(data, source->bytes.data() + source->offset, length);
  source->offset += length;
}

void png_fail(png_structp png, png_const_charp message) {
  auto* source = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(source->message, sizeof(source->message), "%s", message);
  png_longjmp(png, 1);
}

void png_ignore_warning(png_structp, png_const_charp) {}

// The transparent colour of a PNG's tRNS chunk as PIL leaves it after convert("RGB") (see Image).
[[gnu::noinline]] std::optional<std::array<int, 3>> transparent_colour(png_structp png,
                                                                       png_infop info, int colour,
                                                                       int depth) {
  png_bytep alphas = nullptr;
  int count = 0;
  png_color_16p value = nullptr;
  if (png_get_tRNS(png, info, &alphas, &count, &value) == 0) return std::nullopt;
  if (colour == PNG_COLOR_TYPE_PALETTE) {
    // PIL keeps one index only when a single entry is 0 and every other 255.
    int transparent = -1;
    for (int i = 0; i < count; ++i) {
      if (alphas[i] == 255) continue;
      if (alphas[i] != 0 || transparent >= 0) return std::nullopt;
      transparent = i;
    }
    png_colorp palette = nullptr;
    int entries = 0;
    if (transparent < 0 || png_get_PLTE(png, info, &palette, &entries) == 0) return std::nullopt;
    if (transparent >= entries) return std::array<int, 3>{0, 0, 0};
    const png_color c = palette[transparent];
    return std::array<int, 3>{c.red, c.green, c.blue};
  }
  if (value == nullptr) return std::nullopt;
  if (colour == PNG_COLOR_TYPE_GRAY) {
    const int t = value->gray;
    if (depth == 1 || depth == 16) return std::array<int, 3>{t & 255, (t >> 8) & 255, 0};
    return std::array<int, 3>{t, t, t};
  }
  if (colour == PNG_COLOR_TYPE_RGB)
    return std::array<int, 3>{value->red, value->green, value->blue};
  return std::nullopt;
}

Image decode_png(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels) {
  PngSource source{bytes};
  Image image;
  std::vector<uint8_t> pixels;
  std::vector<png_bytep> rows;
  int orientation = 1;
  int64_t declared_width = 0, declared_height = 0;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, png_fail, png_ignore_warning);
  if (png == nullptr) throw Error("libpng: cannot create a read structure");
  png_infop info = png_create_info_struct(png);
  png_infop end = png_create_info_struct(png);
  if (info == nullptr || end == nullptr) {
    png_destroy_read_struct(&png, &info, &end);
    throw Error("libpng: cannot create an info structure");
  }
  // Objects with destructors are all declared above: a longjmp back here skips none.
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, &end);
    throw bad_image(name, str("not a whole PNG image: ", source.message));
  }
  png_set_read_fn(png, &source, png_read_bytes);
  png_set_user_limits(png, 0x7fffffff, 0x7fffffff);  // max_pixels is checked below
  png_read_info(png, info);
  declared_width = png_get_image_width(png, info);
  declared_height = png_get_image_height(png, info);
  if (declared_width > 0 && declared_height > 0 && declared_width * declared_height <= max_pixels) {
    const int colour = png_get_color_type(png, info);
    const int depth = png_get_bit_depth(png, info);
    const bool grey16 = depth == 16 && colour == PNG_COLOR_TYPE_GRAY;
    image.transparent_colour = transparent_colour(png, info, colour, depth);
    if (colour == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);  // (+ tRNS as alpha)
    if (colour == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && !grey16) png_set_strip_16(png);  // PIL keeps the high byte
    if ((colour & PNG_COLOR_MASK_ALPHA) != 0) png_set_strip_alpha(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    const size_t stride = png_get_rowbytes(png, info);
    pixels.resize(stride * static_cast<size_t>(declared_height));
    rows.resize(static_cast<size_t>(declared_height));
    for (int64_t y = 0; y < declared_height; ++y) rows[y] = pixels.data() + y * stride;
    png_read_image(png, rows.data());
    png_read_end(png, end);
    const int channels = png_get_channels(png, info);
    image.width = declared_width;
    image.height = declared_height;
    image.rgb.resize(static_cast<size_t>(declared_width * declared_height * 3));
    for (int64_t y = 0; y < declared_height; ++y) {
      const uint8_t* in = rows[y];
      uint8_t* out = image.rgb.data() + y * declared_width * 3;
      for (int64_t x = 0; x < declared_width; ++x) {
        if (grey16) {  // PIL's I;16 -> RGB: values past 255 become 255
          const int v = (in[x * 2] << 8) | in[x * 2 + 1];
          out[x * 3] = out[x * 3 + 1] = out[x * 3 + 2] = static_cast<uint8_t>(v > 255 ? 255 : v);
        } else if (channels <= 2) {  // grey (+ alpha, dropped)
          out[x * 3] = out[x * 3 + 1] = out[x * 3 + 2] = in[x * channels];
        } else {  // RGB (+ alpha: a palette's transparency expanded by libpng, dropped)
          std::memcpy(out + x * 3, in + x * channels, 3);
        }
      }
    }
    for (png_infop where : {info, end}) {
      png_bytep exif = nullptr;
      png_uint_32 exif_length = 0;
      if (png_get_eXIf_1(png, where, &exif_length, &exif) != 0 && exif != nullptr) {
        orientation = exif_orientation({exif, exif_length});
        break;
      }
    }
  }
  png_destroy_read_struct(&png, &info, &end);
  if (image.width == 0) check_pixels(name, declared_width, declared_height, max_pixels);
  return apply_orientation(image, orientation);
}

}  // namespace

int exif_orientation(std::span<const uint8_t> tiff) {
  if (tiff.size() < 8) return 1;
  const bool little = tiff[0] == 'I' && tiff[1] == 'I';
  if (!little && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
  const auto u16 = [&](size_t at) -> uint32_t {
    return little ? tiff[at] | (tiff[at + 1] << 8) : (tiff[at] << 8) | tiff[at + 1];
  };
  const auto u32 = [&](size_t at) -> uint32_t {
    return little ? u16(at) | (u16(at + 2) << 16) : (u16(at) << 16) | u16(at + 2);
  };
  const size_t ifd = u32(4);
  if (ifd > tiff.size() - 2) return 1;
  const size_t entries = u16(ifd);
  for (size_t i = 0; i < entries; ++i) {
    const size_t entry = ifd + 2 + 12 * i;
    if (entry > tiff.size() - 12) break;
    if (u16(entry) != 0x0112) continue;
    const uint32_t type = u16(entry + 2);
    const uint32_t value = type == 3 ? u16(entry + 8) : type == 4 ? u32(entry + 8) : 1;
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

Image apply_orientation(const Image& image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int64_t w = image.width, h = image.height;
  const bool swaps = orientation >= 5;  // the transposing ones turn width into height
  Image out{.width = swaps ? h : w,
            .height = swaps ? w : h,
            .rgb = {},
            .transparent_colour = image.transparent_colour};
  out.rgb.resize(image.rgb.size());
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sx = x, sy = y;  // the source pixel of output (x, y)
      switch (orientation) {
        case 2: sx = w - 1 - x; break;  // mirrored left to right
        case 3:
          sx = w - 1 - x;
          sy = h - 1 - y;
          break;                        // turned 180 degrees
        case 4: sy = h - 1 - y; break;  // mirrored top to bottom
        case 5:
          sx = y;
          sy = x;
          break;  // transposed
        case 6:
          sx = y;
          sy = h - 1 - x;
          break;  // turned 90 degrees clockwise
        case 7:
          sx = w - 1 - y;
          sy = h - 1 - x;
          break;  // transversed
        default:
          sx = w - 1 - y;
          sy = x;
          break;  // 8: turned 90 degrees anticlockwise
      }
      std::memcpy(out.rgb.data() + (y * out.width + x) * 3, image.rgb.data() + (sy * w + sx) * 3,
                  3);
    }
  }
  return out;
}

Image decode_image(std::span<const uint8_t> bytes, const std::string& name, int64_t max_pixels) {
  static constexpr uint8_t kPng[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.empty()) throw bad_image(name, "the file is empty");
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    return decode_jpeg(bytes, name, max_pixels);
  }
  if (bytes.size() >= sizeof(kPng) && std::memcmp(bytes.data(), kPng, sizeof(kPng)) == 0) {
    return decode_png(bytes, name, max_pixels);
  }
  throw bad_image(name,
                  "neither a JPEG nor a PNG image (the formats read are told by their "
                  "first bytes)");
}

Image read_image(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw ConfigError(str(path.string(), ": cannot open the image file"));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                                   std::istreambuf_iterator<char>());
  if (file.bad()) throw ConfigError(str(path.string(), ": cannot read the image file"));
  return decode_image(bytes, path.string());
}

}  // namespace shardformer::vision
