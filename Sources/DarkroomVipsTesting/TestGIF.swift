/// An animated GIF written byte by byte, so that tests control what encoders would decide for
/// them: frames smaller than the canvas at an offset, each frame's disposal method, a transparent
/// colour, and per-frame delays.
///
/// The image data is LZW-coded without compression (a clear code every 250 pixels keeps every
/// code 9 bits wide), which every decoder reads.
///
/// ```swift
/// var gif = TestGIF(width: 60, height: 40, palette: [[255, 0, 0], [0, 0, 255]], loop: 0)
/// gif.add(.init(width: 60, height: 40, indices: Array(repeating: 0, count: 2400), delay: 100))
/// gif.add(.init(x: 10, y: 10, width: 20, height: 10, indices: Array(repeating: 1, count: 200), delay: 200))
/// let bytes = ImageBytes(gif.bytes)
/// ```
public struct TestGIF: Sendable {
  /// What happens to a frame's area before the next frame is drawn.
  public enum Disposal: UInt8, Sendable {
    /// Left as drawn.
    case none = 1
    /// Cleared to the background (transparent).
    case background = 2
    /// Put back as it was before this frame.
    case previous = 3
  }

  /// One frame: palette indices for a rectangle of the canvas.
  public struct Frame: Sendable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int
    public var indices: [UInt8]
    /// Milliseconds (stored in hundredths of a second).
    public var delay: Int
    public var disposal: Disposal
    /// The palette index drawn as transparent, if any.
    public var transparent: UInt8?
    /// The frame's own colour table (up to 256 RGB colours), used instead of the global one.
    public var palette: [[UInt8]]?

    public init(
      x: Int = 0, y: Int = 0, width: Int, height: Int, indices: [UInt8], delay: Int, disposal: Disposal = .none,
      transparent: UInt8? = nil, palette: [[UInt8]]? = nil
    ) {
      (self.x, self.y, self.width, self.height, self.indices) = (x, y, width, height, indices)
      (self.delay, self.disposal, self.transparent, self.palette) = (delay, disposal, transparent, palette)
    }
  }

  public var width: Int
  public var height: Int
  /// Up to 256 RGB colours.
  public var palette: [[UInt8]]
  /// Times the animation repeats after it first plays (0: for ever); `nil` writes no loop
  /// extension. (libvips reports plays: a file repeating 3 times has `loop` 4.)
  public var loop: Int?
  /// The palette index of the background colour (what `.background` disposal restores).
  public var background: UInt8
  public private(set) var frames: [Frame] = []

  public init(width: Int, height: Int, palette: [[UInt8]], loop: Int? = 0, background: UInt8 = 0) {
    (self.width, self.height, self.palette, self.loop, self.background) = (width, height, palette, loop, background)
  }

  public mutating func add(_ frame: Frame) { frames.append(frame) }

  /// The file.
  public var bytes: [UInt8] {
    var out = Array("GIF89a".utf8)
    out += Self.word(width) + Self.word(height)
    out += [0xF7, background, 0]  // a global table of 256 colours
    out += Self.table(palette)
    if let loop {
      out += [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1] + Self.word(loop) + [0]
    }
    for frame in frames {
      let flags = frame.disposal.rawValue << 2 | (frame.transparent == nil ? 0 : 1)
      out += [0x21, 0xF9, 4, flags] + Self.word(frame.delay / 10) + [frame.transparent ?? 0, 0]
      out += [0x2C] + Self.word(frame.x) + Self.word(frame.y) + Self.word(frame.width) + Self.word(frame.height)
      if let local = frame.palette { out += [0x87] + Self.table(local) } else { out.append(0) }
      out.append(8)  // LZW minimum code size
      let data = Self.lzw(frame.indices)
      var offset = 0
      while offset < data.count {
        let count = min(255, data.count - offset)
        out.append(UInt8(count))
        out += data[offset..<(offset + count)]
        offset += count
      }
      out.append(0)
    }
    out.append(0x3B)
    return out
  }

  /// 256 RGB entries: the colours given, then black.
  static func table(_ colours: [[UInt8]]) -> [UInt8] {
    (0..<256).flatMap { index in index < colours.count ? Array(colours[index].prefix(3)) : [0, 0, 0] }
  }

  static func word(_ value: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)] }

  /// Literal codes, 9 bits each, least significant bit first, with a clear code every 250.
  static func lzw(_ indices: [UInt8]) -> [UInt8] {
    var codes: [Int] = [256]
    for (count, index) in indices.enumerated() {
      if count > 0, count % 250 == 0 { codes.append(256) }
      codes.append(Int(index))
    }
    codes.append(257)
    var out: [UInt8] = []
    var buffer = 0
    var bits = 0
    for code in codes {
      buffer |= code << bits
      bits += 9
      while bits >= 8 {
        out.append(UInt8(buffer & 0xFF))
        buffer >>= 8
        bits -= 8
      }
    }
    if bits > 0 { out.append(UInt8(buffer & 0xFF)) }
    return out
  }
}
