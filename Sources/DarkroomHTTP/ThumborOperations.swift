import Darkroom

/// Turns a parsed thumbor URL into Darkroom stages: decode, crop, resize, pad, flip, the
/// filters' operations in the URL's order, encode.
///
/// The filters that have a stage are `format`, `quality`, `fill`, `background_color`,
/// `strip_icc`, `strip_exif` (Darkroom strips all metadata anyway), `no_upscale`, `upscale`,
/// `max_bytes`, `rotate(angle)` (counter-clockwise, as thumbor turns: a multiple of 90),
/// `grayscale()`, `brightness(amount)` and `saturation(amount)` (-100 to 100 %), `blur(radius[,sigma])` (sigma defaults to the radius; 0 blurs nothing) and
/// `sharpen(amount,radius,luminance_only)` (always on lightness), `round_corner(a|b,r,g,b[,transparent])`. A `-` before the width or the
/// height flips the image horizontally or vertically, and `trim[:top-left|:bottom-right][:N]`
/// removes a uniform border first (a tolerance of N, at most 255; 10 by default).
/// Any other filter answers 400 with "unsupported …".
/// Sizes follow thumbor: the default mode fills the box and crops (upscaling unless
/// `no_upscale()`), `fit-in` fits inside it (never upscaling unless `upscale()`), and a side of 0
/// keeps the image's proportion.
///
/// ```swift
/// let url = try ThumborURL(path: "/unsafe/fit-in/300x300/filters:format(webp)/a.jpg")
/// let recipe = try ThumborOperations(configuration: configuration).stages(for: url, accept: nil)
/// print(recipe.stages.map(\.kind))   // ["decode", "resize", "encode"]
/// ```
public struct ThumborOperations: Sendable {
  /// The stages after the fetch, and whether the encoder's format came from `Accept`.
  public struct Recipe: Sendable {
    public var stages: [AnyStage]
    public var variesOnAccept: Bool
  }

  /// The filters that have a stage.
  public static let supportedFilters: Set<String> = [
    "format", "quality", "fill", "background_color", "strip_icc", "strip_exif", "no_upscale", "upscale", "max_bytes",
    "rotate", "grayscale", "blur", "sharpen", "brightness", "saturation", "round_corner",
  ]

  private let configuration: ServerConfiguration
  private let negotiation: FormatNegotiation

  public init(configuration: ServerConfiguration) {
    self.configuration = configuration
    negotiation = FormatNegotiation(preferred: configuration.preferredFormats)
  }

  /// The stages for `url`, for a client that sent `accept`. Throws `invalidInput` for a filter
  /// or an argument that cannot be done.
  public func stages(for url: ThumborURL, accept: String?) throws(PipelineError) -> Recipe {
    var settings = try FilterSettings(url.filters)
    try checkOutputSize(url, settings: settings)
    // A still format named by the URL takes the first frame: the other frames are not decoded.
    let still = settings.format.map { ![.gif, .webp].contains($0) } ?? false
    var stages = [AnyStage(ImageDecoder(maxPixels: configuration.maxPixels, animated: !still))]
    if url.trim {
      // thumbor trims first, before its crop and resize.
      stages.append(
        AnyStage(
          Trimmer(
            threshold: url.trimTolerance.map { Double(min($0, 255)) } ?? 10,
            corner: url.trimFromBottomRight ? .bottomRight : .topLeft)))
    }
    if let crop = url.crop, crop != (0, 0, 0, 0) {
      guard crop.right > crop.left, crop.bottom > crop.top else {
        throw PipelineError(.invalidInput, "the crop's bottom-right corner must be below and right of its top-left corner")
      }
      stages.append(
        AnyStage(Cropper(.pixels(x: crop.left, y: crop.top, width: crop.right - crop.left, height: crop.bottom - crop.top))))
    }
    stages += resize(url, settings: settings)
    switch (url.flipHorizontally, url.flipVertically) {
    case (true, true): stages.append(AnyStage(Flipper(.both)))
    case (true, false): stages.append(AnyStage(Flipper(.horizontal)))
    case (false, true): stages.append(AnyStage(Flipper(.vertical)))
    case (false, false): break
    }
    stages += settings.operations
    settings.quality = settings.quality ?? configuration.quality
    let (format, varies) = encodeFormat(settings, accept: accept)
    let encoder = ImageEncoder(format, background: settings.background ?? [255, 255, 255])
    stages.append(settings.maxBytes.map { AnyStage(ByteBudgetEncoder(encoder: encoder, maxBytes: $0)) } ?? AnyStage(encoder))
    return Recipe(stages: stages, variesOnAccept: varies)
  }

  /// Refuses a size the server will not make, before anything is fetched: over
  /// ``ServerConfiguration/maxOutputPixels``, or over what the named format can hold.
  private func checkOutputSize(_ url: ThumborURL, settings: FilterSettings) throws(PipelineError) {
    let pixels = url.width * url.height  // each side is at most 65,500: no overflow
    if pixels > configuration.maxOutputPixels {
      throw PipelineError(
        .invalidInput,
        "the size \(url.width)x\(url.height) is over this server's limit of \(configuration.maxOutputPixels) pixels")
    }
    let side = max(url.width, url.height)
    if settings.format == .webp, side > ImageEncoder.maxWebPSide {
      throw PipelineError(.invalidInput, "a WebP side can be at most \(ImageEncoder.maxWebPSide) pixels, not \(side)")
    }
    if settings.format == .avif, pixels > ImageEncoder.maxAVIFPixels {
      throw PipelineError(.invalidInput, "an AVIF image can have at most \(ImageEncoder.maxAVIFPixels) pixels, not \(pixels)")
    }
  }

  private func resize(_ url: ThumborURL, settings: FilterSettings) -> [AnyStage] {
    let cap = configuration.maxOutputPixels
    let width = url.width > 0 ? url.width : nil
    let height = url.height > 0 ? url.height : nil
    guard width != nil || height != nil else { return [] }
    switch url.fit {
    case .fill:
      let upscale = settings.upscale ?? true
      guard let width, let height else {
        return [AnyStage(Resizer(width: width, height: height, mode: .fit, upscale: upscale, maxPixels: cap))]
      }
      let anchor: Resizer.Anchor = url.smart ? .smart(.attention) : .gravity(Self.gravity(url))
      return [AnyStage(Resizer(width: width, height: height, mode: .fill, upscale: upscale, crop: anchor, maxPixels: cap))]
    case .fitIn, .adaptiveFitIn, .fullFitIn:
      let upscale = settings.upscale ?? false
      var stages: [AnyStage]
      switch url.fit {
      case .adaptiveFitIn:
        stages = [AnyStage(ThumborFit(mode: .adaptive, width: url.width, height: url.height, upscale: upscale, maxPixels: cap))]
      case .fullFitIn:
        stages = [AnyStage(ThumborFit(mode: .full, width: url.width, height: url.height, upscale: upscale, maxPixels: cap))]
      default: stages = [AnyStage(Resizer(width: width, height: height, mode: .fit, upscale: upscale, maxPixels: cap))]
      }
      if let fill = settings.fill, let width, let height {
        // thumbor's fill(): the box is padded to its size with the colour.
        let gravity = Self.gravity(url)
        stages.append(
          AnyStage(
            Resizer(width: width, height: height, mode: .center, crop: .gravity(gravity), background: fill, maxPixels: cap)))
      }
      return stages
    }
  }

  /// The encoder's format: the `format` filter's, or the negotiated one.
  private func encodeFormat(_ settings: FilterSettings, accept: String?) -> (EncodeFormat, Bool) {
    let quality = settings.quality ?? configuration.quality
    if let named = settings.format { return (Self.format(named, quality: quality, qualityGiven: settings.qualityGiven), false) }
    let choice = negotiation.choose(accept: accept, hasAlpha: false)
    let varies = !negotiation.preferred.isEmpty
    let still =
      negotiation.preferred.contains(choice.format)
      ? Self.format(choice.format, quality: quality, qualityGiven: settings.qualityGiven) : .jpegOrPNG(quality: quality)
    return (Self.animating(still, as: choice.animatedFormat, quality: quality), varies)
  }

  /// A negotiated format that an animated source keeps moving in: WebP and GIF as they are;
  /// anything else (AVIF, JPEG, PNG) becomes `animated` (WebP when the client named it, else GIF)
  /// for an animation. Both formats come from `Accept`, and the hit index keys on both.
  static func animating(_ format: EncodeFormat, as animated: ImageFormat, quality: Int) -> EncodeFormat {
    switch format {
    case .webp, .gif: format
    default: .stillOrAnimated(still: format, animated: animated == .webp ? .webp(quality: quality) : .gif())
    }
  }

  static func format(_ format: ImageFormat, quality: Int, qualityGiven: Bool) -> EncodeFormat {
    switch format {
    case .png: .png()
    case .webp: .webp(quality: quality)
    // AVIF's scale is not JPEG's: its own default unless the URL names a quality.
    case .avif, .heif: .avif(quality: qualityGiven ? quality : 50)
    case .gif: .gif()
    default: .jpeg(quality: quality)
    }
  }

  static func gravity(_ url: ThumborURL) -> Gravity {
    switch (url.horizontalAlignment, url.verticalAlignment) {
    case ("left", "top"): .northwest
    case ("center", "top"): .north
    case ("right", "top"): .northeast
    case ("left", "bottom"): .southwest
    case ("center", "bottom"): .south
    case ("right", "bottom"): .southeast
    case ("left", _): .west
    case ("right", _): .east
    default: .centre
    }
  }
}

/// The settings the supported filters make.
struct FilterSettings {
  var format: ImageFormat?
  var quality: Int?
  var qualityGiven = false
  var fill: [Double]?
  var background: [Double]?
  var upscale: Bool?
  var maxBytes: Int?
  /// The filters that change pixels, as stages, in the URL's order.
  var operations: [AnyStage] = []

  /// The most blur and sharpen filters one URL takes (each reads the whole image again).
  static let maxConvolutions = 4

  init(_ filters: [ThumborURL.Filter]) throws(PipelineError) {
    var convolutions = 0
    for filter in filters {
      let arguments = filter.arguments.map { $0.trimmingCharacters(in: .whitespaces) }
      func expect(_ count: ClosedRange<Int>) throws(PipelineError) {
        guard count.contains(arguments.count) else {
          throw PipelineError(
            .invalidInput,
            "the filter \(filter.name) takes \(count.lowerBound) to \(count.upperBound) arguments, got \(arguments.count)")
        }
      }
      switch filter.name {
      case "format":
        try expect(1...1)
        let names: [String: ImageFormat] = ["jpeg": .jpeg, "jpg": .jpeg, "png": .png, "webp": .webp, "avif": .avif, "gif": .gif]
        guard let format = names[arguments[0].lowercased()] else {
          throw PipelineError(.invalidInput, "unsupported format \(arguments[0]); use jpeg, png, webp, avif or gif")
        }
        self.format = format
      case "quality":
        try expect(1...1)
        guard let value = Int(arguments[0]), (0...100).contains(value) else {
          throw PipelineError(.invalidInput, "the quality must be a whole number from 0 to 100, got \(arguments[0])")
        }
        quality = max(1, value)
        qualityGiven = true
      case "fill":
        try expect(1...2)
        fill = try Self.colour(arguments[0], filter: filter.name)
      case "background_color":
        try expect(1...1)
        background = Array(try Self.colour(arguments[0], filter: filter.name).prefix(3))
      case "strip_icc", "strip_exif":
        // Darkroom strips every kind of metadata unless a preset keeps it.
        try expect(0...0)
      case "no_upscale":
        try expect(0...0)
        upscale = false
      case "upscale":
        try expect(0...0)
        upscale = true
      case "max_bytes":
        try expect(1...1)
        guard arguments[0].count <= 10, let bytes = Int(arguments[0]), (1...1_000_000_000).contains(bytes) else {
          throw PipelineError(
            .invalidInput, "max_bytes takes a number of bytes from 1 to 1000000000, got \(arguments[0].prefix(16))")
        }
        maxBytes = bytes
      case "rotate", "grayscale", "blur", "sharpen", "brightness", "saturation":
        if ["blur", "sharpen"].contains(filter.name) {
          convolutions += 1
          guard convolutions <= Self.maxConvolutions else {
            throw PipelineError(
              .invalidInput, "a URL takes at most \(Self.maxConvolutions) blur and sharpen filters together, to bound its work")
          }
        }
        if let stage = try Self.operation(filter.name, arguments, expect: expect) { operations.append(stage) }
      case "round_corner":
        try expect(4...5)
        operations += try Self.roundCorner(arguments)
      default:
        throw PipelineError(.invalidInput, "unsupported filter \(filter.name)")
      }
    }
  }

  /// The stage of a filter that changes pixels (nil when it changes nothing: `rotate(0)`,
  /// `blur(0)`).
  private static func operation(
    _ name: String, _ arguments: [String], expect: (ClosedRange<Int>) throws(PipelineError) -> Void
  ) throws(PipelineError) -> AnyStage? {
    func number(_ index: Int, _ what: String, in range: ClosedRange<Double>) throws(PipelineError) -> Double {
      // Decimal only (Swift's Double also reads 0x10, nan and 1e2).
      let text = arguments[index]
      guard text.count <= 16, text.allSatisfy({ "0123456789.-+".contains($0) }), let value = Double(text), range.contains(value)
      else {
        throw PipelineError(
          .invalidInput,
          "\(name)'s \(what) is a number from \(range.lowerBound) to \(range.upperBound), got \(arguments[index].prefix(16))")
      }
      return value
    }
    switch name {
    case "rotate":
      try expect(1...1)
      // thumbor takes 90 and 90.0 alike.
      let degreesText = arguments[0].hasSuffix(".0") ? String(arguments[0].dropLast(2)) : arguments[0]
      guard degreesText.count <= 6, let degrees = Int(degreesText), degrees % 90 == 0 else {
        throw PipelineError(.invalidInput, "rotate takes a multiple of 90 degrees, got \(arguments[0].prefix(16))")
      }
      // thumbor turns counter-clockwise; a Rotator turns clockwise.
      return RotationAngle(rawValue: ((-degrees % 360) + 360) % 360).map { AnyStage(Rotator($0)) }
    case "grayscale":
      try expect(0...0)
      return AnyStage(Grayscaler())
    case "brightness", "saturation":
      try expect(1...1)
      let percent = try number(0, "amount", in: -100...100)
      if percent == 0 { return nil }
      let factor = 1 + percent / 100
      return AnyStage(name == "brightness" ? Modulator(brightness: factor) : Modulator(saturation: factor))
    case "blur":
      try expect(1...2)
      let radius = try number(0, "radius", in: 0...150)
      let sigma =
        arguments.count > 1 ? try number(1, "sigma", in: 0...VipsImage.maxBlurSigma) : min(radius, VipsImage.maxBlurSigma)
      return radius == 0 || sigma == 0 ? nil : AnyStage(Blurrer(sigma: sigma))
    default:
      try expect(2...3)
      let amount = try number(0, "amount", in: 0...VipsImage.maxSharpenAmount)
      let radius = try number(1, "radius", in: 0.01...VipsImage.maxSharpenSigma)
      if arguments.count > 2, !["true", "false", "1", "0"].contains(arguments[2].lowercased()) {
        throw PipelineError(.invalidInput, "sharpen's luminance_only is true or false, got \(arguments[2].prefix(16))")
      }
      return AnyStage(Sharpener(sigma: radius, amount: amount))
    }
  }

  /// thumbor's `round_corner(a|b,r,g,b[,transparent])`: corners of radius a (b vertically),
  /// filled with the colour r, g, b unless `transparent` is 1 or true.
  private static func roundCorner(_ arguments: [String]) throws(PipelineError) -> [AnyStage] {
    let radii = arguments[0].split(separator: "|", omittingEmptySubsequences: false)
    guard (1...2).contains(radii.count),
      let rx = radii.first.flatMap({ $0.count <= 6 ? Double($0) : nil }), (0...65_535).contains(rx),
      let ry = radii.count == 2 ? radii.last.flatMap({ $0.count <= 6 ? Double($0) : nil }) : rx, (0...65_535).contains(ry)
    else {
      throw PipelineError(.invalidInput, "round_corner's radius is a|b, pixels from 0 to 65535, got \(arguments[0].prefix(16))")
    }
    var colour: [Double] = []
    for text in arguments[1...3] {
      guard text.count <= 3, let value = Int(text), (0...255).contains(value) else {
        throw PipelineError(.invalidInput, "round_corner's colour is three numbers from 0 to 255, got \(text.prefix(16))")
      }
      colour.append(Double(value))
    }
    let transparent = arguments.count > 4 && ["1", "true"].contains(arguments[4].lowercased())
    if arguments.count > 4, !transparent, !["0", "false"].contains(arguments[4].lowercased()) {
      throw PipelineError(.invalidInput, "round_corner's transparent is 0, 1, true or false, got \(arguments[4].prefix(16))")
    }
    guard rx > 0, ry > 0 else { return [] }
    let round = AnyStage(Rounder(radius: rx, verticalRadius: ry == rx ? nil : ry))
    return transparent ? [round] : [round, AnyStage(Flattener(background: colour))]
  }

  private static let named: [String: [Double]] = [
    "white": [255, 255, 255, 255], "black": [0, 0, 0, 255], "red": [255, 0, 0, 255], "green": [0, 128, 0, 255],
    "blue": [0, 0, 255, 255], "transparent": [0, 0, 0, 0],
  ]

  /// A colour as thumbor writes it: `ff0000`, `f00`, `ff000080`, or a few names.
  static func colour(_ text: String, filter: String) throws(PipelineError) -> [Double] {
    if let colour = named[text.lowercased()] { return colour }
    let hex = text.hasPrefix("#") ? text : "#" + text
    guard let colour = Color.parse(hex) else {
      throw PipelineError(
        .invalidInput, "the filter \(filter) needs a colour like ffffff or white, got \(text.prefix(32))")
    }
    return colour
  }
}
