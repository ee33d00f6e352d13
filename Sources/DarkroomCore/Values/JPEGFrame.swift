/// What a JPEG's frame header and first scan header declare: the coding process, the size, each
/// component's sampling factors, and how many components the first scan holds.
///
/// Found by walking the segments from the start up to the first scan (`SOS`), however much
/// metadata comes first (a large local file is read a window at a time, never whole): metadata
/// segments cannot push the frame header out of sight. Every read is bounds-checked; damaged
/// headers give `nil` or a partial frame (the decoder then names the damage).
///
/// ```swift
/// if let frame = JPEGFrame(bytes), frame.buffersWholeImage {
///   print("libjpeg will hold \(frame.coefficientBytes) bytes of coefficients")
/// }
/// ```
package struct JPEGFrame: Sendable, Equatable {
  /// The start-of-frame marker (0xC0…0xCF, not 0xC4/0xC8/0xCC).
  public var marker: UInt8
  public var width: Int
  public var height: Int
  /// Each component's horizontal and vertical sampling factors (1–4).
  public var sampling: [Sampling]
  /// How many components the first scan holds (`nil` when no scan header was found).
  public var firstScanComponents: Int?

  public struct Sampling: Sendable, Equatable {
    public var horizontal: Int
    public var vertical: Int
  }

  /// Whether libjpeg must hold every DCT coefficient of the image before it can output a line: a
  /// progressive file, or a sequential one whose first scan does not hold every component
  /// (`has_multiple_scans` in libjpeg). Such images are not streamed, even with shrink-on-load.
  public var buffersWholeImage: Bool {
    let progressive = marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE
    return progressive || (firstScanComponents.map { $0 < sampling.count } ?? false)
  }

  /// The bytes libjpeg's whole-image coefficient buffer takes: 64 coefficients of 2 bytes per
  /// 8×8 block of every component, components padded to whole MCUs.
  public var coefficientBytes: UInt64 {
    let maxH = UInt64(sampling.map(\.horizontal).max() ?? 1)
    let maxV = UInt64(sampling.map(\.vertical).max() ?? 1)
    let mcuColumns = (UInt64(width) + 8 * maxH - 1) / (8 * maxH)
    let mcuRows = (UInt64(height) + 8 * maxV - 1) / (8 * maxV)
    return sampling.reduce(0) { total, component in
      total + mcuColumns * UInt64(component.horizontal) * mcuRows * UInt64(component.vertical) * 128
    }
  }

  /// Reads the frame of a JPEG; `nil` when no frame header comes before a scan or the end of the
  /// data.
  public init?(_ data: ImageBytes) {
    var bytes = WindowedBytes(data)
    var found: JPEGFrame?
    var index = 2
    while let byte = bytes.byte(index), let marker = bytes.byte(index + 1), index + 4 <= bytes.count {
      if byte != 0xFF || marker == 0xFF {  // junk between segments, or a fill byte
        index += 1
        continue
      }
      if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 {
        index += 2
        continue
      }
      if marker == 0xD9 { break }
      if marker == 0xDA {
        found?.firstScanComponents = bytes.byte(index + 4).map(Int.init)
        break
      }
      guard let length = bytes.int(index + 2, length: 2), length >= 2 else { break }
      if found == nil, (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
        found = JPEGFrame(marker: marker, header: &bytes, at: index + 4)
      }
      index += 2 + length
    }
    guard let found else { return nil }
    self = found
  }

  /// A frame header's fields: precision, height, width, component count, then per component its
  /// identifier, sampling factors and table.
  private init(marker: UInt8, header bytes: inout WindowedBytes, at offset: Int) {
    self.marker = marker
    height = bytes.int(offset + 1, length: 2) ?? 0
    width = bytes.int(offset + 3, length: 2) ?? 0
    sampling = []
    let count = Int(bytes.byte(offset + 5) ?? 0)
    for component in 0..<count {
      guard let factors = bytes.byte(offset + 6 + component * 3 + 1) else { break }
      sampling.append(Sampling(horizontal: max(1, Int(factors >> 4)), vertical: max(1, Int(factors & 0x0F))))
    }
  }
}

/// Bounds-checked reads from ``ImageBytes`` through a 64 KiB window that moves as the reads do.
struct WindowedBytes {
  private let data: ImageBytes
  let count: Int
  private var start = 0
  private var window: [UInt8] = []

  init(_ data: ImageBytes) {
    self.data = data
    count = data.count
  }

  mutating func byte(_ offset: Int) -> UInt8? {
    guard offset >= 0, offset < count else { return nil }
    if offset < start || offset >= start + window.count {
      start = offset
      window = data.bytes(at: offset, count: 1 << 16)
    }
    return offset - start < window.count ? window[offset - start] : nil
  }

  /// `length` bytes (at most 8) at `offset` as an unsigned big-endian number.
  mutating func int(_ offset: Int, length: Int) -> Int? {
    guard length >= 0, length <= 7 else { return nil }
    var value = 0
    for index in 0..<length {
      guard let byte = byte(offset + index) else { return nil }
      value = value << 8 | Int(byte)
    }
    return value
  }
}
