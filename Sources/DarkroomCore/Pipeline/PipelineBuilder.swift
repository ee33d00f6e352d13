/// A typed run of stages, as the result builder assembles it.
///
/// ```swift
/// @PipelineBuilder func decoding() -> StageChain<ImageSource, DecodedImage> {
///   Fetcher()
///   ImageDecoder()
/// }
/// decoding().stages.map(\.kind)   // ["fetch", "decode"]
/// ```
public struct StageChain<Input: Sendable, Output: Sendable>: Sendable {
  /// The stages in order.
  public let stages: [AnyStage]

  init(stages: [AnyStage]) { self.stages = stages }
}

/// Composes stages into a pipeline, checking at compile time that each stage's `Input` is the
/// previous stage's `Output`.
///
/// A stage that does not fit is a compile error, not a runtime surprise. Pipelines can be nested
/// as components.
///
/// ```swift
/// let decode = Pipeline(name: "decode") { Fetcher(); ImageDecoder() }
/// let avatar = Pipeline(name: "avatar") {
///   decode
///   Cropper(rect: .relative(x: 0.1, y: 0.1, width: 0.8, height: 0.8))
///   Resizer(width: 256, height: 256, mode: .fill)
///   ImageEncoder(.webp(quality: 80))
/// }
/// ```
@resultBuilder
public enum PipelineBuilder {
  public static func buildExpression<S: Stage>(_ stage: S) -> StageChain<S.Input, S.Output> {
    StageChain(stages: [AnyStage(stage)])
  }

  public static func buildExpression<I, O>(_ pipeline: Pipeline<I, O>) -> StageChain<I, O> {
    StageChain(stages: pipeline.graph.stages)
  }

  public static func buildPartialBlock<I, O>(first: StageChain<I, O>) -> StageChain<I, O> { first }

  public static func buildPartialBlock<I, M, O>(accumulated: StageChain<I, M>, next: StageChain<M, O>) -> StageChain<I, O> {
    StageChain(stages: accumulated.stages + next.stages)
  }
}
