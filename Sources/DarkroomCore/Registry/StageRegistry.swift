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
    /// True for kinds whose value passes through unchanged and whose type comes from the stage
    /// before them (caches, notifiers).
    public let passesThrough: Bool
    /// Builds the stage; `valueType` is the type flowing in, for pass-through kinds.
    let make: @Sendable (JSONValue, StageBuildContext, _ valueType: any Sendable.Type) throws -> AnyStage
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
      kind: kind, summary: summary, specs: O.specs, inputType: S.Input.self, outputType: S.Output.self, passesThrough: false,
      make: { json, context, _ in AnyStage(try make(try StageRegistry.decode(O.self, json), context)) })
    add(entry)
  }

  /// Registers (or replaces) a pass-through kind: a stage that hands its input on unchanged
  /// (a cache, a notifier) and so fits anywhere. Its value type is the output type of the stage
  /// before it (a source, for the first stage); `make` returns a factory that builds the stage
  /// for that type.
  ///
  /// ```swift
  /// registry.registerPassThrough("tap", summary: "Counts values.", options: NoOptions.self) { _, _ in TapFactory() }
  /// ```
  public mutating func registerPassThrough<O: StageOptions>(
    _ kind: String, summary: String, options: O.Type,
    make: @escaping @Sendable (O, StageBuildContext) throws -> any PassThroughStageFactory
  ) {
    let entry = Entry(
      kind: kind, summary: summary, specs: O.specs, inputType: PassThroughValue.self, outputType: PassThroughValue.self,
      passesThrough: true,
      make: { json, context, valueType in
        let factory = try make(try StageRegistry.decode(O.self, json), context)
        return try factory.makeErasedStage(for: valueType)
      })
    add(entry)
  }

  private mutating func add(_ entry: Entry) {
    if entries.updateValue(entry, forKey: entry.kind) == nil { order.append(entry.kind) }
  }

  static func decode<O: StageOptions>(_ type: O.Type, _ json: JSONValue) throws -> O {
    let decoded = try JSONDecoder().decode(O.self, from: Data(json.jsonText.utf8))
    let problems = decoded.problems()
    if !problems.isEmpty { throw OptionProblems(problems: problems) }
    return decoded
  }

  /// The entry for a kind.
  public func entry(for kind: String) -> Entry? { entries[kind] }

  /// Every registered kind, in registration order.
  public var kinds: [String] { order }

  /// Every entry, in registration order.
  public var allEntries: [Entry] { order.compactMap { entries[$0] } }

  /// Kinds that turn a `from` value into a `to` value, for "add a … stage" hints.
  public func kinds(from: any Sendable.Type, to: any Sendable.Type) -> [String] {
    allEntries.filter { !$0.passesThrough }.filter {
      ObjectIdentifier($0.inputType) == ObjectIdentifier(from) && ObjectIdentifier($0.outputType) == ObjectIdentifier(to)
    }.map(\.kind)
  }

  /// Kinds whose output is a `to` value.
  public func kinds(producing to: any Sendable.Type) -> [String] {
    allEntries.filter { !$0.passesThrough }.filter { ObjectIdentifier($0.outputType) == ObjectIdentifier(to) }.map(\.kind)
  }
}

/// Thrown by a registry factory when ``StageOptions/problems()`` is not empty.
struct OptionProblems: Error {
  let problems: [OptionProblem]
}

/// Builds a pass-through stage for the value type it turns out to carry (see
/// ``StageRegistry/registerPassThrough(_:summary:options:make:)``).
///
/// ```swift
/// struct PeekFactory: PassThroughStageFactory {
///   func makeStage<Value: Sendable>(for type: Value.Type) throws -> AnyStage { AnyStage(Peek<Value>()) }
/// }
/// registry.registerPassThrough("peek", summary: "Logs and passes on.", options: PeekOptions.self) { _, _ in PeekFactory() }
/// ```
public protocol PassThroughStageFactory: Sendable {
  /// The stage for values of type `Value` (its input and output).
  func makeStage<Value: Sendable>(for type: Value.Type) throws -> AnyStage
}

extension PassThroughStageFactory {
  /// Opens an existential metatype and builds the stage for it. (A distinct name: an overload of
  /// `makeStage(for:)` taking the existential would be chosen for the call inside and recurse.)
  func makeErasedStage(for type: any Sendable.Type) throws -> AnyStage {
    func open<Value: Sendable>(_ type: Value.Type) throws -> AnyStage { try makeStage(for: type) }
    return try open(type)
  }
}

/// Stands for "whatever value flows here" in the description of pass-through kinds.
package enum PassThroughValue: PipelineValue {
  public static let valueDescription = "any value (passed through unchanged)"
}
