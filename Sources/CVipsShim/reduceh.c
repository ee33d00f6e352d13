// The horizontal Lanczos reduce of 8-bit images with one or three bands, vectorised: the same
// geometry, coefficient tables and fixed-point rounding as libvips 8.14's reduceh (so the same
// bytes), with each output pixel's taps multiplied and summed two at a time in SSSE3 registers.
//
// libvips 8.14's reduceh sums every tap of every band in a scalar loop; on a 3/8-scale decode
// resized to sharp's benchmark size it is 27 % of the CPU (Docs/Performance.md, issue 18). The
// vertical reduce before it is already vectorised (liborc) and stays libvips'.
//
// Anything else (other formats or band counts, other kernels, a CPU without SSSE3, a kernel wider
// than DR_REDUCEH_MAX_POINTS) goes to libvips' own reduceh.
#include "CVipsShim.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "library.h"
#include "reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DR_REDUCEH_SIMD 1
#endif

/* The widest kernel taken: Lanczos 3 is 2 * rint(3 * shrink) + 1 points and libvips' gap of 2
 * keeps the residual shrink below 4 (25 points); wider kernels go to libvips. */
enum { DR_REDUCEH_MAX_POINTS = 64, DR_REDUCEH_PHASES = VIPS_TRANSFORM_SCALE + 1 };

typedef struct {
  double hshrink;
  double hoffset;
  int points;         /* taps a pixel */
  int padded;         /* taps rounded up to a multiple of 4 (the SIMD loop reads 4 at a time) */
  int bands;          /* 1 or 3 */
  int16_t *scalar;    /* [phase][points]: libvips' matrixi, as int16 */
  int16_t *pairs;     /* [phase][padded / 2][8]: the coefficients laid out for pmaddwd (see below) */
} DrReduceh;

static void dr_reduceh_free(void *data) {
  DrReduceh *reduce = data;
  if (!reduce) return;
  free(reduce->scalar);
  free(reduce->pairs);
  free(reduce);
}

/* The tables for `lobes`-lobe Lanczos at `hshrink`, or NULL when the kernel is too wide or memory
 * runs out. */
static DrReduceh *dr_reduceh_new(int lobes, double hshrink, double hoffset, int bands) {
  const int points = dr_reduce_points(lobes, hshrink);
  if (points < 1 || points > DR_REDUCEH_MAX_POINTS) return NULL;
  DrReduceh *reduce = calloc(1, sizeof *reduce);
  if (!reduce) return NULL;
  reduce->hshrink = hshrink;
  reduce->hoffset = hoffset;
  reduce->points = points;
  reduce->padded = (points + 3) & ~3;
  reduce->bands = bands;
  reduce->scalar = calloc((size_t)DR_REDUCEH_PHASES * (size_t)points, sizeof(int16_t));
  reduce->pairs = calloc((size_t)DR_REDUCEH_PHASES * (size_t)(reduce->padded / 2) * 8, sizeof(int16_t));
  if (!reduce->scalar || !reduce->pairs) {
    dr_reduceh_free(reduce);
    return NULL;
  }
  double mask[DR_REDUCEH_MAX_POINTS];
  for (int phase = 0; phase < DR_REDUCEH_PHASES; phase++) {
    dr_lanczos_mask(mask, lobes, hshrink, (float)phase / VIPS_TRANSFORM_SCALE);
    int16_t *row = reduce->scalar + (size_t)phase * (size_t)points;
    /* As libvips: truncated towards zero. Each lies within (-0.25, 1] of 4096: an int16. */
    for (int i = 0; i < points; i++) row[i] = (int16_t)(int)(mask[i] * VIPS_INTERPOLATE_SCALE);
    int16_t *lanes = reduce->pairs + (size_t)phase * (size_t)(reduce->padded / 2) * 8;
    if (bands == 3) {
      /* tap pair k: [c(2k) c(2k+1)] three times, then [0 0], against [R R G G B B 0 0] */
      for (int pair = 0; pair < reduce->padded / 2; pair++, lanes += 8)
        for (int band = 0; band < 3; band++) {
          lanes[2 * band] = 2 * pair < points ? row[2 * pair] : 0;
          lanes[2 * band + 1] = 2 * pair + 1 < points ? row[2 * pair + 1] : 0;
        }
    } else {
      /* one band: the taps in order, eight to a register (zero past the last) */
      memcpy(lanes, row, (size_t)points * sizeof(int16_t));
    }
  }
  return reduce;
}

/* One output pixel from `p` (its first tap) with phase `row`, as libvips computes it. */
static inline void dr_reduceh_pixel_scalar(const DrReduceh *reduce, const VipsPel *p, const int16_t *row, VipsPel *q) {
  for (int band = 0; band < reduce->bands; band++) {
    int sum = 0;
    for (int i = 0; i < reduce->points; i++) sum += row[i] * p[i * reduce->bands + band];
    sum = (sum + (VIPS_INTERPOLATE_SCALE >> 1)) >> VIPS_INTERPOLATE_SHIFT;
    q[band] = (VipsPel)(sum < 0 ? 0 : sum > UCHAR_MAX ? UCHAR_MAX : sum);
  }
}

#ifdef DR_REDUCEH_SIMD
/* Three bands: each 16-byte load holds taps i..i+3 (12 bytes); two shuffles spread a pair's
 * R, G and B into int16 lanes beside each other, and pmaddwd multiplies and adds the pair. */
__attribute__((target("ssse3"))) static void dr_reduceh_row3(const DrReduceh *reduce, const VipsPel *p0,
                                                             const VipsPel *end, double X, int width, VipsPel *q) {
  const __m128i low = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
  const __m128i high = _mm_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
  const __m128i round = _mm_set1_epi32(VIPS_INTERPOLATE_SCALE >> 1);
  const int groups = reduce->padded / 4;
  const ptrdiff_t reach = (ptrdiff_t)(groups - 1) * 12 + 16;
  for (int x = 0; x < width; x++, q += 3, X += reduce->hshrink) {
    const int ix = (int)X;
    const int phase = dr_reduce_phase(X);
    const VipsPel *p = p0 + (ptrdiff_t)ix * 3;
    if (end - p < reach) {
      dr_reduceh_pixel_scalar(reduce, p, reduce->scalar + (size_t)phase * (size_t)reduce->points, q);
      continue;
    }
    const __m128i *c = (const __m128i *)(reduce->pairs + (size_t)phase * (size_t)(reduce->padded / 2) * 8);
    __m128i sum = _mm_setzero_si128();
    for (int group = 0; group < groups; group++, p += 12, c += 2) {
      const __m128i taps = _mm_loadu_si128((const __m128i *)p);
      sum = _mm_add_epi32(sum, _mm_madd_epi16(_mm_shuffle_epi8(taps, low), _mm_load_si128(c)));
      sum = _mm_add_epi32(sum, _mm_madd_epi16(_mm_shuffle_epi8(taps, high), _mm_load_si128(c + 1)));
    }
    sum = _mm_srai_epi32(_mm_add_epi32(sum, round), VIPS_INTERPOLATE_SHIFT);
    const __m128i bytes = _mm_packus_epi16(_mm_packs_epi32(sum, sum), _mm_setzero_si128());
    const uint32_t pixel = (uint32_t)_mm_cvtsi128_si32(bytes);
    memcpy(q, &pixel, 3);
  }
}

/* One band: 8 taps a load, widened to int16 and multiplied against 8 coefficients. */
__attribute__((target("ssse3"))) static void dr_reduceh_row1(const DrReduceh *reduce, const VipsPel *p0,
                                                             const VipsPel *end, double X, int width, VipsPel *q) {
  const __m128i zero = _mm_setzero_si128();
  const int octets = (reduce->padded + 7) / 8;
  const ptrdiff_t reach = (ptrdiff_t)octets * 8;
  for (int x = 0; x < width; x++, q++, X += reduce->hshrink) {
    const int ix = (int)X;
    const int phase = dr_reduce_phase(X);
    const VipsPel *p = p0 + ix;
    const int16_t *row = reduce->scalar + (size_t)phase * (size_t)reduce->points;
    if (end - p < reach) {
      dr_reduceh_pixel_scalar(reduce, p, row, q);
      continue;
    }
    const __m128i *c = (const __m128i *)(reduce->pairs + (size_t)phase * (size_t)(reduce->padded / 2) * 8);
    __m128i sum = zero;
    for (int octet = 0; octet < octets; octet++) {
      const __m128i taps = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(p + octet * 8)), zero);
      sum = _mm_add_epi32(sum, _mm_madd_epi16(taps, _mm_load_si128(c + octet)));
    }
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(1, 0, 3, 2)));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(2, 3, 0, 1)));
    int value = (_mm_cvtsi128_si32(sum) + (VIPS_INTERPOLATE_SCALE >> 1)) >> VIPS_INTERPOLATE_SHIFT;
    *q = (VipsPel)(value < 0 ? 0 : value > UCHAR_MAX ? UCHAR_MAX : value);
  }
}
#endif

static int dr_reduceh_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
  (void)a;
  (void)stop;
  VipsRegion *ir = seq;
  const DrReduceh *reduce = b;
  const VipsRect *r = &out->valid;
  VipsRect s = {(int)(r->left * reduce->hshrink - reduce->hoffset), r->top,
                (int)(r->width * reduce->hshrink + reduce->points), r->height};
  if (vips_region_prepare(ir, &s)) return -1;
  const int ps = reduce->bands;
  for (int y = 0; y < r->height; y++) {
    VipsPel *q = VIPS_REGION_ADDR(out, r->left, r->top + y);
    const double X = (r->left + 0.5) * reduce->hshrink - 0.5 - reduce->hoffset;
    /* p0: where x == 0 would be on this input line (it may lie left of the valid area). */
    const VipsPel *first = VIPS_REGION_ADDR(ir, ir->valid.left, r->top + y);
    const VipsPel *p0 = first - (ptrdiff_t)ir->valid.left * ps;
    const VipsPel *end = first + (ptrdiff_t)ir->valid.width * ps;
#ifdef DR_REDUCEH_SIMD
    if (ps == 3)
      dr_reduceh_row3(reduce, p0, end, X, r->width, q);
    else
      dr_reduceh_row1(reduce, p0, end, X, r->width, q);
#else
    /* Not reached: without SIMD dr_reduceh_takes is false and libvips reduces. */
    (void)p0, (void)end, (void)X, (void)q;
    return -1;
#endif
  }
  return 0;
}

/* Whether this process may take the vectorised path (SSSE3; DARKROOM_REDUCEH=vips turns it off,
 * for comparison). */
static int dr_reduceh_enabled(void) {
  static int enabled = -1;
  int now = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
  if (now >= 0) return now;
#ifdef DR_REDUCEH_SIMD
  const char *choice = getenv("DARKROOM_REDUCEH");
  now = __builtin_cpu_supports("ssse3") && !(choice && strcmp(choice, "vips") == 0);
#else
  now = 0;
#endif
  __atomic_store_n(&enabled, now, __ATOMIC_RELAXED);
  return now;
}

int dr_reduceh_vips(VipsImage *in, double hshrink, VipsKernel kernel, VipsImage **out) {
  return vips_reduceh(in, out, hshrink, "kernel", kernel, "gap", 2.0, NULL);
}

int dr_reduceh_takes(const VipsImage *in, VipsKernel kernel) {
  return dr_reduceh_enabled() && (kernel == VIPS_KERNEL_LANCZOS3 || kernel == VIPS_KERNEL_LANCZOS2) &&
         in->BandFmt == VIPS_FORMAT_UCHAR && in->Coding == VIPS_CODING_NONE && (in->Bands == 1 || in->Bands == 3) &&
         in->Xsize >= 1;
}

/* vips_reduceh(in, out, hshrink, "kernel", kernel, "gap", 2.0) as libvips 8.14 builds it, with
 * the vectorised loop: the integer part of the shrink by vips_shrinkh, the rest reduced here. */
int dr_reduceh(VipsImage *in, double hshrink, VipsKernel kernel, VipsImage **out) {
  const int lobes = kernel == VIPS_KERNEL_LANCZOS3 ? 3 : 2;
  if (!dr_reduceh_takes(in, kernel) || !(hshrink >= 1.0) || !(hshrink <= (double)in->Xsize))
    return dr_reduceh_vips(in, hshrink, kernel, out);
  DrReduceGeometry geometry;
  if (dr_reduce_geometry(in->Xsize, hshrink, &geometry)) return dr_reduceh_vips(in, hshrink, kernel, out); /* libvips says why */
  const int width = geometry.size, whole = geometry.whole;
  if (geometry.shrink == 1.0 || dr_reduce_points(lobes, geometry.shrink) > DR_REDUCEH_MAX_POINTS)
    return dr_reduceh_vips(in, hshrink, kernel, out);
  DrReduceh *reduce = dr_reduceh_new(lobes, geometry.shrink, geometry.offset, in->Bands);
  if (!reduce) {
    vips_error("darkroom", "out of memory for the reduce tables");
    return -1;
  }
  VipsImage *source = in;
  g_object_ref(source);
  if (whole > 1) {
    VipsImage *shrunk;
    int failed = vips_shrinkh(source, &shrunk, whole, "ceil", TRUE, NULL);
    g_object_unref(source);
    if (failed) {
      dr_reduceh_free(reduce);
      return -1;
    }
    source = shrunk;
  }
  VipsImage *embedded;
  int failed = vips_embed(source, &embedded, (int)VIPS_CEIL(reduce->points / 2.0) - 1, 0,
                          source->Xsize + reduce->points, source->Ysize, "extend", VIPS_EXTEND_COPY, NULL);
  g_object_unref(source);
  if (failed) {
    dr_reduceh_free(reduce);
    return -1;
  }
  VipsImage *reduced = vips_image_new();
  /* The output keeps its input and its tables until it is closed. */
  g_object_set_data_full(G_OBJECT(reduced), "darkroom-reduceh-input", embedded, g_object_unref);
  g_object_set_data_full(G_OBJECT(reduced), "darkroom-reduceh", reduce, dr_reduceh_free);
  if (vips_image_pipelinev(reduced, VIPS_DEMAND_STYLE_THINSTRIP, embedded, NULL)) {
    g_object_unref(reduced);
    return -1;
  }
  reduced->Xsize = width;
  if (vips_image_generate(reduced, vips_start_one, dr_reduceh_generate, vips_stop_one, embedded, reduce)) {
    g_object_unref(reduced);
    return -1;
  }
  vips_reorder_margin_hint(reduced, reduce->points);
  *out = reduced;
  return 0;
}
