import CVips
import CVipsShim
import DarkroomCore

/// The fused decoder's JPEG path: libjpeg-turbo's DCT scaling at any eighth, straight into
/// memory (decision 0014).
///
/// libvips' JPEG loader scales by 1/2, 1/4 or 1/8 only, so sharp's rule keeps up to twice the
/// pixels the output needs. libjpeg-turbo scales by any M/8: the decode stops at the smallest
/// eighth that still covers the output, and the resample that follows reduces by less than 2×.
/// A clean grey, RGB or YCbCr JPEG is decoded on the calling thread into a memory image that
/// carries the header's metadata; anything else (a warning, CMYK, a short file) is declined and
/// loaded by libvips as before, which then reports what was wrong.
enum DirectJPEGDecode {
  /// The most bytes a direct decode holds: 32 MiB (about 3,300×3,300 RGB). A larger reduced
  /// image streams through libvips' loader, which holds only strips.
  static let maxBytes = 32 << 20

  /// The smallest eighth `M` (1…8) for which `width`×`height` scaled by M/8 still covers
  /// `target` (both upright or both stored).
  static func eighths(width: Int, height: Int, covering target: (width: Int, height: Int)) -> Int {
    for eighths in 1...8
    where Double(width) * Double(eighths) >= Double(target.width) * 8
      && Double(height) * Double(eighths) >= Double(target.height) * 8
    {
      return eighths
    }
    return 8
  }

  /// Decodes `input` at `eighths`/8, or `nil` when the direct path declines the file.
  static func load(_ input: FetchedData, header: VipsImage, eighths: Int) -> VipsImage? {
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
    return VipsImage(taking: out, keepAlive: [])
  }
}
