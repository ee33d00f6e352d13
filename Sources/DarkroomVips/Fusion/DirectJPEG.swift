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
  /// The most bytes a direct decode holds: 4 MiB (about 1,180×1,180 RGB). A larger reduced
  /// image streams through libvips' loader, which holds only strips: for a 10000×10000 photo
  /// fitted to 300×300 that is 3 MB less at 3 % more time (the whole image decoded at 1/8 is
  /// 4.7 MB).
  package static let maxBytes = 4 << 20

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

  /// The fewest pixels a side may have for its partial last pixel to stay (below, it is cropped).
  package static let minSideKeepingEdge = 64

  /// `image` (decoded at `eighths`/8 from `width`×`height`) ready to resample, and the extent its
  /// pixels cover. libjpeg rounds the scaled size up: the last column and row stand for the
  /// image's last few pixels mixed with the encoder's padding. On a large image they stay, and the
  /// resample scales from the true extent (`width × M/8`), which lands where a full-size resample
  /// would (cropping them as libvips' loader does shifts the picture by up to half a pixel:
  /// 0.01 less SSIM on case B). Before a relative crop, or on a thin image, where one partial
  /// pixel is much of what is left, they are cropped off.
  package static func prepared(_ image: VipsImage, width: Int, height: Int, eighths: Int, cropping: Bool) throws(PipelineError)
    -> (image: VipsImage, extent: (width: Double, height: Double))
  {
    let extent = Self.extent(width: width, height: height, eighths: eighths)
    let whole = (width: max(1, width * eighths / 8), height: max(1, height * eighths / 8))
    if !cropping, min(image.width, image.height) >= minSideKeepingEdge { return (image, extent) }
    if image.width == whole.width, image.height == whole.height {
      return (image, (Double(whole.width), Double(whole.height)))
    }
    let cropped = try image.cropped(x: 0, y: 0, width: whole.width, height: whole.height)
    return (cropped, (Double(whole.width), Double(whole.height)))
  }

  /// Decodes `input` at `eighths`/8, or `nil` when the direct path declines the file.
  package static func load(_ input: FetchedData, header: VipsImage, eighths: Int) -> VipsImage? {
    decode(input) { buffer, count, descriptor, length, out in
      dr_jpeg_load_scaled(buffer, count, descriptor, length, Int32(eighths), header.pointer, maxBytes, out)
    }.image
  }

  /// What a direct decode that reduces rows gave: its `Value` (the image, or the image with what
  /// the caller knows of it), or why not.
  package enum Outcome<Value> {
    case decoded(Value)
    /// Not taken (the kernel, the colour space, the size): the whole decode or libvips' loader may
    /// take the file.
    case declined
    /// libjpeg warned or failed (a damaged or short file), or the run was stopped: a whole direct
    /// decode would fail the same way, and libvips' loader reports what is wrong.
    case failed

    /// The value, when there is one.
    package var decoded: Value? {
      if case .decoded(let value) = self { value } else { nil }
    }

    /// The outcome with `transform` applied to its value.
    package func map<Other>(_ transform: (Value) -> Other) -> Outcome<Other> {
      switch self {
      case .decoded(let value): .decoded(transform(value))
      case .declined: .declined
      case .failed: .failed
      }
    }
  }

  /// The extent the pixels of a `width`×`height` JPEG decoded at `eighths`/8 cover: libjpeg rounds
  /// the scaled size up, so the last row and column stand for less than a pixel.
  package static func extent(width: Int, height: Int, eighths: Int) -> (width: Double, height: Double) {
    (Double(width * eighths) / 8, Double(height * eighths) / 8)
  }

  /// Decodes `input` at `eighths`/8 with its rows reduced by `vertical` (below 1) as they come,
  /// as ``VipsImage/resized(horizontal:vertical:kernel:)`` reduces them (the same bytes).
  ///
  /// The image is as wide as the decode and as tall as the reduce makes it: the decode is never
  /// held whole, only a window of the kernel's height. A 10000×10000 photo fitted to 300×300 is
  /// decoded at 1/8 into 1,250×300 pixels (1.1 MB) instead of streaming 1,250×1,250 through
  /// libvips' loader and its line caches.
  package static func loadReduced(
    _ input: FetchedData, header: VipsImage, eighths: Int, vertical: Double, kernel: ResizeKernel
  ) -> Outcome<VipsImage> {
    let (status, image) = decode(input) { buffer, count, descriptor, length, out in
      dr_jpeg_load_reduced(
        buffer, count, descriptor, length, Int32(eighths), header.pointer, vertical, kernel.vipsKernel, maxBytes, out)
    }
    if let image { return .decoded(image) }
    return status == 2 ? .failed : .declined
  }

  /// Runs `decoder` on the file's descriptor when it streams from disk, else on its bytes: its
  /// status, and the image when it made one.
  private static func decode(
    _ input: FetchedData,
    _ decoder: (UnsafeRawPointer?, Int, Int32, Int, UnsafeMutablePointer<UnsafeMutablePointer<CVips.VipsImage>?>) -> Int32
  ) -> (status: Int32, image: VipsImage?) {
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    let status: Int32
    if let descriptor = input.bytes.streamingDescriptor {
      status = decoder(nil, 0, descriptor, input.bytes.count, &out)
    } else {
      status = input.bytes.withUnsafeBytes { bytes in decoder(bytes.baseAddress, bytes.count, -1, 0, &out) }
    }
    guard status == 0, let out else { return (status, nil) }
    return (status, VipsImage(taking: out, keepAlive: []))
  }
}

extension VipsImage {
  /// Marks the image as a loader's sequential one (`vips-sequential`), as the images the row
  /// reduce stands in for are: libvips then reduces it in regions of ten rows, and
  /// ``reducedByRows(vertical:kernel:)`` takes it.
  package func markSequential() { dr_mark(pointer, "vips-sequential") }

  /// The image's rows reduced by `vertical` (below 1) one at a time, as
  /// ``DirectJPEG/loadReduced(_:header:eighths:vertical:kernel:)`` reduces a decode's rows (for
  /// comparison with ``resized(horizontal:vertical:kernel:)``: the same bytes), or `nil` when the
  /// row reduce declines (not 8-bit, not marked sequential, another kernel, libvips without
  /// liborc).
  package func reducedByRows(vertical: Double, kernel: ResizeKernel) throws(PipelineError) -> VipsImage? {
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    let status = dr_reducev_rows(pointer, vertical, kernel.vipsKernel, &out)
    if status == 1 { return nil }
    guard status == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(.processingFailed, "reducing rows failed: \(cause.text)", cause: cause)
    }
    return VipsImage(taking: out, keepAlive: [])
  }

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
