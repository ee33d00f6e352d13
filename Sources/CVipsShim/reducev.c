// The vertical reduce of vips_resize, fed one row at a time: the rows of a JPEG as libjpeg decodes
// them go in, the reduced rows come out, and nothing but a window of the kernel's height is held
// (issue 18: case H's memory). The bytes are libvips 8.14's own: vips_reducev(in, vshrink,
// "kernel", kernel, "gap", 2.0) on an 8-bit image runs
//
// 1. vips_shrinkv(in, whole, "ceil", TRUE) for the whole part of the shrink: the image's last row
//    repeated down to a multiple of `whole` rows, each group of `whole` rows averaged with
//    (sum + whole / 2) / whole;
// 2. the rest of the shrink with a Lanczos kernel of n points: the shrunk image's first and last
//    rows repeated above and below (vips_embed's copy extend), each output row at
//    Y = (y + 0.5) * vshrink - 0.5 - voffset summing rows (int)Y... of that, with coefficients in
//    2.6 fixed point (vips_vector_to_fixed_point to 64) for the phase of Y, in liborc's
//    arithmetic: a 16-bit sum starting at 32, each product's low 16 bits added with signed
//    saturation, then shifted right by 6 and saturated to 0…255.
//
// Step 2 is libvips' vector path, taken whenever liborc is enabled (vips_vector_isenabled) and the
// kernel fits its ten passes of five points; otherwise libvips computes it in C with 12-bit
// coefficients, and dr_rowreduce_new declines so that libvips does the work.
#include "CVipsShim.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "library.h"
#include "reduce.h"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define DR_ROWREDUCE_SSE2 1
#endif

/* libvips' vector path runs at most ten passes of five points (reducev.cpp, MAX_PASS and its
 * five-line passes); a wider kernel is computed in C there, and declined here. */
enum { DR_ROWREDUCE_MAX_POINTS = 50, DR_ROWREDUCE_PHASES = VIPS_TRANSFORM_SCALE + 1 };

/* The rows of the regions libvips' reducev makes for a sequential image: the tile height of the
 * line cache (vips_sequential) it puts on its output. */
enum { DR_ROWREDUCE_TILE = 10 };

struct DrRowReducer {
  size_t elements;  /* bytes a row (width × bands) */
  int in_height;    /* rows that come in */
  int whole;        /* the integer part of the shrink (1: none) */
  int shrunk;       /* rows after it: ceil(in_height / whole) */
  int out_height;   /* rows that go out */
  int points;       /* the kernel's height; 0 when the integer shrink is all (no kernel) */
  int top;          /* rows repeated above the first: ceil(points / 2) - 1 */
  double vshrink;   /* the shrink left after the integer part */
  double voffset;
  int ring_rows;    /* shrunk rows held */
  int received;     /* input rows in so far (with the copies that fill the last group) */
  int made;         /* shrunk rows made so far */
  int next;         /* the next output row */
  double position;  /* where it sits on the shrunk rows (dr_rowreduce_advance) */
  int16_t *coefficients; /* [phase][points], 2.6 fixed point */
  int *sums;        /* one row of sums for the integer shrink */
  VipsPel *ring;    /* ring_rows shrunk rows; row r at r % ring_rows */
};

void dr_rowreduce_free(DrRowReducer *reducer) {
  if (!reducer) return;
  free(reducer->coefficients);
  free(reducer->sums);
  free(reducer->ring);
  free(reducer);
}

DrRowReducer *dr_rowreduce_new(int height, size_t elements, double vscale, VipsKernel kernel) {
  if (height < 1 || height > VIPS_MAX_COORD || elements < 1 || elements > (size_t)INT_MAX / 4) return NULL;
  if (kernel != VIPS_KERNEL_LANCZOS3 && kernel != VIPS_KERNEL_LANCZOS2) return NULL;
  if (!(vscale > 0) || !(vscale < 1.0) || !vips_vector_isenabled()) return NULL;
  const int lobes = kernel == VIPS_KERNEL_LANCZOS3 ? 3 : 2;
  /* dr_resize's clamp (so at least one row comes out), then vips_reducev_build's geometry. */
  DrReduceGeometry geometry;
  if (dr_reduce_geometry(height, 1.0 / VIPS_MAX(vscale, 1.0 / height), &geometry)) return NULL;
  const int whole = geometry.whole;
  const int shrunk = whole > 1 ? (int)VIPS_CEIL((double)height / whole) : height;
  const double vshrink = geometry.shrink;
  int points = 0;
  if (vshrink != 1.0) {
    points = dr_reduce_points(lobes, vshrink);
    if (points < 1 || points > DR_ROWREDUCE_MAX_POINTS) return NULL;
  }
  DrRowReducer *reducer = calloc(1, sizeof *reducer);
  if (!reducer) return NULL;
  reducer->elements = elements;
  reducer->in_height = height;
  reducer->whole = whole;
  reducer->shrunk = shrunk;
  /* With the integer shrink doing it all, libvips returns the shrunk image as it is. */
  reducer->out_height = points ? geometry.size : shrunk;
  reducer->points = points;
  reducer->top = points ? (int)VIPS_CEIL(points / 2.0) - 1 : 0;
  reducer->vshrink = vshrink;
  reducer->voffset = geometry.offset;
  reducer->position = 0.5 * vshrink - 0.5 - geometry.offset;
  reducer->ring_rows = points + 2;
  reducer->ring = malloc((size_t)reducer->ring_rows * elements);
  if (whole > 1) reducer->sums = calloc(elements, sizeof(int));
  if (points) reducer->coefficients = malloc((size_t)DR_ROWREDUCE_PHASES * (size_t)points * sizeof(int16_t));
  if (!reducer->ring || (whole > 1 && !reducer->sums) || (points && !reducer->coefficients)) {
    dr_rowreduce_free(reducer);
    return NULL;
  }
  double mask[DR_ROWREDUCE_MAX_POINTS];
  int fixed[DR_ROWREDUCE_MAX_POINTS];
  for (int phase = 0; points && phase < DR_ROWREDUCE_PHASES; phase++) {
    dr_lanczos_mask(mask, lobes, vshrink, (float)phase / VIPS_TRANSFORM_SCALE);
    vips_vector_to_fixed_point(mask, fixed, points, 64);
    for (int i = 0; i < points; i++) {
      /* liborc takes each as a 16-bit parameter. */
      reducer->coefficients[(size_t)phase * (size_t)points + (size_t)i] = (int16_t)fixed[i];
    }
  }
  return reducer;
}

int dr_rowreduce_height(const DrRowReducer *reducer) { return reducer->out_height; }

/* vips_shrinkv asks for small tiles (VIPS_DEMAND_STYLE_SMALLTILE), and the most restrictive
 * demand of a pipeline is its own: with an integer shrink, libvips' savers then make the image
 * 128 pixels wide at a time, and the horizontal reduce's positions start at each tile's left
 * edge. The image the rows go into asks for the same. */
VipsDemandStyle dr_rowreduce_demand(const DrRowReducer *reducer) {
  return reducer->whole > 1 ? VIPS_DEMAND_STYLE_SMALLTILE : VIPS_DEMAND_STYLE_ANY;
}

/* One output row from the `points` rows in `taps`, in liborc's 16-bit arithmetic. */
static void dr_rowreduce_row(const DrRowReducer *reducer, const VipsPel *const *taps, const int16_t *c, VipsPel *q) {
  const int n = reducer->points;
  const size_t count = reducer->elements;
  size_t x = 0;
#ifdef DR_ROWREDUCE_SSE2
  const __m128i zero = _mm_setzero_si128();
  const __m128i start = _mm_set1_epi16(32);
  for (; x + 16 <= count; x += 16) {
    __m128i low = start, high = start;
    for (int i = 0; i < n; i++) {
      const __m128i pixels = _mm_loadu_si128((const __m128i *)(taps[i] + x));
      const __m128i coefficient = _mm_set1_epi16(c[i]);
      low = _mm_adds_epi16(low, _mm_mullo_epi16(_mm_unpacklo_epi8(pixels, zero), coefficient));
      high = _mm_adds_epi16(high, _mm_mullo_epi16(_mm_unpackhi_epi8(pixels, zero), coefficient));
    }
    _mm_storeu_si128((__m128i *)(q + x), _mm_packus_epi16(_mm_srai_epi16(low, 6), _mm_srai_epi16(high, 6)));
  }
#endif
  for (; x < count; x++) {
    int sum = 32;
    for (int i = 0; i < n; i++) {
      const int16_t product = (int16_t)(uint16_t)((unsigned)taps[i][x] * (uint16_t)c[i]);
      sum += product;
      sum = sum > INT16_MAX ? INT16_MAX : sum < INT16_MIN ? INT16_MIN : sum;
    }
    sum = sum < 0 ? 0 : sum >> 6;
    q[x] = (VipsPel)(sum > UCHAR_MAX ? UCHAR_MAX : sum);
  }
}

/* Moves on to the next output row and its position on the shrunk rows, to the last bit as libvips
 * computes it: reducev starts each region it makes at (top + 0.5) * vshrink - 0.5 - voffset and
 * adds vshrink a row, and the line cache libvips puts after it on a sequential image asks for
 * regions of DR_ROWREDUCE_TILE rows. (Computed afresh, a row whose position lands on a phase
 * boundary can round to the neighbouring phase: the attack on this change found such rows.) */
static void dr_rowreduce_advance(DrRowReducer *reducer) {
  const int y = ++reducer->next;
  if (y % DR_ROWREDUCE_TILE == 0)
    reducer->position = (y + 0.5) * reducer->vshrink - 0.5 - reducer->voffset;
  else
    reducer->position += reducer->vshrink;
}

/* Writes every output row whose rows have all been made. -1 when a row it needs has left the
 * ring (which the geometry rules out). */
static int dr_rowreduce_emit(DrRowReducer *reducer, VipsPel *out, size_t stride) {
  const VipsPel *taps[DR_ROWREDUCE_MAX_POINTS];
  while (reducer->next < reducer->out_height) {
    const int y = reducer->next;
    VipsPel *q = out + (size_t)y * stride;
    if (!reducer->points) { /* the shrunk rows are the output */
      if (y >= reducer->made) return 0;
      memcpy(q, reducer->ring + (size_t)(y % reducer->ring_rows) * reducer->elements, reducer->elements);
      reducer->next++;
      continue;
    }
    const int py = (int)reducer->position;
    /* The last shrunk row it reads must be made. */
    if (VIPS_MIN(py + reducer->points - 1 - reducer->top, reducer->shrunk - 1) >= reducer->made) return 0;
    for (int i = 0; i < reducer->points; i++) {
      int row = py + i - reducer->top;
      row = row < 0 ? 0 : row >= reducer->shrunk ? reducer->shrunk - 1 : row;
      if (row < reducer->made - reducer->ring_rows) return -1;
      taps[i] = reducer->ring + (size_t)(row % reducer->ring_rows) * reducer->elements;
    }
    const int phase = dr_reduce_phase(reducer->position);
    dr_rowreduce_row(reducer, taps, reducer->coefficients + (size_t)phase * (size_t)reducer->points, q);
    dr_rowreduce_advance(reducer);
  }
  return 0;
}

/* Adds one input row to the integer shrink; a shrunk row is made when its group is complete. */
static void dr_rowreduce_take(DrRowReducer *reducer, const VipsPel *row) {
  VipsPel *slot = reducer->ring + (size_t)(reducer->made % reducer->ring_rows) * reducer->elements;
  reducer->received++;
  if (reducer->whole == 1) {
    memcpy(slot, row, reducer->elements);
    reducer->made++;
    return;
  }
  int *sums = reducer->sums;
  for (size_t x = 0; x < reducer->elements; x++) sums[x] += row[x];
  if (reducer->received % reducer->whole != 0) return;
  const int whole = reducer->whole, half = whole / 2;
  for (size_t x = 0; x < reducer->elements; x++) {
    slot[x] = (VipsPel)((sums[x] + half) / whole);
    sums[x] = 0;
  }
  reducer->made++;
}

int dr_rowreduce_push(DrRowReducer *reducer, const VipsPel *row, VipsPel *out, size_t stride) {
  if (reducer->received >= reducer->in_height) return -1;
  dr_rowreduce_take(reducer, row);
  /* The last group, filled with copies of the last row (shrinkv's embed). */
  if (reducer->received == reducer->in_height)
    while (reducer->received % reducer->whole != 0) dr_rowreduce_take(reducer, row);
  return dr_rowreduce_emit(reducer, out, stride);
}

int dr_rowreduce_done(const DrRowReducer *reducer) { return reducer->next == reducer->out_height; }

int dr_reducev_rows(VipsImage *in, double vscale, VipsKernel kernel, VipsImage **out) {
  if (!in || !out || in->BandFmt != VIPS_FORMAT_UCHAR || in->Coding != VIPS_CODING_NONE || in->Xsize < 1) return 1;
  /* Row positions are libvips' for a sequential image (dr_rowreduce_advance). */
  if (!vips_image_get_typeof(in, VIPS_META_SEQUENTIAL)) return 1;
  VipsImage *source = vips_image_copy_memory(in);
  if (!source) return -1;
  DrRowReducer *reducer = dr_rowreduce_new(source->Ysize, (size_t)source->Xsize * (size_t)source->Bands, vscale, kernel);
  if (!reducer) {
    g_object_unref(source);
    return 1;
  }
  VipsImage *reduced = vips_image_new_memory();
  int failed = vips_image_pipelinev(reduced, dr_rowreduce_demand(reducer), source, NULL);
  if (!failed) {
    reduced->Ysize = dr_rowreduce_height(reducer);
    failed = vips_image_write_prepare(reduced);
  }
  const size_t stride = VIPS_IMAGE_SIZEOF_LINE(reduced);
  for (int y = 0; !failed && y < source->Ysize; y++)
    failed = dr_rowreduce_push(reducer, VIPS_IMAGE_ADDR(source, 0, y), VIPS_IMAGE_ADDR(reduced, 0, 0), stride) != 0;
  if (!failed && !dr_rowreduce_done(reducer)) failed = 1;
  dr_rowreduce_free(reducer);
  g_object_unref(source);
  if (failed) {
    vips_error("darkroom", "the row reduce went wrong");
    g_object_unref(reduced);
    return -1;
  }
  *out = reduced;
  return 0;
}
