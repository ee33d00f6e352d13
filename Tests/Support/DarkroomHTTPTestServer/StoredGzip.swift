/// A minimal gzip (RFC 1952) encoder that stores the data in uncompressed deflate blocks (RFC 1951 §3.2.4).
///
/// The output is larger than the input (by 18 bytes plus 5 per 65,535-byte block) but is a valid gzip stream
/// that every decoder accepts, which is all a test server needs.
enum StoredGzip {
  /// The largest payload of one stored deflate block.
  private static let maxBlock = 65_535

  /// Encodes `data` as a gzip member with stored deflate blocks.
  static func encode(_ data: [UInt8]) -> [UInt8] {
    let blockCount = max(1, (data.count + maxBlock - 1) / maxBlock)
    var out: [UInt8] = []
    out.reserveCapacity(data.count + 18 + 5 * blockCount)
    // ID1 ID2, CM = deflate, FLG = 0, MTIME = 0, XFL = 0, OS = 255 (unknown).
    out += [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff]
    var offset = 0
    repeat {
      let length = min(maxBlock, data.count - offset)
      let isFinal = offset + length == data.count
      // BFINAL in bit 0, BTYPE = 00 (stored) in bits 1-2; the rest of the byte is padding.
      out.append(isFinal ? 0x01 : 0x00)
      let len = UInt16(length)
      appendLittleEndian(len, to: &out)
      appendLittleEndian(~len, to: &out)
      out += data[offset..<offset + length]
      offset += length
    } while offset < data.count
    appendLittleEndian(CRC32.checksum(data), to: &out)
    appendLittleEndian(UInt32(truncatingIfNeeded: data.count), to: &out)
    return out
  }

  private static func appendLittleEndian<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
    for index in 0..<(T.bitWidth / 8) {
      out.append(UInt8(truncatingIfNeeded: value >> (index * 8)))
    }
  }
}

/// CRC-32 as used by gzip and zlib (reflected polynomial 0xEDB88320).
enum CRC32 {
  private static let table: [UInt32] = (0..<256).map { (index: UInt32) -> UInt32 in
    var crc = index
    for _ in 0..<8 {
      crc = (crc & 1) != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
    }
    return crc
  }

  /// The CRC-32 of `data`.
  static func checksum(_ data: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in data {
      crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
    }
    return crc ^ 0xFFFF_FFFF
  }
}
