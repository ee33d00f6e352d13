// What libvips 8.14's reduceh and reducev share, for Darkroom's copies of them (reduceh.c,
// reducev.c; private to CVipsShim): the kernel's size, its coefficients, and the phase of an
// output pixel's position.
#ifndef DARKROOM_CVIPSSHIM_REDUCE_H
#define DARKROOM_CVIPSSHIM_REDUCE_H

#include <math.h>

#include <vips/vips.h>

/* The taps of an `a`-lobe Lanczos kernel reducing by `shrink` (libvips' vips_reduce_get_points). */
static inline int dr_reduce_points(int a, double shrink) { return 2 * (int)rint(a * shrink) + 1; }

/* The phase (the row of the coefficient tables) of an output pixel at input position `X`, as
 * libvips picks it; its first tap is (int)X. */
static inline int dr_reduce_phase(double X) {
  const int sx = (int)(X * VIPS_TRANSFORM_SCALE * 2);
  return ((sx & (VIPS_TRANSFORM_SCALE * 2 - 1)) + 1) >> 1;
}

/* How libvips 8.14 builds reduceh and reducev with vips_resize's gap of 2 for `size` pixels reduced
 * by `shrink`: the output size rounded to nearest, the integer part of the shrink done first (by
 * vips_shrinkh or vips_shrinkv), and for the rest its shrink and the offset that discards input
 * equally at both ends. */
typedef struct {
  int size;      /* the output's pixels */
  int whole;     /* the integer part of the shrink (1: none) */
  double shrink; /* the shrink left after it */
  double offset;
} DrReduceGeometry;

/* 0, or -1 when the image would shrink to nothing. */
static inline int dr_reduce_geometry(int size, double shrink, DrReduceGeometry *geometry) {
  const int out = VIPS_ROUND_UINT((double)size / shrink);
  if (out <= 0) return -1;
  geometry->size = out;
  geometry->whole = VIPS_MAX(1, (int)VIPS_FLOOR((double)size / out / 2.0));
  geometry->shrink = shrink / geometry->whole;
  geometry->offset = (1 + (out * shrink - size) / geometry->whole) / 2.0 - 1;
  return 0;
}

/* libvips' Lanczos mask (templates.h, calculate_coefficients_lanczos): `x` is the phase. */
static inline void dr_lanczos_mask(double *c, int a, double shrink, double x) {
  const int n = dr_reduce_points(a, shrink);
  const double half = x + n / 2.0 - 1;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    const double xp = (i - half) / shrink;
    double l;
    if (xp == 0.0)
      l = 1.0;
    else if (xp < -a || xp > a)
      l = 0.0;
    else
      l = (double)a * sin(VIPS_PI * xp) * sin(VIPS_PI * xp / (double)a) / (VIPS_PI * VIPS_PI * xp * xp);
    c[i] = l;
    sum += l;
  }
  for (int i = 0; i < n; i++) c[i] /= sum;
}

#endif
