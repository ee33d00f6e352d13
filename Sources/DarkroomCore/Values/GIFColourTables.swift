/// The colour tables of a GIF file and what each frame does to the canvas, read from its blocks
/// without decoding any pixels.
///
/// A GIF has an optional global table and, per frame, an optional local one; a frame's graphic
/// control extension may name one entry as transparent and says what happens to the frame's area
/// after it is shown (its disposal). Image data is not decoded: its LZW codes are walked only to
/// count how many pixels they give, so that a frame whose data ends early (the decoder leaves the
/// rest of its area as it was) is known. The walk stops at the trailer, at the first byte it does
/// not understand, or at the end of the data; it never reads past the data, and it gives up
/// (`nil`) past ``maxFrames`` frames.
///
/// ```swift
/// let tables = GIFColourTables(bytes)
/// print(tables?.frames.count, tables?.frames.first?.colours.count)
/// ```
package struct GIFColourTables: Sendable, Equatable {
  /// One frame as its blocks declare it.
  package struct Frame: Sendable, Equatable {
    /// The frame's table (its local one, else the global one) as RGB triples; empty when it has
    /// neither.
    package var colours: [UInt8]
    /// The entry drawn as transparent, if the frame's graphic control extension names one.
    package var transparentIndex: Int?
    package var left = 0
    package var top = 0
    package var width = 0
    package var height = 0
    /// The disposal method (0 to 7): 2 clears the frame's area after it is shown, 3 (and 4, which
    /// decoders read as 3) puts back what was there before it.
    package var disposal = 0
    /// Whether the image data gives a pixel for every pixel of the frame's rectangle.
    package var complete = false
    /// The largest colour index the image data draws. An index past the frame's table shows
    /// what libnsgif's 256-entry table holds there: nothing (the empty canvas) past the global
    /// table, an earlier local table's entry past a local one.
    package var largestIndex = 0

    package init(
      colours: [UInt8], transparentIndex: Int? = nil, left: Int = 0, top: Int = 0, width: Int = 0, height: Int = 0,
      disposal: Int = 0, complete: Bool = true
    ) {
      (self.colours, self.transparentIndex, self.disposal, self.complete) = (colours, transparentIndex, disposal, complete)
      (self.left, self.top, self.width, self.height) = (left, top, width, height)
    }

    /// Whether the frame paints every pixel of a `width`×`height` canvas: it starts at the origin,
    /// covers the canvas, draws no pixel transparent, and its data is whole.
    package func paints(canvasWidth: Int, canvasHeight: Int) -> Bool {
      left == 0 && top == 0 && width >= canvasWidth && height >= canvasHeight && transparentIndex == nil && complete
    }
  }

  package var width: Int
  package var height: Int
  /// What disposal 2 clears a frame without a transparent entry to: the global table's background
  /// entry (its first when the index is past the table), or black without a global table.
  package var background: [UInt8] = [0, 0, 0]
  package var frames: [Frame]

  /// More frames than any animation Darkroom decodes (`maxFrames` is at most 4,096).
  package static let maxFrames = 4_096

  package init(width: Int, height: Int, background: [UInt8] = [0, 0, 0], frames: [Frame]) {
    (self.width, self.height, self.background, self.frames) = (width, height, background, frames)
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
      let index = data.byte(11).map(Int.init) ?? 0
      let entry = 3 * index + 2 < size ? 3 * index : 0
      background = Array(table[entry..<entry + 3])
    }
    var control: (transparent: Int?, disposal: Int) = (nil, 0)
    while let introducer = data.byte(position) {
      switch introducer {
      case 0x21:  // extension: label, then sub-blocks
        guard let label = data.byte(position + 1) else { return }
        // A graphic control extension, read as libnsgif (libvips' GIF decoder) reads it: at fixed
        // offsets whatever its size byte says; a later one before the same image changes the
        // disposal, and turns transparency on but never off.
        if label == 0xF9, let packed = data.byte(position + 3), let index = data.byte(position + 6) {
          control = (packed & 1 != 0 ? Int(index) : control.transparent, Int(packed >> 2) & 7)
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
        // The LZW minimum code size, then the image data's sub-blocks.
        let pixels = frameWidth * frameHeight
        let walk = data.byte(position).map { LZWWalk(data, codeSize: Int($0), from: position + 1, enough: pixels) }
        // A chain of sub-blocks that runs past the data is one libnsgif does not draw whole.
        let next = data.skippingSubBlocks(from: position + 1)
        var frame = Frame(
          colours: colours, transparentIndex: control.transparent, left: left, top: top, width: frameWidth,
          height: frameHeight, disposal: control.disposal, complete: next != nil && walk?.complete == true)
        frame.largestIndex = walk?.largestIndex ?? 0
        frames.append(frame)
        control = (nil, 0)
        guard let next else { return }
        position = next
      default:  // the trailer (0x3B), or bytes a decoder would stop at too
        return
      }
    }
  }
}

/// What the LZW codes in the sub-blocks from `start` draw, as libnsgif decodes them: whether they
/// give at least `enough` pixels, and the largest colour index among them.
///
/// Only the length of each code's string is followed (an array of 4,096 lengths), so the walk
/// costs the compressed size, not the pixels: every pixel a code draws is a literal code seen
/// before it (or the code itself), so the largest literal is the largest index drawn. The walk
/// stops at the end code, at a code no decoder accepts, at a sub-block that runs past the data
/// (libnsgif skips it), at the end of the sub-blocks, or once `enough` pixels are counted. A code
/// that ends on the last bit of the last sub-block is one libnsgif drops: it reads ahead for
/// another sub-block and finds the end.
private struct LZWWalk {
  var complete = false
  var largestIndex = 0

  init(_ data: SafeBytes, codeSize minimum: Int, from start: Int, enough: Int) {
    guard (1...11).contains(minimum) else { return }
    if enough == 0 {
      complete = true
      return
    }
    let clear = 1 << minimum
    let end = clear + 1
    var size = minimum + 1
    var next = clear + 2
    var lengths = [Int](repeating: 1, count: 4_096)
    var previous = -1
    var total = 0
    var bits = 0
    var held = 0
    var position = start
    var remaining = 0  // bytes left in the current sub-block
    while true {
      while held < size {
        if remaining == 0 {
          guard let length = data.byte(position), length > 0, position + Int(length) < data.count else { return }
          remaining = Int(length)
          position += 1
        }
        guard let byte = data.byte(position) else { return }
        bits |= Int(byte) << held
        held += 8
        position += 1
        remaining -= 1
      }
      let code = bits & ((1 << size) - 1)
      bits >>= size
      held -= size
      if held == 0, remaining == 0, (data.byte(position) ?? 0) == 0 { return }
      if code == clear {
        (size, next, previous) = (minimum + 1, clear + 2, -1)
        continue
      }
      if code == end { return }
      let length: Int
      if previous < 0 {
        guard code < clear else { return }
        length = 1
      } else if code < next {
        length = lengths[code]
      } else if code == next {
        length = lengths[previous] + 1
      } else {
        return
      }
      if code < clear { largestIndex = max(largestIndex, code) }
      if previous >= 0, next < 4_096 {
        lengths[next] = lengths[previous] + 1
        next += 1
        if next == 1 << size, size < 12 { size += 1 }
      }
      total += length
      if total >= enough {
        complete = true
        return
      }
      previous = code
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
