/// The options of a stage kind, decoded from a JSON stage object.
///
/// Declare every option in ``specs``; the registry checks a JSON stage against them (names,
/// types, ranges), fills in the defaults, decodes the type with `Codable`, then asks
/// ``problems()`` for checks that involve several options.
///
/// ```swift
/// struct WatermarkOptions: StageOptions {
///   var text: String
///   var opacity: Double
///   static let specs = [
///     OptionSpec("text", .string, required: true, "The text to draw."),
///     OptionSpec("opacity", .number(min: 0, max: 1), default: 0.5, "0 transparent … 1 opaque."),
///   ]
/// }
/// ```
public protocol StageOptions: Codable, Sendable {
  /// Every option this stage kind accepts.
  static var specs: [OptionSpec] { get }
  /// Problems involving several options; empty when the options are consistent.
  func problems() -> [OptionProblem]
}

extension StageOptions {
  public func problems() -> [OptionProblem] { [] }
}

/// Options for a stage kind that takes none.
package struct NoOptions: StageOptions {
  public static let specs: [OptionSpec] = []
  public init() {}
}
