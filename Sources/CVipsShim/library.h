// The image libraries, reached through one table that dlopen(3) fills on first use (private to
// CVipsShim: every .c file includes this after its library headers).
//
// libvips links about a hundred shared libraries; with Debian's (built with -z now) the dynamic
// loader binds ~28,000 symbols across them at every process start, 15-19 ms before main(). A
// command that needs no pixels (a cached rerun, a fetch-only pipeline, --help, validate, list)
// never opens them. The first caller opens libvips (RTLD_LAZY | RTLD_GLOBAL, so libvips' own
// modules and GLib see it as if it were linked) and resolves every symbol below from it and its
// dependencies (libjpeg, libtiff and cgif are among them: the same copies libvips uses).
//
// Each name below is a macro for its table entry: `vips_resize(in, &out, scale, NULL)` calls
// through a pointer of vips_resize's own type (variadic calls included). A function used without
// an entry here is a link error, since nothing links libvips.
#ifndef DARKROOM_CVIPSSHIM_LIBRARY_H
#define DARKROOM_CVIPSSHIM_LIBRARY_H

#include <stdio.h> /* jpeglib.h needs FILE */

#include <cgif.h>
#include <jpeglib.h>
#include <stdatomic.h>
#include <tiffio.h>
#include <vips/vips.h>
#include <vips/vector.h>

#define DR_LIBRARY_SYMBOLS(X) \
  /* libvips */ \
  X(vips_abs) X(vips_add) X(vips_addalpha) X(vips_area_unref) X(vips_array_double_new) X(vips_autorot) \
  X(vips_bandjoin2) X(vips_bandmean) X(vips_block_untrusted_set) X(vips_cache_set_max) X(vips_cache_set_max_files) \
  X(vips_cache_set_max_mem) X(vips_cast) X(vips_colourspace) X(vips_composite2) X(vips_concurrency_get) \
  X(vips_concurrency_set) X(vips_copy) X(vips_crop) X(vips_embed) X(vips_error) X(vips_error_buffer_copy) \
  X(vips_extract_area) X(vips_extract_band) X(vips_find_trim) X(vips_flatten) X(vips_flip) X(vips_format_sizeof) \
  X(vips_format_sizeof_unsafe) X(vips_gaussblur) X(vips_getpoint) X(vips_gifload_buffer) X(vips_gifsave_buffer) \
  X(vips_gravity) X(vips_heifload_buffer) X(vips_heifsave_buffer) X(vips_icc_transform) X(vips_image_copy_memory) \
  X(vips_image_generate) X(vips_image_get_array_int) X(vips_image_get_bands) X(vips_image_get_fields) \
  X(vips_image_get_format) X(vips_image_get_height) X(vips_image_get_int) X(vips_image_get_interpretation) \
  X(vips_image_get_n_pages) X(vips_image_get_orientation) X(vips_image_get_page_height) X(vips_image_get_string) \
  X(vips_image_get_typeof) X(vips_image_get_width) X(vips_image_hasalpha) X(vips_image_init_fields) \
  X(vips_image_iskilled) X(vips_image_new) X(vips_image_new_from_memory) X(vips_image_new_from_memory_copy) \
  X(vips_image_new_memory) X(vips_image_pipelinev) X(vips_image_remove) X(vips_image_set_array_int) \
  X(vips_image_set_blob_copy) X(vips_image_set_int) X(vips_image_set_kill) X(vips_image_set_string) \
  X(vips_image_write_prepare) X(vips_image_write_to_memory) X(vips_init) X(vips_jpegload_buffer) \
  X(vips_jpegload_source) X(vips_jpegsave_buffer) X(vips_linear) X(vips_multiply) X(vips_object_get_type) \
  X(vips_object_local_array) X(vips_pngload_buffer) X(vips_pngload_source) X(vips_pngsave_buffer) \
  X(vips_pow_const1) X(vips_premultiply) X(vips_reduceh) X(vips_reducev) X(vips_reorder_margin_hint) X(vips_rect_includespoint) X(vips_region_copy) X(vips_region_new) X(vips_region_prepare) \
  X(vips_replicate) X(vips_resize) X(vips_rot) X(vips_sharpen) X(vips_shrinkh) X(vips_sink_disc) X(vips_smartcrop) \
  X(vips_source_custom_new) X(vips_source_get_type) X(vips_start_one) X(vips_stop_one) X(vips_tiffload_buffer) X(vips_tiffload_source) \
  X(vips_unpremultiply) X(vips_vector_isenabled) X(vips_vector_to_fixed_point) X(vips_version) X(vips_version_string) X(vips_webpload_buffer) X(vips_webpsave_buffer) \
  X(vips_xyz) \
  /* libjpeg (libjpeg-turbo, as libvips links it) */ \
  X(jpeg_CreateCompress) X(jpeg_CreateDecompress) X(jpeg_abort_decompress) X(jpeg_calc_output_dimensions) \
  X(jpeg_destroy_compress) X(jpeg_destroy_decompress) X(jpeg_finish_compress) X(jpeg_mem_src) X(jpeg_read_header) \
  X(jpeg_read_scanlines) X(jpeg_resync_to_restart) X(jpeg_set_defaults) X(jpeg_set_quality) \
  X(jpeg_simple_progression) X(jpeg_start_compress) X(jpeg_start_decompress) X(jpeg_std_error) \
  X(jpeg_write_scanlines) \
  /* libtiff */ \
  X(TIFFClientOpen) X(TIFFClose) X(TIFFGetField) X(TIFFGetFieldDefaulted) X(TIFFIsTiled) \
  X(TIFFReadRGBAImageOriented) X(_TIFFfree) X(_TIFFmalloc) \
  /* cgif */ \
  X(cgif_addframe) X(cgif_close) X(cgif_newgif)

typedef struct {
#define DR_LIBRARY_FIELD(name) __typeof__(name) *name;
  DR_LIBRARY_SYMBOLS(DR_LIBRARY_FIELD)
#undef DR_LIBRARY_FIELD
} DrLibrary;

/* The filled table once the libraries are open, NULL before. */
extern _Atomic(const DrLibrary *) dr_library_table;

/* Opens the libraries and fills the table, once (later calls return at once). Returns NULL when
 * that failed; dr_library_error() says why. */
const DrLibrary *dr_library_open(void);
const char *dr_library_error(void);

/* The table, opening the libraries if no one has yet. dr_init opens them first and fails with the
 * reason when it cannot; every other entry point runs after dr_init succeeded. */
static inline const DrLibrary *dr_library(void) {
  const DrLibrary *table = atomic_load_explicit(&dr_library_table, memory_order_acquire);
  return table ? table : dr_library_open();
}

/* library.c fills the table by these names, and defines DR_LIBRARY_TABLE_ONLY to see them. */
#ifndef DR_LIBRARY_TABLE_ONLY
#define TIFFClientOpen (dr_library()->TIFFClientOpen)
#define TIFFClose (dr_library()->TIFFClose)
#define TIFFGetField (dr_library()->TIFFGetField)
#define TIFFGetFieldDefaulted (dr_library()->TIFFGetFieldDefaulted)
#define TIFFIsTiled (dr_library()->TIFFIsTiled)
#define TIFFReadRGBAImageOriented (dr_library()->TIFFReadRGBAImageOriented)
#define _TIFFfree (dr_library()->_TIFFfree)
#define _TIFFmalloc (dr_library()->_TIFFmalloc)
#define cgif_addframe (dr_library()->cgif_addframe)
#define cgif_close (dr_library()->cgif_close)
#define cgif_newgif (dr_library()->cgif_newgif)
#define jpeg_CreateCompress (dr_library()->jpeg_CreateCompress)
#define jpeg_CreateDecompress (dr_library()->jpeg_CreateDecompress)
#define jpeg_abort_decompress (dr_library()->jpeg_abort_decompress)
#define jpeg_calc_output_dimensions (dr_library()->jpeg_calc_output_dimensions)
#define jpeg_destroy_compress (dr_library()->jpeg_destroy_compress)
#define jpeg_destroy_decompress (dr_library()->jpeg_destroy_decompress)
#define jpeg_finish_compress (dr_library()->jpeg_finish_compress)
#define jpeg_mem_src (dr_library()->jpeg_mem_src)
#define jpeg_read_header (dr_library()->jpeg_read_header)
#define jpeg_read_scanlines (dr_library()->jpeg_read_scanlines)
#define jpeg_resync_to_restart (dr_library()->jpeg_resync_to_restart)
#define jpeg_set_defaults (dr_library()->jpeg_set_defaults)
#define jpeg_set_quality (dr_library()->jpeg_set_quality)
#define jpeg_simple_progression (dr_library()->jpeg_simple_progression)
#define jpeg_start_compress (dr_library()->jpeg_start_compress)
#define jpeg_start_decompress (dr_library()->jpeg_start_decompress)
#define jpeg_std_error (dr_library()->jpeg_std_error)
#define jpeg_write_scanlines (dr_library()->jpeg_write_scanlines)
#define vips_abs (dr_library()->vips_abs)
#define vips_add (dr_library()->vips_add)
#define vips_addalpha (dr_library()->vips_addalpha)
#define vips_area_unref (dr_library()->vips_area_unref)
#define vips_array_double_new (dr_library()->vips_array_double_new)
#define vips_autorot (dr_library()->vips_autorot)
#define vips_bandjoin2 (dr_library()->vips_bandjoin2)
#define vips_bandmean (dr_library()->vips_bandmean)
#define vips_block_untrusted_set (dr_library()->vips_block_untrusted_set)
#define vips_cache_set_max (dr_library()->vips_cache_set_max)
#define vips_cache_set_max_files (dr_library()->vips_cache_set_max_files)
#define vips_cache_set_max_mem (dr_library()->vips_cache_set_max_mem)
#define vips_cast (dr_library()->vips_cast)
#define vips_colourspace (dr_library()->vips_colourspace)
#define vips_composite2 (dr_library()->vips_composite2)
#define vips_concurrency_get (dr_library()->vips_concurrency_get)
#define vips_concurrency_set (dr_library()->vips_concurrency_set)
#define vips_copy (dr_library()->vips_copy)
#define vips_crop (dr_library()->vips_crop)
#define vips_embed (dr_library()->vips_embed)
#define vips_error (dr_library()->vips_error)
#define vips_error_buffer_copy (dr_library()->vips_error_buffer_copy)
#define vips_extract_area (dr_library()->vips_extract_area)
#define vips_extract_band (dr_library()->vips_extract_band)
#define vips_find_trim (dr_library()->vips_find_trim)
#define vips_flatten (dr_library()->vips_flatten)
#define vips_flip (dr_library()->vips_flip)
#define vips_format_sizeof (dr_library()->vips_format_sizeof)
#define vips_format_sizeof_unsafe (dr_library()->vips_format_sizeof_unsafe)
#define vips_gaussblur (dr_library()->vips_gaussblur)
#define vips_getpoint (dr_library()->vips_getpoint)
#define vips_gifload_buffer (dr_library()->vips_gifload_buffer)
#define vips_gifsave_buffer (dr_library()->vips_gifsave_buffer)
#define vips_gravity (dr_library()->vips_gravity)
#define vips_heifload_buffer (dr_library()->vips_heifload_buffer)
#define vips_heifsave_buffer (dr_library()->vips_heifsave_buffer)
#define vips_icc_transform (dr_library()->vips_icc_transform)
#define vips_image_copy_memory (dr_library()->vips_image_copy_memory)
#define vips_image_generate (dr_library()->vips_image_generate)
#define vips_image_get_array_int (dr_library()->vips_image_get_array_int)
#define vips_image_get_bands (dr_library()->vips_image_get_bands)
#define vips_image_get_fields (dr_library()->vips_image_get_fields)
#define vips_image_get_format (dr_library()->vips_image_get_format)
#define vips_image_get_height (dr_library()->vips_image_get_height)
#define vips_image_get_int (dr_library()->vips_image_get_int)
#define vips_image_get_interpretation (dr_library()->vips_image_get_interpretation)
#define vips_image_get_n_pages (dr_library()->vips_image_get_n_pages)
#define vips_image_get_orientation (dr_library()->vips_image_get_orientation)
#define vips_image_get_page_height (dr_library()->vips_image_get_page_height)
#define vips_image_get_string (dr_library()->vips_image_get_string)
#define vips_image_get_typeof (dr_library()->vips_image_get_typeof)
#define vips_image_get_width (dr_library()->vips_image_get_width)
#define vips_image_hasalpha (dr_library()->vips_image_hasalpha)
#define vips_image_init_fields (dr_library()->vips_image_init_fields)
#define vips_image_iskilled (dr_library()->vips_image_iskilled)
#define vips_image_new (dr_library()->vips_image_new)
#define vips_image_new_from_memory (dr_library()->vips_image_new_from_memory)
#define vips_image_new_from_memory_copy (dr_library()->vips_image_new_from_memory_copy)
#define vips_image_new_memory (dr_library()->vips_image_new_memory)
#define vips_image_pipelinev (dr_library()->vips_image_pipelinev)
#define vips_image_remove (dr_library()->vips_image_remove)
#define vips_image_set_array_int (dr_library()->vips_image_set_array_int)
#define vips_image_set_blob_copy (dr_library()->vips_image_set_blob_copy)
#define vips_image_set_int (dr_library()->vips_image_set_int)
#define vips_image_set_kill (dr_library()->vips_image_set_kill)
#define vips_image_set_string (dr_library()->vips_image_set_string)
#define vips_image_write_prepare (dr_library()->vips_image_write_prepare)
#define vips_image_write_to_memory (dr_library()->vips_image_write_to_memory)
#define vips_init (dr_library()->vips_init)
#define vips_jpegload_buffer (dr_library()->vips_jpegload_buffer)
#define vips_jpegload_source (dr_library()->vips_jpegload_source)
#define vips_jpegsave_buffer (dr_library()->vips_jpegsave_buffer)
#define vips_linear (dr_library()->vips_linear)
#define vips_multiply (dr_library()->vips_multiply)
#define vips_object_get_type (dr_library()->vips_object_get_type)
#define vips_object_local_array (dr_library()->vips_object_local_array)
#define vips_pngload_buffer (dr_library()->vips_pngload_buffer)
#define vips_pngload_source (dr_library()->vips_pngload_source)
#define vips_pngsave_buffer (dr_library()->vips_pngsave_buffer)
#define vips_pow_const1 (dr_library()->vips_pow_const1)
#define vips_premultiply (dr_library()->vips_premultiply)
#define vips_rect_includespoint (dr_library()->vips_rect_includespoint)
#define vips_reduceh (dr_library()->vips_reduceh)
#define vips_reducev (dr_library()->vips_reducev)
#define vips_region_copy (dr_library()->vips_region_copy)
#define vips_region_new (dr_library()->vips_region_new)
#define vips_region_prepare (dr_library()->vips_region_prepare)
#define vips_reorder_margin_hint (dr_library()->vips_reorder_margin_hint)
#define vips_replicate (dr_library()->vips_replicate)
#define vips_resize (dr_library()->vips_resize)
#define vips_rot (dr_library()->vips_rot)
#define vips_sharpen (dr_library()->vips_sharpen)
#define vips_shrinkh (dr_library()->vips_shrinkh)
#define vips_sink_disc (dr_library()->vips_sink_disc)
#define vips_smartcrop (dr_library()->vips_smartcrop)
#define vips_source_custom_new (dr_library()->vips_source_custom_new)
#define vips_source_get_type (dr_library()->vips_source_get_type)
#define vips_start_one (dr_library()->vips_start_one)
#define vips_stop_one (dr_library()->vips_stop_one)
#define vips_tiffload_buffer (dr_library()->vips_tiffload_buffer)
#define vips_tiffload_source (dr_library()->vips_tiffload_source)
#define vips_unpremultiply (dr_library()->vips_unpremultiply)
#define vips_vector_isenabled (dr_library()->vips_vector_isenabled)
#define vips_vector_to_fixed_point (dr_library()->vips_vector_to_fixed_point)
#define vips_version (dr_library()->vips_version)
#define vips_version_string (dr_library()->vips_version_string)
#define vips_webpload_buffer (dr_library()->vips_webpload_buffer)
#define vips_webpsave_buffer (dr_library()->vips_webpsave_buffer)
#define vips_xyz (dr_library()->vips_xyz)
#endif

#endif
