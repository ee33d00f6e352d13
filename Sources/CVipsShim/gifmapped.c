// A GIF saver that maps every frame onto colour tables it is given (the source GIF's own), as
// gifsicle does when it resizes, instead of quantising each frame again with libimagequant as
// libvips' saver does. Frames arrive from vips_sink_disc (the pipeline runs on libvips' threads,
// this code on its write-behind thread), are mapped to the nearest colour of their table and
// handed to cgif, which writes only the part of a frame that changed.

#include "CVipsShim.h"

#include <cgif.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "library.h"

// One table, prepared for nearest-colour search: its opaque entries sorted by the channel whose
// values spread widest, so a search starts at the query's value of that channel and stops once
// the difference in it alone exceeds the best match. `key` is that channel, `p` and `q` the others.
typedef struct {
  int count;
  int axis; // 0 red, 1 green, 2 blue
  uint8_t key[256], p[256], q[256], index[256];
} DrSortedTable;

// Exact colours already mapped in this table (a pixel is most often a colour seen before).
#define DR_CACHE_BITS 14
#define DR_CACHE_SIZE (1 << DR_CACHE_BITS)

typedef struct {
  const DrGifTable *tables;
  int table_count;
  const int *frame_tables;
  int frames;
  int width, frame_height, bands;
  int *delays;
  int delay_count;
  int loop;

  uint8_t *rgb;     // one frame as it arrives (bands bytes a pixel)
  uint8_t *indices; // the frame mapped onto its table
  int row;          // rows of the current frame received
  int frame;        // the frame being received

  DrSortedTable sorted;
  int sorted_table; // which table `sorted` and the cache hold (-1: none yet)
  uint32_t cache_key[DR_CACHE_SIZE];
  uint8_t cache_value[DR_CACHE_SIZE];

  CGIF *gif;
  GByteArray *out;
  int failed;
} DrMappedGif;

static int dr_mapped_write(void *context, const uint8_t *data, const size_t count) {
  DrMappedGif *state = context;
  if (count > G_MAXUINT) return -1;
  g_byte_array_append(state->out, data, (guint)count);
  return 0;
}

static void dr_sort_table(DrSortedTable *sorted, const DrGifTable *table) {
  int low[3] = {255, 255, 255}, high[3] = {0, 0, 0};
  for (int i = 0; i < table->count && i < 256; i++) {
    if (i == table->transparent) continue;
    for (int c = 0; c < 3; c++) {
      int value = table->colours[3 * i + c];
      if (value < low[c]) low[c] = value;
      if (value > high[c]) high[c] = value;
    }
  }
  int axis = 1;
  for (int c = 0; c < 3; c++)
    if (high[c] - low[c] > high[axis] - low[axis]) axis = c;
  sorted->axis = axis;
  sorted->count = 0;
  for (int i = 0; i < table->count && i < 256; i++) {
    if (i == table->transparent) continue;
    const uint8_t *c = table->colours + 3 * i;
    uint8_t key = c[axis], p = c[(axis + 1) % 3], q = c[(axis + 2) % 3];
    // Insertion sort: at most 256 entries, once per table change.
    int at = sorted->count;
    while (at > 0 && sorted->key[at - 1] > key) {
      sorted->key[at] = sorted->key[at - 1];
      sorted->p[at] = sorted->p[at - 1];
      sorted->q[at] = sorted->q[at - 1];
      sorted->index[at] = sorted->index[at - 1];
      at--;
    }
    sorted->key[at] = key;
    sorted->p[at] = p;
    sorted->q[at] = q;
    sorted->index[at] = (uint8_t)i;
    sorted->count++;
  }
}

// The index of the entry nearest to `colour` (RGB) by squared RGB distance.
static uint8_t dr_nearest(const DrSortedTable *t, const uint8_t *colour) {
  int key = colour[t->axis], p = colour[(t->axis + 1) % 3], q = colour[(t->axis + 2) % 3];
  int low = 0, high = t->count;
  while (low < high) {
    int middle = (low + high) / 2;
    if (t->key[middle] < key) low = middle + 1;
    else high = middle;
  }
  int best = INT_MAX, chosen = 0;
  int up = low, down = low - 1;
  while (up < t->count || down >= 0) {
    if (up < t->count) {
      int dk = t->key[up] - key;
      if (dk * dk >= best) up = t->count;
      else {
        int dp = t->p[up] - p, dq = t->q[up] - q;
        int d = dk * dk + dp * dp + dq * dq;
        if (d < best) best = d, chosen = up;
        up++;
      }
    }
    if (down >= 0) {
      int dk = key - t->key[down];
      if (dk * dk >= best) down = -1;
      else {
        int dp = t->p[down] - p, dq = t->q[down] - q;
        int d = dk * dk + dp * dp + dq * dq;
        if (d < best) best = d, chosen = down;
        down--;
      }
    }
  }
  return t->count > 0 ? t->index[chosen] : 0;
}

static void dr_map_frame(DrMappedGif *state, const DrGifTable *table) {
  size_t pixels = (size_t)state->width * state->frame_height;
  const uint8_t *p = state->rgb;
  uint8_t transparent = table->transparent >= 0 ? (uint8_t)table->transparent : 0;
  int has_alpha = state->bands == 4 && table->transparent >= 0;
  for (size_t i = 0; i < pixels; i++, p += state->bands) {
    if (has_alpha && p[3] < 128) {
      state->indices[i] = transparent;
      continue;
    }
    uint32_t colour = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
    uint32_t slot = (colour ^ (colour >> DR_CACHE_BITS) ^ (colour >> 7)) & (DR_CACHE_SIZE - 1);
    uint32_t key = colour | 0x1000000u;
    if (state->cache_key[slot] != key) {
      state->cache_key[slot] = key;
      state->cache_value[slot] = dr_nearest(&state->sorted, p);
    }
    state->indices[i] = state->cache_value[slot];
  }
}

static int dr_mapped_start(DrMappedGif *state) {
  CGIF_Config config;
  memset(&config, 0, sizeof config);
  config.width = (uint16_t)state->width;
  config.height = (uint16_t)state->frame_height;
  config.pWriteFn = dr_mapped_write;
  config.pContext = state;
  // Always animated, as libvips' saver writes it: cgif writes a frame's control block (and with
  // it the transparent entry) only in an animated GIF, so a still logo would lose its transparency.
  config.attrFlags |= CGIF_ATTR_IS_ANIMATED;
  // libvips' convention: loop 0 repeats for ever, 1 plays once, n plays n times.
  if (state->loop == 1) config.attrFlags |= CGIF_ATTR_NO_LOOP;
  int repeats = state->loop > 1 ? state->loop - 1 : state->loop;
  config.numLoops = (uint16_t)(repeats > 65535 ? 65535 : repeats < 0 ? 0 : repeats);
  if (state->table_count == 1) {
    config.pGlobalPalette = (uint8_t *)state->tables[0].colours;
    config.numGlobalPaletteEntries = (uint16_t)state->tables[0].count;
  } else {
    config.attrFlags |= CGIF_ATTR_NO_GLOBAL_TABLE;
  }
  state->gif = cgif_newgif(&config);
  if (!state->gif) {
    vips_error("gifsave", "cannot start the GIF");
    return -1;
  }
  return 0;
}

static int dr_mapped_frame_done(DrMappedGif *state) {
  int which = state->frame_tables[state->frame];
  if (which < 0 || which >= state->table_count) {
    vips_error("gifsave", "frame %d names colour table %d of %d", state->frame, which, state->table_count);
    return -1;
  }
  const DrGifTable *table = &state->tables[which];
  if (which != state->sorted_table) {
    dr_sort_table(&state->sorted, table);
    memset(state->cache_key, 0, sizeof state->cache_key);
    state->sorted_table = which;
  }
  dr_map_frame(state, table);
  if (!state->gif && dr_mapped_start(state)) return -1;

  CGIF_FrameConfig frame;
  memset(&frame, 0, sizeof frame);
  frame.pImageData = state->indices;
  frame.genFlags = CGIF_FRAME_GEN_USE_TRANSPARENCY | CGIF_FRAME_GEN_USE_DIFF_WINDOW;
  if (state->table_count > 1) {
    frame.attrFlags |= CGIF_FRAME_ATTR_USE_LOCAL_TABLE;
    frame.pLocalPalette = (uint8_t *)table->colours;
    frame.numLocalPaletteEntries = (uint16_t)table->count;
  }
  if (state->bands == 4 && table->transparent >= 0) {
    frame.attrFlags |= CGIF_FRAME_ATTR_HAS_ALPHA;
    frame.transIndex = (uint8_t)table->transparent;
  }
  if (state->delays && state->frame < state->delay_count) {
    int centiseconds = (state->delays[state->frame] + 5) / 10;
    frame.delay = (uint16_t)(centiseconds < 0 ? 0 : centiseconds > 65535 ? 65535 : centiseconds);
  }
  if (cgif_addframe(state->gif, &frame) != CGIF_OK) {
    vips_error("gifsave", "cgif refused frame %d", state->frame);
    return -1;
  }
  return 0;
}

static int dr_mapped_rows(VipsRegion *region, VipsRect *area, void *a) {
  DrMappedGif *state = a;
  size_t line = (size_t)state->width * state->bands;
  for (int y = 0; y < area->height; y++) {
    if (state->frame >= state->frames) return 0;
    memcpy(state->rgb + (size_t)state->row * line, VIPS_REGION_ADDR(region, 0, area->top + y), line);
    state->row++;
    if (state->row == state->frame_height) {
      if (dr_mapped_frame_done(state)) {
        state->failed = 1;
        return -1;
      }
      state->row = 0;
      state->frame++;
    }
  }
  return 0;
}

int dr_gifsave_mapped(
  VipsImage *in, const DrGifTable *tables, int table_count, const int *frame_tables, int frame_count, void **buf, size_t *len
) {
  if (!in || !tables || !frame_tables || !buf || !len || table_count < 1) {
    vips_error("gifsave", "no colour tables");
    return -1;
  }
  if (in->BandFmt != VIPS_FORMAT_UCHAR || (in->Bands != 3 && in->Bands != 4)) {
    vips_error("gifsave", "mapped GIF frames must be 8-bit RGB or RGBA");
    return -1;
  }
  for (int i = 0; i < table_count; i++) {
    const DrGifTable *t = &tables[i];
    if (!t->colours || t->count < 1 || t->count > 256 || t->transparent >= t->count) {
      vips_error("gifsave", "colour table %d is not a GIF table", i);
      return -1;
    }
  }
  int frame_height = vips_image_get_page_height(in);
  if (frame_height < 1 || in->Ysize % frame_height != 0 || in->Ysize / frame_height != frame_count) {
    vips_error("gifsave", "the image has not %d frames", frame_count);
    return -1;
  }
  if (in->Xsize > 65535 || frame_height > 65535) {
    vips_error("gifsave", "a GIF frame is at most 65535 pixels a side");
    return -1;
  }

  DrMappedGif *state = g_try_malloc0(sizeof(DrMappedGif));
  if (!state) {
    vips_error("gifsave", "out of memory");
    return -1;
  }
  state->tables = tables;
  state->table_count = table_count;
  state->frame_tables = frame_tables;
  state->frames = frame_count;
  state->width = in->Xsize;
  state->frame_height = frame_height;
  state->bands = in->Bands;
  state->sorted_table = -1;
  size_t pixels = (size_t)in->Xsize * frame_height;
  state->rgb = g_try_malloc(pixels * in->Bands);
  state->indices = g_try_malloc(pixels);
  state->out = g_byte_array_new();
  // A copy: the array belongs to the image, and a lazy loader sets its fields again (freeing the
  // old array) when its first pixels are read.
  int *delays = NULL;
  if (vips_image_get_typeof(in, "delay") && !vips_image_get_array_int(in, "delay", &delays, &state->delay_count) &&
      delays && state->delay_count > 0)
    state->delays = g_memdup2(delays, (gsize)state->delay_count * sizeof(int));
  else
    state->delay_count = 0;
  if (vips_image_get_typeof(in, "loop")) vips_image_get_int(in, "loop", &state->loop);

  int status = -1;
  if (!state->rgb || !state->indices) vips_error("gifsave", "out of memory");
  else if (vips_sink_disc(in, dr_mapped_rows, state) == 0 && !state->failed && state->frame == frame_count && state->gif) {
    CGIF *gif = state->gif;
    state->gif = NULL;
    if (cgif_close(gif) == CGIF_OK) status = 0;
    else vips_error("gifsave", "cgif could not finish the GIF");
  }
  if (state->gif) cgif_close(state->gif);
  g_free(state->rgb);
  g_free(state->indices);
  g_free(state->delays);
  if (status == 0) {
    *len = state->out->len;
    *buf = g_byte_array_free(state->out, FALSE);
  } else {
    g_byte_array_free(state->out, TRUE);
  }
  g_free(state);
  return status;
}
