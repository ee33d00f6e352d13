/// JSON options of the `resize` stage.
package struct ResizeOptions: StageOptions {
  public var width: Int?
  public var height: Int?
  public var mode: String
  public var kernel: String
  public var upscale: Bool
  public var gravity: String
  public var background: String
  public var dpr: Double

  public static let specs = [
    OptionSpec("width", .integer(min: 1), "Box width in pixels; leave out to scale by height alone."),
    OptionSpec("height", .integer(min: 1), "Box height in pixels; leave out to scale by width alone."),
    OptionSpec(
      "mode", .choice(ResizeMode.allCases.map(\.rawValue)), default: "fit",
      "fit: inside the box; fill: cover the box and crop the excess; stretch: exactly the box; center: no scaling, crop or pad to the box."
    ),
    OptionSpec("kernel", .choice(ResizeKernel.allCases.map(\.rawValue)), default: "lanczos3", "The resampling kernel."),
    OptionSpec("upscale", .boolean, default: false, "Enlarge images smaller than the box."),
    OptionSpec(
      "gravity", .choice(CropOptions.gravities), default: "centre",
      "Where fill crops and center crops or pads; attention/entropy pick the most interesting area (fill)."),
    OptionSpec("background", .string, default: "#000000", "Padding colour for center: #rgb, #rrggbb or #rrggbbaa."),
    OptionSpec(
      "dpr", .number(min: 1, max: 8), default: 1.0,
      "Device pixel ratio: the box is width × dpr by height × dpr pixels (2 for a 2× screen)."),
  ]

  public func problems() -> [OptionProblem] {
    var problems: [OptionProblem] = []
    if width == nil, height == nil { problems.append(OptionProblem("give \"width\", \"height\" or both")) }
    problems += ColourOption.problems(background, option: "background")
    for (name, side) in [("width", width), ("height", height)] {
      if let side, Double(side) * dpr > Double(Int32.max) {
        problems.append(OptionProblem(option: name, "\(name) × dpr must be at most \(Int32.max), got \(side) × \(dpr)"))
      }
    }
    return problems
  }

  /// The stage these options describe.
  public var resizer: Resizer {
    let anchor: Resizer.Anchor =
      SmartCropStrategy(rawValue: gravity).map { .smart($0) } ?? .gravity(Gravity(rawValue: gravity) ?? .centre)
    // Scaled sides round to the nearest pixel (checked to fit by problems()).
    let scaled = { (side: Int?) in side.map { dpr == 1 ? $0 : Int(min((Double($0) * dpr).rounded(), Double(Int32.max))) } }
    return Resizer(
      width: scaled(width), height: scaled(height), mode: ResizeMode(rawValue: mode) ?? .fit,
      kernel: ResizeKernel(rawValue: kernel) ?? .lanczos3,
      upscale: upscale, crop: anchor, background: Color.parse(background) ?? [0, 0, 0, 255])
  }
}

/// Parses `#rgb`, `#rrggbb` and `#rrggbbaa` colours into 0…255 components (RGBA).
package enum Color {
  package static func parse(_ text: String) -> [Double]? {
    guard text.hasPrefix("#") else { return nil }
    var hex = String(text.dropFirst())
    if hex.count == 3 { hex = hex.map { "\($0)\($0)" }.joined() }
    guard hex.count == 6 || hex.count == 8, let value = UInt64(hex, radix: 16) else { return nil }
    let bytes = hex.count == 8 ? 4 : 3
    var components = (0..<bytes).map { Double((value >> (8 * UInt64(bytes - 1 - $0))) & 0xFF) }
    if bytes == 3 { components.append(255) }
    return components
  }
}
