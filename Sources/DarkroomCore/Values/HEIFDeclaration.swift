/// What a HEIF or AVIF file declares about the images its decoder will allocate: the largest size
/// found in its `ispe` properties, in the AV1 sequence headers of its `av01` items and in the HEVC
/// sequence parameter sets of its `hvc1` items, and the deepest sample layout of their `av1C` or
/// `hvcC` configurations.
///
/// libheif checks only `ispe`, but the decoder allocates frames at the size of the headers it is
/// handed (the configuration's OBUs or parameter sets, then the item's own data). A file whose
/// `ispe` says 64×48 while its sequence header says 65272×8707 made the AV1 decoder allocate
/// 1.75 GB, so all are read, and the largest counts. Every read is bounds-checked and the walk
/// has fixed budgets: a damaged file gives a smaller declaration (the decoder then names the
/// damage), never a trap, and an overgrown one is ``exceededBudget``.
///
/// ```swift
/// if let declared = HEIFDeclaration(bytes) {
///   print(declared.width, declared.height, declared.bytesPerDecodedPixel)
/// }
/// ```
package struct HEIFDeclaration: Sendable, Equatable {
  /// The largest width × height declared anywhere (by area).
  public var width: Int
  public var height: Int
  /// The largest bit depth of an AV1 or HEVC configuration (8 when there is none).
  public var bitDepth: Int
  /// The most samples per pixel a configuration's planes hold: 3 for 4:4:4, 2 for 4:2:2,
  /// 1.5 for 4:2:0, 1 for monochrome (3 when there is no configuration).
  public var planeSamplesPerPixel: Double
  /// Whether any size came from an AV1 sequence header or HEVC parameter set (not `ispe` alone).
  public var fromSequenceHeader: Bool
  /// Whether the file holds more structure than the walk reads (over 65,536 boxes or OBUs, 4,096
  /// extents or items, 16 `idat` boxes): no real file does, and what was not read cannot be
  /// judged, so the decoder refuses it. Width and height are then 0 when nothing was found.
  public var exceededBudget: Bool

  /// The walk's budgets, for messages.
  public static let limitsDescription =
    "\(HEIFBoxWalk.maxBoxes) boxes, \(HEIFBoxWalk.maxExtents) item extents or coded items, \(HEIFBoxWalk.maxOBUs) OBUs or NAL units, or \(HEIFBoxWalk.maxIDATs) idat boxes"

  /// The bytes per pixel of the decoder's planes, before conversion to RGB.
  public var bytesPerDecodedPixel: Double { planeSamplesPerPixel * (bitDepth > 8 ? 2 : 1) }
}

extension HEIFDeclaration {
  /// Reads the declaration from a file's bytes; `nil` when nothing in them declares a size.
  public init?(_ bytes: ImageBytes) {
    guard
      let found = bytes.withUnsafeBytes({ raw -> HEIFDeclaration? in
        var walk = HEIFBoxWalk(SafeBytes(raw))
        walk.run()
        return walk.declaration()
      })
    else { return nil }
    self = found
  }
}

/// Bounds-checked big-endian reads from raw bytes: `nil` past the end, never a trap.
struct SafeBytes {
  let raw: UnsafeRawBufferPointer
  init(_ raw: UnsafeRawBufferPointer) { self.raw = raw }

  var count: Int { raw.count }

  func byte(_ offset: Int) -> UInt8? { offset >= 0 && offset < raw.count ? raw[offset] : nil }

  /// `length` bytes at `offset` as an unsigned big-endian number (at most 8 bytes).
  func number(_ offset: Int, length: Int) -> UInt64? {
    guard length >= 0, length <= 8, offset >= 0, offset <= raw.count - length else { return nil }
    var value: UInt64 = 0
    for index in offset..<offset + length { value = value << 8 | UInt64(raw[index]) }
    return value
  }

  func int(_ offset: Int, length: Int) -> Int? { number(offset, length: length).flatMap { Int(exactly: $0) } }

  func fourCC(_ offset: Int) -> UInt32? { number(offset, length: 4).map { UInt32(truncatingIfNeeded: $0) } }
}

extension UInt32 {
  init(fourCC text: StaticString) {
    var value: UInt32 = 0
    text.withUTF8Buffer { for byte in $0.prefix(4) { value = value << 8 | UInt32(byte) } }
    self = value
  }
}
