import CVips
import CVipsShim
import DarkroomCore

/// The `overlay` stage: composes a watermark image over the image, at a gravity with an offset, or
/// tiled over all of it, with an opacity and a scale.
///
/// The watermark is decoded once, when the stage is made, and kept in memory (8-bit sRGB with
/// alpha). `scale` sizes it against the image's width (0.25: a quarter of the width, the aspect
/// kept); `x` and `y` move it in from the edges its gravity puts it against (right and down from
/// the left and top edges and the centre, left and up from the right and bottom ones). A watermark
/// larger than the image is cut at the image's edges. The result is 8-bit sRGB; an image with
/// alpha keeps it. Every frame of an animation gets the same watermark.
///
/// ```swift
/// let logo = try ImageDecoder().decode(FetchedData(source: ImageSource("logo.png"), bytes: logoBytes))
/// let marked = Pipeline(name: "marked") {
///   Fetcher(); ImageDecoder(); Resizer(width: 1200, height: 1200)
///   try Overlay(watermark: logo, identity: "logo-v1", gravity: .southeast, x: 20, y: 20, opacity: 0.7)
///   ImageEncoder(.jpeg())
/// }
/// ```
public struct Overlay: PixelOperation {
  public static let kind = "overlay"

  /// The watermark: 8-bit sRGB with alpha, in memory.
  public let watermark: VipsImage
  /// What identifies the watermark in cache keys (a digest of its file, say).
  public var identity: String
  public var gravity: Gravity
  public var x: Int
  public var y: Int
  /// 0 (invisible) to 1 (as the watermark is).
  public var opacity: Double
  /// The watermark's width as a fraction of the image's (0 < scale ≤ 1), or `nil` for its own size.
  public var scale: Double?
  /// Repeat the watermark over the whole image (gravity and offsets then do not apply).
  public var tile: Bool

  /// The largest offset, in pixels.
  public static let maxOffset = 65_535

  public init(
    watermark: DecodedImage, identity: String, gravity: Gravity = .southeast, x: Int = 0, y: Int = 0, opacity: Double = 1,
    scale: Double? = nil, tile: Bool = false
  ) throws(PipelineError) {
    guard opacity.isFinite, (0...1).contains(opacity) else {
      throw PipelineError(.invalidInput, "an overlay's opacity is 0 to 1, not \(opacity)")
    }
    if let scale, !(scale > 0 && scale <= 1) {
      throw PipelineError(
        .invalidInput, "an overlay's scale is a fraction of the image's width above 0 and at most 1, not \(scale)")
    }
    guard abs(x) <= Self.maxOffset, abs(y) <= Self.maxOffset else {
      throw PipelineError(.invalidInput, "an overlay's offsets are at most \(Self.maxOffset) pixels, not \(x), \(y)")
    }
    var mark = try watermark.image.eightBitSRGB(keepGrey: false)
    if !mark.hasAlpha { mark = try mark.derive("adding alpha to the watermark") { dr_addalpha($0, $1) } }
    if opacity < 1 {
      mark = try mark.linear("fading the watermark", times: [1, 1, 1, opacity], plus: [0]).cast(to: VIPS_FORMAT_UCHAR)
    }
    self.watermark = try mark.materialized()
    (self.identity, self.gravity, self.x, self.y, self.opacity, self.scale, self.tile) = (
      identity, gravity, x, y, opacity, scale, tile
    )
  }

  public var identifier: String {
    "overlay(\(identity),\(tile ? "tile" : "\(gravity.rawValue),\(x),\(y)"),opacity=\(opacity),scale=\(scale.map { String($0) } ?? "none"))"
  }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    let base = try image.eightBitSRGB(keepGrey: false)
    var mark = watermark
    if let scale {
      let width = max(1, Int((Double(base.width) * scale).rounded()))
      let factor = Double(width) / Double(mark.width)
      // Rows that would land past the image's height are cut first: a tall, narrow watermark
      // scaled to a wide image would otherwise be taller than libvips can address.
      let rows = min(mark.height, Int((Double(base.height) / factor).rounded(.up)) + 1)
      if rows < mark.height { mark = try mark.cropped(x: 0, y: 0, width: mark.width, height: max(1, rows)) }
      mark = try mark.resized(horizontal: factor, vertical: factor, kernel: .lanczos3)
    }
    let composed: VipsImage
    if tile {
      let across = (base.width + mark.width - 1) / mark.width
      let down = (base.height + mark.height - 1) / mark.height
      let tiled = try mark.derive("tiling the watermark") { dr_replicate($0, Int32(clamping: across), Int32(clamping: down), $1) }
      let cover = try tiled.cropped(x: 0, y: 0, width: base.width, height: base.height)
      composed = try base.derive("overlaying the watermark") { dr_composite_over($0, cover.pointer, 0, 0, $1) }
    } else {
      let origin = gravity.origin(width: mark.width, height: mark.height, inWidth: base.width, height: base.height)
      let east = [.northeast, .east, .southeast].contains(gravity)
      let south = [.southwest, .south, .southeast].contains(gravity)
      let left = origin.x + (east ? -x : x)
      let top = origin.y + (south ? -y : y)
      // Wholly outside: nothing to compose (and libvips takes positions within ±10,000,000 only).
      guard left < base.width, top < base.height, left > -mark.width, top > -mark.height else { return base }
      composed = try base.derive("overlaying the watermark") {
        dr_composite_over($0, mark.pointer, Int32(clamping: left), Int32(clamping: top), $1)
      }
    }
    // The composite has alpha; an image that had none stays opaque and loses it again.
    guard !base.hasAlpha else { return try composed.cast(to: VIPS_FORMAT_UCHAR) }
    let colour = try composed.derive("dropping the alpha") { dr_extract_bands($0, 0, 3, $1) }
    return try colour.cast(to: VIPS_FORMAT_UCHAR)
  }
}
