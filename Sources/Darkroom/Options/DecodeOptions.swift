/// JSON options of the `decode` stage.
package struct DecodeOptions: StageOptions {
  public var maxPixels: Int
  public var autoRotate: Bool
  public var convertToSRGB: Bool
  public var lenient: Bool
  public var share: Bool
  public var animated: AnimationChoice
  public var maxFrames: Int

  public static let specs = [
    OptionSpec(
      "maxPixels", .integer(min: 1), default: 100_000_000,
      "The largest width × height accepted, checked from the header before decoding; larger images fail with imageTooLarge. Images a decoder holds whole (AVIF/HEIF, interlaced PNG, progressive JPEG) may take at most 4 bytes a pixel of it while decoded."
    ),
    OptionSpec("autoRotate", .boolean, default: true, "Apply the EXIF orientation so the image is upright."),
    OptionSpec("convertToSRGB", .boolean, default: true, "Convert embedded ICC profiles (and CMYK) to sRGB."),
    OptionSpec(
      "lenient", .boolean, default: false,
      "Accept truncated or damaged pixel data and return what could be decoded, marked partial (decodes eagerly)."),
    OptionSpec(
      "share", .boolean, default: false,
      "Share one in-memory decode between operations decoding identical bytes at the same time (no shrink-on-load)."),
    OptionSpec(
      "animated", .choiceOrFalse(["auto"]), default: "auto",
      "\"auto\": an animated GIF or WebP keeps every frame (each cropped, resized and fitted alike; GIF and WebP outputs stay animated). false: only the first frame is taken, and a note says so."
    ),
    OptionSpec(
      "maxFrames", .integer(min: 1, max: ImageDecoder.maxFrames),
      default: .number(Double(ImageDecoder.defaultMaxFrames), text: String(ImageDecoder.defaultMaxFrames)),
      "The most frames an animation may have (more fails with imageTooLarge); maxPixels counts canvas × frames."),
  ]
}

/// `"animated": "auto"` or `false` on `decode`.
package enum AnimationChoice: Codable, Sendable, Equatable {
  case auto
  case off

  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if let flag = try? container.decode(Bool.self), flag == false {
      self = .off
    } else if try container.decode(String.self) == "auto" {
      self = .auto
    } else {
      throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected \"auto\" or false")
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .auto: try container.encode("auto")
    case .off: try container.encode(false)
    }
  }
}
