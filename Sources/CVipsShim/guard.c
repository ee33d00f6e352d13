// A bounded walk over the few header fields that decide how much memory a loader allocates, run
// before any libvips loader sees the bytes (see dr_guard_check in CVipsShim.h).
#include "CVipsShim.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "library.h"

// The bytes being checked: memory, or a file read with pread through a one-page window (GIF
// sub-blocks and PNG chunk headers are many small reads close together).
typedef struct {
  const unsigned char *mem;
  int fd;
  uint64_t size;
  unsigned char window[4096];
  uint64_t window_offset;
  size_t window_length;
} DrReader;

static int dr_read(DrReader *r, uint64_t offset, void *dst, size_t n) {
  if (offset > r->size || n > r->size - offset) return -1;
  if (r->mem) {
    memcpy(dst, r->mem + offset, n);
    return 0;
  }
  if (n <= sizeof r->window) {
    if (offset < r->window_offset || offset - r->window_offset + n > r->window_length) {
      uint64_t left = r->size - offset;
      size_t want = left < sizeof r->window ? (size_t)left : sizeof r->window;
      size_t done = 0;
      while (done < want) {
        ssize_t got = pread(r->fd, r->window + done, want - done, (off_t)(offset + done));
        if (got <= 0) break;
        done += (size_t)got;
      }
      r->window_offset = offset;
      r->window_length = done;
      if (done < n) return -1;
    }
    memcpy(dst, r->window + (offset - r->window_offset), n);
    return 0;
  }
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(r->fd, (char *)dst + done, n - done, (off_t)(offset + done));
    if (got <= 0) return -1;
    done += (size_t)got;
  }
  return 0;
}

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static uint32_t le24(const unsigned char *p) { return (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0]; }
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[1] << 8 | p[0]); }

static DrGuardVerdict dr_verdict(DrGuardResult *result, DrGuardVerdict verdict, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(result->message, sizeof result->message, format, args);
  va_end(args);
  result->verdict = verdict;
  return verdict;
}

// Declared pixels against the limit (width and height are reported to the caller either way).
static DrGuardVerdict dr_declared(DrGuardResult *result, uint64_t width, uint64_t height, const DrGuardLimits *limits) {
  result->width = width;
  result->height = height;
  uint64_t pixels;
  if (__builtin_mul_overflow(width, height, &pixels) || pixels > limits->max_pixels) {
    result->verdict = DR_GUARD_TOO_MANY_PIXELS;
    return DR_GUARD_TOO_MANY_PIXELS;
  }
  return DR_GUARD_OK;
}

/* ---- PNG ---- */

// Runs inflate over `length` bytes at `offset` and returns the inflated size, stopping as soon as
// it passes `budget` (returns budget + 1 then). A stream that is not valid zlib counts as what
// was inflated before the error (the loader reports the damage itself).
static uint64_t dr_inflated_size(DrReader *r, uint64_t offset, uint64_t length, uint64_t budget) {
  unsigned char in[16384], out[65536];
  z_stream stream;
  memset(&stream, 0, sizeof stream);
  if (inflateInit(&stream) != Z_OK) return budget + 1;
  uint64_t total = 0, read = 0;
  int status = Z_OK;
  while (status == Z_OK && read < length) {
    size_t n = length - read < sizeof in ? (size_t)(length - read) : sizeof in;
    if (dr_read(r, offset + read, in, n)) break;
    read += n;
    stream.next_in = in;
    stream.avail_in = (uInt)n;
    do {
      stream.next_out = out;
      stream.avail_out = sizeof out;
      status = inflate(&stream, Z_NO_FLUSH);
      total += sizeof out - stream.avail_out;
      if (total > budget) {
        inflateEnd(&stream);
        return budget + 1;
      }
    } while (status == Z_OK && stream.avail_out == 0);
    if (status == Z_BUF_ERROR) status = Z_OK;
  }
  inflateEnd(&stream);
  return total;
}

// Where the zlib stream of a compressed metadata chunk starts (relative to its data), or -1 when
// the chunk holds no compressed data, or -2 when its prefix cannot be parsed within `n` bytes.
static int64_t dr_png_compressed_start(const char *type, const unsigned char *p, size_t n) {
  const unsigned char *nul = memchr(p, 0, n);
  if (!nul) return -2;
  size_t at = (size_t)(nul - p) + 1;  // after the keyword
  if (!memcmp(type, "zTXt", 4) || !memcmp(type, "iCCP", 4)) return at + 1 <= n ? (int64_t)at + 1 : -2;
  // iTXt: compression flag, method, language tag\0, translated keyword\0, text.
  if (at + 2 > n) return -2;
  if (p[at] == 0) return -1;
  at += 2;
  for (int field = 0; field < 2; field++) {
    const unsigned char *end = at < n ? memchr(p + at, 0, n - at) : NULL;
    if (!end) return -2;
    at = (size_t)(end - p) + 1;
  }
  return (int64_t)at;
}

static DrGuardVerdict dr_guard_png(DrReader *r, const DrGuardLimits *limits, DrGuardResult *result) {
  unsigned char head[8 + 8 + 13];
  if (dr_read(r, 0, head, sizeof head) || memcmp(head + 12, "IHDR", 4) || be32(head + 8) != 13)
    return DR_GUARD_OK;  // the loader names the damage
  if (dr_declared(result, be32(head + 16), be32(head + 20), limits)) return result->verdict;
  uint64_t position = 8, metadata = 0, chunks = 0, frames = 0;
  while (position + 8 <= r->size) {
    unsigned char header[8];
    if (dr_read(r, position, header, 8)) break;
    uint32_t length = be32(header);
    char type[5] = {(char)header[4], (char)header[5], (char)header[6], (char)header[7], 0};
    if (length > 0x7FFFFFFFu)
      return dr_verdict(result, DR_GUARD_CORRUPT,
                        "the PNG chunk \"%s\" at byte %llu declares %u bytes, more than PNG allows (2^31-1): the file is damaged",
                        type, (unsigned long long)position, length);
    uint64_t data = position + 8, end = data + (uint64_t)length + 4;
    int critical = !memcmp(type, "IHDR", 4) || !memcmp(type, "PLTE", 4) || !memcmp(type, "IDAT", 4) ||
                   !memcmp(type, "IEND", 4);
    if (!memcmp(type, "IEND", 4)) break;
    if (end > r->size) {
      // Pixel data cut short is the loader's to judge (lenient decoding keeps what is there); a
      // metadata chunk is allocated at its declared length before it is read.
      if (critical || length <= limits->small_chunk_bytes) break;
      return dr_verdict(result, DR_GUARD_CORRUPT,
                        "the PNG chunk \"%s\" at byte %llu declares %u bytes, but the file ends %llu bytes later: "
                        "the file is truncated or damaged",
                        type, (unsigned long long)position, length, (unsigned long long)(r->size - data));
    }
    // An APNG's animation chunks are frames, not metadata: libpng skips them (only the default
    // image is decoded), and they count against the frame limit like a GIF's or a WebP's frames.
    int animation = !memcmp(type, "acTL", 4) || !memcmp(type, "fcTL", 4) || !memcmp(type, "fdAT", 4);
    if (!memcmp(type, "fcTL", 4) && ++frames > limits->max_frames)
      return dr_verdict(result, DR_GUARD_TOO_LARGE,
                        "the animated PNG has more than %llu frames; images with at most %llu frames are decoded (the "
                        "first frame)",
                        (unsigned long long)limits->max_frames, (unsigned long long)limits->max_frames);
    if (!critical && !animation) {
      if (++chunks > limits->max_metadata_chunks)
        return dr_verdict(result, DR_GUARD_TOO_LARGE,
                          "the PNG holds more than %llu metadata chunks (text, ICC profile, EXIF…); images with at most "
                          "%llu are decoded: strip the file's metadata before it is passed on",
                          (unsigned long long)limits->max_metadata_chunks,
                          (unsigned long long)limits->max_metadata_chunks);
      metadata += length;
      int compressed = !memcmp(type, "zTXt", 4) || !memcmp(type, "iTXt", 4) || !memcmp(type, "iCCP", 4);
      if (compressed && metadata <= limits->max_metadata_bytes) {
        unsigned char prefix[4096];
        size_t n = length < sizeof prefix ? length : sizeof prefix;
        int64_t start = -2;
        if (!dr_read(r, data, prefix, n)) start = dr_png_compressed_start(type, prefix, n);
        uint64_t budget = limits->max_metadata_bytes - metadata;
        if (start == -2) {
          metadata += (uint64_t)length * 1032;  // deflate's largest ratio
        } else if (start >= 0 && (uint64_t)start < length) {
          metadata += dr_inflated_size(r, data + (uint64_t)start, length - (uint64_t)start, budget);
        }
      }
      if (metadata > limits->max_metadata_bytes)
        return dr_verdict(result, DR_GUARD_TOO_LARGE,
                          "the PNG's metadata (text, ICC profile, EXIF… chunks, decompressed) holds more than %llu bytes "
                          "(at chunk \"%s\", byte %llu); images with at most %llu bytes of metadata are decoded: strip "
                          "the file's metadata before it is passed on",
                          (unsigned long long)limits->max_metadata_bytes, type, (unsigned long long)position,
                          (unsigned long long)limits->max_metadata_bytes);
    }
    position = end;
  }
  return DR_GUARD_OK;
}

/* ---- GIF ---- */

// Skips a sequence of GIF data sub-blocks starting at *position; -1 when the data ends first.
static int dr_gif_skip_blocks(DrReader *r, uint64_t *position) {
  for (;;) {
    unsigned char size;
    if (dr_read(r, *position, &size, 1)) return -1;
    *position += 1 + (uint64_t)size;
    if (size == 0) return 0;
  }
}

static DrGuardVerdict dr_guard_gif(DrReader *r, const DrGuardLimits *limits, DrGuardResult *result) {
  unsigned char screen[13];
  if (dr_read(r, 0, screen, sizeof screen)) return DR_GUARD_OK;
  if (dr_declared(result, le16(screen + 6), le16(screen + 8), limits)) return result->verdict;
  uint64_t position = 13;
  if (screen[10] & 0x80) position += 3ull << ((screen[10] & 7) + 1);
  uint64_t frames = 0;
  for (;;) {
    unsigned char kind;
    if (dr_read(r, position, &kind, 1)) break;
    if (kind == 0x3B) break;  // trailer
    if (kind == 0x21) {       // extension: label, sub-blocks
      position += 2;
      if (dr_gif_skip_blocks(r, &position)) break;
    } else if (kind == 0x2C) {  // image descriptor
      unsigned char image[10];
      if (dr_read(r, position, image, sizeof image)) break;
      if (++frames > limits->max_frames)
        return dr_verdict(result, DR_GUARD_TOO_LARGE,
                          "the GIF has more than %llu frames; the loader reads every frame's header before it decodes "
                          "any, so GIFs with at most %llu frames are accepted, with \"animated\": false too: shorten "
                          "the animation, or save its first frame as a still image",
                          (unsigned long long)limits->max_frames, (unsigned long long)limits->max_frames);
      position += 10;
      if (image[9] & 0x80) position += 3ull << ((image[9] & 7) + 1);
      position += 1;  // LZW minimum code size
      if (dr_gif_skip_blocks(r, &position)) break;
    } else {
      break;  // damage: the loader names it
    }
  }
  return DR_GUARD_OK;
}

/* ---- WebP ---- */

static DrGuardVerdict dr_guard_webp(DrReader *r, const DrGuardLimits *limits, DrGuardResult *result) {
  unsigned char head[30];
  if (dr_read(r, 0, head, sizeof head)) return DR_GUARD_OK;
  if (memcmp(head + 12, "VP8X", 4)) {
    if (!memcmp(head + 12, "VP8L", 4) && head[20] == 0x2F) {
      uint32_t bits = le32(head + 21);
      return dr_declared(result, (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, limits);
    }
    if (!memcmp(head + 12, "VP8 ", 4) && head[23] == 0x9D && head[24] == 0x01 && head[25] == 0x2A)
      return dr_declared(result, le16(head + 26) & 0x3FFF, le16(head + 28) & 0x3FFF, limits);
    return DR_GUARD_OK;
  }
  uint64_t width = (uint64_t)le24(head + 24) + 1, height = (uint64_t)le24(head + 27) + 1;
  if (dr_declared(result, width, height, limits)) return result->verdict;
  if (!(head[20] & 0x02)) return DR_GUARD_OK;  // not animated
  // Animated: the loader composes frames on a canvas of 4 bytes a pixel held in memory, and
  // decodes each frame it needs into another buffer of the frame's size.
  uint64_t canvas = width * height * 4;
  if (canvas > limits->max_buffer_bytes)
    return dr_verdict(result, DR_GUARD_TOO_LARGE,
                      "the animated WebP declares a %llu×%llu canvas, which is held in memory whole (%llu MB); "
                      "animations of at most %llu MB of canvas are decoded: raise maxPixels, or convert the first "
                      "frame to a still image",
                      (unsigned long long)width, (unsigned long long)height, (unsigned long long)(canvas >> 20),
                      (unsigned long long)(limits->max_buffer_bytes >> 20));
  uint64_t position = 12, frames = 0;
  while (position + 8 <= r->size) {
    unsigned char chunk[8 + 12];
    if (dr_read(r, position, chunk, 8)) break;
    uint64_t length = le32(chunk + 4);
    if (!memcmp(chunk, "ANMF", 4)) {
      if (++frames > limits->max_frames)
        return dr_verdict(result, DR_GUARD_TOO_LARGE,
                          "the animated WebP has more than %llu frames; WebPs with at most %llu are accepted, with "
                          "\"animated\": false too: shorten the animation, or save its first frame as a still image",
                          (unsigned long long)limits->max_frames, (unsigned long long)limits->max_frames);
      if (length < 16 || dr_read(r, position + 8, chunk + 8, 12)) break;
      uint64_t x = (uint64_t)le24(chunk + 8) * 2, y = (uint64_t)le24(chunk + 11) * 2;
      uint64_t w = (uint64_t)le24(chunk + 14) + 1, h = (uint64_t)le24(chunk + 17) + 1;
      if (x + w > width || y + h > height)
        return dr_verdict(result, DR_GUARD_CORRUPT,
                          "WebP frame %llu (%llu×%llu at %llu,%llu) reaches outside the %llu×%llu canvas: the file "
                          "is damaged",
                          (unsigned long long)frames, (unsigned long long)w, (unsigned long long)h,
                          (unsigned long long)x, (unsigned long long)y, (unsigned long long)width,
                          (unsigned long long)height);
    }
    position += 8 + length + (length & 1);
  }
  return DR_GUARD_OK;
}

/* ---- TIFF ---- */

typedef struct {
  DrReader *r;
  int little;
  int big;  // BigTIFF
} DrTiff;

static uint64_t dr_tiff_uint(const DrTiff *t, const unsigned char *p, int size) {
  uint64_t value = 0;
  for (int i = 0; i < size; i++) value |= (uint64_t)p[t->little ? i : size - 1 - i] << (8 * (t->little ? i : size - 1 - i));
  return value;
}

// One tag's value `index` (SHORT, LONG or LONG8), reading from the entry or from its offset.
static int dr_tiff_value(const DrTiff *t, const unsigned char *entry, uint64_t index, uint64_t *out) {
  int type = (int)dr_tiff_uint(t, entry + 2, 2);
  int size = type == 3 ? 2 : type == 4 ? 4 : type == 16 ? 8 : 0;
  if (!size) return -1;
  int field = t->big ? 8 : 4;
  uint64_t count = dr_tiff_uint(t, entry + 4, t->big ? 8 : 4);
  if (index >= count) return -1;
  const unsigned char *inline_value = entry + (t->big ? 12 : 8);
  unsigned char buffer[8];
  uint64_t bytes;
  if (__builtin_mul_overflow(count, (uint64_t)size, &bytes)) return -1;
  if (bytes <= (uint64_t)field) {
    memcpy(buffer, inline_value + index * size, size);
  } else {
    uint64_t offset = dr_tiff_uint(t, inline_value, field);
    if (dr_read(t->r, offset + index * size, buffer, size)) return -1;
  }
  *out = dr_tiff_uint(t, buffer, size);
  return 0;
}

// The largest ratio of decoded to stored bytes a TIFF compression can reach (0: no known bound).
static uint64_t dr_tiff_max_ratio(uint64_t compression) {
  switch (compression) {
  case 1: return 1;           // none
  case 32773: return 64;      // PackBits: 2 bytes -> 128
  case 8: case 32946: return 1032;  // deflate
  case 5: return 4096;        // LZW: a 9-12 bit code yields at most 4096 bytes
  default: return 0;
  }
}

static DrGuardVerdict dr_guard_tiff(DrReader *r, const DrGuardLimits *limits, DrGuardResult *result) {
  unsigned char head[16];
  if (dr_read(r, 0, head, 8)) return DR_GUARD_OK;
  DrTiff t = {r, head[0] == 'I', 0};
  uint64_t magic = dr_tiff_uint(&t, head + 2, 2), ifd;
  if (magic == 43) {
    if (dr_read(r, 0, head, 16)) return DR_GUARD_OK;
    t.big = 1;
    ifd = dr_tiff_uint(&t, head + 8, 8);
  } else {
    ifd = dr_tiff_uint(&t, head + 4, 4);
  }
  int entry_size = t.big ? 20 : 12;
  unsigned char count_bytes[8];
  if (dr_read(r, ifd, count_bytes, t.big ? 8 : 2)) return DR_GUARD_OK;
  uint64_t entries = dr_tiff_uint(&t, count_bytes, t.big ? 8 : 2);
  if (entries > 4096) return DR_GUARD_OK;
  uint64_t width = 0, height = 0, spp = 1, bps = 1, compression = 1, rows = UINT32_MAX, tile_w = 0, tile_h = 0;
  uint64_t planar = 1, photometric = 0;
  unsigned char offsets_entry[20], counts_entry[20];
  int have_offsets = 0, have_counts = 0;
  for (uint64_t i = 0; i < entries; i++) {
    unsigned char entry[20];
    if (dr_read(r, ifd + (t.big ? 8 : 2) + i * entry_size, entry, entry_size)) return DR_GUARD_OK;
    uint64_t tag = dr_tiff_uint(&t, entry, 2), value = 0;
    int scalar = tag != 273 && tag != 279 && tag != 324 && tag != 325;
    if (scalar && dr_tiff_value(&t, entry, 0, &value)) continue;
    switch (tag) {
    case 256: width = value; break;
    case 257: height = value; break;
    case 258: bps = value; break;
    case 259: compression = value; break;
    case 277: spp = value; break;
    case 278: rows = value; break;
    case 262: photometric = value; break;
    case 284: planar = value; break;
    case 322: tile_w = value; break;
    case 323: tile_h = value; break;
    case 273: case 324: memcpy(offsets_entry, entry, entry_size); have_offsets = 1; break;
    case 279: case 325: memcpy(counts_entry, entry, entry_size); have_counts = 1; break;
    default: break;
    }
  }
  if (dr_declared(result, width, height, limits)) return result->verdict;
  if (!width || !height || !spp || !bps || spp > 64 || bps > 64 || !have_offsets || !have_counts) return DR_GUARD_OK;
  int tiled = tile_w && tile_h;
  uint64_t planes = planar == 2 ? spp : 1, samples = planar == 2 ? 1 : spp;
  uint64_t block_w = tiled ? tile_w : width, block_h = tiled ? tile_h : (rows < height ? (rows ? rows : 1) : height);
  // Decoded bytes of one strip or tile: rows × ceil(width × samples × bits / 8).
  uint64_t line_bits, line, block;
  if (__builtin_mul_overflow(block_w, samples * bps, &line_bits)) line_bits = UINT64_MAX;
  line = line_bits / 8 + (line_bits % 8 != 0);
  if (__builtin_mul_overflow(line, block_h, &block)) block = UINT64_MAX;
  uint64_t tile_pixels;
  if (tiled && (block > limits->max_buffer_bytes || __builtin_mul_overflow(tile_w, tile_h, &tile_pixels) ||
                tile_pixels > limits->max_pixels))
    return dr_verdict(result, DR_GUARD_TOO_LARGE,
                      "the TIFF declares %llu×%llu-pixel tiles (%llu MB each decoded); tiles of at most %llu MB are "
                      "decoded: re-save it with smaller tiles (e.g. `vips tiffsave in.tif out.tif --tile`)",
                      (unsigned long long)tile_w, (unsigned long long)tile_h, (unsigned long long)(block >> 20),
                      (unsigned long long)(limits->max_buffer_bytes >> 20));
  // libvips decodes a whole strip at once when it has at most 128 rows, separate planes or YCbCr
  // samples; otherwise it reads line by line.
  int whole_strips = !tiled && (block_h <= 128 || planar == 2 || photometric == 6);
  uint64_t blocks_across = tiled ? (width + tile_w - 1) / tile_w : 1;
  uint64_t blocks_down = (height + block_h - 1) / block_h;
  uint64_t expected;
  if (__builtin_mul_overflow(blocks_across * blocks_down, planes, &expected)) expected = UINT64_MAX;
  uint64_t ratio = dr_tiff_max_ratio(compression);
  const char *what = tiled ? "tile" : "strip";
  if ((tiled || whole_strips) && block > limits->max_buffer_bytes)
    return dr_verdict(result, DR_GUARD_TOO_LARGE,
                      "the TIFF's %ss are decoded whole, %llu MB each (%llu×%llu pixels); strips and tiles of at most "
                      "%llu MB are decoded: re-save it with smaller strips or tiles (e.g. `vips tiffsave in.tif "
                      "out.tif --tile`)",
                      what, (unsigned long long)(block >> 20), (unsigned long long)block_w,
                      (unsigned long long)block_h, (unsigned long long)(limits->max_buffer_bytes >> 20));
  // A strip or tile decoded whole gets a buffer of its decoded size before its data is read:
  // check that the stored bytes can hold that much (the first ones; bounded so the walk stays
  // cheap). libtiff reads stored data as it arrives, so a stored count past the end of the file
  // costs nothing and is left to the loader (lenient decoding keeps what is there).
  uint64_t checked = expected < 4096 ? expected : 4096;
  for (uint64_t i = 0; ratio && (tiled || whole_strips) && i < checked; i++) {
    uint64_t offset, count;
    if (dr_tiff_value(&t, offsets_entry, i, &offset) || dr_tiff_value(&t, counts_entry, i, &count)) break;
    if (count == 0) continue;  // libtiff works missing counts out itself
    uint64_t present = offset < r->size ? r->size - offset : 0;
    if (count < present) present = count;
    uint64_t decoded = block;
    if (!tiled) {  // the last strip of a plane holds only the rows left
      uint64_t first_row = (i % blocks_down) * block_h;
      uint64_t rows_here = height - first_row < block_h ? height - first_row : block_h;
      decoded = line * rows_here;
    }
    uint64_t most;
    if (decoded > limits->small_chunk_bytes && !__builtin_mul_overflow(present, ratio, &most) && most < decoded)
      return dr_verdict(result, DR_GUARD_CORRUPT,
                        "TIFF %s %llu declares %llu×%llu pixels (%llu bytes decoded) from only %llu stored bytes, "
                        "more than its compression can hold: the file is truncated or damaged",
                        what, (unsigned long long)i, (unsigned long long)block_w, (unsigned long long)block_h,
                        (unsigned long long)decoded, (unsigned long long)present);
  }
  return DR_GUARD_OK;
}

DrGuardVerdict dr_guard_check(DrFormat format, const void *buf, size_t len, int fd, DrGuardLimits limits,
                              DrGuardResult *result) {
  memset(result, 0, sizeof *result);
  /* Without bytes in memory, the header is read with pread from the caller's descriptor (the
     file that was checked; never reopened by a path, never closed here). */
  DrReader reader = {.mem = buf, .fd = buf ? -1 : fd, .size = len};
  if (!buf && fd < 0) return DR_GUARD_OK;
  DrGuardVerdict verdict = DR_GUARD_OK;
  switch (format) {
  case DR_FORMAT_PNG: verdict = dr_guard_png(&reader, &limits, result); break;
  case DR_FORMAT_GIF: verdict = dr_guard_gif(&reader, &limits, result); break;
  case DR_FORMAT_WEBP: verdict = dr_guard_webp(&reader, &limits, result); break;
  case DR_FORMAT_TIFF: verdict = dr_guard_tiff(&reader, &limits, result); break;
  default: break;
  }
  return verdict;
}
