/// A value that flows between stages and can describe itself in messages.
///
/// Conforming is optional: it gives validation messages a readable name for the type
/// ("stages[2] `resize` needs an image but stages[1] `fetch` produces bytes"). Without it the
/// Swift type name is used.
///
/// ```swift
/// struct Histogram: PipelineValue { static let valueDescription = "a histogram" }
/// ```
public protocol PipelineValue: Sendable {
  /// A short noun phrase with its article: "bytes", "an image", "an encoded image".
  static var valueDescription: String { get }
}

/// A value that can summarise itself for events and notifications (dimensions, format, size, path).
///
/// ```swift
/// struct Histogram: PipelineValue, SummarizableOutput {
///   static let valueDescription = "a histogram"
///   var bins: [Int]
///   var outputSummary: OutputSummary { OutputSummary(bytes: bins.count * MemoryLayout<Int>.size) }
/// }
/// ```
public protocol SummarizableOutput: Sendable {
  /// What events report about this value when an operation finishes with it.
  var outputSummary: OutputSummary { get }
}

/// What an operation's `finished` event says about its result.
///
/// ```swift
/// let summary = WrittenFile(path: "out/a.jpg", bytes: 2048).outputSummary
/// summary.path    // "out/a.jpg"
/// summary.bytes   // 2048
/// ```
public struct OutputSummary: Sendable, Equatable, Codable {
  public var width: Int?
  public var height: Int?
  public var format: String?
  public var bytes: Int?
  /// Where the result was written, when it was written.
  public var path: String?
  /// True when a lenient decoder accepted damaged data and the image is incomplete.
  public var partial: Bool

  public init(
    width: Int? = nil, height: Int? = nil, format: String? = nil, bytes: Int? = nil, path: String? = nil,
    partial: Bool = false
  ) {
    self.width = width
    self.height = height
    self.format = format
    self.bytes = bytes
    self.path = path
    self.partial = partial
  }
}

/// The readable name of a value type, for messages.
public func valueDescription(of type: Any.Type) -> String {
  if let described = type as? any PipelineValue.Type { return described.valueDescription }
  return "a value of type \(String(reflecting: type))"
}

/// What `value` says about itself (``SummarizableOutput``), or `nil` when it cannot say.
package func outputSummary(of value: any Sendable) -> OutputSummary? {
  (value as? any SummarizableOutput)?.outputSummary
}
