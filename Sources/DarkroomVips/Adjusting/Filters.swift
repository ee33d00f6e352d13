import DarkroomCore

/// The `grayscale` stage: shades of grey (the image's luminance), alpha kept.
///
/// ```swift
/// let grey = Pipeline(name: "grey") { Fetcher(); ImageDecoder(); Grayscaler(); ImageEncoder(.jpeg(quality: 80)) }
/// ```
public struct Grayscaler: PixelOperation {
  public static let kind = "grayscale"

  public init() {}

  public var identifier: String { "grayscale" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage { try image.greyscaled() }
}

/// The `blur` stage: a Gaussian blur of standard deviation `sigma` pixels (at most
/// `VipsImage.maxBlurSigma`).
///
/// ```swift
/// let soft = Pipeline(name: "soft") { Fetcher(); ImageDecoder(); Blurrer(sigma: 4); ImageEncoder(.jpeg(quality: 80)) }
/// ```
public struct Blurrer: PixelOperation {
  public static let kind = "blur"

  public var sigma: Double

  public init(sigma: Double) { self.sigma = sigma }

  public var identifier: String { "blur(\(sigma))" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage { try image.blurred(sigma: sigma) }
}

/// The `sharpen` stage: an unsharp mask on lightness, for edges about `sigma` pixels wide,
/// strengthened by `amount` (libvips' `sharpen`, its `m2`).
///
/// ```swift
/// let crisp = Pipeline(name: "crisp") {
///   Fetcher(); ImageDecoder(); Resizer(width: 300, height: 300); Sharpener(); ImageEncoder(.webp(quality: 80))
/// }
/// ```
public struct Sharpener: PixelOperation {
  public static let kind = "sharpen"

  public var sigma: Double
  public var amount: Double

  public init(sigma: Double = 1, amount: Double = 2) {
    self.sigma = sigma
    self.amount = amount
  }

  public var identifier: String { "sharpen(\(sigma),\(amount))" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    try image.sharpened(sigma: sigma, amount: amount)
  }
}

/// The `modulate` stage: brightness and saturation as factors, and a hue turn in degrees (in
/// LCh, as sharp's `modulate`).
///
/// ```swift
/// let vivid = Pipeline(name: "vivid") { Fetcher(); ImageDecoder(); Modulator(saturation: 1.5); ImageEncoder(.jpeg()) }
/// ```
public struct Modulator: PixelOperation {
  public static let kind = "modulate"

  public var brightness: Double
  public var saturation: Double
  public var hue: Double

  public init(brightness: Double = 1, saturation: Double = 1, hue: Double = 0) {
    (self.brightness, self.saturation, self.hue) = (brightness, saturation, hue)
  }

  public var identifier: String { "modulate(\(brightness),\(saturation),\(hue))" }

  public func apply(to image: VipsImage) throws(PipelineError) -> VipsImage {
    try image.modulated(brightness: brightness, saturation: saturation, hue: hue)
  }
}
