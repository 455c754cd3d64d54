// Images for vision models: JPEG decoded with libjpeg-turbo and PNG with libpng, the EXIF
// orientation applied and every colour mode converted to RGB, as HF's load_image does with PIL
// (ImageOps.exif_transpose, then Image.convert("RGB")); grey PNG files written (SAM's masks).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace shardformer::vision {

// 8-bit RGB pixels, row-major: pixel (x, y) channel c at rgb[(y * width + x) * 3 + c].
struct Image {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]
  // A PNG's transparent colour (its tRNS chunk) as PIL's convert("RGB") leaves it in the image's
  // info: the RGB pixels equal to it are the transparent ones, which HF's convert_to_rgb paints
  // white (ImageProcessorOptions::do_convert_rgb). Grey: (t, t, t) at 2 to 8 bits, and at 1 and
  // 16 bits PIL's integer read as a packed colour (t & 255, t >> 8 & 255, 0); RGB: the raw
  // values (16-bit ones match no 8-bit pixel); a palette: the colour of its one fully transparent
  // entry, or none when its alphas are anything else. Values may exceed 255.
  std::optional<std::array<int, 3>> transparent_colour{};
};

// The most pixels an image may declare: PIL's decompression-bomb limit (2 x 89,478,485), checked
// from the header before any pixel buffer is allocated.
inline constexpr int64_t kMaxImagePixels = 2 * 89478485;

// Reads `path` (JPEG or PNG, told by its first bytes). Grey, grey + alpha, RGBA, palette, 1-bit
// and 16-bit PNG and grey and CMYK JPEG become RGB as PIL converts them: alpha dropped, a palette
// looked up, 16-bit RGB cut to the high byte, 16-bit grey clamped at 255, CMYK through PIL's
// formula. Throws ConfigError naming the file for a missing, empty, truncated or corrupt file, one
// of another format, or one declaring more than kMaxImagePixels.
Image read_image(const std::filesystem::path& path);

// The same for the bytes of a file; `name` names it in errors. `max_pixels`: the most pixels the
// header may declare.
Image decode_image(std::span<const uint8_t> bytes, const std::string& name,
                   int64_t max_pixels = kMaxImagePixels);

// The EXIF orientation (1-8) in a TIFF-format EXIF block ("II*\0" or "MM\0*" first, as in a
// JPEG's APP1 after "Exif\0\0" or a PNG's eXIf chunk): tag 0x0112 of the first IFD; 1 when the
// block has none or is malformed.
int exif_orientation(std::span<const uint8_t> tiff);

// `image` as PIL's exif_transpose leaves an image of that orientation (2: mirrored, 3: turned
// 180 degrees, 6: turned 90 degrees clockwise to stand upright, ...); orientation 1 or unknown
// values leave it as it is.
Image apply_orientation(const Image& image, int orientation);

// Writes 8-bit grey pixels [height, width] (row-major; 0 black, 255 white) as a PNG file with
// libpng, atomically: to a file beside `path`, then renamed over it. Throws Error naming the file
// when it cannot be written.
void write_grey_png(const std::filesystem::path& path, std::span<const uint8_t> pixels,
                    int64_t width, int64_t height);

}  // namespace shardformer::vision
