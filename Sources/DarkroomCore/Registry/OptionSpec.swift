/// The declared shape of one stage option: name, type and range, default, and meaning.
///
/// Option specs are the single source of truth for validating JSON definitions, for defaults,
/// for `darkroom stages`, for the generated JSON Schema and for `Docs/PipelineJSON.md`.
///
/// ```swift
/// OptionSpec("quality", .integer(min: 1, max: 100), default: 80, "Encoder quality, 1 (smallest) to 100 (best).")
/// ```
public struct OptionSpec: Sendable {
  public var name: String
  public var type: OptionType
  /// The value used when the option is absent; `nil` when absence means "not set".
  public var defaultValue: JSONValue?
  /// Whether the option must be given.
  public var required: Bool
  /// One or two sentences: what it does.
  public var summary: String

  public init(
    _ name: String, _ type: OptionType, default defaultValue: JSONValue? = nil, required: Bool = false, _ summary: String
  ) {
    self.name = name
    self.type = type
    self.defaultValue = defaultValue
    self.required = required
    self.summary = summary
  }
}

/// The type and range of an option value.
///
/// ```swift
/// OptionType.integer(min: 1, max: 100).expectation   // "an integer from 1 to 100"
/// OptionType.choice(["fit", "fill"]).expectation      // "one of \"fit\", \"fill\""
/// OptionType.stringMap.typeName                       // "object (string → string)"
/// ```
public indirect enum OptionType: Sendable {
  /// A whole number within the inclusive range.
  case integer(min: Int? = nil, max: Int? = nil)
  /// Any number within the inclusive range.
  case number(min: Double? = nil, max: Double? = nil)
  case string
  case boolean
  /// One of the listed strings.
  case choice([String])
  /// One of the listed strings, or `false` (a feature that is on in some way, or off).
  case choiceOrFalse([String])
  /// An object with the listed options.
  case object([OptionSpec])
  /// An object of string values with free keys (HTTP headers).
  case stringMap
  /// An array of strings.
  case stringList

  /// What values of this type look like, for messages and docs ("an integer from 1 to 100").
  public var expectation: String {
    switch self {
    case .integer(let min, let max):
      switch (min, max) {
      case (1?, nil): return "a positive integer"
      case (0?, nil): return "a non-negative integer"
      case (let min?, let max?): return "an integer from \(min) to \(max)"
      case (let min?, nil): return "an integer of at least \(min)"
      case (nil, let max?): return "an integer of at most \(max)"
      case (nil, nil): return "an integer"
      }
    case .number(let min, let max):
      switch (min, max) {
      case (let min?, let max?): return "a number from \(OptionType.format(min)) to \(OptionType.format(max))"
      case (let min?, nil): return "a number of at least \(OptionType.format(min))"
      case (nil, let max?): return "a number of at most \(OptionType.format(max))"
      case (nil, nil): return "a number"
      }
    case .string: return "a string"
    case .boolean: return "true or false"
    case .choice(let values): return "one of " + values.map { "\"\($0)\"" }.joined(separator: ", ")
    case .choiceOrFalse(let values): return values.map { "\"\($0)\"" }.joined(separator: ", ") + " or false"
    case .object(let specs): return "an object with " + specs.map { "\"\($0.name)\"" }.joined(separator: ", ")
    case .stringMap: return "an object of strings"
    case .stringList: return "an array of strings"
    }
  }

  /// The short type name used in tables ("integer", "string").
  public var typeName: String {
    switch self {
    case .integer: "integer"
    case .number: "number"
    case .string: "string"
    case .boolean: "boolean"
    case .choice: "string (enum)"
    case .choiceOrFalse: "string (enum) or false"
    case .object: "object"
    case .stringMap: "object (string → string)"
    case .stringList: "array of strings"
    }
  }

  static func format(_ value: Double) -> String {
    value.rounded() == value && abs(value) < 1e15 ? String(Int(value)) : String(value)
  }
}

/// A problem a stage's options have as a whole (two options that exclude each other, say),
/// reported by ``StageOptions/problems()``.
///
/// ```swift
/// struct BoxOptions: StageOptions {
///   static let specs = [OptionSpec("width", .integer(min: 1), "Width."), OptionSpec("height", .integer(min: 1), "Height.")]
///   var width: Int?, height: Int?
///   func problems() -> [OptionProblem] { width == nil && height == nil ? [OptionProblem("give width or height")] : [] }
/// }
/// ```
public struct OptionProblem: Sendable, Equatable {
  /// The option concerned, or `nil` for the stage as a whole.
  public var option: String?
  public var message: String

  public init(option: String? = nil, _ message: String) {
    self.option = option
    self.message = message
  }
}
