/// A typed pipeline: stages from `Input` to `Output`, checked by the compiler.
///
/// Build it with the result builder, where each stage's input must be the previous stage's
/// output, or imperatively with ``appending(_:)``; load the same thing from JSON with
/// ``PipelineDefinition``. Running it starts a ``PipelineOperation``.
///
/// ```swift
/// let thumbnail = Pipeline(name: "thumbnail") {
///   Fetcher()
///   ImageDecoder()
///   Resizer(width: 300, height: 300, mode: .fit)
///   ImageEncoder(.jpeg(quality: 80))
/// }
/// let image = try await thumbnail.run(ImageSource("photo.jpg")).value   // EncodedImage
/// ```
public struct Pipeline<Input: Sendable, Output: Sendable>: Sendable {
  /// The validated, optimized stages.
  public let graph: StageGraph

  /// The name used in events and errors.
  public var name: String { graph.name }

  /// Builds a pipeline with the result builder. `fusion: false` turns the optimizer off.
  public init(name: String = "pipeline", fusion: Bool = true, @PipelineBuilder _ content: () -> StageChain<Input, Output>) {
    // The builder guarantees the types line up and that there is at least one stage.
    self.graph = StageGraph.unchecked(name: name, stages: content().stages, fusion: fusion)
  }

  /// Starts a pipeline with one stage, to extend with ``appending(_:)``.
  public init<S: Stage>(name: String = "pipeline", fusion: Bool = true, _ first: S) where S.Input == Input, S.Output == Output {
    self.graph = StageGraph.unchecked(name: name, stages: [AnyStage(first)], fusion: fusion)
  }

  /// Wraps an untyped graph (for example one loaded from JSON), checking that its input and output
  /// types are `Input` and `Output`.
  public init(_ graph: StageGraph) throws(PipelineError) {
    let outputMatches = Output.self == (any Sendable).self || ObjectIdentifier(graph.outputType) == ObjectIdentifier(Output.self)
    guard ObjectIdentifier(graph.inputType) == ObjectIdentifier(Input.self), outputMatches else {
      throw PipelineError(
        .typeMismatch,
        "pipeline \"\(graph.name)\" turns \(valueDescription(of: graph.inputType)) into \(valueDescription(of: graph.outputType)), "
          + "not \(valueDescription(of: Input.self)) into \(valueDescription(of: Output.self))")
    }
    self.graph = graph
  }

  private init(graph: StageGraph) { self.graph = graph }

  /// A new pipeline with `stage` added at the end.
  public func appending<S: Stage>(_ stage: S) -> Pipeline<Input, S.Output> where S.Input == Output {
    Pipeline<Input, S.Output>(
      graph: StageGraph.unchecked(name: name, stages: graph.stages + [AnyStage(stage)], fusion: graph.fusionEnabled))
  }

  /// A copy with the optimizer switched on or off.
  public func fusion(_ enabled: Bool) -> Pipeline { Pipeline(graph: graph.fusion(enabled)) }

  /// Starts an operation that runs the pipeline on `input`.
  public func run(_ input: Input, options: RunOptions = RunOptions()) -> PipelineOperation<Output> {
    PipelineExecutor().start(graph, input: input, options: options, as: Output.self)
  }

  /// Runs the pipeline and returns its output (a shortcut for `run(input).value`).
  public func process(_ input: Input, options: RunOptions = RunOptions()) async throws -> Output {
    try await run(input, options: options).value
  }
}

extension StageGraph {
  /// A graph whose neighbours were checked by the compiler (builder, `appending`).
  static func unchecked(name: String, stages: [AnyStage], fusion: Bool) -> StageGraph {
    StageGraph(trusting: name, stages: stages, fusion: fusion)
  }
}
