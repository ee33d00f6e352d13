/* JPEG straight through libjpeg-turbo, for the two places where libvips' general machinery costs
 * more than the work (issue 18, decision 0014):
 *
 * - dr_jpeg_load_scaled: a clean JPEG decoded at any of libjpeg's DCT scales M/8 (libvips' loader
 *   offers 1/2, 1/4 and 1/8) straight into a libvips memory image, from memory or from a file
 *   read with pread(2), on the calling thread. Anything unusual (a warning, an error, a colour
 *   space other than grey, RGB or YCbCr, a kill) declines, and the caller loads with libvips.
 * - dr_jpeg_load_reduced: the same decode with its rows reduced vertically as they come
 *   (reducev.c), so that a large decode is never held whole.
 * - dr_jpeg_save_direct: an 8-bit grey or RGB image pulled through its libvips pipeline on the
 *   calling thread, a strip at a time, and compressed with the same libjpeg settings as
 *   vips_jpegsave with `strip` (the bytes are identical), without libvips' thread pool.
 */
#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jpeglib.h>
#include <jerror.h>

#include "CVipsShim.h"
#include "library.h"

/* Errors and warnings both end the work: a longjmp back to the caller, with the message kept. */
typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} DrJpegErrors;

static void dr_jpeg_error_exit(j_common_ptr cinfo) {
  DrJpegErrors *errors = (DrJpegErrors *)cinfo->err;
  errors->pub.format_message(cinfo, errors->message);
  longjmp(errors->jump, 1);
}

static void dr_jpeg_emit_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return; /* trace messages */
  DrJpegErrors *errors = (DrJpegErrors *)cinfo->err;
  errors->pub.format_message(cinfo, errors->message);
  longjmp(errors->jump, 1); /* any warning: libvips' loader decides what it means */
}

static void dr_jpeg_output_message(j_common_ptr cinfo) { (void)cinfo; }

/* Errors end the work; so do warnings when `warnings_end_work` (the decoder's policy: libvips'
 * loader decides what they mean). libjpeg's compressor emits no warning that matters. */
static void dr_jpeg_errors_init(DrJpegErrors *errors, int warnings_end_work) {
  jpeg_std_error(&errors->pub);
  errors->pub.error_exit = dr_jpeg_error_exit;
  if (warnings_end_work) errors->pub.emit_message = dr_jpeg_emit_message;
  errors->pub.output_message = dr_jpeg_output_message;
  errors->message[0] = 0;
}

/* A source reading an open file with pread(2) in 64 KiB pieces: never a mapping (a file that
 * someone truncates cannot raise SIGBUS), never past `length`. A short file is an error. */
#define DR_JPEG_FILE_CHUNK 65536
typedef struct {
  struct jpeg_source_mgr pub;
  int fd;
  off_t position;
  off_t length;
  JOCTET buffer[DR_JPEG_FILE_CHUNK];
} DrJpegFileSource;

static void dr_jpeg_file_init(j_decompress_ptr cinfo) { (void)cinfo; }

static boolean dr_jpeg_file_fill(j_decompress_ptr cinfo) {
  DrJpegFileSource *source = (DrJpegFileSource *)cinfo->src;
  off_t left = source->length - source->position;
  size_t want = left > DR_JPEG_FILE_CHUNK ? DR_JPEG_FILE_CHUNK : (size_t)(left > 0 ? left : 0);
  ssize_t got = 0;
  if (want > 0) {
    do {
      got = pread(source->fd, source->buffer, want, source->position);
    } while (got < 0 && errno == EINTR);
  }
  if (got <= 0) ERREXIT(cinfo, JERR_INPUT_EOF);
  source->position += got;
  source->pub.next_input_byte = source->buffer;
  source->pub.bytes_in_buffer = (size_t)got;
  return TRUE;
}

static void dr_jpeg_file_skip(j_decompress_ptr cinfo, long count) {
  DrJpegFileSource *source = (DrJpegFileSource *)cinfo->src;
  if (count <= 0) return;
  if ((size_t)count <= source->pub.bytes_in_buffer) {
    source->pub.next_input_byte += count;
    source->pub.bytes_in_buffer -= (size_t)count;
    return;
  }
  off_t beyond = (off_t)((size_t)count - source->pub.bytes_in_buffer);
  source->pub.bytes_in_buffer = 0;
  /* Past the end: the next fill reports the file short. */
  source->position = beyond > source->length - source->position ? source->length : source->position + beyond;
}

static void dr_jpeg_file_term(j_decompress_ptr cinfo) { (void)cinfo; }

/* Everything one decode owns, on the heap so that longjmp never leaves a stale local. */
typedef struct {
  struct jpeg_decompress_struct cinfo;
  DrJpegErrors errors;
  DrJpegFileSource *file;
  VipsImage *out;
  int killed;         /* the header was killed during the decode (libvips clears the flag) */
  DrRowReducer *rows; /* dr_jpeg_load_reduced's */
  JSAMPLE *strip;     /* dr_jpeg_load_reduced's decoded rows, before they are reduced */
} DrJpegDecode;

static void dr_jpeg_decode_free(DrJpegDecode *decode) {
  jpeg_destroy_decompress(&decode->cinfo);
  g_free(decode->file);
  if (decode->out) g_object_unref(decode->out);
  dr_rowreduce_free(decode->rows);
  g_free(decode->strip);
  g_free(decode);
}

/* Reads the header and sets the decode up at `eighths`/8: longjmps (declines) for anything but
 * a grey, RGB or YCbCr JPEG that libvips' `header` describes, and for a scaled size libvips
 * cannot hold. Sets the bands and interpretation of the pixels to come. */
static void dr_jpeg_begin(DrJpegDecode *decode, const void *buf, size_t len, int fd, size_t file_length, int eighths,
                          const VipsImage *header, int *bands, VipsInterpretation *interpretation) {
  jpeg_create_decompress(&decode->cinfo);
  if (buf) {
    jpeg_mem_src(&decode->cinfo, (const unsigned char *)buf, (unsigned long)len);
  } else {
    if (file_length > (size_t)G_MAXINT64) longjmp(decode->errors.jump, 1);
    decode->file = g_new0(DrJpegFileSource, 1);
    decode->file->fd = fd;
    decode->file->length = (off_t)file_length;
    decode->file->pub.init_source = dr_jpeg_file_init;
    decode->file->pub.fill_input_buffer = dr_jpeg_file_fill;
    decode->file->pub.skip_input_data = dr_jpeg_file_skip;
    decode->file->pub.resync_to_restart = jpeg_resync_to_restart;
    decode->file->pub.term_source = dr_jpeg_file_term;
    decode->cinfo.src = &decode->file->pub;
  }
  struct jpeg_decompress_struct *cinfo = &decode->cinfo;
  if (jpeg_read_header(cinfo, TRUE) != JPEG_HEADER_OK) longjmp(decode->errors.jump, 1);
  if (cinfo->num_components == 1 && cinfo->jpeg_color_space == JCS_GRAYSCALE) {
    cinfo->out_color_space = JCS_GRAYSCALE;
    *bands = 1;
    *interpretation = VIPS_INTERPRETATION_B_W;
  } else if (cinfo->num_components == 3 && (cinfo->jpeg_color_space == JCS_YCbCr || cinfo->jpeg_color_space == JCS_RGB)) {
    cinfo->out_color_space = JCS_RGB;
    *bands = 3;
    *interpretation = VIPS_INTERPRETATION_sRGB;
  } else {
    longjmp(decode->errors.jump, 1); /* CMYK, YCCK and the rest: libvips' loader */
  }
  /* The header libvips read must describe this very image. */
  if ((int)cinfo->image_width != header->Xsize || (int)cinfo->image_height != header->Ysize)
    longjmp(decode->errors.jump, 1);
  cinfo->scale_num = (unsigned int)eighths;
  cinfo->scale_denom = 8;
  cinfo->dct_method = JDCT_ISLOW;
  jpeg_calc_output_dimensions(cinfo);
  if (cinfo->output_width == 0 || cinfo->output_height == 0 || cinfo->output_width > VIPS_MAX_COORD ||
      cinfo->output_height > VIPS_MAX_COORD)
    longjmp(decode->errors.jump, 1);
}

/* A new memory image `width`×`height` with the header's metadata (EXIF, ICC profile,
 * orientation…), ready for its rows; longjmps when libvips cannot make it. */
static void dr_jpeg_make_image(DrJpegDecode *decode, const VipsImage *header, int width, int height, int bands,
                               VipsInterpretation interpretation, VipsDemandStyle demand) {
  decode->out = vips_image_new_memory();
  if (vips_image_pipelinev(decode->out, demand, (VipsImage *)header, NULL))
    longjmp(decode->errors.jump, 1);
  vips_image_init_fields(decode->out, width, height, bands, VIPS_FORMAT_UCHAR, VIPS_CODING_NONE, interpretation,
                         header->Xres, header->Yres);
  if (vips_image_write_prepare(decode->out)) longjmp(decode->errors.jump, 1);
}

/* Starts the decompressor and checks that it decodes what jpeg_calc_output_dimensions said. */
static void dr_jpeg_start(DrJpegDecode *decode, size_t width, size_t height, int bands) {
  struct jpeg_decompress_struct *cinfo = &decode->cinfo;
  jpeg_start_decompress(cinfo);
  if (cinfo->output_width != width || cinfo->output_height != height || cinfo->output_components != bands)
    longjmp(decode->errors.jump, 1);
}

/* Hands the image over once every row is in: what follows the last scan is not read (libvips'
 * loader never reads it either). */
static void dr_jpeg_finish(DrJpegDecode *decode, VipsImage **out) {
  jpeg_abort_decompress(&decode->cinfo);
  *out = decode->out;
  decode->out = NULL;
  dr_jpeg_decode_free(decode);
}

/* Ends the decode once the header is killed, looking every 64 rows. */
static void dr_jpeg_check_kill(DrJpegDecode *decode, const VipsImage *header) {
  if ((decode->cinfo.output_scanline & 63) >= 16) return;
  /* vips_image_iskilled clears the flag it reports: the decode remembers it. */
  if (vips_image_iskilled((VipsImage *)header)) {
    decode->killed = 1;
    longjmp(decode->errors.jump, 1);
  }
}

/* Every row into the image. */
static void dr_jpeg_read_whole(DrJpegDecode *decode, const VipsImage *header) {
  struct jpeg_decompress_struct *cinfo = &decode->cinfo;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW rows[16];
    int count = 0;
    for (; count < 16 && cinfo->output_scanline + (JDIMENSION)count < cinfo->output_height; count++)
      rows[count] = (JSAMPROW)VIPS_IMAGE_ADDR(decode->out, 0, cinfo->output_scanline + (JDIMENSION)count);
    if (jpeg_read_scanlines(cinfo, rows, (JDIMENSION)count) == 0) longjmp(decode->errors.jump, 1);
    dr_jpeg_check_kill(decode, header);
  }
}

/* Every row through the row reduce, which writes the image's rows as it completes them. */
static void dr_jpeg_read_reducing(DrJpegDecode *decode, const VipsImage *header, size_t row) {
  struct jpeg_decompress_struct *cinfo = &decode->cinfo;
  VipsPel *base = VIPS_IMAGE_ADDR(decode->out, 0, 0);
  const size_t stride = VIPS_IMAGE_SIZEOF_LINE(decode->out);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW rows[16];
    for (int i = 0; i < 16; i++) rows[i] = decode->strip + (size_t)i * row;
    JDIMENSION got = jpeg_read_scanlines(cinfo, rows, 16);
    if (got == 0) longjmp(decode->errors.jump, 1);
    for (JDIMENSION i = 0; i < got; i++)
      if (dr_rowreduce_push(decode->rows, rows[i], base, stride)) longjmp(decode->errors.jump, 1);
    dr_jpeg_check_kill(decode, header);
  }
  if (!dr_rowreduce_done(decode->rows)) longjmp(decode->errors.jump, 1);
}

/* The decode at `eighths`/8: whole when `vscale` is 0, else with its rows reduced by it. Returns
 * 0, 1 when declined, or 2 when libjpeg found the file wanting or the image was killed (another
 * direct decode of it would fail the same way). */
static int dr_jpeg_decode(const void *buf, size_t len, int fd, size_t file_length, int eighths, VipsImage *header,
                          double vscale, VipsKernel kernel, size_t max_bytes, VipsImage **out) {
  if (eighths < 1 || eighths > 8 || !header || !out || (!buf && fd < 0)) return 1;
  DrJpegDecode *decode = g_new0(DrJpegDecode, 1);
  dr_jpeg_errors_init(&decode->errors, 1);
  decode->cinfo.err = &decode->errors.pub;
  if (setjmp(decode->errors.jump)) {
    const int failed = decode->errors.message[0] != 0 || decode->killed;
    dr_jpeg_decode_free(decode);
    return failed ? 2 : 1;
  }
  int bands;
  VipsInterpretation interpretation;
  dr_jpeg_begin(decode, buf, len, fd, file_length, eighths, header, &bands, &interpretation);
  /* A row is at most 65,535 pixels (JPEG's own limit): the window of rows held is bounded. */
  const size_t width = decode->cinfo.output_width, height = decode->cinfo.output_height;
  const size_t row = width * (size_t)bands;
  if (row > max_bytes) longjmp(decode->errors.jump, 1);
  size_t rows = height;
  VipsDemandStyle demand = VIPS_DEMAND_STYLE_ANY;
  if (vscale != 0) {
    /* The rows are placed where libvips places them on a sequential image (reducev.c). */
    if (!vips_image_get_typeof(header, VIPS_META_SEQUENTIAL)) longjmp(decode->errors.jump, 1);
    decode->rows = dr_rowreduce_new((int)height, row, vscale, kernel);
    decode->strip = g_try_malloc(row * 16);
    if (!decode->rows || !decode->strip) longjmp(decode->errors.jump, 1);
    rows = (size_t)dr_rowreduce_height(decode->rows);
    demand = dr_rowreduce_demand(decode->rows);
  }
  if (rows > max_bytes / row) longjmp(decode->errors.jump, 1);
  dr_jpeg_make_image(decode, header, (int)width, (int)rows, bands, interpretation, demand);
  dr_jpeg_start(decode, width, height, bands);
  if (decode->rows)
    dr_jpeg_read_reducing(decode, header, row);
  else
    dr_jpeg_read_whole(decode, header);
  dr_jpeg_finish(decode, out);
  return 0;
}

int dr_jpeg_load_scaled(const void *buf, size_t len, int fd, size_t file_length, int eighths, VipsImage *header,
                        size_t max_bytes, VipsImage **out) {
  return dr_jpeg_decode(buf, len, fd, file_length, eighths, header, 0, VIPS_KERNEL_LANCZOS3, max_bytes, out) ? 1 : 0;
}

int dr_jpeg_load_reduced(const void *buf, size_t len, int fd, size_t file_length, int eighths, VipsImage *header,
                         double vscale, VipsKernel kernel, size_t max_bytes, VipsImage **out) {
  /* 0 would ask for the whole decode; dr_rowreduce_new declines what is not a reduction. */
  if (!(vscale > 0)) return 1;
  return dr_jpeg_decode(buf, len, fd, file_length, eighths, header, vscale, kernel, max_bytes, out);
}

/* A destination growing a g_malloc'd buffer, so the caller frees it with g_free like a saver's. */
typedef struct {
  struct jpeg_destination_mgr pub;
  JOCTET *data;
  size_t capacity;
} DrJpegDestination;

static void dr_jpeg_destination_init(j_compress_ptr cinfo) {
  DrJpegDestination *destination = (DrJpegDestination *)cinfo->dest;
  destination->pub.next_output_byte = destination->data;
  destination->pub.free_in_buffer = destination->capacity;
}

static boolean dr_jpeg_destination_grow(j_compress_ptr cinfo) {
  DrJpegDestination *destination = (DrJpegDestination *)cinfo->dest;
  size_t used = destination->capacity;
  if (destination->capacity > G_MAXSIZE / 2) ERREXIT(cinfo, JERR_OUT_OF_MEMORY);
  JOCTET *grown = g_try_realloc(destination->data, destination->capacity * 2);
  if (!grown) ERREXIT(cinfo, JERR_OUT_OF_MEMORY);
  destination->data = grown;
  destination->capacity *= 2;
  destination->pub.next_output_byte = grown + used;
  destination->pub.free_in_buffer = destination->capacity - used;
  return TRUE;
}

static void dr_jpeg_destination_term(j_compress_ptr cinfo) { (void)cinfo; }

typedef struct {
  struct jpeg_compress_struct cinfo;
  DrJpegErrors errors;
  DrJpegDestination destination;
  VipsRegion *region;
} DrJpegEncode;

static void dr_jpeg_encode_free(DrJpegEncode *encode) {
  jpeg_destroy_compress(&encode->cinfo);
  g_free(encode->destination.data);
  if (encode->region) g_object_unref(encode->region);
  g_free(encode);
}

int dr_jpeg_save_direct(VipsImage *in, int quality, int progressive, void **buf, size_t *len) {
  if (!in || !buf || !len || quality < 1 || quality > 100) return 1;
  if (in->BandFmt != VIPS_FORMAT_UCHAR || in->Coding != VIPS_CODING_NONE || (in->Bands != 1 && in->Bands != 3) ||
      in->Type == VIPS_INTERPRETATION_CMYK || in->Xsize < 1 || in->Ysize < 1 || in->Xsize > JPEG_MAX_DIMENSION ||
      in->Ysize > JPEG_MAX_DIMENSION)
    return 1;
  /* With more than one libvips thread an image, libvips' saver computes strips in parallel. */
  if (vips_concurrency_get() > 1) return 1;
  DrJpegEncode *encode = g_new0(DrJpegEncode, 1);
  dr_jpeg_errors_init(&encode->errors, 0);
  encode->cinfo.err = &encode->errors.pub;
  if (setjmp(encode->errors.jump)) {
    if (encode->errors.message[0]) vips_error("jpegsave", "%s", encode->errors.message);
    dr_jpeg_encode_free(encode);
    return -1;
  }
  jpeg_create_compress(&encode->cinfo);
  struct jpeg_compress_struct *cinfo = &encode->cinfo;
  encode->destination.capacity = 65536;
  encode->destination.data = g_try_malloc(encode->destination.capacity);
  if (!encode->destination.data) ERREXIT(cinfo, JERR_OUT_OF_MEMORY);
  encode->destination.pub.init_destination = dr_jpeg_destination_init;
  encode->destination.pub.empty_output_buffer = dr_jpeg_destination_grow;
  encode->destination.pub.term_destination = dr_jpeg_destination_term;
  cinfo->dest = &encode->destination.pub;
  cinfo->image_width = (JDIMENSION)in->Xsize;
  cinfo->image_height = (JDIMENSION)in->Ysize;
  cinfo->input_components = in->Bands;
  cinfo->in_color_space = in->Bands == 3 ? JCS_RGB : JCS_GRAYSCALE;
  /* vips_jpegsave's settings with `strip` (libvips 8.14, vips2jpeg.c write_vips). */
  jpeg_set_defaults(cinfo);
  cinfo->optimize_coding = FALSE;
  jpeg_set_quality(cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(cinfo);
  if (quality >= 90) {
    for (int i = 0; i < in->Bands; i++) {
      cinfo->comp_info[i].h_samp_factor = 1;
      cinfo->comp_info[i].v_samp_factor = 1;
    }
  }
  cinfo->write_JFIF_header = FALSE;

  /* libvips warns once per failing tile ("error in tile 0 x 368"); on its saver's worker threads
   * those never reached the caller's message. Neither do they here. */
  size_t warnings = dr_warning_mark();
  encode->region = vips_region_new(in);
  if (!encode->region) longjmp(encode->errors.jump, 1);
  jpeg_start_compress(cinfo, TRUE);
  while (cinfo->next_scanline < cinfo->image_height) {
    int top = (int)cinfo->next_scanline;
    int rows = in->Ysize - top < 16 ? in->Ysize - top : 16;
    VipsRect strip = {0, top, in->Xsize, rows};
    /* Pulls the rows through the pipeline on this thread; fails once the image is killed. */
    if (vips_region_prepare(encode->region, &strip)) {
      dr_warning_reset(warnings);
      encode->errors.message[0] = 0; /* libvips' own error is in its buffer */
      longjmp(encode->errors.jump, 1);
    }
    JSAMPROW pointers[16];
    for (int y = 0; y < rows; y++) pointers[y] = (JSAMPROW)VIPS_REGION_ADDR(encode->region, 0, top + y);
    jpeg_write_scanlines(cinfo, pointers, (JDIMENSION)rows);
  }
  jpeg_finish_compress(cinfo);
  *len = encode->destination.capacity - encode->destination.pub.free_in_buffer;
  *buf = encode->destination.data;
  encode->destination.data = NULL;
  dr_jpeg_encode_free(encode);
  return 0;
}
