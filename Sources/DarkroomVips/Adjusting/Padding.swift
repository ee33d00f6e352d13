import DarkroomCore

/// The `flatten` stage: composes an image with alpha over a solid colour and drops the alpha
/// (what JPEG needs; an image without alpha passes unchanged).
///
/// ```swift
/// let opaque = Pipeline(name: "opaque") { Fetcher(); ImageDecoder(); Flattener(background: [255, 255, 255]); ImageEncoder(.jpeg()) }
/// ```
public struct Flattener: PixelOperation {
  public static let kind = "flatten"

  /// RGB, 0…255.
  public var background: [Double]

  public init(background: [Double] = [255, 255, 255]) { self.background = background }

  public var identifier: String { "flatten(\(background.map { String(Int($0)) }.joined(separator: ",")))" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage { try image.flattened(background: background) }
}

/// The `extend` stage: pads the image with a colour by a number of pixels on each side (an image
/// without alpha gains it when the colour is not opaque).
///
/// ```swift
/// let framed = Pipeline(name: "framed") {
///   Fetcher(); ImageDecoder(); Resizer(width: 300, height: 300)
///   Extender(top: 10, right: 10, bottom: 10, left: 10, background: [255, 255, 255, 255]); ImageEncoder(.png())
/// }
/// ```
public struct Extender: PixelOperation {
  public static let kind = "extend"

  public var top: Int
  public var right: Int
  public var bottom: Int
  public var left: Int
  /// RGBA, 0…255.
  public var background: [Double]

  public init(top: Int = 0, right: Int = 0, bottom: Int = 0, left: Int = 0, background: [Double] = [0, 0, 0, 255]) {
    (self.top, self.right, self.bottom, self.left, self.background) = (top, right, bottom, left, background)
  }

  public var identifier: String {
    "extend(\(top),\(right),\(bottom),\(left),\(background.map { String(Int($0)) }.joined(separator: ",")))"
  }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    try image.extended(top: top, right: right, bottom: bottom, left: left, background: background)
  }
}

/// The `trim` stage: removes a uniform border (the colour of the top-left pixel, or a given one,
/// within a threshold).
///
/// ```swift
/// let cropped = Pipeline(name: "cropped") { Fetcher(); ImageDecoder(); Trimmer(threshold: 20); ImageEncoder(.png()) }
/// ```
public struct Trimmer: PixelOperation {
  public static let kind = "trim"

  /// How far (0…255) a pixel may differ from the border's colour and still be border.
  public var threshold: Double
  /// The border's colour (RGB, 0…255); the colour of the pixel at `corner` when `nil`.
  public var background: [Double]?
  /// Where the border's colour is read when no `background` is given.
  public var corner: TrimCorner

  public init(threshold: Double = 10, background: [Double]? = nil, corner: TrimCorner = .topLeft) {
    self.threshold = threshold
    self.background = background
    self.corner = corner
  }

  public var identifier: String {
    "trim(\(threshold),\(background.map { $0.map { String(Int($0)) }.joined(separator: ",") } ?? corner.rawValue))"
  }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    try image.trimmed(threshold: threshold, background: background, corner: corner)
  }

  /// An animation is trimmed by the border of its first frame, every frame alike.
  public func applyToFrames(of image: VipsImage) throws(PipelineError) -> VipsImage {
    guard image.isAnimated else { return try apply(to: image) }
    let first = try image.frame(0)
    guard first.width >= 3, first.height >= 3,
      let box = try first.materialized().trimBox(threshold: threshold, background: background, corner: corner)
    else { return image }
    return try image.framewise("trim") { frame throws(PipelineError) in
      try frame.cropped(x: box.x, y: box.y, width: box.width, height: box.height)
    }
  }
}

/// The `round` stage: cuts the corners round (a radius in pixels, or a circle or ellipse that
/// fills the image), leaving transparency outside; an image without alpha gains it.
///
/// ```swift
/// let avatar = Pipeline(name: "avatar") {
///   Fetcher(); ImageDecoder(); Resizer(width: 128, height: 128, mode: .fill); Rounder(); ImageEncoder(.png())
/// }
/// ```
public struct Rounder: PixelOperation {
  public static let kind = "round"

  /// The corners' radius in pixels; `nil` for a circle (an ellipse for an image that is not square).
  public var radius: Double?
  /// The corners' vertical radius, for elliptic corners; `radius` when `nil`.
  public var verticalRadius: Double?

  public init(radius: Double? = nil, verticalRadius: Double? = nil) {
    self.radius = radius
    self.verticalRadius = verticalRadius
  }

  public var identifier: String {
    guard let radius else { return "round(circle)" }
    return "round(\(radius)\(verticalRadius.map { "|\($0)" } ?? ""))"
  }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    try image.rounded(rx: radius, ry: radius == nil ? nil : verticalRadius)
  }
}
