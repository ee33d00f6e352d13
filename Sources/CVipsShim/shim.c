#define _GNU_SOURCE /* dladdr */
#include "CVipsShim.h"

#include <tiffio.h>

#include <dlfcn.h>
#include <errno.h>
#include <gmodule.h>
#include <pthread.h>
#include <limits.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "library.h"
#include "CLibraryLoader.h"

static __thread char last_warning[512];

static void dr_log_handler(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
  (void)domain;
  (void)level;
  (void)data;
  if (!message) return;
  size_t used = strlen(last_warning);
  // Keep the first warning of a sequence and append the following ones while they fit.
  if (used > 0 && used + 3 < sizeof last_warning) {
    strncat(last_warning, " | ", sizeof last_warning - used - 1);
    used = strlen(last_warning);
  }
  if (used + 1 < sizeof last_warning) strncat(last_warning, message, sizeof last_warning - used - 1);
}

size_t dr_warning_mark(void) { return strlen(last_warning); }

void dr_warning_reset(size_t mark) {
  if (mark < strlen(last_warning)) last_warning[mark] = 0;
}

size_t dr_take_warning(char *buffer, size_t size) {
  size_t length = strlen(last_warning);
  if (buffer && size > 0) {
    size_t n = length < size - 1 ? length : size - 1;
    memcpy(buffer, last_warning, n);
    buffer[n] = 0;
  }
  last_warning[0] = 0;
  return length;
}

/* The folder libvips is pointed at for its modules: under /proc, where nobody can create it. */
static const char *const dr_no_modules_home = "/proc/darkroom-loads-only-vips-heif";

/* Loads libvips' HEIF module (HEIF and AVIF) from the module folder beside libvips itself, once,
 * when the first HEIF or AVIF image is loaded or saved (libheif and its codecs cost about 3 ms
 * and 2 MB a process that never sees one). */
static pthread_once_t dr_heif_once = PTHREAD_ONCE_INIT;

static void dr_load_heif_module(void) {
  Dl_info info;
  if (!dladdr((void *)vips_init, &info) || !info.dli_fname) return;
  /* The folder of the file itself: libvips reached through a symlink (a library path of links)
   * keeps its modules beside the real file. */
  char *real = realpath(info.dli_fname, NULL);
  char *folder = g_path_get_dirname(real ? real : info.dli_fname);
  free(real);
  char *path = g_strdup_printf("%s/vips-modules-%d.%d/vips-heif.%s", folder, VIPS_MAJOR_VERSION, VIPS_MINOR_VERSION,
                               G_MODULE_SUFFIX);
  /* Not while the process exits (see dr_library_enter): the HEIF image then fails instead. */
  if (dr_library_enter() == 0) {
    GModule *module = g_module_open(path, G_MODULE_BIND_LAZY);
    if (module) g_module_make_resident(module); /* it registers GTypes: it stays */
    dr_library_leave();
  }
  g_free(path);
  g_free(folder);
}

void dr_heif_ready(void) { pthread_once(&dr_heif_once, dr_load_heif_module); }

static char dr_start_failure[600];

static int dr_start(const char *argv0) {
  if (!dr_library_open()) {
    snprintf(dr_start_failure, sizeof dr_start_failure, "%s", dr_library_error());
    return -2;
  }
  /* libvips loads every module of its module folder when it starts, and takes that folder from
   * $VIPSHOME when set: ImageMagick, poppler, OpenSlide and libjxl cost about 15 ms and 7 MB a
   * process, and their loaders are untrusted (blocked below). Point libvips at a folder that
   * cannot exist (the environment chooses no code to load), then load only the HEIF module. */
  g_setenv("VIPSHOME", dr_no_modules_home, TRUE);
  if (VIPS_INIT(argv0 ? argv0 : "darkroom")) return -1;
  g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE, dr_log_handler, NULL);
  // Loaders of formats Darkroom does not trust (ImageMagick, PDF, SVG, JPEG 2000, Matlab…) are
  // marked untrusted by libvips; refuse them even if something asks for them by name.
  vips_block_untrusted_set(TRUE);
  // Every image is processed once: the operation cache would only hold memory.
  vips_cache_set_max(0);
  vips_cache_set_max_mem(0);
  vips_cache_set_max_files(0);
  return 0;
}

int dr_init(const char *argv0) {
  /* The whole start (opening libvips, then registering its types) is kept out of exit()'s way. */
  if (dr_library_enter() != 0) {
    snprintf(dr_start_failure, sizeof dr_start_failure, "libvips was not started: the process is exiting");
    return -2;
  }
  int result = dr_start(argv0);
  dr_library_leave();
  return result;
}

const char *dr_init_failure(void) { return dr_start_failure; }

const char *dr_version(void) { return vips_version_string(); }

int dr_load_buffer(DrFormat format, const void *buf, size_t len, int shrink, double scale, int thumbnail,
                   VipsFailOn fail_on, int sequential, VipsImage **out) {
  VipsAccess access = sequential ? VIPS_ACCESS_SEQUENTIAL : VIPS_ACCESS_RANDOM;
  // The loaders take a non-const pointer but only read from it.
  void *data = (void *)buf;
  switch (format) {
  case DR_FORMAT_JPEG:
    return vips_jpegload_buffer(data, len, out, "access", access, "fail_on", fail_on, "shrink", shrink > 0 ? shrink : 1,
                                "autorotate", FALSE, NULL);
  case DR_FORMAT_PNG:
    return vips_pngload_buffer(data, len, out, "access", access, "fail_on", fail_on, "unlimited", FALSE, NULL);
  case DR_FORMAT_GIF:
    return vips_gifload_buffer(data, len, out, "access", access, "fail_on", fail_on, "n", 1, "page", 0, NULL);
  case DR_FORMAT_WEBP:
    return vips_webpload_buffer(data, len, out, "access", access, "fail_on", fail_on, "n", 1, "page", 0, "scale",
                                scale > 0 ? scale : 1.0, NULL);
  case DR_FORMAT_TIFF:
    return vips_tiffload_buffer(data, len, out, "access", access, "fail_on", fail_on, "n", 1, "page", 0, NULL);
  case DR_FORMAT_HEIF:
    dr_heif_ready();
    return vips_heifload_buffer(data, len, out, "access", access, "fail_on", fail_on, "n", 1, "page", 0, "thumbnail",
                                thumbnail ? TRUE : FALSE, "unlimited", FALSE, NULL);
  }
  vips_error("darkroom", "unknown format %d", (int)format);
  return -1;
}

/* A VipsSourceCustom reading a descriptor with pread(2): the loader never sees a file name or a
 * descriptor, so it cannot map the file (vips_source_map() of a custom source reads it into
 * memory). A mapped file that another process truncates raises SIGBUS on the next access. */
typedef struct {
  int fd;            /* our own duplicate, closed with the source */
  gint64 length;     /* bytes past this (a file that grew) are never read */
  /* Atomic: libvips calls the source from the thread that loads the header, then from its
   * workers, one at a time under GLib's own (futex) locks, which ThreadSanitizer cannot see. */
  _Atomic gint64 position;
} DrDescriptorReader;

static gint64 dr_reader_read(VipsSourceCustom *source, void *buffer, gint64 length, gpointer data) {
  (void)source;
  DrDescriptorReader *reader = data;
  gint64 position = atomic_load(&reader->position);
  if (length <= 0 || position >= reader->length) return 0;
  if (length > reader->length - position) length = reader->length - position;
  for (;;) {
    ssize_t got = pread(reader->fd, buffer, (size_t)length, (off_t)position);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      vips_error("darkroom", "reading the file failed: %s", strerror(errno));
      return -1;
    }
    atomic_store(&reader->position, position + got);
    return got; /* 0 when the file was cut short: the loader reports it truncated */
  }
}

static gint64 dr_reader_seek(VipsSourceCustom *source, gint64 offset, int whence, gpointer data) {
  (void)source;
  DrDescriptorReader *reader = data;
  gint64 base;
  switch (whence) {
  case SEEK_SET: base = 0; break;
  case SEEK_CUR: base = atomic_load(&reader->position); break;
  case SEEK_END: base = reader->length; break;
  default: return -1;
  }
  if ((offset > 0 && base > G_MAXINT64 - offset) || base + offset < 0) return -1;
  atomic_store(&reader->position, base + offset);
  return base + offset;
}

static void dr_reader_free(gpointer data) {
  DrDescriptorReader *reader = data;
  close(reader->fd);
  g_free(reader);
}

int dr_load_descriptor(DrFormat format, int fd, size_t length, int shrink, double scale, int thumbnail, VipsFailOn fail_on,
                       int sequential, VipsImage **out) {
  (void)scale;     /* WebP only */
  (void)thumbnail; /* HEIF only */
  VipsAccess access = sequential ? VIPS_ACCESS_SEQUENTIAL : VIPS_ACCESS_RANDOM;
  if (length > (size_t)G_MAXINT64) {
    vips_error("darkroom", "the file is too large");
    return -1;
  }
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    vips_error("darkroom", "cannot duplicate the file descriptor: %s", strerror(errno));
    return -1;
  }
  VipsSourceCustom *custom = vips_source_custom_new();
  if (!custom) {
    close(own);
    return -1;
  }
  DrDescriptorReader *reader = g_new0(DrDescriptorReader, 1);
  reader->fd = own;
  reader->length = (gint64)length;
  atomic_store(&reader->position, 0);
  /* Freed (and the duplicate closed) when the source goes, after the last image reading it. */
  g_object_set_data_full(G_OBJECT(custom), "darkroom-reader", reader, dr_reader_free);
  g_signal_connect(custom, "read", G_CALLBACK(dr_reader_read), reader);
  g_signal_connect(custom, "seek", G_CALLBACK(dr_reader_seek), reader);
  VipsSource *source = VIPS_SOURCE(custom);
  int result = -1;
  switch (format) {
  case DR_FORMAT_JPEG:
    result = vips_jpegload_source(source, out, "access", access, "fail_on", fail_on, "shrink", shrink > 0 ? shrink : 1,
                                  "autorotate", FALSE, NULL);
    break;
  case DR_FORMAT_PNG:
    result = vips_pngload_source(source, out, "access", access, "fail_on", fail_on, "unlimited", FALSE, NULL);
    break;
  case DR_FORMAT_TIFF:
    result = vips_tiffload_source(source, out, "access", access, "fail_on", fail_on, "n", 1, "page", 0, NULL);
    break;
  default:
    /* GIF and WebP loaders want the whole file (they map it); libheif asserts (SIGABRT) when the
     * file gets shorter than it was at the header. Their bytes are handed over in memory. */
    vips_error("darkroom", "format %d is not decoded from a file", (int)format);
  }
  g_object_unref(custom); /* the image holds its own reference while it reads */
  return result;
}

int dr_autorot(VipsImage *in, VipsImage **out) { return vips_autorot(in, out, NULL); }

int dr_icc_to_srgb(VipsImage *in, int embedded, const char *fallback_profile, VipsImage **out) {
  if (fallback_profile)
    return vips_icc_transform(in, out, "srgb", "embedded", embedded ? TRUE : FALSE, "input_profile", fallback_profile,
                              "intent", VIPS_INTENT_PERCEPTUAL, NULL);
  return vips_icc_transform(in, out, "srgb", "embedded", embedded ? TRUE : FALSE, "intent", VIPS_INTENT_PERCEPTUAL, NULL);
}

int dr_colourspace(VipsImage *in, VipsInterpretation space, VipsImage **out) { return vips_colourspace(in, out, space, NULL); }

int dr_cast(VipsImage *in, VipsBandFormat format, VipsImage **out) { return vips_cast(in, out, format, NULL); }

int dr_crop(VipsImage *in, int left, int top, int width, int height, VipsImage **out) {
  return vips_crop(in, out, left, top, width, height, NULL);
}

int dr_smartcrop(VipsImage *in, int width, int height, VipsInteresting interesting, VipsImage **out) {
  return vips_smartcrop(in, out, width, height, "interesting", interesting, NULL);
}

int dr_gravity(VipsImage *in, VipsCompassDirection direction, int width, int height, const double *background,
               int n_background, VipsImage **out) {
  VipsArrayDouble *bg = vips_array_double_new(background, n_background);
  int result = vips_gravity(in, out, direction, width, height, "extend", VIPS_EXTEND_BACKGROUND, "background", bg, NULL);
  vips_area_unref(VIPS_AREA(bg));
  return result;
}

int dr_resize(VipsImage *in, double hscale, double vscale, VipsKernel kernel, VipsImage **out) {
  /* A reduction on both axes of an image the vectorised reduceh takes: vips_resize's own steps
   * (reducev, then reduceh, both with its gap of 2), the horizontal one by dr_reduceh. */
  if (hscale < 1.0 && vscale <= 1.0 && in->Ysize >= 1 && dr_reduceh_takes(in, kernel)) {
    const double h = VIPS_MAX(hscale, 1.0 / in->Xsize);
    const double v = VIPS_MAX(vscale, 1.0 / in->Ysize);
    VipsImage *tall = in;
    if (v < 1.0) {
      if (vips_reducev(in, &tall, 1.0 / v, "kernel", kernel, "gap", 2.0, NULL)) return -1;
    } else {
      g_object_ref(tall);
    }
    if (h >= 1.0) { /* a one-pixel-wide image: nothing to reduce across */
      *out = tall;
      return 0;
    }
    int status = dr_reduceh(tall, 1.0 / h, kernel, out);
    g_object_unref(tall);
    return status;
  }
  return vips_resize(in, out, hscale, "vscale", vscale, "kernel", kernel, NULL);
}

int dr_resize_vips(VipsImage *in, double hscale, double vscale, VipsKernel kernel, VipsImage **out) {
  return vips_resize(in, out, hscale, "vscale", vscale, "kernel", kernel, NULL);
}

int dr_premultiply(VipsImage *in, VipsImage **out) { return vips_premultiply(in, out, NULL); }

int dr_unpremultiply(VipsImage *in, VipsImage **out) { return vips_unpremultiply(in, out, NULL); }

int dr_rot(VipsImage *in, VipsAngle angle, VipsImage **out) { return vips_rot(in, out, angle, NULL); }

int dr_flip(VipsImage *in, VipsDirection direction, VipsImage **out) { return vips_flip(in, out, direction, NULL); }

int dr_gaussblur(VipsImage *in, double sigma, int approximate, VipsImage **out) {
  return vips_gaussblur(in, out, sigma, "precision", approximate ? VIPS_PRECISION_APPROXIMATE : VIPS_PRECISION_INTEGER,
                        NULL);
}

void dr_mark(VipsImage *image, const char *name) { vips_image_set_int(image, name, 1); }

int dr_marked(VipsImage *image, const char *name) { return vips_image_get_typeof(image, name) != 0; }

int dr_sharpen(VipsImage *in, double sigma, double m2, VipsImage **out) {
  return vips_sharpen(in, out, "sigma", sigma, "m2", m2, NULL);
}

int dr_addalpha(VipsImage *in, VipsImage **out) { return vips_addalpha(in, out, NULL); }

int dr_rounded_mask(int width, int height, double rx, double ry, VipsImage **out) {
  // Computed, not drawn (svgload is one of the loaders Darkroom blocks): for each pixel centre,
  // its distance past the inner rectangle, in radii; 255 up to 1, fading to 0 over a pixel.
  if (width < 1 || height < 1 || !(rx > 0) || !(ry > 0)) return -1;
  VipsImage *context = vips_image_new();
  VipsImage **t = (VipsImage **)vips_object_local_array(VIPS_OBJECT(context), 11);
  double cx = width / 2.0, cy = height / 2.0, m = rx < ry ? rx : ry;
  double ones[2] = {1, 1}, centred[2] = {0.5 - cx, 0.5 - cy}, inner[2] = {rx - cx, ry - cy};
  double radii[2] = {0.5 / rx, 0.5 / ry}, zeros[2] = {0, 0}, doubled = 2, none = 0;
  double fade = -m * 255.0, full = (m + 0.5) * 255.0;
  int failed = vips_xyz(&t[0], width, height, NULL) || vips_linear(t[0], &t[1], ones, centred, 2, NULL) ||
               vips_abs(t[1], &t[2], NULL) || vips_linear(t[2], &t[3], ones, inner, 2, NULL) ||
               vips_abs(t[3], &t[4], NULL) || vips_add(t[3], t[4], &t[5], NULL) ||  // 2 × max(v, 0)
               vips_linear(t[5], &t[6], radii, zeros, 2, NULL) || vips_multiply(t[6], t[6], &t[7], NULL) ||
               vips_bandmean(t[7], &t[8], NULL) || vips_linear(t[8], &t[9], &doubled, &none, 1, NULL) ||
               vips_pow_const1(t[9], &t[10], 0.5, NULL);
  if (failed) {
    g_object_unref(context);
    return -1;
  }
  VipsImage *alpha = NULL;
  if (vips_linear(t[10], &alpha, &fade, &full, 1, NULL)) {
    g_object_unref(context);
    return -1;
  }
  int result = vips_cast(alpha, out, VIPS_FORMAT_UCHAR, NULL);
  g_object_unref(alpha);
  g_object_unref(context);
  return result;
}

int dr_extract_bands(VipsImage *in, int first, int count, VipsImage **out) {
  return vips_extract_band(in, out, first, "n", count, NULL);
}

int dr_multiply(VipsImage *left, VipsImage *right, VipsImage **out) { return vips_multiply(left, right, out, NULL); }

int dr_bandjoin2(VipsImage *left, VipsImage *right, VipsImage **out) { return vips_bandjoin2(left, right, out, NULL); }

int dr_linear(VipsImage *in, const double *a, const double *b, int n, VipsImage **out) {
  return vips_linear(in, out, (double *)a, (double *)b, n, NULL);
}

int dr_find_trim(VipsImage *in, double threshold, const double *background, int n_background, int *left, int *top,
                 int *width, int *height) {
  VipsArrayDouble *bg = vips_array_double_new(background, n_background);
  int result = vips_find_trim(in, left, top, width, height, "threshold", threshold, "background", bg, NULL);
  vips_area_unref(VIPS_AREA(bg));
  return result;
}

int dr_getpoint(VipsImage *in, int x, int y, double *values, int max, int *n) {
  double *vector = NULL;
  int count = 0;
  if (vips_getpoint(in, &vector, &count, x, y, NULL)) return -1;
  int kept = count < max ? count : max;
  for (int i = 0; i < kept; i++) values[i] = vector[i];
  *n = kept;
  g_free(vector);
  return 0;
}

int dr_embed(VipsImage *in, int x, int y, int width, int height, const double *background, int n_background,
             VipsImage **out) {
  VipsArrayDouble *bg = vips_array_double_new(background, n_background);
  int result = vips_embed(in, out, x, y, width, height, "extend", VIPS_EXTEND_BACKGROUND, "background", bg, NULL);
  vips_area_unref(VIPS_AREA(bg));
  return result;
}

int dr_flatten(VipsImage *in, const double *background, int n_background, VipsImage **out) {
  VipsArrayDouble *bg = vips_array_double_new(background, n_background);
  int result = vips_flatten(in, out, "background", bg, NULL);
  vips_area_unref(VIPS_AREA(bg));
  return result;
}


int dr_jpegsave_buffer(VipsImage *in, int quality, int progressive, int strip, void **buf, size_t *len) {
  return vips_jpegsave_buffer(in, buf, len, "Q", quality, "interlace", progressive ? TRUE : FALSE, "strip",
                              strip ? TRUE : FALSE, NULL);
}

int dr_pngsave_buffer(VipsImage *in, int compression, int palette, int quality, int strip, void **buf, size_t *len) {
  return vips_pngsave_buffer(in, buf, len, "compression", compression, "palette", palette ? TRUE : FALSE, "Q", quality,
                             "strip", strip ? TRUE : FALSE, NULL);
}

int dr_webpsave_buffer(VipsImage *in, int quality, int lossless, int effort, int strip, void **buf, size_t *len) {
  return vips_webpsave_buffer(in, buf, len, "Q", quality, "lossless", lossless ? TRUE : FALSE, "effort", effort, "strip",
                              strip ? TRUE : FALSE, NULL);
}

int dr_avifsave_buffer(VipsImage *in, int quality, int effort, int lossless, int strip, void **buf, size_t *len) {
  dr_heif_ready();
  return vips_heifsave_buffer(in, buf, len, "Q", quality, "effort", effort, "lossless", lossless ? TRUE : FALSE,
                              "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1, "strip", strip ? TRUE : FALSE, NULL);
}

int dr_gifsave_buffer(VipsImage *in, int effort, int strip, void **buf, size_t *len) {
  return vips_gifsave_buffer(in, buf, len, "effort", effort, "strip", strip ? TRUE : FALSE, NULL);
}

int dr_load_animation(DrFormat format, const void *buf, size_t len, VipsFailOn fail_on, VipsImage **out) {
  void *data = (void *)buf;
  switch (format) {
  case DR_FORMAT_GIF:
    return vips_gifload_buffer(data, len, out, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", fail_on, "n", -1, NULL);
  case DR_FORMAT_WEBP:
    return vips_webpload_buffer(data, len, out, "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", fail_on, "n", -1, NULL);
  default:
    vips_error("darkroom", "only GIF and WebP animations are loaded");
    return -1;
  }
}

int dr_n_pages(VipsImage *in) { return vips_image_get_n_pages(in); }

int dr_page_height_field(VipsImage *in) {
  int value = 0;
  if (vips_image_get_typeof(in, VIPS_META_PAGE_HEIGHT) == 0 || vips_image_get_int(in, VIPS_META_PAGE_HEIGHT, &value))
    return 0;
  return value;
}

int dr_frame(VipsImage *in, int index, int page_height, VipsImage **out) {
  if (page_height < 1 || index < 0 || index >= in->Ysize / page_height) {
    vips_error("darkroom", "frame %d of pages %d tall is outside the image", index, page_height);
    return -1;
  }
  VipsImage *area = NULL;
  if (vips_extract_area(in, &area, 0, index * page_height, in->Xsize, page_height, NULL)) return -1;
  int failed = vips_copy(area, out, NULL);
  g_object_unref(area);
  if (failed) return -1;
  (void)vips_image_remove(*out, VIPS_META_PAGE_HEIGHT);
  return 0;
}

int dr_frame_delays(VipsImage *in, int *delays, int max) {
  int *array = NULL, count = 0;
  if (vips_image_get_typeof(in, "delay") == 0 || vips_image_get_array_int(in, "delay", &array, &count) || !array) return 0;
  for (int i = 0; i < count && i < max; i++) delays[i] = array[i];
  return count;
}

int dr_with_own_delays(VipsImage *in, VipsImage **out) {
  if (vips_copy(in, out, NULL)) return -1;
  int *array = NULL, count = 0;
  if (vips_image_get_typeof(*out, "delay") && !vips_image_get_array_int(*out, "delay", &array, &count) && array && count > 0) {
    int *copy = g_new(int, count);
    memcpy(copy, array, sizeof(int) * (size_t)count);
    vips_image_set_array_int(*out, "delay", copy, count);
    g_free(copy);
  }
  return 0;
}

int dr_loop_count(VipsImage *in) {
  int value = 0;
  if (vips_image_get_typeof(in, "loop") == 0 || vips_image_get_int(in, "loop", &value)) return -1;
  return value;
}

int dr_composite_over(VipsImage *base, VipsImage *overlay, int x, int y, VipsImage **out) {
  return vips_composite2(base, overlay, out, VIPS_BLEND_MODE_OVER, "x", x, "y", y, NULL);
}

int dr_replicate(VipsImage *in, int across, int down, VipsImage **out) {
  return vips_replicate(in, out, across, down, NULL);
}

int dr_has_icc(VipsImage *in) { return vips_image_get_typeof(in, VIPS_META_ICC_NAME) != 0; }

/* The fields a pruned image keeps whatever the caller keeps: an animation's frame layout. */
static int dr_structural_field(const char *name) {
  static const char *const kept[] = {"page-height", "n-pages", "delay", "loop", "gif-delay", "gif-loop", NULL};
  for (int i = 0; kept[i]; i++)
    if (strcmp(name, kept[i]) == 0) return 1;
  return strncmp(name, "darkroom-", 9) == 0;
}

int dr_prune_metadata(VipsImage *in, int keep_icc, int keep_copyright, VipsImage **out) {
  if (vips_copy(in, out, NULL)) return -1;
  int copyright = keep_copyright && vips_image_get_typeof(*out, "exif-ifd0-Copyright") != 0;
  gchar **fields = vips_image_get_fields(*out);
  for (int i = 0; fields && fields[i]; i++) {
    const char *name = fields[i];
    if (dr_structural_field(name)) continue;
    if (keep_icc && strcmp(name, VIPS_META_ICC_NAME) == 0) continue;
    // libvips rebuilds the EXIF block at save from the exif-ifd fields left on the image: the
    // block stays, holding only the copyright.
    if (copyright && (strcmp(name, VIPS_META_EXIF_NAME) == 0 || strcmp(name, "exif-ifd0-Copyright") == 0)) continue;
    (void)vips_image_remove(*out, name);
  }
  g_strfreev(fields);
  // Marked only when something is kept: with nothing to write, the saver strips as usual (with
  // `strip` off it would write an EXIF block of its own).
  if ((keep_icc && vips_image_get_typeof(*out, VIPS_META_ICC_NAME)) || copyright)
    vips_image_set_int(*out, "darkroom-metadata-pruned", 1);
  else
    (void)vips_image_remove(*out, "darkroom-metadata-pruned");
  return 0;
}

int dr_get_string_field(VipsImage *in, const char *name, char *buffer, size_t size) {
  const char *value = NULL;
  if (size == 0 || vips_image_get_typeof(in, name) == 0 || vips_image_get_string(in, name, &value) || !value) return -1;
  g_strlcpy(buffer, value, size);
  return 0;
}

int dr_with_field(VipsImage *in, const char *name, const char *value, const void *data, size_t length, VipsImage **out) {
  if (vips_copy(in, out, NULL)) return -1;
  if (value)
    vips_image_set_string(*out, name, value);
  else
    vips_image_set_blob_copy(*out, name, data, length);
  return 0;
}

int dr_has_field(VipsImage *in, const char *name) { return vips_image_get_typeof(in, name) != 0; }

void dr_kill(VipsImage *image) { vips_image_set_kill(image, TRUE); }

int dr_image_from_pixels(const void *pixels, int width, int height, int bands, VipsImage **out) {
  VipsImage *image = vips_image_new_from_memory_copy(pixels, (size_t)width * height * bands, width, height, bands, VIPS_FORMAT_UCHAR);
  if (!image) return -1;
  image->Type = bands >= 3 ? VIPS_INTERPRETATION_sRGB : VIPS_INTERPRETATION_B_W;
  *out = image;
  return 0;
}

int dr_image_to_pixels(VipsImage *in, void **pixels, size_t *length) {
  *pixels = vips_image_write_to_memory(in, length);
  return *pixels ? 0 : -1;
}

int dr_with_orientation(VipsImage *in, int orientation, VipsImage **out) {
  if (vips_copy(in, out, NULL)) return -1;
  vips_image_set_int(*out, VIPS_META_ORIENTATION, orientation);
  return 0;
}

/* A read-only memory stream for TIFFClientOpen. */
typedef struct {
  const unsigned char *data;
  toff_t size;
  toff_t offset;
} DrMemoryStream;

static tsize_t dr_tiff_read(thandle_t handle, tdata_t buffer, tsize_t size) {
  DrMemoryStream *stream = (DrMemoryStream *)handle;
  if (stream->offset >= stream->size) return 0;
  toff_t available = stream->size - stream->offset;
  tsize_t count = (toff_t)size < available ? size : (tsize_t)available;
  memcpy(buffer, stream->data + stream->offset, (size_t)count);
  stream->offset += (toff_t)count;
  return count;
}

static tsize_t dr_tiff_write(thandle_t handle, tdata_t buffer, tsize_t size) {
  (void)handle;
  (void)buffer;
  (void)size;
  return -1;
}

static toff_t dr_tiff_seek(thandle_t handle, toff_t offset, int whence) {
  DrMemoryStream *stream = (DrMemoryStream *)handle;
  toff_t base = whence == SEEK_CUR ? stream->offset : whence == SEEK_END ? stream->size : 0;
  toff_t target = base + offset;
  if (target > stream->size) return (toff_t)-1;
  stream->offset = target;
  return target;
}

static int dr_tiff_close(thandle_t handle) {
  (void)handle;
  return 0;
}

static toff_t dr_tiff_size(thandle_t handle) { return ((DrMemoryStream *)handle)->size; }

// The bytes are already in memory (ours, not a mapped file), so libtiff may read them in place:
// libtiff 4.5 refuses uncompressed planar tiles smaller than its read size when it must copy them
// ("Invalid tile byte count"), and reads them when "mapped".
static int dr_tiff_map(thandle_t handle, tdata_t *base, toff_t *size) {
  DrMemoryStream *stream = (DrMemoryStream *)handle;
  *base = (tdata_t)stream->data;
  *size = stream->size;
  return 1;
}

static void dr_tiff_unmap(thandle_t handle, tdata_t base, toff_t size) {
  (void)handle;
  (void)base;
  (void)size;
}

static TIFF *dr_tiff_open(DrMemoryStream *stream) {
  return TIFFClientOpen("memory", "r", (thandle_t)stream, dr_tiff_read, dr_tiff_write, dr_tiff_seek, dr_tiff_close,
                        dr_tiff_size, dr_tiff_map, dr_tiff_unmap);
}

int dr_tiff_is_tiled_planar(const void *buf, size_t len) {
  DrMemoryStream stream = {buf, (toff_t)len, 0};
  TIFF *tiff = dr_tiff_open(&stream);
  if (!tiff) return 0;
  uint16_t planar = PLANARCONFIG_CONTIG;
  TIFFGetFieldDefaulted(tiff, TIFFTAG_PLANARCONFIG, &planar);
  int result = TIFFIsTiled(tiff) && planar == PLANARCONFIG_SEPARATE;
  TIFFClose(tiff);
  return result;
}

static void dr_free_raster(VipsImage *image, void *raster) {
  (void)image;
  _TIFFfree(raster);
}

// What the RGBA raster of a TIFF should become: its bands (grey or colour, with or without
// alpha) and whether its colours are premultiplied by that alpha.
typedef struct {
  int grey, alpha, premultiplied;
} DrTiffLayout;

static DrTiffLayout dr_tiff_layout(TIFF *tiff) {
  uint16_t photometric = PHOTOMETRIC_RGB, samples = 1, extras = 0;
  uint16_t *types = NULL;
  TIFFGetFieldDefaulted(tiff, TIFFTAG_PHOTOMETRIC, &photometric);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_EXTRASAMPLES, &extras, &types);
  DrTiffLayout layout = {photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE, 0, 0};
  if (extras > 0 && types) {
    // libtiff's RGBA reader takes the first extra sample as alpha: associated as it is,
    // unassociated premultiplied, unspecified as associated when there are colour samples too.
    layout.alpha = types[0] == EXTRASAMPLE_ASSOCALPHA || types[0] == EXTRASAMPLE_UNASSALPHA ||
                   (types[0] == EXTRASAMPLE_UNSPECIFIED && samples > 3);
    // The RGBA reader hands back premultiplied colours either way (an associated alpha as stored,
    // an unassociated one multiplied in); libvips gives both unpremultiplied, so they are undone.
    layout.premultiplied = layout.alpha;
  }
  return layout;
}

// Undoes the premultiplication of the raster's colours (rounded; colours under a small alpha
// keep what precision is left).
static void dr_tiff_unpremultiply(unsigned char *rgba, size_t pixels) {
  for (size_t i = 0; i < pixels; i++) {
    unsigned char *p = rgba + i * 4;
    unsigned a = p[3];
    if (a == 0 || a == 255) continue;
    for (int c = 0; c < 3; c++) {
      unsigned v = (p[c] * 255u + a / 2) / a;
      p[c] = (unsigned char)(v > 255 ? 255 : v);
    }
  }
}

// The raster's bands reduced to the file's: grey (1) or colour (3), with alpha when it has one.
static VipsImage *dr_tiff_bands(VipsImage *rgba, DrTiffLayout layout) {
  VipsImage *out = NULL;
  if (!layout.grey && layout.alpha) {
    g_object_ref(rgba);
    return rgba;
  }
  if (!layout.grey) {
    if (vips_extract_band(rgba, &out, 0, "n", 3, NULL)) return NULL;
  } else if (!layout.alpha) {
    if (vips_extract_band(rgba, &out, 0, NULL)) return NULL;
  } else {
    VipsImage *grey = NULL, *alpha = NULL;
    int failed = vips_extract_band(rgba, &grey, 0, NULL) || vips_extract_band(rgba, &alpha, 3, NULL) ||
                 vips_bandjoin2(grey, alpha, &out, NULL);
    if (grey) g_object_unref(grey);
    if (alpha) g_object_unref(alpha);
    if (failed) return NULL;
  }
  out->Type = layout.grey ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
  return out;
}

int dr_tiff_load_rgba(const void *buf, size_t len, size_t max_pixels, VipsImage **out) {
  DrMemoryStream stream = {buf, (toff_t)len, 0};
  TIFF *tiff = dr_tiff_open(&stream);
  if (!tiff) {
    vips_error("tiffload", "cannot open the TIFF data");
    return -1;
  }
  uint32_t width = 0, height = 0;
  uint16_t orientation = ORIENTATION_TOPLEFT;
  TIFFGetField(tiff, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tiff, TIFFTAG_IMAGELENGTH, &height);
  TIFFGetFieldDefaulted(tiff, TIFFTAG_ORIENTATION, &orientation);
  if (orientation < 1 || orientation > 8) orientation = ORIENTATION_TOPLEFT;
  if (width == 0 || height == 0 || (size_t)width * height > max_pixels) {
    vips_error("tiffload", "TIFF size %ux%u is empty or over the pixel limit", width, height);
    TIFFClose(tiff);
    return -1;
  }
  DrTiffLayout layout = dr_tiff_layout(tiff);
  size_t pixels = (size_t)width * height;
  // TIFFReadRGBAImage packs R, G, B, A from the low byte up, so on a little-endian machine the
  // raster already is 8-bit RGBA in memory: the image is made from it, without a copy (one
  // buffer of 4 bytes a pixel, the most maxPixels allows a held image). Asking for the file's own
  // orientation keeps the stored order; the orientation is then applied like any TIFF's.
  uint32_t *raster = (uint32_t *)_TIFFmalloc((tmsize_t)(pixels * sizeof(uint32_t)));
  int status = -1;
  if (!raster) {
    vips_error("tiffload", "out of memory decoding a %ux%u TIFF", width, height);
  } else if (!TIFFReadRGBAImageOriented(tiff, width, height, raster, orientation, 1)) {
    vips_error("tiffload", "libtiff could not decode the TIFF pixels");
  } else {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    for (size_t i = 0; i < pixels; i++) raster[i] = __builtin_bswap32(raster[i]);
#endif
    if (layout.premultiplied) dr_tiff_unpremultiply((unsigned char *)raster, pixels);
    VipsImage *image = vips_image_new_from_memory(raster, pixels * 4, (int)width, (int)height, 4, VIPS_FORMAT_UCHAR);
    if (image) {
      image->Type = VIPS_INTERPRETATION_sRGB;
      g_signal_connect(image, "postclose", G_CALLBACK(dr_free_raster), raster);
      raster = NULL;  // the image owns it now
      VipsImage *shaped = dr_tiff_bands(image, layout);
      g_object_unref(image);
      if (shaped) {
        vips_image_set_int(shaped, VIPS_META_ORIENTATION, orientation);
        *out = shaped;
        status = 0;
      }
    }
  }
  if (raster) _TIFFfree(raster);
  TIFFClose(tiff);
  return status;
}
