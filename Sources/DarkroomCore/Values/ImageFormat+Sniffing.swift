extension ImageFormat {
  /// Identifies a format from the first bytes of a file (its magic numbers), or `nil`.
  ///
  /// Only the bytes decide: file names and claimed MIME types are not trusted. HEIF and AVIF are
  /// told apart by the brands of their `ftyp` box.
  ///
  /// ```swift
  /// ImageFormat.sniff([0xFF, 0xD8, 0xFF, 0xE0])   // .jpeg
  /// ```
  public static func sniff(_ head: [UInt8]) -> ImageFormat? {
    func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
      head.count >= offset + magic.count && Array(head[offset..<offset + magic.count]) == magic
    }
    func ascii(_ text: String, at offset: Int = 0) -> Bool { starts(Array(text.utf8), at: offset) }

    // SOI alone: libjpeg accepts files whose next marker is damaged, and the corpus has such files.
    if starts([0xFF, 0xD8]) { return .jpeg }
    if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
    if ascii("GIF87a") || ascii("GIF89a") { return .gif }
    if ascii("RIFF"), ascii("WEBP", at: 8) { return .webp }
    if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A]) || starts([0x49, 0x49, 0x2B, 0x00])
      || starts([0x4D, 0x4D, 0x00, 0x2B])
    {
      return .tiff
    }
    if ascii("ftyp", at: 4) { return isoBrand(head) }
    if starts([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) || starts([0xFF, 0x4F, 0xFF, 0x51]) { return .jpeg2000 }
    if starts([0xFF, 0x0A]) || starts([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) { return .jpegxl }
    if ascii("BM") && head.count >= 14 { return .bmp }
    if ascii("%PDF") { return .pdf }
    if ascii("8BPS") { return .psd }
    if ascii("qoif") { return .qoi }
    if starts([0x00, 0x00, 0x01, 0x00]) { return .ico }
    if starts([0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1]) { return .ole2 }
    if starts([0x1F, 0x8B]) { return .gzip }
    if head.count >= 2, head[0] == UInt8(ascii: "P"), (UInt8(ascii: "1")...UInt8(ascii: "7")).contains(head[1]) { return .pnm }
    let text = String(decoding: head.prefix(256), as: UTF8.self).lowercased()
    if text.contains("<svg") || (text.hasPrefix("<?xml") && text.contains("svg")) { return .svg }
    return nil
  }

  /// HEIF or AVIF from the major and compatible brands of an ISO-BMFF `ftyp` box.
  private static func isoBrand(_ head: [UInt8]) -> ImageFormat? {
    guard head.count >= 12 else { return nil }
    let size = head[0..<4].reduce(0) { $0 << 8 | Int($1) }
    var brands: [String] = []
    let end = min(head.count, max(16, min(size, 256)))
    var offset = 8
    while offset + 4 <= end {
      if offset != 12 { brands.append(String(decoding: head[offset..<offset + 4], as: UTF8.self)) }
      offset += 4
    }
    if brands.contains(where: { $0 == "avif" || $0 == "avis" }) { return .avif }
    if brands.contains(where: { ["heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1"].contains($0) }) { return .heif }
    return nil
  }
}

extension ImageFormat {
  /// The largest image size a HEIF/AVIF file declares: in any `ispe` (image spatial extents)
  /// box in its first 256 KiB, and in its structure (`HEIFDeclaration`: `ispe` properties and
  /// the AV1 sequence headers its decoder will be handed).
  ///
  /// libheif refuses images over its own limit with an error whose text is the only way to tell
  /// it from damage, and it never looks at the sequence header; checking the declared size first
  /// makes "too large" deterministic and stops before anything is allocated.
  public static func declaredHEIFSize(_ bytes: ImageBytes) -> (width: Int, height: Int)? {
    declaredHEIFSize(bytes, declaration: HEIFDeclaration(bytes))
  }

  /// ``declaredHEIFSize(_:)`` with the file's `HEIFDeclaration` already read.
  package static func declaredHEIFSize(_ bytes: ImageBytes, declaration: HEIFDeclaration?) -> (width: Int, height: Int)? {
    let scanned = scannedISPESize(bytes)
    guard let declared = declaration, declared.width > 0, declared.height > 0 else { return scanned }
    guard let scanned else { return (declared.width, declared.height) }
    let declaredArea = UInt64(declared.width) * UInt64(declared.height)
    return UInt64(scanned.width) * UInt64(scanned.height) > declaredArea ? scanned : (declared.width, declared.height)
  }

  /// The largest `ispe` box found by scanning the first 256 KiB byte by byte.
  private static func scannedISPESize(_ bytes: ImageBytes) -> (width: Int, height: Int)? {
    bytes.withUnsafeHead(256 * 1024) { buffer -> (width: Int, height: Int)? in
      let end = buffer.count
      guard end >= 20 else { return nil }
      func uint32(_ offset: Int) -> Int {
        Int(buffer[offset]) << 24 | Int(buffer[offset + 1]) << 16 | Int(buffer[offset + 2]) << 8 | Int(buffer[offset + 3])
      }
      // Two 32-bit sides multiply past Int.max (found by fuzzing): compare their product unsigned.
      func area(_ size: (width: Int, height: Int)) -> UInt64 { UInt64(size.width) * UInt64(size.height) }
      var largest: (width: Int, height: Int)?
      var index = 4
      // An ispe box: size(4) "ispe" version+flags(4) width(4) height(4).
      while index + 16 <= end {
        if buffer[index] == 0x69, buffer[index + 1] == 0x73, buffer[index + 2] == 0x70, buffer[index + 3] == 0x65,
          uint32(index - 4) == 20
        {
          let width = uint32(index + 8)
          let height = uint32(index + 12)
          if width > 0, height > 0, area((width, height)) > largest.map(area) ?? 0 { largest = (width, height) }
          index += 16
        } else {
          index += 1
        }
      }
      return largest
    }
  }
}

extension ImageFormat {
  /// The start-of-frame marker of a JPEG (0xC0…0xCF, not 0xC4/0xC8/0xCC), found by walking its
  /// segments up to the first scan; `nil` when there is none before the data ends.
  public static func jpegFrameMarker(_ bytes: ImageBytes) -> UInt8? { JPEGFrame(bytes)?.marker }

  /// Whether a JPEG frame marker is a coding process libjpeg cannot decode: lossless (SOF3, SOF11)
  /// and hierarchical (SOF5–7, SOF13–15).
  public static func isUnsupportedJPEGProcess(_ marker: UInt8) -> Bool {
    [0xC3, 0xC5, 0xC6, 0xC7, 0xCB, 0xCD, 0xCE, 0xCF].contains(marker)
  }
}
