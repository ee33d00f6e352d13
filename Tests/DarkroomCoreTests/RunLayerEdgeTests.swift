import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

/// An origin with one current representation, as a fetch transport: `200` with its ETag and
/// `Cache-Control`, and on a conditional request `304` when the validators name the current ETag
/// (a representation's bytes are its ETag's). Transfers and revalidations may wait at gates.
private final class OriginTransport: ConditionalFetchTransport, @unchecked Sendable {
  let fetches = ConcurrencyMeter()
  let revalidations = ConcurrencyMeter()
  let current: Protected<String>
  let cacheControl: String
  let fetchGate: Protected<Gate?> = Protected(nil)
  let revalidationGate: Protected<Gate?> = Protected(nil)
  let sentETags = Protected<[String?]>([])

  init(etag: String = "v1", cacheControl: String = "max-age=0") {
    current = Protected(etag)
    self.cacheControl = cacheControl
  }

  var schemes: Set<String> { ["https"] }

  private func answer(_ source: ImageSource, notModified: Bool) -> FetchedData {
    let etag = current.value
    let bytes: [UInt8] = notModified ? [] : Array(etag.utf8)
    var data = FetchedData(
      source: source, bytes: ImageBytes(bytes), metadata: ["etag": "\"\(etag)\"", "cache-control": cacheControl])
    data.status = notModified ? 304 : 200
    data.notModified = notModified
    return data
  }

  func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData {
    fetches.enter()
    defer { fetches.leave() }
    try await fetchGate.value?.wait()
    return answer(source, notModified: false)
  }

  func fetch(
    _ source: ImageSource, limits: FetchLimits, validators: CacheValidators, context: StageContext
  ) async throws -> FetchedData {
    revalidations.enter()
    defer { revalidations.leave() }
    sentETags.withLock { $0.append(validators.etag) }
    try await revalidationGate.value?.wait()
    return answer(source, notModified: validators.etag.map { CacheValidators.sameETag($0, "\"\(current.value)\"") } ?? false)
  }
}

/// Passes fetched bytes on (a stage between the fetch and a checkpoint).
private struct Touch: Stage {
  static let kind = "touch"
  var identifier: String { "touch" }
  func process(_ input: FetchedData, context: StageContext) async throws -> FetchedData { input }
}

/// Reads the fetched bytes (what a decoder does: its output is no longer the response).
private struct Unwrap: Stage {
  static let kind = "unwrap"
  var identifier: String { "unwrap" }
  func process(_ input: FetchedData, context: StageContext) async throws -> [UInt8] { Array(input.bytes.data) }
}

@Suite("Run layers: edges", .timeLimit(.minutes(3)))
struct RunLayerEdgeTests {
  private func cacheOutcomes(_ events: [OperationEvent]) -> [String] {
    events.compactMap { if case .cache(let event) = $0 { event.outcome.rawValue } else { nil } }
  }

  private func stagePairs(_ events: [OperationEvent]) -> (started: [Int], finished: [Int]) {
    let started = events.compactMap { if case .stageStarted(let stage) = $0 { stage.index } else { nil } }
    let finished = events.compactMap { if case .stageFinished(let stage, _) = $0 { stage.index } else { nil } }
    return (started, finished)
  }

  /// fetch → touch → cache in `store`.
  private func cached(_ name: String, _ origin: OriginTransport, store: MemoryStore) -> Pipeline<ImageSource, FetchedData> {
    Pipeline<ImageSource, FetchedData>(name: name, Fetcher(transports: [origin])).appending(Touch())
      .appending(Cache<FetchedData>(store: store))
  }

  /// A pipeline with a checkpoint, run once through `loader` so that its entry is stale (max-age=0).
  private func primed(_ name: String, loader: ImageLoader) async throws
    -> (origin: OriginTransport, pipeline: Pipeline<ImageSource, FetchedData>, source: ImageSource)
  {
    let origin = OriginTransport()
    let pipeline = cached(name, origin, store: MemoryStore(costLimit: 1 << 20))
    let source = ImageSource("https://images.example/\(name).jpg")
    _ = try await loader.load(source, pipeline: pipeline).value
    return (origin, pipeline, source)
  }

  /// Waits until no revalidation runs at `origin` and `loader` has no shared work and no network
  /// slot taken; then lets revalidations through.
  private func settled(_ loader: ImageLoader, _ origin: OriginTransport) async {
    await eventually { origin.revalidations.inside == 0 }
    await eventually { loader.scheduler.coalescer?.inFlight == 0 && loader.scheduler.network.running == 0 }
    origin.revalidationGate.withLock { $0 = nil }
  }

  /// A loader whose runs' events go to the returned ledger.
  private func recordingLoader() -> (ImageLoader, EventLedger) {
    let ledger = EventLedger()
    var configuration = ImageLoader.Configuration()
    configuration.observers = [ledger]
    return (ImageLoader(configuration: configuration), ledger)
  }

  /// Runs `starter` on `source` and, while its transfer waits, `joiner` (which joins the transfer);
  /// returns their operation ids once both have ended.
  private func joinTransfer<A: Sendable, B: Sendable>(
    _ source: ImageSource, origin: OriginTransport, loader: ImageLoader, starter: Pipeline<ImageSource, A>,
    joiner: Pipeline<ImageSource, B>
  ) async throws -> (starter: OperationID, joiner: OperationID) {
    let gate = Gate()
    origin.fetchGate.withLock { $0 = gate }
    defer { origin.fetchGate.withLock { $0 = nil } }
    let first = loader.load(source, pipeline: starter)
    await gate.entered()
    let second = loader.load(source, pipeline: joiner)
    await eventually { loader.scheduler.coalescer?.joined == 1 }
    gate.open()
    _ = try await first.value
    _ = try await second.value
    #expect(origin.fetches.runs == 1)
    return (first.id, second.id)
  }

  @Test("a run that joins another's in-flight fetch keeps the response's facts: a private response is not stored")
  func joinedFetchKeepsFacts() async throws {
    let (loader, ledger) = recordingLoader()
    let origin = OriginTransport(cacheControl: "private, max-age=600")
    // The run that starts the transfer keeps no checkpoint; the one that joins it does.
    let starter = Pipeline<ImageSource, FetchedData>(name: "starter", Fetcher(transports: [origin])).appending(Touch())
    let joiner = Pipeline<ImageSource, FetchedData>(name: "joiner", Fetcher(transports: [origin])).appending(Unwrap())
      .appending(Cache<[UInt8]>(store: MemoryStore(costLimit: 1 << 20)))
    let ids = try await joinTransfer(
      ImageSource("https://images.example/private.jpg"), origin: origin, loader: loader, starter: starter, joiner: joiner)
    #expect(cacheOutcomes(ledger.events(of: ids.starter)).isEmpty)
    #expect(cacheOutcomes(ledger.events(of: ids.joiner)) == ["miss", "storeFailed"])
  }

  @Test("a run that joins another's in-flight fetch stores its checkpoint with the response's validators and lifetime")
  func joinedFetchKeepsValidators() async throws {
    let loader = ImageLoader()
    let origin = OriginTransport(cacheControl: "max-age=0")
    let store = MemoryStore(costLimit: 1 << 20)
    let starter = cached("starter", origin, store: store)
    let joiner = Pipeline<ImageSource, FetchedData>(name: "joiner", Fetcher(transports: [origin])).appending(Unwrap())
      .appending(Cache<[UInt8]>(store: store))
    let source = ImageSource("https://images.example/stale.jpg")
    _ = try await joinTransfer(source, origin: origin, loader: loader, starter: starter, joiner: joiner)
    // The entry is stale at once (max-age=0) and is revalidated with its ETag.
    let again = try await loader.load(source, pipeline: joiner).value
    #expect(again == Array("v1".utf8))
    #expect(origin.fetches.runs == 1)
    #expect(origin.sentETags.value == ["\"v1\""])
  }

  @Test("a revalidation cancelled while it waits leaves no shared work, slot or run behind")
  func cancelledRevalidationLeaksNothing() async throws {
    let (loader, ledger) = recordingLoader()
    let (origin, pipeline, source) = try await primed("cancel", loader: loader)
    let gate = Gate()
    origin.revalidationGate.withLock { $0 = gate }
    let one = loader.load(source, pipeline: pipeline)
    let two = loader.load(source, pipeline: pipeline)
    await gate.entered()
    await eventually { loader.scheduler.coalescer?.joined == 1 }
    one.cancel()
    #expect(await one.result.isCancelled)
    #expect(origin.revalidations.inside == 1)  // the other run still waits for it
    two.cancel()
    #expect(await two.result.isCancelled)
    await settled(loader, origin)
    await eventually { loader.activeCount == 0 }
    for id in [one.id, two.id] {
      let events = ledger.events(of: id)
      #expect(events.filter(\.isTerminal).count == 1)
    }
    // The loader still works, and the entry is still there.
    _ = try await loader.load(source, pipeline: pipeline).value
    #expect(origin.fetches.runs == 1)
  }

  @Test("a revalidation that times out leaves nothing behind; the next run revalidates again")
  func timedOutRevalidation() async throws {
    let loader = ImageLoader()
    let (origin, pipeline, source) = try await primed("timeout", loader: loader)
    let gate = Gate()  // never opened
    origin.revalidationGate.withLock { $0 = gate }
    var options = loader.defaultRunOptions
    options.stageTimeouts = ["fetch": .milliseconds(50)]
    let result = await loader.load(source, pipeline: pipeline, options: options).result
    guard case .failure(let error) = result else {
      Issue.record("the revalidation did not time out")
      return
    }
    #expect(error.code == .timedOut)
    await settled(loader, origin)
    // (On a busy machine the limit may pass before the revalidation reached the origin.)
    let before = origin.revalidations.runs
    _ = try await loader.load(source, pipeline: pipeline).value
    #expect(origin.revalidations.runs == before + 1)
    #expect(origin.fetches.runs == 1)
  }

  @Test("runs revalidating entries with different ETags at once never share a 304")
  func differentValidatorsDoNotShare() async throws {
    let loader = ImageLoader()
    let origin = OriginTransport(etag: "v1")
    let old = MemoryStore(costLimit: 1 << 20)
    let new = MemoryStore(costLimit: 1 << 20)
    func pipeline(_ store: MemoryStore) -> Pipeline<ImageSource, FetchedData> {
      cached("etags", origin, store: store)
    }
    let source = ImageSource("https://images.example/etags.jpg")
    _ = try await loader.load(source, pipeline: pipeline(old)).value
    origin.current.withLock { $0 = "v2" }
    _ = try await loader.load(source, pipeline: pipeline(new)).value
    let gate = Gate()
    origin.revalidationGate.withLock { $0 = gate }
    let a = loader.load(source, pipeline: pipeline(old))
    let b = loader.load(source, pipeline: pipeline(new))
    await eventually { origin.revalidations.inside == 2 }
    gate.open()
    let (x, y) = try await (a.value, b.value)
    #expect(x.bytes == ImageBytes(Array("v2".utf8)))
    #expect(y.bytes == ImageBytes(Array("v2".utf8)))
    #expect(Set(origin.sentETags.value.compactMap { $0 }) == ["\"v1\"", "\"v2\""])
  }

  @Test("variants started as a cohort with a stale checkpoint share the revalidation and end")
  func cohortWithStaleCheckpoint() async throws {
    let (loader, ledger) = recordingLoader()
    let origin = OriginTransport()
    let store = MemoryStore(costLimit: 1 << 20)
    let cached = cached("cached", origin, store: store)
    let plain = Pipeline<ImageSource, FetchedData>(name: "plain", Fetcher(transports: [origin])).appending(Touch())
    let source = ImageSource("https://images.example/variants.jpg")
    _ = try await loader.load(source, pipeline: cached).value
    for _ in 0..<20 {
      let members = Cohort.members(3)
      let operations = [
        loader.load(source, pipeline: cached, cohort: members[0]),
        loader.load(source, pipeline: plain, cohort: members[1]),
        loader.load(source, pipeline: cached, cohort: members[2]),
      ]
      for operation in operations { _ = try await operation.value }
      for member in members { member.checkIn() }
      for operation in operations {
        let events = ledger.events(of: operation.id)
        let pairs = stagePairs(events)
        #expect(pairs.started.sorted() == pairs.finished.sorted())
        #expect(events.filter(\.isTerminal).count == 1)
      }
    }
    await settled(loader, origin)
  }

  @Test("a revalidating first stage of another kind revalidates under its own kind's time limit")
  func revalidatingStageOfAnotherKind() async throws {
    struct Download: Stage, RevalidatingStage {
      static let kind = "download"
      let fetch: Fetcher
      var identifier: String { "download" }
      func process(_ input: ImageSource, context: StageContext) async throws -> FetchedData {
        try await fetch.process(input, context: context)
      }
      func revalidate(_ source: ImageSource, validators: CacheValidators, context: StageContext) async throws -> FetchedData {
        try await fetch.revalidate(source, validators: validators, context: context)
      }
    }
    let origin = OriginTransport()
    let observer = RecordingObserver()
    let pipeline = Pipeline<ImageSource, FetchedData>(name: "download", Download(fetch: Fetcher(transports: [origin]))).appending(
      Touch()
    )
    .appending(Cache<FetchedData>(store: MemoryStore(costLimit: 1 << 20)))
    let source = ImageSource("https://images.example/download.jpg")
    _ = try await pipeline.process(source)
    var options = RunOptions(observers: [observer])
    options.stageTimeouts = ["fetch": .milliseconds(1)]  // not this stage's kind
    let value = try await pipeline.run(source, options: options).value
    #expect(value.bytes == ImageBytes(Array("v1".utf8)))
    #expect(cacheOutcomes(observer.events) == ["revalidated"])
    let kinds = observer.events.compactMap { if case .stageStarted(let stage) = $0 { stage.kind } else { nil } }
    #expect(kinds == ["download"])
  }

  @Test("a failing willFinish hook after checkpoints were stored fails the run once; the next run hits")
  func willFinishFailsAfterStore() async throws {
    struct Refusal: Error {}
    let origin = OriginTransport(cacheControl: "max-age=600")
    let store = MemoryStore(costLimit: 1 << 20)
    let pipeline = cached("refuse", origin, store: store)
    let source = ImageSource("https://images.example/refuse.jpg")
    let observer = RecordingObserver()
    var options = RunOptions(observers: [observer])
    options.onWillFinish { (_: FetchedData, _: OperationInfo) in throw Refusal() }
    let result = await pipeline.run(source, options: options).result
    guard case .failure(let error) = result else {
      Issue.record("the run succeeded")
      return
    }
    #expect(error.code == .willFinishFailed)
    #expect(observer.events.filter(\.isTerminal).count == 1)
    let pairs = stagePairs(observer.events)
    #expect(pairs.started == [0, 1, 2] && pairs.finished == [0, 1, 2])
    // The checkpoint was stored before the hook refused (the work was done): the next run hits.
    let next = RecordingObserver()
    _ = try await pipeline.run(source, options: RunOptions(observers: [next])).value
    #expect(cacheOutcomes(next.events) == ["hit"])
    #expect(origin.fetches.runs == 1)
  }

  @Test("checkpoints before the fetch (a cache at index 0) do not keep later stale ones from being revalidated")
  func checkpointsBeforeTheFetch() async throws {
    let origin = OriginTransport(cacheControl: "max-age=0")
    let front = MemoryStore(costLimit: 1 << 20)
    let pipeline = Pipeline<ImageSource, ImageSource>(name: "several", Cache<ImageSource>(store: front))
      .appending(Fetcher(transports: [origin])).appending(Cache<FetchedData>(store: MemoryStore(costLimit: 1 << 20)))
      .appending(Touch()).appending(Cache<FetchedData>(store: MemoryStore(costLimit: 1 << 20)))
    let source = ImageSource("https://images.example/several.jpg")
    func run(expecting etag: String) async throws -> (outcomes: [String], started: [Int]) {
      let observer = RecordingObserver()
      let value = try await pipeline.run(source, options: RunOptions(observers: [observer])).value
      #expect(value.bytes == ImageBytes(Array(etag.utf8)))
      #expect(observer.events.filter(\.isTerminal).count == 1)
      let pairs = stagePairs(observer.events)
      #expect(pairs.started == pairs.finished)
      return (cacheOutcomes(observer.events), pairs.started)
    }
    _ = try await run(expecting: "v1")
    for _ in 0..<2 {
      let (outcomes, started) = try await run(expecting: "v1")
      #expect(outcomes == ["revalidated"])
      #expect(started == [1])  // only the fetch ran, at its own place
    }
    #expect(origin.fetches.runs == 1 && origin.sentETags.value == ["\"v1\"", "\"v1\""])
    origin.current.withLock { $0 = "v2" }
    let (outcomes, started) = try await run(expecting: "v2")
    #expect(outcomes == ["miss", "stored", "stored"])
    #expect(started == [1, 2, 3, 4])
    #expect(origin.fetches.runs == 1 && origin.revalidations.runs == 3)
  }
}

extension Result {
  fileprivate var isCancelled: Bool {
    if case .failure(let error) = self, let failure = error as? PipelineError { return failure.code == .cancelled }
    return false
  }
}
