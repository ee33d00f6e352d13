/// Which stage of a running pipeline an event is about.
public struct StageInfo: Sendable, Hashable, Codable, CustomStringConvertible {
  /// The position in the pipeline as it runs (after fusion).
  public var index: Int
  /// The stage kind, `+`-joined for fused stages.
  public var kind: String
  /// The configuration identifier.
  public var identifier: String
  /// The kinds a fused stage replaced (empty otherwise).
  public var fusedKinds: [String]

  public init(index: Int, kind: String, identifier: String, fusedKinds: [String] = []) {
    self.index = index
    self.kind = kind
    self.identifier = identifier
    self.fusedKinds = fusedKinds
  }

  public init(index: Int, stage: AnyStage) {
    self.init(index: index, kind: stage.kind, identifier: stage.identifier, fusedKinds: stage.fusedKinds)
  }

  public var description: String { "stages[\(index)] \(kind)" }
}
