import CVips
import CVipsShim
import DarkroomCore

/// A decoded image and what is known about where it came from.
///
/// The pixels are a lazy libvips image: the work of decoding happens when a later stage (usually
/// the encoder) pulls pixels through.
///
/// ```swift
/// let decode = Pipeline(name: "decode") { Fetcher(); ImageDecoder() }
/// let decoded: DecodedImage = try await decode.process(ImageSource("photo.jpg"))
/// print(decoded.width, decoded.height, decoded.sourceFormat)   // 1200 800 jpeg
/// ```
public struct DecodedImage: Sendable, PipelineValue, SummarizableOutput {
  public static let valueDescription = "an image"

  /// The source the image was decoded from.
  public var source: ImageSource
  /// The pixels.
  public var image: VipsImage
  /// The format the source was in.
  public var sourceFormat: ImageFormat
  /// The size the source declared, before any shrink-on-load, crop or resize.
  public var sourceWidth: Int
  public var sourceHeight: Int
  /// True when a lenient decoder accepted damaged data and some pixels are missing.
  public var partial: Bool
  /// How many frames the source file holds (an animation decoded as its first frame alone still
  /// says how many it had).
  public var sourceFrames: Int = 1
  /// The shared live image this one came from (a `share` decoder), kept alive by every value
  /// derived from it.
  package var liveImage: LiveDecodedImage?
  /// The GIF file the pixels were decoded from, while every stage since only moved, scaled or cut
  /// them (``reshaped(_:)``): a GIF encoder then maps the frames onto the source's own colour
  /// tables instead of quantising them again. Any other change of pixels (``with(_:)``) drops it.
  package var gifSource: ImageBytes?

  public init(
    source: ImageSource, image: VipsImage, sourceFormat: ImageFormat, sourceWidth: Int, sourceHeight: Int, partial: Bool = false
  ) {
    self.source = source
    self.image = image
    self.sourceFormat = sourceFormat
    self.sourceWidth = sourceWidth
    self.sourceHeight = sourceHeight
    self.partial = partial
  }

  /// Width in pixels.
  public var width: Int { image.width }
  /// Height in pixels (of one frame, for an animation).
  public var height: Int { image.frameHeight }
  /// How many frames the image has: 1, or an animation's frame count.
  public var frameCount: Int { image.frameCount }

  /// A copy with other pixels.
  public func with(_ image: VipsImage) -> DecodedImage {
    var copy = self
    copy.image = image
    copy.gifSource = nil
    return copy
  }

  /// A copy with pixels that are these ones moved, scaled, turned or cut, and no other colours
  /// than theirs (so a GIF source's colour tables still fit them).
  package func reshaped(_ image: VipsImage) -> DecodedImage {
    var copy = self
    copy.image = image
    return copy
  }

  public var outputSummary: OutputSummary {
    OutputSummary(width: width, height: height, format: sourceFormat.rawValue, partial: partial)
  }
}

extension DecodedImage: ShareableValue {
  /// Decodes the pixels into memory once, so that every operation sharing this decode can read
  /// them (a lazily decoded image can be read only once, from top to bottom). A live shared image
  /// is already in memory.
  package func preparedForSharing(consumers: Int, pool: BlockingPool) async throws -> DecodedImage {
    guard liveImage == nil else { return self }
    var shared = self
    let image = self.image
    shared.image = try await pool.run { try image.materialized() }
    return shared
  }
}

/// A table-cache hit for another run is given this run's source.
extension DecodedImage: SourceCarrying {}

/// What keeping a decoded image costs a memory store: its pixels as decoded (width × height ×
/// bands × bytes per sample), whether or not they are decoded yet, plus the compressed bytes a
/// lazily decoded image keeps alive, so that a store's byte limit bounds decoded images as it
/// bounds encoded ones.
extension DecodedImage: CacheCost {
  public var cacheCost: Int {
    let sample = max(1, Int(dr_format_sizeof(dr_image_format(image.pointer))))
    let (area, overflow) = image.width.multipliedReportingOverflow(by: image.height)
    let (perPixel, overflow2) = image.bands.multipliedReportingOverflow(by: sample)
    let (total, overflow3) = area.multipliedReportingOverflow(by: perPixel)
    let (withSource, overflow4) = total.addingReportingOverflow(image.retainedSourceBytes)
    return overflow || overflow2 || overflow3 || overflow4 ? Int.max : max(withSource, 1024)
  }
}
