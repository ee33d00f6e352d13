import CVips
import CVipsShim
import DarkroomCore

/// The `decode` stage: turns fetched bytes into an image, trusting only known formats.
///
/// The format is sniffed from the magic bytes and only that format's libvips loader runs —
/// never libvips' generic detection, never its untrusted loaders (ImageMagick, PDF, SVG, JPEG
/// 2000…). Trusted: JPEG, PNG, GIF, WebP, TIFF, HEIF/AVIF. An animated GIF or WebP keeps every
/// frame (``animated``), as a strip of frames that later stages treat frame by frame. The declared size is
/// checked against ``maxPixels`` from the header, before any pixel is decoded.
///
/// Strict by default: truncated or corrupt pixel data fails the operation with `corruptImage`
/// (pixels are decoded lazily, so that failure may surface in a later stage). With ``lenient``
/// the decoder decodes eagerly; when strict decoding fails it accepts what the loader could read
/// and marks the image `partial`.
///
/// EXIF orientation is applied (``autoRotate``) and embedded ICC profiles converted to sRGB
/// (``convertToSRGB``) by default.
///
/// ```swift
/// let decode = ImageDecoder(maxPixels: 50_000_000)
/// let image = try await decode.process(fetched, context: StageContext())
/// ```
public struct ImageDecoder: Stage {
  public static let kind = "decode"

  public var maxPixels: Int
  public var autoRotate: Bool
  public var convertToSRGB: Bool
  public var lenient: Bool
  /// Share one decoded, in-memory image between operations decoding the same bytes at the same
  /// time (`LiveImages`); turns off shrink-on-load fusion for this stage.
  public var share: Bool
  /// Decode every frame of an animated GIF or WebP (a strip of frames that later stages treat
  /// frame by frame); when false, only the first frame is taken and a note says so.
  public var animated: Bool
  /// The most frames an animation may have; more is `imageTooLarge` (decode with `animated` off
  /// to take the first frame of a longer one).
  public var maxFrames: Int

  /// The default ``maxFrames``: every frame costs each stage a fixed amount beside its pixels
  /// (about 10 ms and 100 KB a stage for a tiny frame), so the count is bounded on its own.
  public static let defaultMaxFrames = 256

  public static let defaultMaxPixels = 100_000_000

  /// The longest side libjpeg decodes (`JPEG_MAX_DIMENSION`); a longer one is `imageTooLarge`.
  public static let maxJPEGSide = 65_500

  /// The most bands (channels) per pixel a decoded image may have: grey, RGB, CMYK, each with
  /// alpha, and a few extra TIFF samples fit; a header declaring hundreds is refused as
  /// `unsupportedFormat` before any strip is read, since memory grows with bands × width.
  public static let maxBands = 8

  public init(
    maxPixels: Int = ImageDecoder.defaultMaxPixels, autoRotate: Bool = true, convertToSRGB: Bool = true, lenient: Bool = false,
    share: Bool = false, animated: Bool = true, maxFrames: Int = ImageDecoder.defaultMaxFrames
  ) {
    self.animated = animated
    self.maxFrames = maxFrames
    self.maxPixels = maxPixels
    self.autoRotate = autoRotate
    self.convertToSRGB = convertToSRGB
    self.lenient = lenient
    self.share = share
  }

  public var identifier: String {
    "decode(maxPixels=\(maxPixels),autoRotate=\(autoRotate),srgb=\(convertToSRGB),lenient=\(lenient)\(share ? ",share" : "")"
      + (animated ? (maxFrames == ImageDecoder.defaultMaxFrames ? "" : ",maxFrames=\(maxFrames)") : ",still") + ")"
  }

  public func process(_ input: FetchedData, context: StageContext) async throws -> DecodedImage {
    guard share else {
      let decoded = try await VipsKillScope.blocking(context) { try decode(input) }
      noteFirstFrame(of: decoded, context: context)
      return decoded
    }
    let key = LiveImages.Key(bytes: input.bytes, decoder: identifier)
    let live = try await LiveImages.shared.object(for: key) { [self] in
      try await VipsKillScope.blocking(context) {
        var decoded = try decode(input)
        decoded.image = try decoded.image.materialized()
        return LiveDecodedImage(decoded)
      }
    }
    var decoded = live.decoded
    decoded.source = input.source
    decoded.liveImage = live
    noteFirstFrame(of: decoded, context: context)
    return decoded
  }

  /// With ``animated`` off, a note says that an animation lost its other frames.
  func noteFirstFrame(of decoded: DecodedImage, context: StageContext) {
    guard !animated, decoded.sourceFrames > 1 else { return }
    context.log("the \(decoded.sourceFormat) has \(decoded.sourceFrames) frames; only the first is taken (\"animated\": false)")
  }

  /// Decodes synchronously (call from a blocking-pool thread).
  public func decode(_ input: FetchedData) throws(PipelineError) -> DecodedImage {
    let header = try loadHeader(input)
    return try finish(
      header.image, format: header.format, input: input, width: header.image.width, height: header.image.frameHeight)
  }

  /// The sniffed format and the header-only image, after the pixel limit check.
  func loadHeader(_ input: FetchedData) throws(PipelineError) -> (format: ImageFormat, image: VipsImage) {
    try Vips.initialize()
    let format = try ImageDecoder.trustedFormat(of: input)
    let jpeg = format == .jpeg ? JPEGFrame(input.bytes) : nil
    if let marker = jpeg?.marker, ImageFormat.isUnsupportedJPEGProcess(marker) {
      throw PipelineError(
        .unsupportedFormat,
        "this JPEG uses a coding process the decoder does not support (lossless or hierarchical, SOF marker 0x\(String(marker, radix: 16)))",
        source: input.source.description)
    }
    let heif = format == .heif || format == .avif ? HEIFDeclaration(input.bytes) : nil
    if heif?.exceededBudget == true {
      throw PipelineError(
        .unsupportedFormat,
        "the \(format) file holds more structure than any real image (over \(HEIFDeclaration.limitsDescription)); it is not decoded",
        source: input.source.description)
    }
    if format == .heif || format == .avif, let declared = ImageFormat.declaredHEIFSize(input.bytes, declaration: heif) {
      try checkPixelLimit(width: declared.width, height: declared.height, format: format, source: input.source)
    }
    if let frame = jpeg, max(frame.width, frame.height) > ImageDecoder.maxJPEGSide {
      throw PipelineError(
        .imageTooLarge,
        "the JPEG declares \(frame.width)×\(frame.height) pixels; libjpeg decodes sides of at most \(ImageDecoder.maxJPEGSide) pixels",
        source: input.source.description)
    }
    try guardHeader(format, of: input)
    let image: VipsImage
    do {
      image = try ImageDecoder.load(format, from: input.bytes, source: input.source)
    } catch  where lenient && error.code == .corruptImage && (format == .gif || format == .webp) {
      // GIF and WebP loaders read every frame's header first: damage there fails the header, so
      // a lenient decoder reads it again without a failure threshold (the image is then partial).
      image = try ImageDecoder.load(format, from: input.bytes, failOn: VIPS_FAIL_ON_NONE, source: input.source)
      dr_mark(image.pointer, ImageDecoder.partialMark)
    }
    try checkPixelLimit(width: image.width, height: image.height, format: format, source: input.source)
    if image.bands > ImageDecoder.maxBands {
      // Found by fuzzing: a 173-byte TIFF declaring 65535×900 pixels (inside maxPixels) with 900
      // samples per pixel made libvips allocate gigabytes for its first strip.
      throw PipelineError(
        .unsupportedFormat,
        "the \(format) image declares \(image.bands) bands (channels) per pixel; images of at most \(ImageDecoder.maxBands) are decoded",
        source: input.source.description)
    }
    try guardHeldImage(format, image: image, heif: heif, jpeg: jpeg, input: input)
    if animated, format == .gif || format == .webp, image.declaredPages > 1 {
      let frames = image.declaredPages
      do {
        return (format, try loadAnimation(format, frames: frames, width: image.width, height: image.height, input: input))
      } catch  where lenient && error.code == .corruptImage {
        let relaxed = try loadAnimation(
          format, frames: frames, width: image.width, height: image.height, input: input, failOn: VIPS_FAIL_ON_NONE)
        dr_mark(relaxed.pointer, ImageDecoder.partialMark)
        return (format, relaxed)
      }
    }
    if format == .tiff, dr_tiff_is_tiled_planar(input.bytes.baseAddress, input.bytes.count) != 0 {
      return (format, try ImageDecoder.loadPlanarTIFF(input, maxPixels: maxPixels))
    }
    return (format, image)
  }

  /// The mark a lenient decoder leaves on an image it had to read without a failure threshold.
  static let partialMark = "darkroom-partial"

  /// The tallest strip of frames libvips addresses (`VIPS_MAX_COORD`).
  static let maxStripHeight = 10_000_000

  /// Every frame of an animated GIF or WebP, after checking the frame count against
  /// ``maxFrames`` and canvas × frames against ``maxPixels``.
  func loadAnimation(
    _ format: ImageFormat, frames: Int, width: Int, height: Int, input: FetchedData, failOn: VipsFailOn? = nil
  ) throws(PipelineError) -> VipsImage {
    let source = input.source.description
    guard frames <= maxFrames else {
      throw PipelineError(
        .imageTooLarge,
        "the \(format) has \(frames) frames, over the limit of \(maxFrames) (maxFrames); raise maxFrames, "
          + "or decode with \"animated\": false to take the first frame",
        source: source)
    }
    let (area, overflow) = width.multipliedReportingOverflow(by: height)
    let (pixels, overflow2) = area.multipliedReportingOverflow(by: frames)
    guard !overflow, !overflow2, pixels <= maxPixels else {
      throw PipelineError(
        .imageTooLarge,
        "the \(format)'s \(frames) frames of \(width)×\(height) pixels make "
          + "\(overflow || overflow2 ? "more than \(Int.max)" : String(pixels)) pixels, over the limit of \(maxPixels) (maxPixels, "
          + "which counts every frame); raise maxPixels, or decode with \"animated\": false to take the first frame",
        source: source)
    }
    let (rows, tooMany) = height.multipliedReportingOverflow(by: frames)
    guard !tooMany, rows <= Self.maxStripHeight else {
      throw PipelineError(
        .imageTooLarge,
        "the \(format)'s \(frames) frames of \(width)×\(height) pixels stack \(height) × \(frames) rows high, over the "
          + "\(Self.maxStripHeight) rows libvips addresses; decode with \"animated\": false to take the first frame",
        source: source)
    }
    guard let code = format.shimFormat else {
      throw PipelineError(.unsupportedFormat, "\(format) images are not accepted", source: source)
    }
    var out: UnsafeMutablePointer<CVips.VipsImage>?
    Vips.takeWarning()
    let status = input.bytes.withUnsafeBytes { raw in
      dr_load_animation(code, raw.baseAddress, raw.count, failOn ?? ImageDecoder.strictFailOn(for: format), &out)
    }
    guard status == 0, let out else {
      let cause = Vips.captureError()
      throw PipelineError(
        .corruptImage, "the \(format) animation is damaged: \(cause.text)", source: source, cause: cause)
    }
    let strip = VipsImage(taking: out, keepAlive: [input.bytes])
    guard strip.isAnimated, strip.frameCount == frames, strip.width == width, strip.frameHeight == height else {
      throw PipelineError(
        .corruptImage,
        "the \(format) animation's frames do not add up: \(frames) frames of \(width)×\(height) declared, "
          + "\(strip.frameCount) of \(strip.width)×\(strip.frameHeight) loaded",
        source: source)
    }
    return strip
  }

  /// Throws `imageTooLarge` when a declared size is over ``maxPixels``.
  func checkPixelLimit(width: Int, height: Int, format: ImageFormat, source: ImageSource) throws(PipelineError) {
    let pixels = width.multipliedReportingOverflow(by: height)
    guard pixels.overflow || pixels.partialValue > maxPixels else { return }
    throw PipelineError(
      .imageTooLarge,
      "the \(format) image declares \(width)×\(height) pixels, over the limit of \(maxPixels) (maxPixels); raise maxPixels to accept it",
      source: source.description)
  }

  /// Applies the lenient fallback, colour conversion and (unless `rotate` is false) the
  /// orientation to a freshly loaded image.
  func finish(
    _ loaded: VipsImage, format: ImageFormat, input: FetchedData, width: Int, height: Int, shrink: Int = 1, scale: Double = 1,
    rotate: Bool = true
  ) throws(PipelineError) -> DecodedImage {
    var image = loaded
    var partial = dr_marked(loaded.pointer, ImageDecoder.partialMark) != 0
    if lenient {
      do {
        image = try image.materialized()
      } catch  where error.code == .corruptImage {
        if loaded.isAnimated {
          // The frames that decode, up to the first that does not.
          image = try loadAnimation(
            format, frames: loaded.frameCount, width: loaded.width, height: loaded.frameHeight, input: input,
            failOn: VIPS_FAIL_ON_NONE
          ).leadingDecodableFrames()
        } else {
          image = try ImageDecoder.load(
            format, from: input.bytes, failOn: VIPS_FAIL_ON_NONE, source: input.source, shrink: shrink, scale: scale
          ).materialized()
        }
        partial = true
      }
    }
    if convertToSRGB { image = try image.convertedToSRGB() }
    if rotate, autoRotate, image.orientation != 1 {
      image = try image.framewise("turning upright") { frame throws(PipelineError) in
        try ImageDecoder.upright(frame, materialized: lenient)
      }
    }
    var decoded = DecodedImage(
      source: input.source, image: image, sourceFormat: format, sourceWidth: width, sourceHeight: height, partial: partial)
    decoded.sourceFrames = format == .gif || format == .webp ? loaded.declaredPages : 1
    if format == .gif { decoded.gifSource = input.bytes }
    return decoded
  }

  /// Applies the EXIF orientation. Every turn or vertical flip reads pixels out of the order a
  /// sequential loader delivers them, so the image is decoded into memory first (bounded by
  /// maxPixels). Pipelines that resize avoid this: the fused decoder turns the small result.
  static func upright(_ image: VipsImage, materialized: Bool) throws(PipelineError) -> VipsImage {
    let orientation = image.orientation
    guard orientation != 1 else { return image }
    let source = materialized ? image : try image.materialized()
    return try source.autorotated()
  }
}
