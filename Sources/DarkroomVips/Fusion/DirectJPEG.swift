import CVips
import CVipsShim
import DarkroomCore

/// JPEG straight through libjpeg-turbo where libvips' general machinery costs more than the
/// work (decision 0014): the fused decoder's scaled decode, and the encoder's JPEG without
/// metadata (``VipsImage/jpegBytes(quality:progressive:direct:)``).
///
/// The decode: libjpeg-turbo's DCT scaling at any eighth, straight into memory.
///
/// libvips' JPEG loader scales by 1/2, 1/4 or 1/8 only, so sharp's rule keeps up to twice the
/// pixels the output needs. libjpeg-turbo scales by any M/8: the decode stops at the smallest
/// eighth that still covers the output, and the resample that follows reduces by less than 2×.
/// A clean grey, RGB or YCbCr JPEG is decoded on the calling thread into a memory image that
/// carries the header's metadata; anything else (a warning, CMYK, a short file) is declined and
/// loaded by libvips as before, which then reports what was wrong.
package enum DirectJPEG {
  /// The most bytes a direct decode holds: 32 MiB (about 3,300×3,300 RGB). A larger reduced
  /// image streams through libvips' loader, which holds only strips.
  package static let maxBytes = 32 << 20

  /// The smallest eighth `M` (1…8) for which `width`×`height` scaled by M/8 still covers
  /// `target` (both upright or both stored).
  package static func eighths(width: Int, height: Int, covering target: (width: Int, height: Int)) -> Int {
    for eighths in 1...8
    where Double(width) * Double(eighths) >= Double(target.width) * 8
      && Double(height) * Double(eighths) >= Double(target.height) * 8
    {
      return eighths
    }
    return 8
  }

  /// Decodes `input` at `eighths`/8, or `nil` when the direct path declines the file.
  package static func load(_ input: FetchedData, header: VipsImage, eighths: Int) -> VipsImage? {
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    let status: Int32
    if let descriptor = input.bytes.streamingDescriptor {
      status = dr_jpeg_load_scaled(nil, 0, descriptor, input.bytes.count, Int32(eighths), header.pointer, maxBytes, &out)
    } else {
      status = input.bytes.withUnsafeBytes { bytes in
        dr_jpeg_load_scaled(bytes.baseAddress, bytes.count, -1, 0, Int32(eighths), header.pointer, maxBytes, &out)
      }
    }
    guard status == 0, let out else { return nil }
    let image = VipsImage(taking: out, keepAlive: [])
    // libjpeg rounds the scaled size up: its last column and row stand for the image's last few
    // source pixels mixed with the encoder's padding. Like libvips' loader, keep the whole pixels
    // only (a relative crop of a thin image could otherwise pick the partial edge alone).
    let whole = (width: header.width * eighths / 8, height: header.height * eighths / 8)
    guard whole.width >= 1, whole.height >= 1 else { return nil }
    if image.width == whole.width, image.height == whole.height { return image }
    return try? image.cropped(x: 0, y: 0, width: whole.width, height: whole.height)
  }
}

extension VipsImage {
  /// The image as JPEG without metadata: through libjpeg on this thread (`direct`, as the
  /// encoder writes it; `nil` when that path declines the image: more than 8 bits or other than
  /// 1 or 3 bands, or libvips running more than one thread an image), or through libvips' own
  /// saver with `strip`. The two give the same bytes.
  package func jpegBytes(quality: Int, progressive: Bool = false, direct: Bool) throws(PipelineError) -> [UInt8]? {
    var buffer: UnsafeMutableRawPointer?
    var length = 0
    let status =
      direct
      ? dr_jpeg_save_direct(pointer, Int32(quality), progressive ? 1 : 0, &buffer, &length)
      : dr_jpegsave_buffer(pointer, Int32(quality), progressive ? 1 : 0, 1, &buffer, &length)
    if status == 1 { return nil }
    guard status == 0, let buffer else {
      let cause = Vips.captureError()
      throw PipelineError(.encodeFailed, "encoding jpeg failed: \(cause.text)", cause: cause)
    }
    defer { g_free(buffer) }
    return Array(UnsafeRawBufferPointer(start: buffer, count: length))
  }
}
