#include "CVipsShim.h"

#include "library.h"

int dr_image_width(VipsImage *image) { return vips_image_get_width(image); }
int dr_image_height(VipsImage *image) { return vips_image_get_height(image); }
int dr_image_bands(VipsImage *image) { return vips_image_get_bands(image); }
VipsBandFormat dr_image_format(VipsImage *image) { return vips_image_get_format(image); }
VipsInterpretation dr_image_interpretation(VipsImage *image) { return vips_image_get_interpretation(image); }
int dr_image_orientation(VipsImage *image) { return vips_image_get_orientation(image); }
int dr_image_hasalpha(VipsImage *image) { return vips_image_hasalpha(image) ? 1 : 0; }
size_t dr_format_sizeof(VipsBandFormat format) { return (size_t)vips_format_sizeof(format); }
void dr_concurrency_set(int threads) { vips_concurrency_set(threads); }

char *dr_error_buffer_copy(void) {
  /* Before libvips is open there is no buffer and nothing in it. */
  if (!atomic_load_explicit(&dr_library_table, memory_order_acquire)) return NULL;
  return vips_error_buffer_copy();
}

VipsImage *dr_image_new_from_memory(const void *data, size_t size, int width, int height, int bands,
                                    VipsBandFormat format) {
  return vips_image_new_from_memory(data, size, width, height, bands, format);
}

VipsImage *dr_image_copy_memory(VipsImage *image) { return vips_image_copy_memory(image); }
