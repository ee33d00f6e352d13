/* JPEG straight through libjpeg-turbo, for the two places where libvips' general machinery costs
 * more than the work (issue 18, decision 0014):
 *
 * - dr_jpeg_load_scaled: a clean JPEG decoded at any of libjpeg's DCT scales M/8 (libvips' loader
 *   offers 1/2, 1/4 and 1/8) straight into a libvips memory image, from memory or from a file
 *   read with pread(2), on the calling thread. Anything unusual (a warning, an error, a colour
 *   space other than grey, RGB or YCbCr, a kill) declines, and the caller loads with libvips.
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
} DrJpegDecode;

static void dr_jpeg_decode_free(DrJpegDecode *decode) {
  jpeg_destroy_decompress(&decode->cinfo);
  g_free(decode->file);
  if (decode->out) g_object_unref(decode->out);
  g_free(decode);
}

int dr_jpeg_load_scaled(const void *buf, size_t len, int fd, size_t file_length, int eighths, VipsImage *header,
                        size_t max_bytes, VipsImage **out) {
  if (eighths < 1 || eighths > 8 || !header || !out || (!buf && fd < 0)) return 1;
  DrJpegDecode *decode = g_new0(DrJpegDecode, 1);
  dr_jpeg_errors_init(&decode->errors, 1);
  decode->cinfo.err = &decode->errors.pub;
  if (setjmp(decode->errors.jump)) {
    dr_jpeg_decode_free(decode);
    return 1;
  }
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
  int bands;
  VipsInterpretation interpretation;
  if (cinfo->num_components == 1 && cinfo->jpeg_color_space == JCS_GRAYSCALE) {
    cinfo->out_color_space = JCS_GRAYSCALE;
    bands = 1;
    interpretation = VIPS_INTERPRETATION_B_W;
  } else if (cinfo->num_components == 3 && (cinfo->jpeg_color_space == JCS_YCbCr || cinfo->jpeg_color_space == JCS_RGB)) {
    cinfo->out_color_space = JCS_RGB;
    bands = 3;
    interpretation = VIPS_INTERPRETATION_sRGB;
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
  size_t width = cinfo->output_width, height = cinfo->output_height;
  if (width == 0 || height == 0 || width > VIPS_MAX_COORD || height > VIPS_MAX_COORD) longjmp(decode->errors.jump, 1);
  if (width > max_bytes / (size_t)bands || height > max_bytes / (width * (size_t)bands)) longjmp(decode->errors.jump, 1);

  /* A memory image with the header's metadata (EXIF, ICC profile, orientation…) and our size. */
  decode->out = vips_image_new_memory();
  if (vips_image_pipelinev(decode->out, VIPS_DEMAND_STYLE_ANY, header, NULL)) longjmp(decode->errors.jump, 1);
  vips_image_init_fields(decode->out, (int)width, (int)height, bands, VIPS_FORMAT_UCHAR, VIPS_CODING_NONE,
                         interpretation, header->Xres, header->Yres);
  if (vips_image_write_prepare(decode->out)) longjmp(decode->errors.jump, 1);

  jpeg_start_decompress(cinfo);
  if (cinfo->output_width != width || cinfo->output_height != height || cinfo->output_components != bands)
    longjmp(decode->errors.jump, 1);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW rows[16];
    int count = 0;
    for (; count < 16 && cinfo->output_scanline + (JDIMENSION)count < cinfo->output_height; count++)
      rows[count] = (JSAMPROW)VIPS_IMAGE_ADDR(decode->out, 0, cinfo->output_scanline + (JDIMENSION)count);
    if (jpeg_read_scanlines(cinfo, rows, (JDIMENSION)count) == 0) longjmp(decode->errors.jump, 1);
    if ((cinfo->output_scanline & 63) < 16 && vips_image_iskilled(header)) longjmp(decode->errors.jump, 1);
  }
  /* Every row is in: what follows the last scan is not read (libvips' loader never reads it either). */
  jpeg_abort_decompress(cinfo);
  *out = decode->out;
  decode->out = NULL;
  dr_jpeg_decode_free(decode);
  return 0;
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
