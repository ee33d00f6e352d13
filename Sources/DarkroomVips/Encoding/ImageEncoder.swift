import CVips
import CVipsShim
import DarkroomCore

/// The `encode` stage: turns an image into the bytes of a JPEG, PNG, WebP, AVIF or GIF file.
///
/// Metadata (EXIF, XMP, ICC) is stripped unless ``keepMetadata`` is set, or a ``MetadataKeeper``
/// earlier in the pipeline chose what to keep. Formats without alpha (JPEG) get transparent areas
/// flattened onto ``background``. Encoding is where a lazily decoded
/// image is actually read, so damaged pixel data found here fails with `corruptImage`. A cancelled
/// operation stops libvips mid-image.
///
/// A GIF decoded from a GIF, and since only moved, scaled or cut (crop, resize, rotate, flip,
/// trim), is mapped onto the source's own colour tables, as gifsicle does, instead of quantised
/// again; any stage that makes new colours brings libvips' quantiser back (`effort` applies).
///
/// ```swift
/// let encode = ImageEncoder(.webp(quality: 80))
/// let encoded = try await encode.process(image, context: StageContext())
/// ```
public struct ImageEncoder: Stage {
  public static let kind = "encode"

  public var format: EncodeFormat
  public var keepMetadata: Bool
  /// Background for flattening alpha (RGB, 0…255).
  public var background: [Double]

  public init(_ format: EncodeFormat = .jpeg(), keepMetadata: Bool = false, background: [Double] = [255, 255, 255]) {
    self.format = format
    self.keepMetadata = keepMetadata
    self.background = background
  }

  /// Every setting that changes the bytes, the flattening colour included (two encoders that
  /// differ only in it must not share a cached or in-flight value).
  public var identifier: String {
    "encode(\(format.identifier),keepMetadata=\(keepMetadata),background=\(background.map { String($0) }.joined(separator: "/")))"
  }

  public func process(_ input: DecodedImage, context: StageContext) async throws -> EncodedImage {
    try await VipsKillScope.blocking(context, inputs: [input.image]) { try encode(input) }
  }

  /// The longest side a JPEG can have: its header stores width and height in 16 bits.
  public static let maxJPEGSide = 65_535

  /// The longest side a WebP can have (14 bits in its header).
  public static let maxWebPSide = 16_383

  /// Throws `encodeFailed` naming the format's side limit and what to do, before libvips is asked
  /// (its own message, "image too large" or a bare libjpeg error, does not say which side or why).
  static func checkSides(width: Int, height: Int, limit: Int, format: ImageFormat, source: ImageSource) throws(PipelineError) {
    guard width > limit || height > limit else { return }
    throw PipelineError(
      .encodeFailed,
      "the image is \(width)×\(height) pixels, but a \(format) side can be at most \(limit) pixels: "
        + "add a resize stage that makes the longer side at most \(limit), or encode to another format (PNG has no such limit)",
      source: source.description)
  }

  /// The most pixels an AVIF encode may have: 16,777,216 (4096×4096). libheif's AV1 encoder
  /// never looks at libvips' kill flag, so once started an AVIF encode runs to its end: the time
  /// limit can abandon the operation (`PipelineExecutor.abandonAfter`) but not stop the thread,
  /// which keeps its CPU and memory. Measured on this 2-core machine at effort 4: 12 Mpx of noise
  /// took 24 s (13 s of CPU) and 300 MB; the cap keeps the worst case well inside the default
  /// 60 s limit.
  public static let maxAVIFPixels = 16_777_216

  /// Throws `encodeFailed` when an AVIF encode would be larger than ``maxAVIFPixels``.
  static func checkAVIFPixels(width: Int, height: Int, source: ImageSource) throws(PipelineError) {
    let pixels = width.multipliedReportingOverflow(by: height)
    guard pixels.overflow || pixels.partialValue > maxAVIFPixels else { return }
    throw PipelineError(
      .encodeFailed,
      "the image is \(width)×\(height) pixels; AVIF encodes of at most \(maxAVIFPixels) pixels are made, since an AVIF "
        + "encode cannot be stopped once started: add a resize stage before encode, or encode to WebP or JPEG",
      source: source.description)
  }

  /// Encodes synchronously (call from a blocking-pool thread).
  public func encode(_ input: DecodedImage) throws(PipelineError) -> EncodedImage {
    let concrete = format.resolved(for: input.sourceFormat, hasAlpha: input.image.hasAlpha, animated: input.image.isAnimated)
    // A `metadata` stage chose what the image keeps: what it left is written.
    let strip: Int32 = keepMetadata || input.image.metadataPruned ? 0 : 1
    // libvips 8.14's WebP saver writes EXIF, XMP and ICC even with `strip` set: for WebP the
    // fields go first (and the chunks after, below). The other savers strip as asked.
    var image = input.image
    if strip == 1, case .webp = concrete {
      image = try image.derive("removing metadata") { dr_prune_metadata($0, 0, 0, $1) }
    }
    // GIF and WebP keep an animation's frames, delays and loop count; the other formats hold one
    // image: the first frame.
    switch concrete {
    case .gif, .webp:
      // The saver may rewrite the delays in place (WebP's does): on a copy of their own, so that
      // variants sharing this decode do not see it.
      if image.isAnimated { image = try image.derive("copying the frame delays") { dr_with_own_delays($0, $1) } }
    default: image = try image.firstFrame()
    }
    var buffer: UnsafeMutableRawPointer?
    var length = 0
    let status: Int32
    let written: ImageFormat
    switch concrete {
    case .jpeg(let quality, let progressive):
      try ImageEncoder.checkSides(
        width: image.width, height: image.height, limit: ImageEncoder.maxJPEGSide, format: .jpeg, source: input.source)
      // To 8 bits first, so the 0…255 background means the same for 16-bit and float sources.
      image = try image.eightBitSRGB().flattened(background: background)
      // Without metadata, straight through libjpeg on this thread (the same bytes as libvips'
      // saver, without its thread pool; decision 0014); otherwise, or when declined, libvips'.
      var direct: Int32 = 1
      if strip == 1 { direct = dr_jpeg_save_direct(image.pointer, Int32(quality), progressive ? 1 : 0, &buffer, &length) }
      status =
        direct == 1 ? dr_jpegsave_buffer(image.pointer, Int32(quality), progressive ? 1 : 0, strip, &buffer, &length) : direct
      written = .jpeg
    case .png(let compression, let palette, let quality):
      if palette { image = try image.eightBitSRGB() }
      status = dr_pngsave_buffer(image.pointer, Int32(compression), palette ? 1 : 0, Int32(quality), strip, &buffer, &length)
      written = .png
    case .webp(let quality, let lossless, let effort):
      try ImageEncoder.checkSides(
        width: image.width, height: image.frameHeight, limit: ImageEncoder.maxWebPSide, format: .webp, source: input.source)
      image = try image.eightBitSRGB(keepGrey: false)
      status = dr_webpsave_buffer(image.pointer, Int32(quality), lossless ? 1 : 0, Int32(effort), strip, &buffer, &length)
      written = .webp
    case .avif(let quality, let lossless, let effort):
      try ImageEncoder.checkAVIFPixels(width: image.width, height: image.height, source: input.source)
      image = try image.eightBitSRGB(keepGrey: false)
      status = dr_avifsave_buffer(image.pointer, Int32(quality), Int32(effort), lossless ? 1 : 0, strip, &buffer, &length)
      written = .avif
    case .gif(let effort):
      image = try image.eightBitSRGB(keepGrey: false)
      // A GIF source that was only moved, scaled or cut keeps its own colour tables.
      if let source = input.gifSource.flatMap(GIFColourTables.init),
        let plan = GIFTablePlan(
          source: source, frames: image.frameCount, hasAlpha: image.hasAlpha, canvasWidth: input.sourceWidth,
          canvasHeight: input.sourceHeight)
      {
        (status, buffer, length) = plan.save(image)
      } else {
        status = dr_gifsave_buffer(image.pointer, Int32(effort), strip, &buffer, &length)
      }
      written = .gif
    case .auto, .jpegOrPNG, .stillOrAnimated:
      throw PipelineError(.encodeFailed, "no output format could be chosen for a \(input.sourceFormat) source")
    }
    guard status == 0, let buffer else {
      let cause = Vips.captureError()
      // Savers rarely fail on their own; a failure while pixels are pulled through is the
      // source's damaged data (libvips' JPEG reader sometimes leaves no message at all).
      if !Vips.isSaverFailure(cause) {
        throw PipelineError(
          .corruptImage,
          "the \(input.sourceFormat) data is damaged or truncated: \(cause.text) (decode with \"lenient\": true to accept partial images)",
          source: input.source.description, cause: cause)
      }
      throw PipelineError(
        .encodeFailed, "encoding \(written) failed: \(cause.text)", source: input.source.description, cause: cause)
    }
    defer { g_free(buffer) }
    let saved = UnsafeRawBufferPointer(start: buffer, count: length)
    let bytes = written == .webp && strip == 1 ? ImageBytes(WebPMetadata.stripped(Array(saved))) : ImageBytes(saved)
    return EncodedImage(
      source: input.source, bytes: bytes, format: written, width: image.width, height: image.frameHeight, partial: input.partial)
  }
}
