import CZlib
import Foundation

/// CRC-32 (zlib's, hardware-assisted where zlib has it) of cache entries, so a torn or corrupted
/// entry is detected on read and treated as a miss.
///
/// ```swift
/// let sum = Checksum.crc32(bytes)
/// ```
package enum Checksum {
  /// The CRC-32 of `buffer`, continuing from `initial`.
  public static func crc32(_ buffer: UnsafeRawBufferPointer, initial: UInt32 = 0) -> UInt32 {
    guard var base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return initial }
    var remaining = buffer.count
    var crc = UInt(initial)
    while remaining > 0 {
      let chunk = min(remaining, Int(UInt32.max >> 1))
      crc = CZlib.crc32(crc, base, UInt32(chunk))
      base += chunk
      remaining -= chunk
    }
    return UInt32(truncatingIfNeeded: crc)
  }

  /// The CRC-32 of a byte collection.
  public static func crc32<Bytes: ContiguousBytes>(_ bytes: Bytes, initial: UInt32 = 0) -> UInt32 {
    bytes.withUnsafeBytes { crc32($0, initial: initial) }
  }
}
