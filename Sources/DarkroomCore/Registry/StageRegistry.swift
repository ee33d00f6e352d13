import Foundation

/// The stage kinds a JSON definition may name: kind → options type + factory.
///
/// This is Darkroom's plugin mechanism. `Darkroom.standardRegistry` holds the built-in kinds
/// (`fetch`, `decode`, `crop`, `resize`, `encode`, `write`); a user's stage registers the same way
/// and is then usable from JSON, validated like the built-in ones.
///
/// ```swift
/// var registry = Darkroom.standardRegistry
/// registry.register("watermark", summary: "Draws a text watermark.", options: WatermarkOptions.self) { options, _ in
///   Watermark(text: options.text, opacity: options.opacity)
/// }
/// let graph = try PipelineDefinition.load(contentsOf: "marked.json", registry: registry)
/// ```
public struct StageRegistry: Sendable {
  /// One registered kind.
  public struct Entry: Sendable {
    public let kind: String
    public let summary: String
    public let specs: [OptionSpec]
    public let inputType: any Sendable.Type
    public let outputType: any Sendable.Type
    let make: @Sendable (JSONValue, StageBuildContext) throws -> AnyStage
  }

  private var entries: [String: Entry] = [:]
  private var order: [String] = []

  /// An empty registry.
  public init() {}

  /// Registers (or replaces) a stage kind. `make` receives the validated options and the build
  /// context and returns the stage; it may throw a ``PipelineError`` for problems the option
  /// specs cannot express.
  public mutating func register<O: StageOptions, S: Stage>(
    _ kind: String, summary: String, options: O.Type,
    make: @escaping @Sendable (O, StageBuildContext) throws -> S
  ) {
    let entry = Entry(
      kind: kind, summary: summary, specs: O.specs, inputType: S.Input.self, outputType: S.Output.self,
      make: { json, context in
        let decoded = try JSONDecoder().decode(O.self, from: Data(json.jsonText.utf8))
        let problems = decoded.problems()
        if !problems.isEmpty { throw OptionProblems(problems: problems) }
        return AnyStage(try make(decoded, context))
      })
    if entries.updateValue(entry, forKey: kind) == nil { order.append(kind) }
  }

  /// The entry for a kind.
  public func entry(for kind: String) -> Entry? { entries[kind] }

  /// Every registered kind, in registration order.
  public var kinds: [String] { order }

  /// Every entry, in registration order.
  public var allEntries: [Entry] { order.compactMap { entries[$0] } }

  /// Kinds that turn a `from` value into a `to` value, for "add a … stage" hints.
  public func kinds(from: any Sendable.Type, to: any Sendable.Type) -> [String] {
    allEntries.filter {
      ObjectIdentifier($0.inputType) == ObjectIdentifier(from) && ObjectIdentifier($0.outputType) == ObjectIdentifier(to)
    }.map(\.kind)
  }

  /// Kinds whose output is a `to` value.
  public func kinds(producing to: any Sendable.Type) -> [String] {
    allEntries.filter { ObjectIdentifier($0.outputType) == ObjectIdentifier(to) }.map(\.kind)
  }
}

/// Thrown by a registry factory when ``StageOptions/problems()`` is not empty.
struct OptionProblems: Error {
  let problems: [OptionProblem]
}
