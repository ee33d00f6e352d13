/// The checkpoints of one run: their keys, the lookup that lets a run resume after the latest one
/// holding a value, and the stores when the run finishes.
struct Checkpoints: Sendable {
  let stages: [AnyStage]
  /// Stage index → key, for every checkpoint stage.
  let keys: [Int: String]

  init(stages: [AnyStage], input: any Sendable, source: ImageSource?) {
    self.stages = stages
    let identity = source?.identity ?? String(describing: input)
    var keys: [Int: String] = [:]
    for (index, stage) in stages.enumerated() {
      guard let checkpoint = stage.base as? any CheckpointStage else { continue }
      let upstream = stages[..<index].filter { !($0.base is any CheckpointStage) }.map(\.identifier)
      keys[index] = CacheKey.make(prefix: checkpoint.keyPrefix, source: identity, upstream: upstream)
    }
    self.keys = keys
  }

  /// The latest checkpoint whose store has the value, with that value; misses are noted.
  func resume(context: StageContext) async throws -> (index: Int, value: any Sendable)? {
    for index in keys.keys.sorted(by: >) {
      guard let key = keys[index], let checkpoint = stages[index].base as? any CheckpointStage else { continue }
      if let hit = try await checkpoint.lookup(key: key),
        ObjectIdentifier(type(of: hit)) == ObjectIdentifier(stages[index].outputType)
      {
        context.reportCache(CacheEvent(.hit, store: checkpoint.storeName, stageIndex: index))
        return (index, hit)
      }
      context.reportCache(CacheEvent(.miss, store: checkpoint.storeName, stageIndex: index))
    }
    return nil
  }

  /// Stores the values of checkpoints that ran (they missed); a failing store is noted, not fatal.
  func store(_ pending: [(index: Int, value: any Sendable)], freshness: Freshness?, context: StageContext) async {
    for (index, value) in pending {
      guard let key = keys[index], let checkpoint = stages[index].base as? any CheckpointStage else { continue }
      do {
        try await checkpoint.store(value, key: key, freshness: freshness)
        context.reportCache(CacheEvent(.stored, store: checkpoint.storeName, stageIndex: index))
      } catch {
        context.reportCache(CacheEvent(.storeFailed, store: checkpoint.storeName, stageIndex: index, detail: "\(error)"))
      }
    }
  }
}
