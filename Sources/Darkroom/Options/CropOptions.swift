/// JSON options of the `crop` stage: either `rect` (relative by default, or `unit: "pixels"`), or
/// `width` and `height` with a `gravity` (a compass point, or `attention` / `entropy` for a smart
/// crop).
package struct CropOptions: StageOptions {
  public struct Rect: Codable, Sendable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double
  }

  public var rect: Rect?
  public var unit: String
  public var width: Int?
  public var height: Int?
  public var gravity: String

  static let gravities = Gravity.allCases.map(\.rawValue) + SmartCropStrategy.allCases.map(\.rawValue)

  public static let specs = [
    OptionSpec(
      "rect",
      .object([
        // At most 2^31 − 1, the largest coordinate libvips takes (a larger number trapped
        // converting to Int).
        OptionSpec("x", .number(min: 0, max: 2_147_483_647), required: true, "Left edge."),
        OptionSpec("y", .number(min: 0, max: 2_147_483_647), required: true, "Top edge."),
        OptionSpec("width", .number(min: 0, max: 2_147_483_647), required: true, "Width (greater than 0)."),
        OptionSpec("height", .number(min: 0, max: 2_147_483_647), required: true, "Height (greater than 0)."),
      ]), "The rectangle to keep, in `unit`s."),
    OptionSpec(
      "unit", .choice(["relative", "pixels"]), default: "relative", "Units of `rect`: fractions 0…1 of the image, or pixels."),
    OptionSpec("width", .integer(min: 1), "Width in pixels of a box crop (with `gravity`; instead of `rect`)."),
    OptionSpec("height", .integer(min: 1), "Height in pixels of a box crop (with `gravity`; instead of `rect`)."),
    OptionSpec(
      "gravity", .choice(gravities), default: "centre",
      "Where a box crop is anchored; `attention` or `entropy` picks the most interesting area."),
  ]

  public func problems() -> [OptionProblem] {
    var problems: [OptionProblem] = []
    switch (rect, width, height) {
    case (nil, nil, nil):
      problems.append(OptionProblem("give either \"rect\" or \"width\" and \"height\" to say what to keep"))
    case (_?, _, _) where width != nil || height != nil:
      problems.append(OptionProblem("give either \"rect\" or \"width\"/\"height\", not both"))
    case (nil, nil, _?), (nil, _?, nil):
      problems.append(OptionProblem(option: width == nil ? "width" : "height", "a box crop needs both \"width\" and \"height\""))
    default: break
    }
    if let rect {
      if rect.width <= 0 || rect.height <= 0 {
        problems.append(OptionProblem(option: "rect", "width and height must be greater than 0"))
      }
      if unit == "relative" {
        for (name, value) in [("x", rect.x), ("y", rect.y), ("width", rect.width), ("height", rect.height)] where value > 1 {
          problems.append(OptionProblem(option: "rect.\(name)", "relative coordinates run from 0 to 1, got \(value)"))
        }
        if rect.x + rect.width > 1.000_001 {
          problems.append(OptionProblem(option: "rect", "x + width is \(rect.x + rect.width), past the right edge (1)"))
        }
        if rect.y + rect.height > 1.000_001 {
          problems.append(OptionProblem(option: "rect", "y + height is \(rect.y + rect.height), past the bottom edge (1)"))
        }
      } else {
        for (name, value) in [("x", rect.x), ("y", rect.y), ("width", rect.width), ("height", rect.height)]
        where value.rounded() != value {
          problems.append(OptionProblem(option: "rect.\(name)", "pixel coordinates are whole numbers, got \(value)"))
        }
      }
    }
    return problems
  }

  /// The region these options describe (valid once ``problems()`` is empty).
  public var region: CropRegion {
    if let rect {
      if unit == "pixels" { return .pixels(x: Int(rect.x), y: Int(rect.y), width: Int(rect.width), height: Int(rect.height)) }
      return .relative(x: rect.x, y: rect.y, width: rect.width, height: rect.height)
    }
    let w = width ?? 1
    let h = height ?? 1
    if let strategy = SmartCropStrategy(rawValue: gravity) { return .smart(width: w, height: h, strategy: strategy) }
    return .box(width: w, height: h, gravity: Gravity(rawValue: gravity) ?? .centre)
  }
}
