import CVips
import CVipsShim
import DarkroomCore

extension VipsImage {
  /// Makes an image from 8-bit pixels, row by row, `bands` bytes per pixel (1 grey, 2 grey+alpha,
  /// 3 RGB, 4 RGBA). The bytes are copied.
  ///
  /// ```swift
  /// let red = try VipsImage.fromPixels([UInt8](repeating: 0, count: 12), width: 2, height: 2, bands: 3)
  /// ```
  public static func fromPixels(_ pixels: [UInt8], width: Int, height: Int, bands: Int) throws(PipelineError) -> VipsImage {
    try Vips.initialize()
    guard width > 0, height > 0, (1...4).contains(bands), pixels.count == width * height * bands else {
      throw PipelineError(
        .invalidInput, "expected \(width)×\(height)×\(bands) = \(width * height * bands) bytes, got \(pixels.count)")
    }
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    let status = pixels.withUnsafeBytes { dr_image_from_pixels($0.baseAddress, Int32(width), Int32(height), Int32(bands), &out) }
    guard status == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "making an image from pixels failed: \(cause.text)", cause: cause)
    }
    return VipsImage(taking: out, keepAlive: [])
  }

  /// Decodes every pixel and returns them as bytes, row by row (8-bit images: one byte per band).
  public func pixelBytes() throws(PipelineError) -> [UInt8] {
    var buffer: UnsafeMutableRawPointer?
    var length = 0
    guard dr_image_to_pixels(pointer, &buffer, &length) == 0, let buffer else {
      let cause = Vips.captureError()
      throw PipelineError(.corruptImage, "reading pixels failed: \(cause.text)", cause: cause)
    }
    defer { g_free(buffer) }
    return Array(UnsafeRawBufferPointer(start: buffer, count: length))
  }

  /// A copy carrying an EXIF orientation tag (1…8), written to EXIF when saved with metadata.
  public func withOrientation(_ orientation: Int) throws(PipelineError) -> VipsImage {
    try derive("setting the orientation") { dr_with_orientation($0, Int32(orientation), $1) }
  }

  /// The pixel at `x`, `y` of an 8-bit image, one value per band (decodes the image).
  public func pixel(x: Int, y: Int) throws(PipelineError) -> [UInt8] {
    let crop = try cropped(x: x, y: y, width: 1, height: 1)
    return try crop.pixelBytes()
  }
}

extension VipsImage {
  /// Wraps 8-bit pixels in place — no copy — as an image; `owner` is kept alive as long as this
  /// image or any image derived from it, so the memory must stay valid and unchanged while
  /// `owner` lives (an image table entry's lease guarantees that).
  ///
  /// ```swift
  /// let image = try VipsImage.wrapping(entry.pixels, width: entry.width, height: entry.height, bands: 3, owner: entry)
  /// ```
  public static func wrapping(
    _ pixels: UnsafeRawBufferPointer, width: Int, height: Int, bands: Int, owner: AnyObject
  ) throws(PipelineError) -> VipsImage {
    try Vips.initialize()
    // Checked before any arithmetic: the sizes come from the caller (a table entry read from disk).
    let limit = Int(Int32.max)
    let rows = width.multipliedReportingOverflow(by: height)
    let bytes = rows.partialValue.multipliedReportingOverflow(by: bands)
    guard (1...limit).contains(width), (1...limit).contains(height), (1...4).contains(bands), !rows.overflow, !bytes.overflow,
      pixels.count == bytes.partialValue, let base = pixels.baseAddress
    else {
      let expected = rows.overflow || bytes.overflow ? "more than fit in memory" : "\(bytes.partialValue) bytes"
      throw PipelineError(.invalidInput, "expected \(width)×\(height)×\(bands) = \(expected), got \(pixels.count)")
    }
    guard let image = dr_image_new_from_memory(base, pixels.count, Int32(width), Int32(height), Int32(bands), VIPS_FORMAT_UCHAR)
    else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "wrapping pixels failed: \(cause.text)", cause: cause)
    }
    // Table pixels are sRGB (or grey) at the usual 72 dpi, as the decoder delivered them.
    image.pointee.Type = bands >= 3 ? VIPS_INTERPRETATION_sRGB : VIPS_INTERPRETATION_B_W
    image.pointee.Xres = 72 / 25.4
    image.pointee.Yres = 72 / 25.4
    return VipsImage(taking: image, keepAlive: [owner])
  }

  /// Whether samples are 8-bit unsigned (what image tables and `pixelBytes()` hold).
  public var isEightBit: Bool { bandFormat == VIPS_FORMAT_UCHAR }
}
