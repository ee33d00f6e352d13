// Frames (or strips of frames) joined one under the other, read once, frame by frame.
//
// vips_arrayjoin makes a region on an input for every piece of output it is asked for and drops
// it straight after, so each strip of output rows starts the input's whole pipeline again; and
// every input lives (with the buffers libvips keeps for each image, and a resize's kernel tables)
// until the join goes. An animation is read once, top to bottom: here each thread keeps its
// region on the input it reads, an input is let go as soon as all its rows have been read, and
// the inputs of dr_join_made_frames are made only when they are first read (and made again if the
// strip is read again). So one frame's pipeline lives at a time, however many frames there are.

#include "CVipsShim.h"

#include <limits.h>
#include <string.h>

#include "library.h"

enum { DR_UNMADE = 0, DR_LIVE = 1, DR_READ = 2 };

typedef struct {
  int count;
  int width;
  VipsImage **inputs; // referenced while live
  void **owners;      // what keeps a made input's memory alive, released with it
  int *state;
  int *tops;          // where each input starts in the output; tops[count] is the height
  int *rows_read;     // per input, rows handed out so far
  DrFrameMaker maker; // make is NULL for a join of images made already
  GMutex lock;
} DrFrameJoin;

typedef struct {
  VipsRegion *region;
  int input;
} DrFrameJoinSequence;

static void dr_frame_join_free(gpointer data) {
  DrFrameJoin *join = data;
  for (int i = 0; i < join->count; i++) {
    if (join->inputs[i]) g_object_unref(join->inputs[i]);
    if (join->owners[i] && join->maker.release_owner) join->maker.release_owner(join->owners[i]);
  }
  if (join->maker.context && join->maker.release_context) join->maker.release_context(join->maker.context);
  g_free(join->inputs);
  g_free(join->owners);
  g_free(join->state);
  g_free(join->tops);
  g_free(join->rows_read);
  g_mutex_clear(&join->lock);
  g_free(join);
}

static DrFrameJoin *dr_frame_join_new(int count) {
  DrFrameJoin *join = g_new0(DrFrameJoin, 1);
  join->count = count;
  join->inputs = g_new0(VipsImage *, count + 1);
  join->owners = g_new0(void *, count);
  join->state = g_new0(int, count);
  join->tops = g_new0(int, count + 1);
  join->rows_read = g_new0(int, count);
  g_mutex_init(&join->lock);
  return join;
}

static void *dr_frame_join_start(VipsImage *out, void *a, void *b) {
  (void)out;
  (void)a;
  (void)b;
  DrFrameJoinSequence *sequence = g_new0(DrFrameJoinSequence, 1);
  sequence->input = -1;
  return sequence;
}

static int dr_frame_join_stop(void *seq, void *a, void *b) {
  (void)a;
  (void)b;
  DrFrameJoinSequence *sequence = seq;
  if (sequence->region) g_object_unref(sequence->region);
  g_free(sequence);
  return 0;
}

// The input that holds output row `y`.
static int dr_frame_join_input(const DrFrameJoin *join, int y) {
  int low = 0, high = join->count - 1;
  while (low < high) {
    int middle = (low + high + 1) / 2;
    if (join->tops[middle] <= y) low = middle;
    else high = middle - 1;
  }
  return low;
}

// Makes input `index` (under the lock). 0, or -1 with the reason in the error buffer.
static int dr_frame_join_make(DrFrameJoin *join, int index, const VipsImage *like) {
  void *owner = NULL;
  VipsImage *made = join->maker.make(join->maker.context, index, &owner);
  if (!made) {
    if (owner && join->maker.release_owner) join->maker.release_owner(owner);
    return -1;
  }
  int height = join->tops[index + 1] - join->tops[index];
  if (made->Xsize != join->width || made->Ysize != height || made->Bands != like->Bands ||
      made->BandFmt != like->BandFmt || made->Coding != like->Coding) {
    vips_error("darkroom", "frame %d came out %dx%d with %d bands where the first is %dx%d with %d", index, made->Xsize,
      made->Ysize, made->Bands, join->width, height, like->Bands);
    if (owner && join->maker.release_owner) join->maker.release_owner(owner);
    return -1;
  }
  g_object_ref(made);
  join->inputs[index] = made;
  join->owners[index] = owner;
  join->state[index] = DR_LIVE;
  return 0;
}

static int dr_frame_join_enter(DrFrameJoin *join, DrFrameJoinSequence *sequence, int input, const VipsImage *out) {
  if (sequence->region) {
    g_object_unref(sequence->region);
    sequence->region = NULL;
    sequence->input = -1;
  }
  g_mutex_lock(&join->lock);
  int status = 0;
  if (join->state[input] != DR_LIVE) {
    // Made now, or again for a second read (which works where the source can be read again).
    join->rows_read[input] = 0;
    status = join->maker.make ? dr_frame_join_make(join, input, out) : -1;
  }
  if (status == 0) sequence->region = vips_region_new(join->inputs[input]);
  g_mutex_unlock(&join->lock);
  if (status || !sequence->region) return -1;
  sequence->input = input;
  return 0;
}

// Counts rows handed out of `input`; once all have been, the input and its pipeline go.
static void dr_frame_join_count(DrFrameJoin *join, DrFrameJoinSequence *sequence, int input, int rows) {
  VipsImage *done = NULL;
  void *owner = NULL;
  g_mutex_lock(&join->lock);
  join->rows_read[input] += rows;
  // Only a made input goes (it can be made again); images given to dr_join_frames stay.
  if (join->maker.make && join->state[input] == DR_LIVE &&
      join->rows_read[input] >= join->tops[input + 1] - join->tops[input]) {
    done = join->inputs[input];
    owner = join->owners[input];
    join->inputs[input] = NULL;
    join->owners[input] = NULL;
    join->state[input] = DR_READ;
  }
  g_mutex_unlock(&join->lock);
  if (!done) return;
  if (sequence->input == input && sequence->region) {
    g_object_unref(sequence->region);
    sequence->region = NULL;
    sequence->input = -1;
  }
  g_object_unref(done);
  if (owner && join->maker.release_owner) join->maker.release_owner(owner);
}

static int dr_frame_join_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
  (void)b;
  (void)stop;
  DrFrameJoinSequence *sequence = seq;
  DrFrameJoin *join = a;
  VipsRect *wanted = &out->valid;
  int y = wanted->top;
  int bottom = VIPS_RECT_BOTTOM(wanted);
  while (y < bottom) {
    int input = dr_frame_join_input(join, y);
    if (input != sequence->input && dr_frame_join_enter(join, sequence, input, out->im)) return -1;
    int top = join->tops[input];
    int end = VIPS_MIN(bottom, join->tops[input + 1]);
    VipsRect area = {wanted->left, y - top, wanted->width, end - y};
    if (vips_region_prepare(sequence->region, &area)) return -1;
    vips_region_copy(sequence->region, out, &area, wanted->left, y);
    // Only whole rows count: an input is let go once each of its rows has been handed out.
    if (wanted->left == 0 && wanted->width == join->width) dr_frame_join_count(join, sequence, input, end - y);
    y = end;
  }
  return 0;
}

// The joined image: fields and metadata from `like`, `height` rows.
static int dr_frame_join_finish(DrFrameJoin *join, VipsImage *like, gint64 height, int page_height, VipsImage **out) {
  VipsImage *joined = vips_image_new();
  g_object_set_data_full(G_OBJECT(joined), "darkroom-frame-join", join, dr_frame_join_free);
  if (vips_image_pipelinev(joined, VIPS_DEMAND_STYLE_THINSTRIP, like, NULL)) {
    g_object_unref(joined);
    return -1;
  }
  joined->Ysize = (int)height;
  if (vips_image_generate(joined, dr_frame_join_start, dr_frame_join_generate, dr_frame_join_stop, join, NULL)) {
    g_object_unref(joined);
    return -1;
  }
  vips_image_set_int(joined, VIPS_META_PAGE_HEIGHT, page_height);
  vips_image_set_int(joined, VIPS_META_N_PAGES, (int)(height / page_height));
  *out = joined;
  return 0;
}

int dr_join_frames(VipsImage **frames, int n, int page_height, VipsImage **out) {
  if (!frames || n < 1 || page_height < 1) {
    vips_error("darkroom", "no frames to join");
    return -1;
  }
  gint64 height = 0;
  for (int i = 0; i < n; i++) {
    VipsImage *frame = frames[i];
    if (!frame || frame->Xsize != frames[0]->Xsize || frame->Bands != frames[0]->Bands ||
        frame->BandFmt != frames[0]->BandFmt || frame->Coding != frames[0]->Coding || frame->Ysize < 1 ||
        frame->Ysize % page_height != 0) {
      vips_error("darkroom", "frame %d is not the size and kind of the first", i);
      return -1;
    }
    height += frame->Ysize;
    if (height > INT_MAX) {
      vips_error("darkroom", "the joined frames are too tall");
      return -1;
    }
  }
  DrFrameJoin *join = dr_frame_join_new(n);
  join->width = frames[0]->Xsize;
  for (int i = 0; i < n; i++) {
    join->inputs[i] = frames[i];
    g_object_ref(frames[i]);
    join->state[i] = DR_LIVE;
    join->tops[i + 1] = join->tops[i] + frames[i]->Ysize;
  }
  return dr_frame_join_finish(join, frames[0], height, page_height, out);
}

int dr_join_made_frames(VipsImage *first, int n, DrFrameMaker maker, VipsImage **out) {
  if (!first || !maker.make || n < 1 || first->Ysize < 1 || (gint64)first->Ysize * n > INT_MAX) {
    vips_error("darkroom", "%d frames cannot be joined", n);
    if (maker.context && maker.release_context) maker.release_context(maker.context);
    return -1;
  }
  DrFrameJoin *join = dr_frame_join_new(n);
  join->width = first->Xsize;
  join->maker = maker;
  for (int i = 0; i < n; i++) join->tops[i + 1] = join->tops[i] + first->Ysize;
  return dr_frame_join_finish(join, first, (gint64)first->Ysize * n, first->Ysize, out);
}

void dr_note_error(const char *text) { vips_error("darkroom", "%s", text ? text : "unknown error"); }
