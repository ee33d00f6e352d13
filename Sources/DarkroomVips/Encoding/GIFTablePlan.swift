import CVips
import CVipsShim
import DarkroomCore

/// The colour table each frame of a GIF output is mapped onto when the image came from a GIF and
/// only moved, scaled or cut since: the source's own colours, as gifsicle keeps them when it
/// resizes, instead of quantising every frame again (libvips' saver runs libimagequant and
/// dithers each frame, most of an animation's time).
///
/// Frame i's table holds every colour that can be visible on the canvas at frame i: its own
/// table's, plus, unless it paints the whole canvas, the colours still showing from the frames
/// before. When that is more than a GIF table holds (256, or 255 and a transparent entry for an
/// image with alpha) there is no plan and the libvips saver quantises as before.
struct GIFTablePlan {
  /// RGB triples, at most 256 entries each.
  var tables: [[UInt8]]
  /// Per table, the entry transparent pixels get, or -1.
  var transparent: [Int32]
  /// Per output frame, its table.
  var frameTables: [Int32]

  /// The plan for the first `frames` frames of `source`, or `nil`.
  init?(source: GIFColourTables, frames: Int, hasAlpha: Bool) {
    guard frames >= 1, frames <= source.frames.count else { return nil }
    let limit = hasAlpha ? 255 : 256
    tables = []
    transparent = []
    frameTables = []
    var visible: [UInt8] = []
    var seen = Set<UInt32>()
    var known: [[UInt8]: Int32] = [:]
    var current: Int32 = -1
    for frame in source.frames.prefix(frames) {
      guard !frame.colours.isEmpty else { return nil }
      var changed = false
      if frame.coversCanvas, !visible.isEmpty {
        visible = []
        seen = []
        changed = true
      }
      var entry = 0
      var offset = 0
      while offset + 2 < frame.colours.count {
        defer {
          entry += 1
          offset += 3
        }
        if entry == frame.transparentIndex { continue }
        let (r, g, b) = (frame.colours[offset], frame.colours[offset + 1], frame.colours[offset + 2])
        guard seen.insert(UInt32(r) << 16 | UInt32(g) << 8 | UInt32(b)).inserted else { continue }
        visible += [r, g, b]
        changed = true
      }
      guard visible.count / 3 <= limit, !visible.isEmpty else { return nil }
      if changed || current < 0 {
        if let index = known[visible] {
          current = index
        } else {
          current = Int32(tables.count)
          known[visible] = current
          tables.append(hasAlpha ? visible + [0, 0, 0] : visible)
          transparent.append(hasAlpha ? Int32(visible.count / 3) : -1)
        }
      }
      frameTables.append(current)
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
