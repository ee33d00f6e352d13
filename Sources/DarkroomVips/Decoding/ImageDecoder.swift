import CVips
import CVipsShim
import DarkroomCore

/// The `decode` stage: turns fetched bytes into an image, trusting only known formats.
///
/// The format is sniffed from the magic bytes and only that format's libvips loader runs —
/// never libvips' generic detection, never its untrusted loaders (ImageMagick, PDF, SVG, JPEG
/// 2000…). Trusted: JPEG, PNG, GIF (first frame), WebP, TIFF, HEIF/AVIF. The declared size is
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

  public static let defaultMaxPixels = 100_000_000

  /// The longest side libjpeg decodes (`JPEG_MAX_DIMENSION`); a longer one is `imageTooLarge`.
  public static let maxJPEGSide = 65_500

  /// The most bands (channels) per pixel a decoded image may have: grey, RGB, CMYK, each with
  /// alpha, and a few extra TIFF samples fit; a header declaring hundreds is refused as
  /// `unsupportedFormat` before any strip is read, since memory grows with bands × width.
  public static let maxBands = 8

  public init(
    maxPixels: Int = ImageDecoder.defaultMaxPixels, autoRotate: Bool = true, convertToSRGB: Bool = true, lenient: Bool = false,
    share: Bool = false
  ) {
    self.maxPixels = maxPixels
    self.autoRotate = autoRotate
    self.convertToSRGB = convertToSRGB
    self.lenient = lenient
    self.share = share
  }

  public var identifier: String {
    "decode(maxPixels=\(maxPixels),autoRotate=\(autoRotate),srgb=\(convertToSRGB),lenient=\(lenient)\(share ? ",share" : ""))"
  }

  public func process(_ input: FetchedData, context: StageContext) async throws -> DecodedImage {
    guard share else { return try await VipsKillScope.blocking(context) { try decode(input) } }
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
    return decoded
  }

  /// Decodes synchronously (call from a blocking-pool thread).
  public func decode(_ input: FetchedData) throws(PipelineError) -> DecodedImage {
    let header = try loadHeader(input)
    return try finish(header.image, format: header.format, input: input, width: header.image.width, height: header.image.height)
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
    let image = try ImageDecoder.load(format, from: input.bytes, source: input.source)
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
    if format == .tiff, dr_tiff_is_tiled_planar(input.bytes.baseAddress, input.bytes.count) != 0 {
      return (format, try ImageDecoder.loadPlanarTIFF(input, maxPixels: maxPixels))
    }
    return (format, image)
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
    var partial = false
    if lenient {
      do {
        image = try image.materialized()
      } catch  where error.code == .corruptImage {
        let relaxed = try ImageDecoder.load(
          format, from: input.bytes, failOn: VIPS_FAIL_ON_NONE, source: input.source, shrink: shrink, scale: scale)
        image = try relaxed.materialized()
        partial = true
      }
    }
    if convertToSRGB { image = try image.convertedToSRGB() }
    if rotate, autoRotate { image = try ImageDecoder.upright(image, materialized: lenient) }
    return DecodedImage(
      source: input.source, image: image, sourceFormat: format, sourceWidth: width, sourceHeight: height, partial: partial)
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
