import CVips
import CVipsShim
import DarkroomCore

/// The colour table each frame of a GIF output is mapped onto when the image came from a GIF and
/// only moved, scaled or cut since: the source's own colours, as gifsicle keeps them when it
/// resizes, instead of quantising every frame again (libvips' saver runs libimagequant and
/// dithers each frame, most of an animation's time).
///
/// Frame i's table holds every colour that can show on the canvas while frame i is shown: its own
/// table's (without its transparent entry), plus, unless it paints the whole canvas, what the
/// canvas held before it. The canvas starts empty, as libvips composes a GIF (libnsgif): black in
/// an image without alpha, transparent in one with alpha. After a frame, the canvas holds what was
/// shown, plus what disposal 2 clears the frame's area to (the empty canvas for a frame with a
/// transparent entry, the file's background colour for one without), or, for disposal 3 (and 4),
/// what it held before the frame. When a frame's colours are more than a GIF table holds (256, or 255
/// and a transparent entry for an image with alpha) there is no plan and the libvips saver
/// quantises as before.
struct GIFTablePlan {
  /// RGB triples, at most 256 entries each.
  var tables: [[UInt8]]
  /// Per table, the entry transparent pixels get, or -1.
  var transparent: [Int32]
  /// Per output frame, its table.
  var frameTables: [Int32]

  /// The plan for the first `frames` frames of `source`, composed on a canvas of `canvasWidth` ×
  /// `canvasHeight` (the size libvips decoded, which grows to hold frames past the declared
  /// screen), or `nil`.
  init?(source: GIFColourTables, frames: Int, hasAlpha: Bool, canvasWidth: Int, canvasHeight: Int) {
    guard frames >= 1, frames <= source.frames.count else { return nil }
    let limit = hasAlpha ? 255 : 256
    let empty: ColourSet = hasAlpha ? ColourSet() : ColourSet([0, 0, 0])
    let background = ColourSet(source.background)
    tables = []
    transparent = []
    frameTables = []
    var canvas = empty
    var known: [[UInt8]: Int32] = [:]
    for frame in source.frames.prefix(frames) {
      // A frame drawing indices past its table shows what only libnsgif's own table knows.
      guard !frame.colours.isEmpty, frame.largestIndex < frame.colours.count / 3 else { return nil }
      var shown = frame.paints(canvasWidth: canvasWidth, canvasHeight: canvasHeight) ? ColourSet() : canvas
      var entry = 0
      var offset = 0
      while offset + 2 < frame.colours.count {
        if entry != frame.transparentIndex {
          shown.insert(frame.colours[offset], frame.colours[offset + 1], frame.colours[offset + 2])
        }
        entry += 1
        offset += 3
      }
      guard shown.count <= limit, shown.count > 0 else { return nil }
      switch frame.disposal {
      case 2: canvas = shown.union(frame.transparentIndex == nil ? background : empty)
      case 3, 4: break  // the canvas as it was before this frame
      default: canvas = shown
      }
      if let index = known[shown.colours] {
        frameTables.append(index)
      } else {
        let index = Int32(tables.count)
        known[shown.colours] = index
        tables.append(hasAlpha ? shown.colours + [0, 0, 0] : shown.colours)
        transparent.append(hasAlpha ? Int32(shown.count) : -1)
        frameTables.append(index)
      }
    }
  }

  /// Writes `image` (8-bit sRGB, RGB or RGBA, with this plan's frame count) as a GIF with
  /// `dr_gifsave_mapped`. Returns libvips' status and the g_malloc'd result.
  func save(_ image: VipsImage) -> (status: Int32, buffer: UnsafeMutableRawPointer?, length: Int) {
    var buffer: UnsafeMutableRawPointer?
    var length = 0
    let flat = tables.flatMap { $0 }
    var starts: [Int] = []
    var start = 0
    for table in tables {
      starts.append(start)
      start += table.count
    }
    let status = flat.withUnsafeBufferPointer { colours -> Int32 in
      guard let base = colours.baseAddress else { return -1 }
      let described = tables.indices.map { index in
        DrGifTable(colours: base + starts[index], count: Int32(tables[index].count / 3), transparent: transparent[index])
      }
      return described.withUnsafeBufferPointer { described in
        frameTables.withUnsafeBufferPointer { frames in
          dr_gifsave_mapped(
            image.pointer, described.baseAddress, Int32(described.count), frames.baseAddress, Int32(frames.count), &buffer,
            &length)
        }
      }
    }
    return (status, buffer, length)
  }
}

/// Distinct RGB colours in the order first seen, as triples.
private struct ColourSet {
  private(set) var colours: [UInt8] = []
  private var seen = Set<UInt32>()

  init(_ colour: [UInt8]? = nil) { if let colour, colour.count == 3 { insert(colour[0], colour[1], colour[2]) } }

  var count: Int { colours.count / 3 }

  mutating func insert(_ r: UInt8, _ g: UInt8, _ b: UInt8) {
    guard seen.insert(UInt32(r) << 16 | UInt32(g) << 8 | UInt32(b)).inserted else { return }
    colours += [r, g, b]
  }

  func union(_ other: ColourSet) -> ColourSet {
    var joined = self
    var offset = 0
    while offset + 2 < other.colours.count {
      joined.insert(other.colours[offset], other.colours[offset + 1], other.colours[offset + 2])
      offset += 3
    }
    return joined
  }
}
