import Foundation

/// The checkpoints of a run, as its layer: before the first stage it resumes after the latest
/// checkpoint holding a usable value (revalidating a stale one through the fetch, with the
/// fetch's scheduling, sharing and time limit); around each stage it keeps what the checkpoints
/// that missed will store and what the fetched response said about freshness; once the output is
/// ready it stores them. `cache` stages bring it (``Cache`` is a ``LayeredStage``).
final class CheckpointLayer: RunLayer {
  struct Factory: RunLayerFactory {
    var key: AnyHashable { "checkpoints" }
    var order: RunLayerOrder { .results }
    func makeLayer(for run: RunPlan) -> (any RunLayer)? { CheckpointLayer() }
  }

  private struct State {
    var checkpoints: Checkpoints?
    /// The values of checkpoints that ran (they missed), to store when the run finishes.
    var pending: [(index: Int, value: any Sendable)] = []
  }
  private let state = Protected(State())

  func resume(from index: Int, value: RunValue, run: RunPlan, runStage: RunPlan.StageRunner) async throws -> Resumption? {
    // The executor asks before each stage and never goes back, so index 0 is asked once.
    guard index == 0 else { return nil }
    let context = run.context
    let checkpoints = try await Checkpoints.prepare(
      stages: run.stages, input: run.input, source: context.source, context: context)
    state.withLock { $0.checkpoints = checkpoints }
    let start = try await checkpoints.start(input: run.input, source: context.source, context: context) { stage, index in
      // Only checkpoints come before the fetch: its input is the run's.
      try await runStage(stage, index, RunValue(run.input)).value
    }
    guard start.index > 0 else { return nil }
    var resumed = RunValue(start.value)
    resumed.annotations[ResponseFacts.self] = start.facts
    return Resumption(value: resumed, next: start.index, kind: .silently)
  }

  func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue {
    var output = try await next(call)
    // A first stage that brings no ResponseFactsLayer; and shared work started by a run that
    // noted nothing hands back a value without facts, while this run's input still has them.
    output.noteResponseFacts()
    if output.annotations[ResponseFacts.self] == nil {
      output.annotations[ResponseFacts.self] = call.input.annotations[ResponseFacts.self]
    }
    let index = call.index
    state.withLock { state in
      guard let checkpoints = state.checkpoints, checkpoints.keys[index] != nil,
        call.stage.cacheIdentifier == checkpoints.stages[index].cacheIdentifier
      else { return }
      state.pending.append((index, output.value))
    }
    return output
  }

  func willFinish(_ output: RunValue, run: RunPlan) async throws {
    let (checkpoints, pending) = state.withLock { ($0.checkpoints, $0.pending) }
    await checkpoints?.store(pending, facts: output.annotations[ResponseFacts.self], context: run.context)
  }
}

extension Cache: LayeredStage {
  /// Checkpoints are kept by the run's ``CheckpointLayer``.
  package var runLayer: (any RunLayerFactory)? { CheckpointLayer.Factory() }
}

/// The checkpoints of one run: their keys, the lookup that lets a run resume after the latest one
/// holding a value (revalidating a stale one), and the stores when the run finishes.
///
/// Keys hold the source's ``ImageSource/requestIdentity`` (a digest of its request headers) and,
/// for a local file, what says which version of the file it is (device, inode, size, modification
/// and change times to the nanosecond): an edited file is a new key, and a file that cannot be
/// inspected gets no checkpoints at all.
struct Checkpoints: Sendable {
  let stages: [AnyStage]
  /// Stage index → key, for every checkpoint stage.
  let keys: [Int: String]
  /// The source's identity, under which stores record entries for purging.
  let identity: String

  /// Where a run starts: the value, the first stage to run, and what is known about freshness.
  struct Start {
    var value: any Sendable
    var index: Int
    var facts: ResponseFacts?
  }

  /// The checkpoints of `stages` for a run on `input`; a local file is inspected on the pool.
  static func prepare(stages: [AnyStage], input: any Sendable, source: ImageSource?, context: StageContext) async throws
    -> Checkpoints
  {
    guard stages.contains(where: { $0.base is any CheckpointStage }) else {
      return Checkpoints(stages: stages, keys: [:], identity: "")
    }
    var keyIdentity = String(describing: input)
    var purgeIdentity = String(describing: input)
    if let source {
      let isFile = if case .file = source.location { true } else { false }
      let found =
        isFile ? try await FileVersion.lookupPool.run { CacheKey.identities(of: source) } : CacheKey.identities(of: source)
      guard let found else { return Checkpoints(stages: stages, keys: [:], identity: source.identity) }
      keyIdentity = found.key
      purgeIdentity = found.recorded
    }
    var keys: [Int: String] = [:]
    for (index, stage) in stages.enumerated() {
      guard let checkpoint = stage.base as? any CheckpointStage else { continue }
      let upstream = stages[..<index].filter { !($0.base is any CheckpointStage) }.map(\.cacheIdentifier)
      keys[index] = CacheKey.make(prefix: checkpoint.keyPrefix, source: keyIdentity, upstream: upstream)
    }
    return Checkpoints(stages: stages, keys: keys, identity: purgeIdentity)
  }

  private func checkpoint(at index: Int) -> (any CheckpointStage)? { stages[index].base as? any CheckpointStage }

  /// Finds the latest checkpoint with a usable value. A fresh one is a hit; a stale one with
  /// validators is revalidated through the fetch, the first stage that is not a checkpoint (a
  /// stand-in for it that sends the validators: ``AnyStage/revalidation(validators:)``), which
  /// `runFetch` runs at its index: `304` refreshes the entry and resumes after it, anything else
  /// resumes after the fetch with the new bytes.
  func start(
    input: any Sendable, source: ImageSource?, context: StageContext,
    runFetch: (_ stage: AnyStage, _ index: Int) async throws -> any Sendable
  ) async throws -> Start {
    // Checkpoints before it pass the source on unchanged.
    let fetchIndex = stages.firstIndex { !($0.base is any CheckpointStage) } ?? stages.count
    for index in keys.keys.sorted(by: >) {
      guard let key = keys[index], let checkpoint = checkpoint(at: index) else { continue }
      let store = checkpoint.cacheStore
      guard let entry = try await store.entry(forKey: key),
        ObjectIdentifier(type(of: entry.value)) == ObjectIdentifier(stages[index].outputType)
      else {
        context.reportCache(CacheEvent(.miss, store: store.name, stageIndex: index, key: key))
        continue
      }
      let now = store.now
      if entry.isFresh(at: now) {
        context.reportCache(CacheEvent(.hit, store: store.name, stageIndex: index, key: key))
        return Start(value: rebound(entry.value, to: source), index: index + 1, facts: ResponseFacts(entry: entry, now: now))
      }
      guard let source, fetchIndex < index, let revalidation = stages[fetchIndex].revalidation(validators: entry.validators)
      else {
        context.reportCache(CacheEvent(.miss, store: store.name, stageIndex: index, key: key, detail: "stale"))
        continue
      }
      let fetched = try await runFetch(revalidation, fetchIndex)
      guard let fetched = fetched as? FetchedData else { break }
      let facts = ResponseFacts(fetched, now: now)
      guard fetched.notModified else {
        context.reportCache(CacheEvent(.miss, store: store.name, stageIndex: index, key: key, detail: "changed"))
        return Start(value: fetched, index: fetchIndex + 1, facts: facts)
      }
      if let sent = entry.validators.etag, let answered = facts.validators.etag, !CacheValidators.sameETag(sent, answered) {
        // A 304 naming another ETag validates another representation, not ours (RFC 9111
        // 4.3.4): the entry is not reused, and the image is fetched again without conditions.
        context.reportCache(
          CacheEvent(.miss, store: store.name, stageIndex: index, key: key, detail: "the 304 named another ETag"))
        let refetched = try await runFetch(stages[fetchIndex], fetchIndex)
        guard let refetched = refetched as? FetchedData else { break }
        guard !refetched.notModified else {
          throw PipelineError(
            .fetchFailed, "the server answered 304 Not Modified to a request without conditions", source: source.description)
        }
        return Start(value: refetched, index: fetchIndex + 1, facts: ResponseFacts(refetched, now: now))
      }
      let validators = facts.validators.isEmpty ? entry.validators : facts.validators
      if let expiry = checkpoint.policy.expiry(
        now: now, freshness: facts.freshness, validators: validators, storeIsMemory: store.name == "memory")
      {
        try await store.refresh(key: key, expiresAt: expiry, validators: validators)
      } else {
        try await store.removeEntry(forKey: key)
      }
      context.reportCache(CacheEvent(.revalidated, store: store.name, stageIndex: index, key: key))
      var refreshed = entry
      refreshed.expiresAt =
        (checkpoint.policy.expiry(now: now, freshness: facts.freshness, validators: validators, storeIsMemory: false) ?? nil)
      refreshed.validators = validators
      return Start(value: rebound(entry.value, to: source), index: index + 1, facts: ResponseFacts(entry: refreshed, now: now))
    }
    return Start(value: input, index: 0, facts: nil)
  }

  /// Stores the values of checkpoints that ran (they missed); a failing store is noted, not fatal.
  func store(_ pending: [(index: Int, value: any Sendable)], facts: ResponseFacts?, context: StageContext) async {
    if facts?.shareable == false {
      for (index, _) in pending {
        guard let key = keys[index], let checkpoint = checkpoint(at: index) else { continue }
        context.reportCache(
          CacheEvent(
            .storeFailed, store: checkpoint.cacheStore.name, stageIndex: index, key: key,
            detail: "not stored: the response is private or varies on every header (Vary: *)"))
      }
      return
    }
    for (index, value) in pending {
      guard let key = keys[index], let checkpoint = checkpoint(at: index) else { continue }
      let store = checkpoint.cacheStore
      let now = store.now
      let validators = facts?.validators ?? .none
      guard
        let expiry = checkpoint.policy.expiry(
          now: now, freshness: facts?.freshness, validators: validators, storeIsMemory: store.name == "memory")
      else { continue }
      do {
        let entry = CacheEntry(value: value, storedAt: now, expiresAt: expiry, validators: validators)
        try await store.setEntry(entry, forKey: key, source: identity)
        context.reportCache(CacheEvent(.stored, store: store.name, stageIndex: index, key: key))
      } catch {
        context.reportCache(CacheEvent(.storeFailed, store: store.name, stageIndex: index, key: key, detail: "\(error)"))
      }
    }
  }
}
