/// JSON options of the `encode` stage.
package struct EncodeOptions: StageOptions {
  public var format: String
  public var quality: Int?
  public var progressive: Bool
  public var compression: Int
  public var palette: Bool
  public var lossless: Bool
  public var effort: Int?
  public var keepMetadata: Bool
  public var background: String

  public static let specs = [
    OptionSpec(
      "format", .choice(["jpeg", "png", "webp", "avif", "gif", "auto"]), required: true,
      "The output format; auto keeps the source's (TIFF becomes PNG, HEIF becomes AVIF)."),
    OptionSpec(
      "quality", .integer(min: 1, max: 100),
      "Quality 1…100 (jpeg, webp, avif; png with palette); default 80 (jpeg, webp), 50 (avif), 100 (png)."),
    OptionSpec("progressive", .boolean, default: false, "JPEG: write a progressive (interlaced) file."),
    OptionSpec("compression", .integer(min: 0, max: 9), default: 6, "PNG: zlib compression level 0…9."),
    OptionSpec("palette", .boolean, default: false, "PNG: quantise to at most 256 colours."),
    OptionSpec("lossless", .boolean, default: false, "WebP, AVIF: lossless compression."),
    OptionSpec(
      "effort", .integer(min: 0, max: 10), "CPU effort: webp 0…6 (default 4), avif 0…9 (default 4), gif 1…10 (default 7)."),
    OptionSpec("keepMetadata", .boolean, default: false, "Keep EXIF, XMP and ICC metadata instead of stripping it."),
    OptionSpec("background", .string, default: "#ffffff", "JPEG: the colour transparent areas are flattened onto."),
  ]

  public func problems() -> [OptionProblem] {
    var problems: [OptionProblem] = []
    if let effort {
      let range = format == "webp" ? 0...6 : format == "avif" ? 0...9 : format == "gif" ? 1...10 : 0...10
      if !range.contains(effort) {
        problems.append(
          OptionProblem(option: "effort", "\(format) effort runs from \(range.lowerBound) to \(range.upperBound), got \(effort)"))
      }
    }
    if Color.parse(background) == nil {
      problems.append(OptionProblem(option: "background", "expected a colour like \"#ffffff\", got \"\(background)\""))
    }
    // Options that the chosen format ignores are mistakes worth pointing out.
    let applies: [(String, Bool, [String])] = [
      ("quality", quality != nil, ["jpeg", "webp", "avif", "png", "auto"]),
      ("progressive", progressive, ["jpeg"]),
      ("compression", compression != 6, ["png"]),
      ("palette", palette, ["png"]),
      ("lossless", lossless, ["webp", "avif", "auto"]),
      ("effort", effort != nil, ["webp", "avif", "gif", "auto"]),
    ]
    for (option, given, formats) in applies where given && !formats.contains(format) {
      problems.append(
        OptionProblem(
          option: option,
          "\"\(option)\" does not apply to \(format); it applies to " + formats.filter { $0 != "auto" }.joined(separator: ", ")))
    }
    return problems
  }

  /// The stage these options describe.
  public var encoder: ImageEncoder {
    let encodeFormat: EncodeFormat
    switch format {
    case "jpeg": encodeFormat = .jpeg(quality: quality ?? 80, progressive: progressive)
    case "png": encodeFormat = .png(compression: compression, palette: palette, quality: quality ?? 100)
    case "webp": encodeFormat = .webp(quality: quality ?? 80, lossless: lossless, effort: effort ?? 4)
    case "avif": encodeFormat = .avif(quality: quality ?? 50, lossless: lossless, effort: effort ?? 4)
    case "gif": encodeFormat = .gif(effort: effort ?? 7)
    default: encodeFormat = .auto(quality: quality, lossless: lossless, effort: effort)
    }
    return ImageEncoder(
      encodeFormat, keepMetadata: keepMetadata, background: Array((Color.parse(background) ?? [255, 255, 255]).prefix(3)))
  }
}
