/// Walks length-prefixed HEVC NAL units (an `hvc1` item's data) that may be split over several
/// ranges of a file, and reads the picture size of each sequence parameter set it passes.
///
/// Only NAL lengths and headers are read; other units are skipped by their declared length. Any
/// read past the data ends the walk: the decoder names the damage.
struct HEVCNALWalk {
  private var data: ItemDataCursor
  private let lengthSize: Int

  /// `lengthSize` is the size of each unit's length field (1, 2 or 4 bytes, from `hvcC`).
  init(bytes: SafeBytes, ranges: [Range<Int>], lengthSize: Int) {
    data = ItemDataCursor(bytes: bytes, ranges: ranges)
    self.lengthSize = lengthSize
  }

  /// The next sequence parameter set's picture size, or `nil` when the data ends or `budget` (units,
  /// shared by every walk of a file) runs out.
  mutating func nextPictureSize(budget: inout Int) -> (width: Int, height: Int)? {
    while !data.atEnd {
      budget -= 1
      guard budget >= 0 else { return nil }
      let field = data.read(lengthSize)
      guard field.count == lengthSize else { return nil }
      let length = field.reduce(0) { $0 << 8 | Int($1) }
      guard length <= data.remaining else { return nil }
      let end = data.position + length
      let unit = data.read(min(length, 1_024))
      data.skip(to: end)
      if let size = HEVCSequenceParameterSet.pictureSize(unit) { return size }
    }
    return nil
  }
}

/// Reads `pic_width_in_luma_samples` and `pic_height_in_luma_samples` from an HEVC sequence
/// parameter set NAL unit (H.265, 7.3.2.2), skipping the fields before them.
enum HEVCSequenceParameterSet {
  /// The picture size of `unit` (a NAL unit with its two-byte header) when it is an SPS.
  static func pictureSize(_ unit: [UInt8]) -> (width: Int, height: Int)? {
    guard unit.count > 2, (unit[0] >> 1) & 0x3F == 33 else { return nil }
    var bits = BitReader(payload(unit.dropFirst(2)))
    guard bits.read(4) != nil, let subLayers = bits.read(3), bits.read(1) != nil, bits.skip(96) else { return nil }
    var profilePresent: [Bool] = []
    var levelPresent: [Bool] = []
    for _ in 0..<subLayers {
      guard let profile = bits.read(1), let level = bits.read(1) else { return nil }
      profilePresent.append(profile == 1)
      levelPresent.append(level == 1)
    }
    if subLayers > 0 { guard bits.skip(2 * (8 - Int(subLayers))) else { return nil } }
    for layer in 0..<Int(subLayers) {
      if profilePresent[layer] { guard bits.skip(88) else { return nil } }
      if levelPresent[layer] { guard bits.skip(8) else { return nil } }
    }
    guard bits.exponentialGolomb() != nil, let chroma = bits.exponentialGolomb() else { return nil }
    if chroma == 3 { guard bits.read(1) != nil else { return nil } }
    guard let width = bits.exponentialGolomb(), let height = bits.exponentialGolomb() else { return nil }
    return (Int(width), Int(height))
  }

  /// The unit's payload without its emulation-prevention bytes (`00 00 03` → `00 00`).
  static func payload(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    var zeros = 0
    for byte in bytes {
      if zeros >= 2, byte == 3 {
        zeros = 0
        continue
      }
      zeros = byte == 0 ? zeros + 1 : 0
      out.append(byte)
    }
    return out
  }
}

extension BitReader {
  /// Skips `count` bits; false past the end.
  mutating func skip(_ count: Int) -> Bool {
    var left = count
    while left > 0 {
      guard read(min(left, 32)) != nil else { return false }
      left -= 32
    }
    return true
  }

  /// An unsigned exponential-Golomb code (`ue(v)`, H.265 9.2); `nil` past the end or over 32 bits.
  mutating func exponentialGolomb() -> UInt64? {
    guard let zeros = leadingZeros(), zeros <= 31, let value = read(zeros) else { return nil }
    return (1 << UInt64(zeros)) - 1 + value
  }
}
