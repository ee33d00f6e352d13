/// A validated list of stages: each stage's output is the next stage's input.
///
/// Every front-end — the result builder, ``Pipeline/appending(_:)`` and JSON definitions —
/// produces a `StageGraph`, and one executor runs it. Creating a graph checks the neighbours;
/// ``runnableStages`` is the list after the optimizer fused what it could (unless fusion is off).
///
/// ```swift
/// let graph = try StageGraph(name: "thumb", stages: [AnyStage(Fetcher()), AnyStage(ImageDecoder())])
/// print(graph.runnableStages.map(\.kind))
/// ```
public struct StageGraph: Sendable {
  /// The pipeline name, used in events and errors.
  public let name: String
  /// The stages as declared.
  public let stages: [AnyStage]
  /// Whether the optimizer may fuse neighbouring stages (shrink-on-load and the like).
  public let fusionEnabled: Bool
  /// The stages as they run: ``stages`` after fusion when ``fusionEnabled``.
  public let runnableStages: [AnyStage]
  /// The layer factories the runnable stages bring (``LayeredStage``), one per key: found once
  /// here instead of by every run of the graph.
  let broughtLayers: [any RunLayerFactory]

  /// Validates and optimizes a list of stages. Throws `typeMismatch` naming both stages when two
  /// neighbours do not fit, and `invalidDefinition` when the list is empty.
  public init(name: String, stages: [AnyStage], fusion: Bool = true) throws(PipelineError) {
    guard !stages.isEmpty else {
      throw PipelineError(.invalidDefinition, "pipeline \"\(name)\" has no stages: add at least one stage")
    }
    for index in stages.indices.dropFirst() where !stages[index - 1].feeds(stages[index]) {
      let issue = StageGraph.mismatch(previous: stages[index - 1], index: index, next: stages[index], path: "stages[\(index)]")
      throw PipelineError(.typeMismatch, issue.message, stageKind: stages[index].kind, path: issue.path, issues: [issue])
    }
    self.init(trusting: name, stages: stages, fusion: fusion)
  }

  /// Assembles a graph whose neighbours are known to fit.
  init(trusting name: String, stages: [AnyStage], fusion: Bool) {
    self.name = name
    self.stages = stages
    self.fusionEnabled = fusion
    self.runnableStages = fusion ? StageGraph.fuse(stages) : stages
    self.broughtLayers = runnableStages.broughtLayers
  }

  /// The type the first stage accepts.
  public var inputType: any Sendable.Type { stages[0].inputType }
  /// The type the last stage produces.
  public var outputType: any Sendable.Type { stages[stages.count - 1].outputType }

  /// A copy with fusion switched on or off.
  public func fusion(_ enabled: Bool) -> StageGraph {
    StageGraph(trusting: name, stages: stages, fusion: enabled)
  }

  /// Lets each fusible stage absorb the stages after it, left to right.
  static func fuse(_ stages: [AnyStage]) -> [AnyStage] {
    var result: [AnyStage] = []
    var index = 0
    while index < stages.count {
      let stage = stages[index]
      let following = stages[(index + 1)...]
      if let fusible = stage.base as? any FusibleStage, let merged = fusible.fused(with: following),
        merged.absorbed > 0, merged.absorbed <= following.count,
        ObjectIdentifier(merged.stage.outputType) == ObjectIdentifier(stages[index + merged.absorbed].outputType)
      {
        result.append(merged.stage)
        index += merged.absorbed + 1
      } else {
        result.append(stage)
        index += 1
      }
    }
    return result
  }

  /// The message for two neighbours that do not fit, with a fix when a registered kind bridges them.
  static func mismatch(
    previous: AnyStage, index: Int, next: AnyStage, path: String, registry: StageRegistry? = nil
  ) -> PipelineError.Issue {
    var message =
      "stages[\(index)] \"\(next.kind)\" needs \(valueDescription(of: next.inputType)) but stages[\(index - 1)] "
      + "\"\(previous.kind)\" produces \(valueDescription(of: previous.outputType))"
    if let bridge = registry?.kinds(from: previous.outputType, to: next.inputType).first {
      message += ": add a \"\(bridge)\" stage between them"
    } else {
      message += ": reorder the stages or add one that turns one into the other"
    }
    return PipelineError.Issue(code: .typeMismatch, path: path, message: message)
  }
}
