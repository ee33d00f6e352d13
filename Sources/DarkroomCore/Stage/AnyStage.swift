/// A type-erased stage: what pipelines store and the executor runs.
///
/// Pipelines built in code keep their static types in ``Pipeline``; underneath, they and pipelines
/// loaded from JSON are the same list of `AnyStage`, whose input and output types are checked
/// when the list is assembled.
///
/// ```swift
/// let stage = AnyStage(Fetcher())
/// stage.kind                        // "fetch"
/// stage.accepts(ImageSource.self)   // true
/// stage.feeds(AnyStage(Fetcher()))  // false: fetch produces FetchedData
/// ```
public struct AnyStage: Sendable, CustomStringConvertible {
  /// The stage kind (`"resize"`), or kinds joined by `+` for a fused stage (`"decode+resize"`).
  public let kind: String
  /// The configuration identifier.
  public let identifier: String
  /// The identifier cache keys and shared work use (``Stage/cacheIdentifier``).
  public let cacheIdentifier: String
  /// The kinds this stage was fused from, in order (empty when it was not fused).
  public let fusedKinds: [String]
  /// The input type.
  public let inputType: any Sendable.Type
  /// The output type.
  public let outputType: any Sendable.Type
  /// The wrapped stage value, for optimizers that recognise stage types.
  public let base: any Sendable
  private let body: @Sendable (any Sendable, StageContext) async throws -> any Sendable
  private let resourceBody: @Sendable (any Sendable) -> StageResource

  /// Wraps a stage.
  public init<S: Stage>(_ stage: S) {
    self.init(stage, kind: S.kind, identifier: stage.identifier, fusedKinds: [])
  }

  /// Wraps a stage under a given kind and identifier (used for fused stages).
  public init<S: Stage>(_ stage: S, kind: String, identifier: String, fusedKinds: [String]) {
    self.kind = kind
    self.identifier = identifier
    self.cacheIdentifier = stage.cacheIdentifier == stage.identifier ? identifier : identifier + "#" + stage.cacheIdentifier
    self.fusedKinds = fusedKinds
    self.inputType = S.Input.self
    self.outputType = S.Output.self
    self.base = stage
    self.resourceBody = { input in (input as? S.Input).map { stage.resource(for: $0) } ?? .cpu }
    self.body = { input, context in
      guard let typed = input as? S.Input else {
        throw PipelineError(
          .typeMismatch,
          "stage \"\(S.kind)\" needs \(valueDescription(of: S.Input.self)) but was given \(valueDescription(of: type(of: input)))",
          stageKind: S.kind, stageIdentifier: stage.identifier)
      }
      return try await stage.process(typed, context: context)
    }
  }

  /// Runs the stage on an input of its input type.
  public func process(_ input: any Sendable, context: StageContext) async throws -> any Sendable {
    try await body(input, context)
  }

  /// Whether this stage accepts a value of `type`.
  /// What processing `input` mostly uses (see ``Stage/resource(for:)``).
  public func resource(for input: any Sendable) -> StageResource { resourceBody(input) }

  public func accepts(_ type: any Sendable.Type) -> Bool { ObjectIdentifier(type) == ObjectIdentifier(inputType) }

  /// Whether the output of this stage can feed `next`.
  public func feeds(_ next: AnyStage) -> Bool { next.accepts(outputType) }

  public var description: String { identifier }
}
