/// Which stage of a running pipeline an event is about.
///
/// ```swift
/// struct StageTimer: OperationObserver {
///   func operation(_ operation: OperationInfo, didFinishStage stage: StageInfo, duration: Duration) {
///     print(stage, stage.joined ? "(joined)" : "", duration)   // stages[1] decode 0.012 seconds
///   }
/// }
/// ```
public struct StageInfo: Sendable, Hashable, Codable, CustomStringConvertible {
  /// The position in the pipeline as it runs (after fusion).
  public var index: Int
  /// The stage kind, `+`-joined for fused stages.
  public var kind: String
  /// The configuration identifier.
  public var identifier: String
  /// The kinds a fused stage replaced (empty otherwise).
  public var fusedKinds: [String]

  /// True when this run did not run the stage itself but joined identical in-flight work of
  /// another run (see ``ImageLoader``).
  public var joined: Bool

  public init(index: Int, kind: String, identifier: String, fusedKinds: [String] = [], joined: Bool = false) {
    self.index = index
    self.kind = kind
    self.identifier = identifier
    self.fusedKinds = fusedKinds
    self.joined = joined
  }

  public init(index: Int, stage: AnyStage, joined: Bool = false) {
    self.init(index: index, kind: stage.kind, identifier: stage.identifier, fusedKinds: stage.fusedKinds, joined: joined)
  }

  public var description: String { "stages[\(index)] \(kind)" }
}
