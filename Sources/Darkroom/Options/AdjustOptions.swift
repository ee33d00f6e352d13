/// JSON options of the `rotate` stage.
package struct RotateOptions: StageOptions {
  public var angle: Int

  public static let specs = [
    OptionSpec("angle", .integer(min: 90, max: 270), required: true, "Degrees clockwise: 90, 180 or 270.")
  ]

  public func problems() -> [OptionProblem] {
    RotationAngle(rawValue: angle) == nil
      ? [OptionProblem(option: "angle", "turns are 90, 180 or 270 degrees, not \(angle)")] : []
  }

  /// The stage these options describe (valid once ``problems()`` is empty).
  public var rotator: Rotator { Rotator(RotationAngle(rawValue: angle) ?? .half) }
}

/// JSON options of the `flip` stage.
package struct FlipOptions: StageOptions {
  public var direction: String

  public static let specs = [
    OptionSpec(
      "direction", .choice(FlipDirection.allCases.map(\.rawValue)), default: "horizontal",
      "horizontal: left and right swapped; vertical: top and bottom; both: a half turn.")
  ]

  public var flipper: Flipper { Flipper(FlipDirection(rawValue: direction) ?? .horizontal) }
}

/// JSON options of the `blur` stage.
package struct BlurOptions: StageOptions {
  public var sigma: Double

  public static let specs = [
    OptionSpec(
      "sigma", .number(min: 0.01, max: VipsImage.maxBlurSigma), required: true,
      "The Gaussian's standard deviation in pixels: how far each pixel spreads.")
  ]
}

/// JSON options of the `sharpen` stage.
package struct SharpenOptions: StageOptions {
  public var sigma: Double
  public var amount: Double

  public static let specs = [
    OptionSpec(
      "sigma", .number(min: 0.01, max: VipsImage.maxSharpenSigma), default: 1.0,
      "How wide the edges sharpened are, in pixels (the mask's standard deviation)."),
    OptionSpec(
      "amount", .number(min: 0, max: VipsImage.maxSharpenAmount), default: 2.0,
      "How much edges gain in contrast (0 leaves the image as it is)."),
  ]
}

/// JSON options of the `flatten` stage.
package struct FlattenOptions: StageOptions {
  public var background: String

  public static let specs = [
    OptionSpec("background", .string, default: "#ffffff", "The colour transparent areas are composed over: #rgb or #rrggbb.")
  ]

  public func problems() -> [OptionProblem] { ColourOption.problems(background, option: "background") }

  public var flattener: Flattener { Flattener(background: Array((Color.parse(background) ?? [255, 255, 255]).prefix(3))) }
}

/// JSON options of the `extend` stage.
package struct ExtendOptions: StageOptions {
  public var top: Int
  public var right: Int
  public var bottom: Int
  public var left: Int
  public var background: String

  public static let specs = [
    OptionSpec("top", .integer(min: 0, max: VipsImage.maxExtendedSide), default: 0, "Pixels added above."),
    OptionSpec("right", .integer(min: 0, max: VipsImage.maxExtendedSide), default: 0, "Pixels added on the right."),
    OptionSpec("bottom", .integer(min: 0, max: VipsImage.maxExtendedSide), default: 0, "Pixels added below."),
    OptionSpec("left", .integer(min: 0, max: VipsImage.maxExtendedSide), default: 0, "Pixels added on the left."),
    OptionSpec(
      "background", .string, default: "#000000",
      "The padding's colour: #rgb, #rrggbb or #rrggbbaa (an image without alpha gains it for a colour that is not opaque)."),
  ]

  public func problems() -> [OptionProblem] { ColourOption.problems(background, option: "background") }

  public var extender: Extender {
    Extender(
      top: top, right: right, bottom: bottom, left: left, background: Color.parse(background) ?? [0, 0, 0, 255])
  }
}

/// The check every colour option gets.
enum ColourOption {
  static func problems(_ text: String, option: String) -> [OptionProblem] {
    guard Color.parse(text) == nil else { return [] }
    return [OptionProblem(option: option, "expected a colour like \"#000000\" or \"#ffffff80\", got \"\(text.prefix(40))\"")]
  }
}

/// JSON options of the `trim` stage.
package struct TrimOptions: StageOptions {
  public var threshold: Double
  public var background: String?
  public var corner: String

  public static let specs = [
    OptionSpec(
      "threshold", .number(min: 0, max: 255), default: 10.0,
      "How far a pixel may differ from the border's colour (0–255) and still be border."),
    OptionSpec("background", .string, "The border's colour (#rgb or #rrggbb); the `corner` pixel's when left out."),
    OptionSpec(
      "corner", .choice(TrimCorner.allCases.map(\.rawValue)), default: "top-left",
      "The pixel whose colour is the border's when no `background` is given."),
  ]

  public func problems() -> [OptionProblem] { background.map { ColourOption.problems($0, option: "background") } ?? [] }

  public var trimmer: Trimmer {
    Trimmer(
      threshold: threshold, background: background.flatMap(Color.parse).map { Array($0.prefix(3)) },
      corner: TrimCorner(rawValue: corner) ?? .topLeft)
  }
}

/// JSON options of the `modulate` stage.
package struct ModulateOptions: StageOptions {
  public var brightness: Double
  public var saturation: Double
  public var hue: Double

  public static let specs = [
    OptionSpec(
      "brightness", .number(min: 0, max: VipsImage.maxModulation), default: 1.0, "Lightness factor: 1 keeps it, 0.5 halves it."),
    OptionSpec(
      "saturation", .number(min: 0, max: VipsImage.maxModulation), default: 1.0, "Colourfulness factor: 0 is grey, 2 doubles it."),
    OptionSpec("hue", .number(min: -360, max: 360), default: 0.0, "Degrees the hue turns."),
  ]

  public var modulator: Modulator { Modulator(brightness: brightness, saturation: saturation, hue: hue) }
}

/// JSON options of the `round` stage.
package struct RoundOptions: StageOptions {
  public var radius: Double?
  public var radiusY: Double?
  public var circle: Bool

  public static let specs = [
    OptionSpec("radius", .number(min: 0, max: 65_535), "The corners' radius in pixels."),
    OptionSpec(
      "radiusY", .number(min: 0, max: 65_535), "The corners' vertical radius, for elliptic corners (`radius` by default)."),
    OptionSpec("circle", .boolean, default: false, "Cut a circle (an ellipse for an image that is not square) instead."),
  ]

  public func problems() -> [OptionProblem] {
    switch (radius, circle) {
    case (nil, false): [OptionProblem("give \"radius\" (pixels) or \"circle\": true")]
    case (_?, true): [OptionProblem("give either \"radius\" or \"circle\", not both")]
    case (nil, true) where radiusY != nil: [OptionProblem(option: "radiusY", "a circle takes no radius")]
    default: []
    }
  }

  public var rounder: Rounder { Rounder(radius: circle ? nil : radius, verticalRadius: radiusY) }
}

/// JSON options of the `metadata` stage.
package struct MetadataOptions: StageOptions {
  public var keep: [String]

  public static let specs = [
    OptionSpec(
      "keep", .stringList, default: .array([]),
      "What survives the stripping: \"icc\" (the colour profile) and/or \"copyright\" (the EXIF copyright); nothing by default.")
  ]

  public func problems() -> [OptionProblem] {
    keep.filter { KeptMetadata(rawValue: $0) == nil }.map { item in
      OptionProblem(
        option: "keep",
        "\"\(item.prefix(40))\" is not kept metadata: the choices are "
          + KeptMetadata.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", "))
    }
  }

  public var keeper: MetadataKeeper { MetadataKeeper(keeping: Set(keep.compactMap(KeptMetadata.init(rawValue:)))) }
}

/// JSON options of the `overlay` stage.
package struct OverlayOptions: StageOptions {
  public var image: String
  public var gravity: String
  public var x: Int
  public var y: Int
  public var opacity: Double
  public var scale: Double?
  public var tile: Bool

  /// The largest watermark file read, in bytes.
  public static let maxBytes = 16 << 20
  /// The longest side a watermark may have: it is held in memory for the run.
  public static let maxSide = 2048
  /// The most pixels a watermark may have (2048 × 2048).
  public static let maxPixels = maxSide * maxSide

  public static let specs = [
    OptionSpec(
      "image", .string, required: true,
      "The watermark's file (PNG with alpha, say; at most 16 MiB and 2048×2048 pixels), read once when the pipeline loads, beneath --root."
    ),
    OptionSpec(
      "gravity", .choice(Gravity.allCases.map(\.rawValue)), default: "southeast", "Where the watermark sits (unless tiled)."),
    OptionSpec(
      "x", .integer(min: -Overlay.maxOffset, max: Overlay.maxOffset), default: 0,
      "Pixels in from the edge the gravity puts it against (right from the left edge or the centre, left from the right edge)."),
    OptionSpec(
      "y", .integer(min: -Overlay.maxOffset, max: Overlay.maxOffset), default: 0,
      "Pixels in from the top or bottom edge (down from the top or the centre, up from the bottom)."),
    OptionSpec("opacity", .number(min: 0, max: 1), default: 1.0, "0 (invisible) to 1 (the watermark as it is)."),
    OptionSpec(
      "scale", .number(min: 0.001, max: 1),
      "The watermark's width as a fraction of the image's (its aspect kept); its own size when left out."),
    OptionSpec("tile", .boolean, default: false, "Repeat the watermark over the whole image (gravity and offsets do not apply)."),
  ]

  /// The stage, with the watermark read beneath `roots` and decoded.
  public func overlay(roots: [String]) throws -> Overlay {
    let bytes = try FileTransport.readSmallFile(
      image, roots: roots, wanted: "a watermark image", limit: Self.maxBytes, limitName: "a watermark's limit"
    ) { size in
      PipelineError(.tooLarge, "image: \(image) is \(size) bytes, over the limit of \(Self.maxBytes) for a watermark")
    }
    let decoded: DecodedImage
    do {
      decoded = try ImageDecoder(maxPixels: Self.maxPixels, animated: false).decode(
        FetchedData(source: ImageSource(path: image), bytes: ImageBytes(bytes)))
    } catch  where error.code == .imageTooLarge {
      throw PipelineError(
        .imageTooLarge, "image: \(image) is larger than a watermark may be (\(Self.maxSide)×\(Self.maxSide) pixels)")
    } catch {
      throw PipelineError(error.code, "image: \(image): \(error.message)", issues: error.issues)
    }
    guard decoded.width <= Self.maxSide, decoded.height <= Self.maxSide else {
      throw PipelineError(
        .imageTooLarge,
        "image: \(image) is \(decoded.width)×\(decoded.height) pixels; a watermark is at most \(Self.maxSide) on each side")
    }
    return try Overlay(
      watermark: decoded, identity: RequestDigest.hex(of: bytes, bytes: 8),
      gravity: Gravity(rawValue: gravity) ?? .southeast,
      x: x, y: y, opacity: opacity, scale: scale, tile: tile)
  }
}
