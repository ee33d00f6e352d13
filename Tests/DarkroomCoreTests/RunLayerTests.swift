import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

/// A first stage whose answers carry an ETag and `max-age=0` (so a cache entry of them is stale at
/// once), and which revalidates with `304 Not Modified`, counting its revalidations.
private struct RevalidatingProbe: Stage, RevalidatingStage {
  static let kind = "fetch"
  let revalidations = ConcurrencyMeter()
  /// When set, a revalidation waits for it.
  var gate: Gate?

  var identifier: String { "probe-fetch" }

  func resource(for input: ImageSource) -> StageResource { .network }

  private func answer(_ source: ImageSource, status: Int) -> FetchedData {
    let bytes: [UInt8] = status == 304 ? [] : [1, 2, 3]
    var data = FetchedData(
      source: source, bytes: ImageBytes(bytes), metadata: ["etag": "\"v1\"", "cache-control": "max-age=0"])
    data.status = status
    data.notModified = status == 304
    return data
  }

  func process(_ input: ImageSource, context: StageContext) async throws -> FetchedData { answer(input, status: 200) }

  func revalidate(_ source: ImageSource, validators: CacheValidators, context: StageContext) async throws -> FetchedData {
    revalidations.enter()
    defer { revalidations.leave() }
    try await gate?.wait()
    return answer(source, status: 304)
  }
}

private struct Refusal: Error {}

/// Records what a layer saw, and can skip a stage or refuse the result.
private final class RecordingLayer: RunLayer, RunLayerFactory, @unchecked Sendable {
  let log = StartLog()
  var skip: Int?
  var refuse = false

  var key: AnyHashable { "recording" }
  var order: RunLayerOrder { .results }
  func makeLayer(for run: RunPlan) -> (any RunLayer)? { self }

  func resume(from index: Int, value: RunValue, run: RunPlan, runStage: RunPlan.StageRunner) async throws -> Resumption? {
    log.append("resume \(index)")
    guard index == skip else { return nil }
    return Resumption(value: value, next: index + 1, kind: .silently)
  }

  func around(_ call: StageCall, next: @escaping StageCall.Next) async throws -> RunValue {
    log.append("around \(call.index) \(call.stage.identifier)")
    return try await next(call)
  }

  func stagesEnded() { log.append("ended") }

  func willFinish(_ output: RunValue, run: RunPlan) async throws {
    log.append("willFinish")
    if refuse { throw Refusal() }
  }
}

@Suite("Run layers", .timeLimit(.minutes(3)))
struct RunLayerTests {
  private func cached(_ probe: RevalidatingProbe, store: MemoryStore) -> Pipeline<ImageSource, FetchedData> {
    Pipeline<ImageSource, FetchedData>(name: "revalidate", probe).appending(Cache<FetchedData>(store: store))
  }

  private func stageKinds(_ events: [OperationEvent]) -> [String] {
    events.compactMap { if case .stageStarted(let stage) = $0 { stage.kind } else { nil } }
  }

  @Test("a layer wraps every stage call, may skip a stage before it runs, and acts in willFinish")
  func layerHooks() async throws {
    let layer = RecordingLayer()
    layer.skip = 1
    let observer = RecordingObserver()
    var options = RunOptions(observers: [observer])
    options.layers = [layer]
    let pipeline = Pipeline<ImageSource, ImageSource>(name: "layers", ProbeStage(name: "a"))
      .appending(ProbeStage(name: "b")).appending(ProbeStage(name: "c"))
    _ = try await pipeline.run(ImageSource("x"), options: options).value
    #expect(
      layer.log.order == [
        "resume 0", "around 0 probe(a)", "resume 1", "resume 2", "around 2 probe(c)", "ended", "willFinish",
      ])
    #expect(stageKinds(observer.events).count == 2)  // the skipped stage has no events
  }

  @Test("a layer refusing in willFinish fails the run with willFinishFailed")
  func layerRefuses() async throws {
    let layer = RecordingLayer()
    layer.refuse = true
    var options = RunOptions()
    options.layers = [layer]
    let result = await Pipeline<ImageSource, ImageSource>(name: "refuse", ProbeStage(name: "a"))
      .run(ImageSource("x"), options: options).result
    guard case .failure(let error) = result else {
      Issue.record("the run succeeded")
      return
    }
    #expect(error.code == .willFinishFailed)
  }

  @Test("a stale checkpoint is revalidated within the fetch's own time limit")
  func revalidationHasTheStageTimeLimit() async throws {
    let gate = Gate()  // never opened: the revalidation hangs
    let probe = RevalidatingProbe(gate: gate)
    let pipeline = cached(probe, store: MemoryStore(costLimit: 1 << 20))
    _ = try await pipeline.process(ImageSource("https://images.example/stale.jpg"))
    var options = RunOptions(timeout: .seconds(50))
    options.stageTimeouts = ["fetch": .milliseconds(100)]
    let result = await pipeline.run(ImageSource("https://images.example/stale.jpg"), options: options).result
    guard case .failure(let error) = result else {
      Issue.record("the revalidation did not time out")
      return
    }
    #expect(error.code == .timedOut)
    #expect(error.stageKind == "fetch")
    #expect(probe.revalidations.runs == 1)
  }

  @Test("revalidations go through the loader: they wait for a network slot and identical ones are shared")
  func revalidationIsScheduledAndShared() async throws {
    var configuration = ImageLoader.Configuration()
    configuration.networkLimit = 1
    let ledger = EventLedger()
    configuration.observers = [ledger]
    let loader = ImageLoader(configuration: configuration)
    let probe = RevalidatingProbe()
    let pipeline = cached(probe, store: MemoryStore(costLimit: 1 << 20))
    _ = try await loader.load(ImageSource("https://images.example/stale.jpg"), pipeline: pipeline).value

    let hold = Gate()
    let holder = ProbeStage(name: "hold", uses: .network, gate: hold)
    let held = loader.load(
      ImageSource("https://images.example/other.jpg"), pipeline: Pipeline<ImageSource, ImageSource>(name: "hold", holder))
    await eventually { holder.meter.inside == 1 }
    let first = loader.load(ImageSource("https://images.example/stale.jpg"), pipeline: pipeline)
    let second = loader.load(ImageSource("https://images.example/stale.jpg"), pipeline: pipeline)
    // Both runs have started their revalidation (the stage starts when it is queued or joined).
    await eventually {
      [first.id, second.id].allSatisfy { id in ledger.events(of: id).contains { $0.name == "stageStarted" } }
    }
    // The one shared revalidation waits for the network slot the holder has.
    await eventually { loader.scheduler.network.waiting == 1 }
    #expect(probe.revalidations.runs == 0)
    hold.open()
    _ = try await held.value
    _ = try await first.value
    _ = try await second.value
    #expect(probe.revalidations.runs == 1)
    let joined = [first.id, second.id].map { id in
      ledger.events(of: id).contains { if case .stageStarted(let stage) = $0 { stage.joined } else { false } }
    }
    #expect(joined.sorted { !$0 && $1 } == [false, true])
  }
}
