/// Walks the OBUs (open bitstream units) of AV1 data that may be split over several ranges of a
/// file, and reads the frame size of each sequence header it passes.
///
/// Only OBU headers are read; payloads are skipped by their declared size, except a sequence
/// header's first bytes, which are parsed bit by bit (AV1 specification, 5.5). Any read past the
/// data ends the walk: the decoder names the damage.
struct AV1OBUWalk {
  private var data: ItemDataCursor

  init(bytes: SafeBytes, ranges: [Range<Int>]) { data = ItemDataCursor(bytes: bytes, ranges: ranges) }

  /// The next sequence header's largest frame size, or `nil` when the data ends or `budget` (OBU
  /// headers, shared by every walk of a file) runs out.
  mutating func nextSequenceHeaderSize(budget: inout Int) -> (width: Int, height: Int)? {
    while !data.atEnd {
      budget -= 1
      guard budget >= 0, let header = data.next() else { return nil }
      let type = (header >> 3) & 0x0F
      if header & 0x04 != 0 { guard data.next() != nil else { return nil } }  // extension header
      var size = data.remaining
      if header & 0x02 != 0 {
        guard let declared = leb128(), declared <= UInt64(data.remaining) else { return nil }
        size = Int(declared)
      }
      let payloadEnd = data.position + size
      if type == 1 {
        let payload = data.read(min(size, 1_024))
        data.skip(to: payloadEnd)
        if let frame = AV1SequenceHeader.maxFrameSize(payload) { return frame }
      } else {
        data.skip(to: payloadEnd)
      }
    }
    return nil
  }

  private mutating func leb128() -> UInt64? {
    var value: UInt64 = 0
    for index in 0..<8 {
      guard let byte = data.next() else { return nil }
      value |= UInt64(byte & 0x7F) << (7 * UInt64(index))
      if byte & 0x80 == 0 { return value }
    }
    return value
  }
}

/// Reads `max_frame_width_minus_1` and `max_frame_height_minus_1` from an AV1 sequence header
/// OBU's payload (AV1 specification, 5.5.1), skipping the fields before them.
enum AV1SequenceHeader {
  static func maxFrameSize(_ payload: [UInt8]) -> (width: Int, height: Int)? {
    var bits = BitReader(payload)
    guard bits.read(3) != nil, bits.read(1) != nil, let reduced = bits.read(1) else { return nil }  // profile, still
    if reduced == 1 {
      guard bits.read(5) != nil else { return nil }  // seq_level_idx[0]
    } else {
      guard let timing = bits.read(1) else { return nil }
      var decoderModel: UInt64 = 0
      var bufferDelayLength: UInt64 = 0
      if timing == 1 {
        guard bits.read(32) != nil, bits.read(32) != nil, let equal = bits.read(1) else { return nil }
        if equal == 1 { guard bits.uvlc() != nil else { return nil } }
        guard let model = bits.read(1) else { return nil }
        decoderModel = model
        if model == 1 {
          guard let delay = bits.read(5), bits.read(32) != nil, bits.read(5) != nil, bits.read(5) != nil else { return nil }
          bufferDelayLength = delay + 1
        }
      }
      guard let displayDelay = bits.read(1), let points = bits.read(5) else { return nil }
      for _ in 0...points {
        guard bits.read(12) != nil, let level = bits.read(5) else { return nil }
        if level > 7 { guard bits.read(1) != nil else { return nil } }
        if decoderModel == 1 {
          guard let present = bits.read(1) else { return nil }
          if present == 1 {
            guard bits.read(Int(bufferDelayLength)) != nil, bits.read(Int(bufferDelayLength)) != nil, bits.read(1) != nil
            else { return nil }
          }
        }
        if displayDelay == 1 {
          guard let present = bits.read(1) else { return nil }
          if present == 1 { guard bits.read(4) != nil else { return nil } }
        }
      }
    }
    guard let widthBits = bits.read(4), let heightBits = bits.read(4),
      let width = bits.read(Int(widthBits) + 1), let height = bits.read(Int(heightBits) + 1)
    else { return nil }
    return (Int(width) + 1, Int(height) + 1)
  }
}

/// Reads big-endian bit fields; `nil` past the end.
struct BitReader {
  private let bytes: [UInt8]
  private var position = 0

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  /// `count` bits (0–32) as a number.
  mutating func read(_ count: Int) -> UInt64? {
    guard count >= 0, count <= 32, position <= bytes.count * 8 - count else { return nil }
    var value: UInt64 = 0
    for _ in 0..<count {
      let bit = (bytes[position >> 3] >> (7 - UInt8(position & 7))) & 1
      value = value << 1 | UInt64(bit)
      position += 1
    }
    return value
  }

  /// An unsigned variable-length code (AV1 specification, 4.10.3).
  mutating func uvlc() -> UInt64? {
    guard let zeros = leadingZeros() else { return nil }
    if zeros >= 32 { return (1 << 32) - 1 }
    guard let value = read(zeros) else { return nil }
    return value + (1 << UInt64(zeros)) - 1
  }

  /// Counts zero bits up to and including the next one bit; `nil` past the end.
  mutating func leadingZeros() -> Int? {
    var zeros = 0
    while true {
      guard let bit = read(1) else { return nil }
      if bit == 1 { return zeros }
      zeros += 1
    }
  }
}
