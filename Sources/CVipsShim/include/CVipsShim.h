// Fixed-arity wrappers for the parts of libvips Swift cannot call: varargs operations
// (vips_resize(in, &out, scale, "kernel", k, NULL)…) and macros (VIPS_INIT).
//
// Ownership: every `VipsImage **out` receives a new reference owned by the caller (release it
// with g_object_unref, which Swift's VipsImage wrapper does in deinit). Every `void **buf` from a
// saver receives memory owned by the caller, freed with g_free. Every function returns 0 on
// success and -1 on failure, with the reason in libvips' error buffer (read it with
// vips_error_buffer_copy, which the Swift side does at the failing call).
#ifndef DARKROOM_CVIPSSHIM_H
#define DARKROOM_CVIPSSHIM_H

#include <stddef.h>
#include <stdint.h>
#include <vips/vips.h>

// Formats the loaders below accept (DarkroomVips maps DarkroomCore's ImageFormat onto these).
typedef enum {
  DR_FORMAT_JPEG = 1,
  DR_FORMAT_PNG = 2,
  DR_FORMAT_GIF = 3,
  DR_FORMAT_WEBP = 4,
  DR_FORMAT_TIFF = 5,
  DR_FORMAT_HEIF = 6,
} DrFormat;

// Opens libvips (nothing links it: see library.h) and starts it (VIPS_INIT is a macro); also
// blocks untrusted loaders and disables the operation cache (a server processes each image once;
// the cache would only grow). Call once per process, before any other function here. Returns 0;
// -1 when libvips failed to start (the reason is in its error buffer); -2 when libvips could not
// be opened or the process is exiting (the reason is dr_init_failure()). A start under way when
// the process exits finishes before exit() goes on.
int dr_init(const char *argv0);
const char *dr_init_failure(void);

// libvips' image accessors and utilities for Swift, which cannot call through the table.
int dr_image_width(VipsImage *image);
int dr_image_height(VipsImage *image);
int dr_image_bands(VipsImage *image);
VipsBandFormat dr_image_format(VipsImage *image);
VipsInterpretation dr_image_interpretation(VipsImage *image);
int dr_image_orientation(VipsImage *image);
int dr_image_hasalpha(VipsImage *image);
size_t dr_format_sizeof(VipsBandFormat format);
void dr_concurrency_set(int threads);
// The error buffer's text, owned by the caller (g_free); NULL before libvips started.
char *dr_error_buffer_copy(void);
// vips_image_new_from_memory: `data` must outlive the image.
VipsImage *dr_image_new_from_memory(const void *data, size_t size, int width, int height, int bands,
                                    VipsBandFormat format);
// vips_image_copy_memory: a new reference owned by the caller, NULL on failure.
VipsImage *dr_image_copy_memory(VipsImage *image);

// Loads libvips' HEIF module (HEIF and AVIF), once; the HEIF loaders and savers below call it.
// dr_init loads no module: libvips' ImageMagick, PDF, OpenSlide and JPEG XL modules are never
// loaded, and $VIPSHOME chooses none.
void dr_heif_ready(void);

// The libvips version as "major.minor.micro".
const char *dr_version(void);

// Loads an image of `format` from memory that must outlive every image made from it. Only the
// format-specific loader runs (never libvips' own format sniffing). `shrink` (JPEG, 1/2/4/8)
// and `scale` (WebP, 0 < scale <= 1) reduce on load; `thumbnail` (HEIF) loads the embedded
// thumbnail; `fail_on` is a VipsFailOn; `sequential` selects VIPS_ACCESS_SEQUENTIAL.
int dr_load_buffer(DrFormat format, const void *buf, size_t len, int shrink, double scale, int thumbnail,
                   VipsFailOn fail_on, int sequential, VipsImage **out);

// As dr_load_buffer, but the loader reads the first `length` bytes of the open file `fd` itself, a
// little at a time, so the compressed bytes are never all in memory. Only JPEG, PNG and TIFF,
// whose loaders read through vips_source_read: the loader gets a custom source (pread on a
// duplicate of `fd`, closed with the source), never a path or a descriptor it could map, so a
// file truncated by another process during the decode is a read error, never SIGBUS.
int dr_load_descriptor(DrFormat format, int fd, size_t length, int shrink, double scale, int thumbnail,
                       VipsFailOn fail_on, int sequential, VipsImage **out);

// TIFF layouts libvips 8.14 cannot decode — tiled images with separate colour planes ("tiled
// separate planes not supported") — read through libtiff's RGBA interface instead.
// dr_tiff_is_tiled_planar returns 1 when the first directory of the TIFF in memory has that
// layout. dr_tiff_load_rgba decodes it into a new 8-bit image owned by the caller, with the
// file's bands (grey or colour, alpha unpremultiplied when it is unassociated) and its orientation
// as metadata (at most `max_pixels` pixels; more fails before any pixel is decoded). Samples of
// more than 8 bits come out as 8. Errors land in libvips' buffer.
int dr_tiff_is_tiled_planar(const void *buf, size_t len);
int dr_tiff_load_rgba(const void *buf, size_t len, size_t max_pixels, VipsImage **out);

// Geometry and colour (each wraps one varargs operation).
int dr_autorot(VipsImage *in, VipsImage **out);
int dr_icc_to_srgb(VipsImage *in, int embedded, const char *fallback_profile, VipsImage **out);
int dr_colourspace(VipsImage *in, VipsInterpretation space, VipsImage **out);
int dr_cast(VipsImage *in, VipsBandFormat format, VipsImage **out);
int dr_crop(VipsImage *in, int left, int top, int width, int height, VipsImage **out);
int dr_smartcrop(VipsImage *in, int width, int height, VipsInteresting interesting, VipsImage **out);
int dr_gravity(VipsImage *in, VipsCompassDirection direction, int width, int height, const double *background,
               int n_background, VipsImage **out);
/* vips_resize, with its horizontal reduce through dr_reduceh when that takes the image. */
int dr_resize(VipsImage *in, double hscale, double vscale, VipsKernel kernel, VipsImage **out);
/* vips_resize alone (dr_resize's vectorised reduceh left out, for comparison). */
int dr_resize_vips(VipsImage *in, double hscale, double vscale, VipsKernel kernel, VipsImage **out);
/* vips_reduceh with libvips' gap of 2, vectorised for 8-bit images of one or three bands with a
 * Lanczos kernel (the same bytes as libvips 8.14's); anything else goes to libvips. */
int dr_reduceh(VipsImage *in, double hshrink, VipsKernel kernel, VipsImage **out);
/* libvips' own vips_reduceh with its gap of 2 (what dr_reduceh is compared against). */
int dr_reduceh_vips(VipsImage *in, double hshrink, VipsKernel kernel, VipsImage **out);
/* Whether dr_reduceh's vectorised loop takes `in` with `kernel` (else it calls libvips). */
int dr_reduceh_takes(const VipsImage *in, VipsKernel kernel);
int dr_premultiply(VipsImage *in, VipsImage **out);
int dr_unpremultiply(VipsImage *in, VipsImage **out);
int dr_flatten(VipsImage *in, const double *background, int n_background, VipsImage **out);

// Operations (the stages rotate, flip, blur and sharpen).
int dr_rot(VipsImage *in, VipsAngle angle, VipsImage **out);
int dr_flip(VipsImage *in, VipsDirection direction, VipsImage **out);
// approximate: libvips' fast integer approximation (for large sigmas: a tenth of the time).
int dr_gaussblur(VipsImage *in, double sigma, int approximate, VipsImage **out);
// A mark on an image's metadata (kept by the images derived from it); dr_marked says 1 when present.
void dr_mark(VipsImage *image, const char *name);
int dr_marked(VipsImage *image, const char *name);
int dr_sharpen(VipsImage *in, double sigma, double m2, VipsImage **out);
int dr_addalpha(VipsImage *in, VipsImage **out);
// A rounded-rectangle mask: one band, 255 inside, 0 outside, antialiased (an SVG this shim writes).
int dr_rounded_mask(int width, int height, double rx, double ry, VipsImage **out);
int dr_extract_bands(VipsImage *in, int first, int count, VipsImage **out);
int dr_multiply(VipsImage *left, VipsImage *right, VipsImage **out);
int dr_bandjoin2(VipsImage *left, VipsImage *right, VipsImage **out);
// out = in × a + b, band by band (float); n values in each of a and b.
int dr_linear(VipsImage *in, const double *a, const double *b, int n, VipsImage **out);
int dr_find_trim(VipsImage *in, double threshold, const double *background, int n_background, int *left, int *top,
                 int *width, int *height);
// The pixel at x, y: at most `max` band values into `values`, how many in `*n`.
int dr_getpoint(VipsImage *in, int x, int y, double *values, int max, int *n);
int dr_embed(VipsImage *in, int x, int y, int width, int height, const double *background, int n_background,
             VipsImage **out);

// Savers to memory (`*buf` is owned by the caller: g_free). `strip` removes metadata.
int dr_jpegsave_buffer(VipsImage *in, int quality, int progressive, int strip, void **buf, size_t *len);

// JPEG straight through libjpeg-turbo (jpegdirect.c, decision 0014).
//
// Decodes the JPEG in `buf` (or, when `buf` is NULL, the first `file_length` bytes of the open
// file `fd`, read with pread) at the DCT scale `eighths`/8 (1…8) into a new memory image that
// carries `header`'s metadata; `header` is libvips' header-only image of the same file, and the
// decode stops when it is killed. Returns 0 with `*out` set, or 1 (declined, nothing set) for
// anything that is not a clean grey, RGB or YCbCr JPEG whose decoded pixels fit `max_bytes`:
// any libjpeg warning or error, another colour space, a short file, a kill. Declined files are
// loaded with libvips' loader, which then reports whatever was wrong.
int dr_jpeg_load_scaled(const void *buf, size_t len, int fd, size_t file_length, int eighths, VipsImage *header,
                        size_t max_bytes, VipsImage **out);

// Decodes as dr_jpeg_load_scaled does, and reduces the rows as libjpeg hands them over by
// `vscale` (below 1) as dr_resize does with `kernel` (vips_reducev with libvips' gap of 2: the
// same bytes), into a memory image as wide as the decode and as tall as the reduce makes it. Only
// a window of the kernel's height is held, never the whole decode (reducev.c). Declines (1) for
// what DrRowReducer declines, another colour space, a size other than the header's, or a reduced
// image over `max_bytes`; returns 2 when libjpeg warned or failed (a damaged or short file) or
// the header was killed: then the whole decode would fail too, and libvips' loader reports it.
int dr_jpeg_load_reduced(const void *buf, size_t len, int fd, size_t file_length, int eighths, VipsImage *header,
                         double vscale, VipsKernel kernel, size_t max_bytes, VipsImage **out);

// Reduces rows as they come (reducev.c): the vertical half of dr_resize for an 8-bit image
// `height` rows tall with `elements` bytes a row, scaled by `vscale` (below 1) with a Lanczos 2 or
// 3 `kernel`, holding a window of rows. NULL when declined: another kernel, libvips without
// liborc (it then reduces in C with other rounding), a kernel over 50 points, or no memory.
typedef struct DrRowReducer DrRowReducer;
DrRowReducer *dr_rowreduce_new(int height, size_t elements, double vscale, VipsKernel kernel);
// The rows the reduce makes.
int dr_rowreduce_height(const DrRowReducer *reducer);
// The demand style vips_reducev's pipeline would have (small tiles after an integer shrink), for
// the image the rows go into: libvips' savers then make it in the same pieces.
VipsDemandStyle dr_rowreduce_demand(const DrRowReducer *reducer);
// Takes the next input row and writes each output row it completes at `out` + row × `stride`
// (an image of dr_rowreduce_height rows). 0, or -1 when more rows come than `height`.
int dr_rowreduce_push(DrRowReducer *reducer, const VipsPel *row, VipsPel *out, size_t stride);
// Whether every output row has been written.
int dr_rowreduce_done(const DrRowReducer *reducer);
void dr_rowreduce_free(DrRowReducer *reducer);
// The reduce over an 8-bit image held in memory and marked sequential (as a loader's image is:
// the rows are placed as libvips places them then), into a new memory image, for comparison
// with dr_resize. 0, 1 when declined, -1 on failure.
int dr_reducev_rows(VipsImage *in, double vscale, VipsKernel kernel, VipsImage **out);

// Encodes an 8-bit, 1- or 3-band image as JPEG with vips_jpegsave's settings and `strip` (the
// same bytes), pulling the pixels through the image's pipeline on the calling thread, 16 rows at
// a time, instead of through libvips' thread pool. Returns 0 with `*buf` (free with g_free) and
// `*len`, -1 on failure (the reason in libvips' error buffer; a killed image fails), or 1
// (declined) for another kind of image or when libvips runs more than one thread an image.
int dr_jpeg_save_direct(VipsImage *in, int quality, int progressive, void **buf, size_t *len);
int dr_pngsave_buffer(VipsImage *in, int compression, int palette, int quality, int strip, void **buf, size_t *len);
int dr_webpsave_buffer(VipsImage *in, int quality, int lossless, int effort, int strip, void **buf, size_t *len);
int dr_avifsave_buffer(VipsImage *in, int quality, int effort, int lossless, int strip, void **buf, size_t *len);
int dr_gifsave_buffer(VipsImage *in, int effort, int strip, void **buf, size_t *len);

// One GIF colour table for dr_gifsave_mapped: `count` RGB triples (1 to 256), and the entry that
// stands for transparent pixels (alpha below 128), or -1.
typedef struct {
  const unsigned char *colours;
  int count;
  int transparent;
} DrGifTable;

// Writes `in` (8-bit RGB or RGBA, `frame_count` frames of its page height) as a GIF whose frame i
// is mapped, without dithering, onto tables[frame_tables[i]]: the source GIF's own colours, as
// gifsicle keeps them, instead of quantising every frame again. Delays and loop count come from
// the image's metadata. The result is g_malloc'd.
int dr_gifsave_mapped(
  VipsImage *in, const DrGifTable *tables, int table_count, const int *frame_tables, int frame_count, void **buf, size_t *len);

// The length of this thread's captured warnings, and a cut back to such a length: work run on
// the calling thread (dr_jpeg_save_direct) drops the warnings libvips emits for each failing
// tile, which its worker threads' warnings never reached either.
size_t dr_warning_mark(void);
void dr_warning_reset(size_t mark);

// libvips reports many loader problems (a damaged PNG header, say) only as GLib warnings in the
// "VIPS" log domain, not in its error buffer. dr_init installs a handler that keeps the last such
// warning per thread (instead of printing it); dr_take_warning copies it into `buffer` (at most
// `size` bytes, NUL-terminated), clears it, and returns its length (0 when there was none).
size_t dr_take_warning(char *buffer, size_t size);

// Pixels in and out (tests and callers that bring their own pixels).
// dr_image_from_pixels copies `width*height*bands` bytes of 8-bit pixels into a new sRGB (3/4
// bands) or B_W (1/2 bands) image. dr_image_to_pixels decodes `in` into memory the caller frees
// with g_free.
int dr_image_from_pixels(const void *pixels, int width, int height, int bands, VipsImage **out);
int dr_image_to_pixels(VipsImage *in, void **pixels, size_t *length);
// A copy of `in` with the EXIF orientation tag set (written into EXIF when saved with metadata).
int dr_with_orientation(VipsImage *in, int orientation, VipsImage **out);


// Animations. A GIF or animated WebP loads as a strip of frames, one under the other, each
// `page-height` pixels tall, with its `delay` array (ms per frame) and `loop` count.
// dr_load_animation loads every frame (n=-1) of a GIF or WebP held in memory.
int dr_load_animation(DrFormat format, const void *buf, size_t len, VipsFailOn fail_on, VipsImage **out);
// How many pages (frames) the file holds, as the loader declared; 1 when it did not say.
int dr_n_pages(VipsImage *in);
// The page-height field, or 0 when the image has none.
int dr_page_height_field(VipsImage *in);
// Frame `index` of a strip of frames `page_height` tall, as an image of its own (without the
// page-height field, so that an operation on it sees a still image).
int dr_frame(VipsImage *in, int index, int page_height, VipsImage **out);
// Frames (or strips of frames) of one width joined into a strip, one under the other, with
// page-height set to `page_height` (and the first image's delay and loop fields). Each reading
// thread keeps a region on the input it reads instead of making one per piece of output.
int dr_join_frames(VipsImage **frames, int n, int page_height, VipsImage **out);
// Makes frame `index` of an animation when it is first read: returns the image (borrowed) and sets
// `owner` to what keeps it (and the memory it reads) alive, or returns NULL with the reason in
// libvips' error buffer.
typedef struct {
  VipsImage *(*make)(void *context, int index, void **owner);
  void (*release_owner)(void *owner);
  void (*release_context)(void *context);
  void *context;
} DrFrameMaker;

// `n` frames the size and kind of `first` as a strip like dr_join_frames', each made by `maker`
// when it is first read and let go once all its rows have been read (made again if read again),
// so that one frame's pipeline lives at a time. The strip owns `maker.context` (released even on
// failure).
int dr_join_made_frames(VipsImage *first, int n, DrFrameMaker maker, VipsImage **out);
// Puts `text` in libvips' error buffer (vips_error is variadic, which Swift cannot call).
void dr_note_error(const char *text);
// The frame delays in ms: at most `max` into `delays`, how many the image has returned (0: none).
int dr_frame_delays(VipsImage *in, int *delays, int max);
// A copy of `in` whose delay array is its own: libvips' WebP saver rewrites the array in place,
// and variants share one decode.
int dr_with_own_delays(VipsImage *in, VipsImage **out);
// The loop count (0: for ever), or -1 when the image has none.
int dr_loop_count(VipsImage *in);

// `overlay` composed over `base` ("over") with its top-left corner at x, y (parts outside are cut).
int dr_composite_over(VipsImage *base, VipsImage *overlay, int x, int y, VipsImage **out);
// `in` repeated `across` times side by side and `down` times one under the other.
int dr_replicate(VipsImage *in, int across, int down, VipsImage **out);

// Whether the image has an embedded ICC profile.
int dr_has_icc(VipsImage *in);

// A copy of `in` without its metadata (EXIF, XMP, IPTC, comments, ICC), keeping the ICC profile
// when `keep_icc` and the EXIF copyright when `keep_copyright`, and the fields an animation needs
// (page-height, delay, loop). Marked so that the encoder writes what is left.
int dr_prune_metadata(VipsImage *in, int keep_icc, int keep_copyright, VipsImage **out);
// The string value of a metadata field (EXIF fields read as "value (description)"), into
// `buffer` (at most `size` bytes, NUL-terminated); 0 when the image has it, -1 when not.
int dr_get_string_field(VipsImage *in, const char *name, char *buffer, size_t size);
// A copy of `in` with a string field, or (value NULL) a blob field of `length` bytes from `data`.
int dr_with_field(VipsImage *in, const char *name, const char *value, const void *data, size_t length, VipsImage **out);
// Whether the image has a metadata field of that name.
int dr_has_field(VipsImage *in, const char *name);

// Asks libvips to stop evaluating `image` (cancellation): pending computations fail quickly.
void dr_kill(VipsImage *image);

// The header guard: a bounded walk over the fields that decide what a loader will allocate
// (PNG chunk lengths and compressed metadata, GIF and animated-WebP frame tables and canvas, TIFF
// strip and tile sizes), run before any loader sees the bytes. It reads the bytes at `buf`
// (`len` of them) or, when `buf` is NULL, the file at `path` with pread; it copies nothing whole
// and inflates compressed metadata only up to its budget.
typedef enum {
  DR_GUARD_OK = 0,
  DR_GUARD_TOO_MANY_PIXELS = 1,  // width × height over max_pixels (`width`, `height` say which)
  DR_GUARD_TOO_LARGE = 2,        // a declared buffer, metadata or frame count over its budget
  DR_GUARD_CORRUPT = 3,          // a declared size the bytes cannot hold (truncated or damaged)
} DrGuardVerdict;

typedef struct {
  uint64_t max_pixels;           // width × height of the image (and of a TIFF tile)
  uint64_t max_buffer_bytes;     // one buffer a loader holds whole: an animation canvas, a strip, a tile
  uint64_t max_metadata_bytes;   // PNG metadata chunks, compressed ones counted inflated
  uint64_t max_metadata_chunks;  // PNG metadata chunks
  uint64_t max_frames;           // GIF and WebP frames (their tables are read whole)
  uint64_t small_chunk_bytes;    // a truncated chunk or strip at most this long is left to the loader
} DrGuardLimits;

typedef struct {
  DrGuardVerdict verdict;
  uint64_t width, height;  // the declared size, when the header was read (else 0)
  char message[512];       // for DR_GUARD_TOO_LARGE and DR_GUARD_CORRUPT: what is wrong, what to do
} DrGuardResult;

DrGuardVerdict dr_guard_check(DrFormat format, const void *buf, size_t len, int fd, DrGuardLimits limits,
                              DrGuardResult *result);

#endif
