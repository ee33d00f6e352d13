/// Removes the metadata chunks (`EXIF`, `XMP `, `ICCP`) from a WebP file that libvips wrote.
///
/// libvips 8.14's WebP saver writes an EXIF block (and the image's XMP and ICC profile) even when
/// asked to strip; a stripped WebP is cleaned here, and the `VP8X` header's flags for those chunks
/// are cleared. A file whose RIFF structure does not add up is returned unchanged (it is libvips'
/// own output, so that does not happen).
enum WebPMetadata {
  static let removed: Set<String> = ["EXIF", "XMP ", "ICCP"]
  /// The VP8X flags of the removed chunks: ICC (bit 5), EXIF (bit 3), XMP (bit 2).
  static let removedFlags: UInt8 = 0x20 | 0x08 | 0x04

  static func stripped(_ file: [UInt8]) -> [UInt8] {
    guard file.count >= 12, file[0..<4].elementsEqual(Array("RIFF".utf8)), file[8..<12].elementsEqual(Array("WEBP".utf8))
    else { return file }
    var output = Array(file[0..<12])
    var offset = 12
    var removedAny = false
    while offset < file.count {
      guard file.count - offset >= 8 else { return file }
      let size = Int(littleEndian32(file, at: offset + 4))
      let padded = size + (size & 1)
      guard padded <= file.count - offset - 8 else { return file }
      let fourCC = String(decoding: file[offset..<(offset + 4)], as: UTF8.self)
      let end = offset + 8 + padded
      if removed.contains(fourCC) {
        removedAny = true
      } else {
        var chunk = Array(file[offset..<end])
        if fourCC == "VP8X", chunk.count > 8 { chunk[8] &= ~removedFlags }
        output += chunk
      }
      offset = end
    }
    guard removedAny else { return file }
    let riffSize = UInt32(truncatingIfNeeded: output.count - 8)
    for index in 0..<4 { output[4 + index] = UInt8(truncatingIfNeeded: riffSize >> (8 * UInt32(index))) }
    return output
  }

  private static func littleEndian32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
    (0..<4).reduce(UInt32(0)) { value, index in value | UInt32(bytes[offset + index]) << (8 * UInt32(index)) }
  }
}
