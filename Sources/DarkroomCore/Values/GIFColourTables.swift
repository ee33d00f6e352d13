/// The colour tables of a GIF file and which frame uses which, read from its blocks without
/// decoding any pixels.
///
/// A GIF has an optional global table and, per frame, an optional local one; a frame's graphic
/// control extension may name one entry as transparent. Image data is skipped by its sub-block
/// lengths. The walk stops at the trailer, at the first byte it does not understand, or at the
/// end of the data; it never reads past the data, and it gives up (`nil`) past ``maxFrames``
/// frames.
///
/// ```swift
/// let tables = GIFColourTables(bytes)
/// print(tables?.frames.count, tables?.frames.first?.colours.count)
/// ```
package struct GIFColourTables: Sendable, Equatable {
  /// One frame as its descriptor declares it.
  package struct Frame: Sendable, Equatable {
    /// The frame's table (its local one, else the global one) as RGB triples; empty when it has
    /// neither.
    package var colours: [UInt8]
    /// The entry drawn as transparent, if the frame's graphic control extension names one.
    package var transparentIndex: Int?
    /// Whether the frame paints every pixel of the canvas: it starts at the origin, is at least
    /// the canvas's size, and has no transparent entry.
    package var coversCanvas: Bool
  }

  package var width: Int
  package var height: Int
  package var frames: [Frame]

  /// More frames than any animation Darkroom decodes (`maxFrames` is at most 4,096).
  package static let maxFrames = 4_096

  package init(width: Int, height: Int, frames: [Frame]) {
    (self.width, self.height, self.frames) = (width, height, frames)
  }

  package init?(_ bytes: ImageBytes) {
    guard let walked = bytes.withUnsafeBytes({ GIFColourTables(walking: SafeBytes($0)) }) else { return nil }
    self = walked
  }

  init?(walking data: SafeBytes) {
    guard data.count >= 13, data.number(0, length: 3) == 0x47_49_46 else { return nil }  // "GIF"
    guard let width = data.littleEndian16(6), let height = data.littleEndian16(8), let flags = data.byte(10) else {
      return nil
    }
    self.width = width
    self.height = height
    frames = []
    var position = 13
    var global: [UInt8] = []
    if flags & 0x80 != 0 {
      let size = 3 << (Int(flags & 7) + 1)
      guard let table = data.slice(position, count: size) else { return nil }
      global = table
      position += size
    }
    var transparent: Int?
    while let introducer = data.byte(position) {
      switch introducer {
      case 0x21:  // extension: label, then sub-blocks
        guard let label = data.byte(position + 1) else { return }
        if label == 0xF9, data.byte(position + 2) == 4, let packed = data.byte(position + 3) {
          transparent = packed & 1 != 0 ? data.byte(position + 6).map(Int.init) : nil
        }
        guard let next = data.skippingSubBlocks(from: position + 2) else { return }
        position = next
      case 0x2C:  // image descriptor
        guard frames.count < Self.maxFrames else { return nil }
        guard let left = data.littleEndian16(position + 1), let top = data.littleEndian16(position + 3),
          let frameWidth = data.littleEndian16(position + 5), let frameHeight = data.littleEndian16(position + 7),
          let packed = data.byte(position + 9)
        else { return }
        position += 10
        var colours = global
        if packed & 0x80 != 0 {
          let size = 3 << (Int(packed & 7) + 1)
          guard let table = data.slice(position, count: size) else { return }
          colours = table
          position += size
        }
        let covers = left == 0 && top == 0 && frameWidth >= width && frameHeight >= height && transparent == nil
        frames.append(Frame(colours: colours, transparentIndex: transparent, coversCanvas: covers))
        transparent = nil
        // The LZW minimum code size, then the image data's sub-blocks.
        guard let next = data.skippingSubBlocks(from: position + 1) else { return }
        position = next
      default:  // the trailer (0x3B), or bytes a decoder would stop at too
        return
      }
    }
  }
}

extension SafeBytes {
  fileprivate func littleEndian16(_ offset: Int) -> Int? {
    guard let low = byte(offset), let high = byte(offset + 1) else { return nil }
    return Int(low) | Int(high) << 8
  }

  fileprivate func slice(_ offset: Int, count length: Int) -> [UInt8]? {
    guard offset >= 0, length >= 0, offset <= count - length else { return nil }
    return Array(raw[offset..<offset + length])
  }

  /// The offset just past a chain of sub-blocks (a length byte, that many bytes, … a zero), or
  /// `nil` when the data ends first.
  fileprivate func skippingSubBlocks(from start: Int) -> Int? {
    var position = start
    while let length = byte(position) {
      position += 1
      if length == 0 { return position }
      position += Int(length)
    }
    return nil
  }
}
