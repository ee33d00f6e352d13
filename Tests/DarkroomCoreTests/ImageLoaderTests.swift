import DarkroomCore
import DarkroomTesting
import Foundation
import Testing

@Suite("Image loader", .timeLimit(.minutes(4)))
struct ImageLoaderTests {
  func loader(cpu: Int = 2, network: Int = 8, disk: Int = 4, coalescing: Bool = true, observers: [any OperationObserver] = [])
    -> ImageLoader
  {
    var configuration = ImageLoader.Configuration()
    configuration.cpuLimit = cpu
    configuration.networkLimit = network
    configuration.diskLimit = disk
    configuration.coalescing = coalescing
    configuration.observers = observers
    // No time limit: these tests check limits, order and cancellation, and a parallel test run
    // on a loaded machine must not turn a slow queue into a timedOut failure.
    configuration.timeout = nil
    return ImageLoader(configuration: configuration)
  }

  /// The key of shared work for the probe stages `names` on `source`.
  func key(_ source: String, _ names: String...) -> String {
    ([ImageSource(source).identity] + names.map { "probe(\($0))" }).joined(separator: "\u{1F}")
  }

  func pipeline(_ stages: ProbeStage...) -> Pipeline<ImageSource, ImageSource> {
    var pipeline = Pipeline<ImageSource, ImageSource>(name: "probe", stages[0])
    for stage in stages.dropFirst() { pipeline = pipeline.appending(stage) }
    return pipeline
  }

  @Test("queued work starts by priority, then in the order asked; raising a priority while queued moves it ahead")
  func prioritiesWhenSaturated() async throws {
    let loader = loader(cpu: 1)
    let gate = Gate()
    let log = StartLog()
    let blocker = loader.load(ImageSource("blocker"), pipeline: pipeline(ProbeStage(name: "block", gate: gate)))
    await gate.entered()
    let work = pipeline(ProbeStage(name: "work", log: log))
    var operations: [PipelineOperation<ImageSource>] = []
    for (name, priority) in [
      ("l1", LoadPriority.low), ("l2", .low), ("l3", .low), ("n1", .normal), ("h1", .high), ("n2", .normal),
    ] {
      operations.append(loader.load(ImageSource(name), pipeline: work, priority: priority))
    }
    await eventually { loader.scheduler.cpu.waiting == 6 }
    loader.setPriority(.high, for: operations[2].id)  // l3 was asked before h1: it goes first among the high
    gate.open()
    _ = try await blocker.value
    for operation in operations { _ = try await operation.value }
    #expect(log.order == ["l3", "h1", "n1", "n2", "l1", "l2"])
    #expect(loader.scheduler.cpu.peak == 1)
  }

  @Test("shared work runs at the highest priority of its waiters")
  func sharedWorkTakesHighestPriority() async throws {
    let loader = loader(cpu: 1)
    let gate = Gate()
    let log = StartLog()
    let blocker = loader.load(ImageSource("blocker"), pipeline: pipeline(ProbeStage(name: "block", gate: gate)))
    await gate.entered()
    let work = pipeline(ProbeStage(name: "work", log: log))
    let low = loader.load(ImageSource("shared"), pipeline: work, priority: .low)
    let normal = loader.load(ImageSource("other"), pipeline: work, priority: .normal)
    await eventually { loader.scheduler.cpu.waiting == 2 }
    let high = loader.load(ImageSource("shared"), pipeline: work, priority: .high)
    await eventually { loader.scheduler.coalescer?.waiters(for: key("shared", "work")) == 2 }
    gate.open()
    for operation in [blocker, low, normal, high] { _ = try await operation.value }
    #expect(log.order == ["shared", "other"])
  }

  @Test("identical loads share one run; a cancelled waiter leaves it to the others; the last one cancels it")
  func coalescingAndCancellation() async throws {
    let loader = loader()
    let gate = Gate()
    let probe = ProbeStage(name: "slow", gate: gate)
    let work = pipeline(probe, ProbeStage(name: "after"))
    let first = loader.load(ImageSource("a"), pipeline: work)
    let second = loader.load(ImageSource("a"), pipeline: work)
    await gate.entered()
    await eventually { loader.scheduler.coalescer?.waiters(for: key("a", "slow")) == 2 }
    first.cancel()
    let firstResult = await first.result
    #expect(throws: PipelineError.self) { try firstResult.get() }
    #expect(first.status == .cancelled)
    gate.open()
    #expect(try await second.value == ImageSource("a"))
    #expect(probe.meter.runs == 1)
    let joined = second.history.compactMap { if case .stageStarted(let info) = $0 { info.joined } else { nil } }
    #expect(joined.count == 2)

    // Both waiters gone: the shared work itself is cancelled.
    let closed = Gate()
    let lonely = ProbeStage(name: "lonely", gate: closed)
    let third = loader.load(ImageSource("b"), pipeline: pipeline(lonely))
    let fourth = loader.load(ImageSource("b"), pipeline: pipeline(lonely))
    await closed.entered()
    await eventually { loader.scheduler.coalescer?.waiters(for: key("b", "lonely")) == 2 }
    third.cancel()
    fourth.cancel()
    _ = await third.result
    _ = await fourth.result
    await eventually { lonely.meter.inside == 0 && loader.scheduler.coalescer?.inFlight == 0 }
    #expect(lonely.meter.runs == 1)
    #expect(loader.activeCount == 0)
  }

  @Test("a later load joins the deepest stage chain already running")
  func joinsDeepestPrefix() async throws {
    let loader = loader()
    let gate = Gate()
    let fetch = ProbeStage(name: "fetch")
    let decode = ProbeStage(name: "decode", gate: gate)
    let small = ProbeStage(name: "small")
    let large = ProbeStage(name: "large")
    let first = loader.load(ImageSource("x"), pipeline: pipeline(fetch, decode, small))
    await gate.entered()
    let second = loader.load(ImageSource("x"), pipeline: pipeline(fetch, decode, large))
    await eventually { loader.scheduler.coalescer?.waiters(for: key("x", "fetch", "decode")) == 2 }
    gate.open()
    _ = try await first.value
    _ = try await second.value
    #expect(fetch.meter.runs == 1 && decode.meter.runs == 1 && small.meter.runs == 1 && large.meter.runs == 1)
  }

  @Test("loads for one target are delivered in the order asked; a later one finishing first cancels the earlier")
  func perTargetOrder() async throws {
    let ledger = EventLedger()
    let loader = loader(observers: [ledger])
    let cell = LoadTarget("cell")

    // The thumbnail finishes first: both are delivered, thumbnail first.
    let thumbGate = Gate()
    let fullGate = Gate()
    let thumb = loader.load(
      ImageSource("thumb-1"), pipeline: pipeline(ProbeStage(name: "thumb", gate: thumbGate)), target: cell, tag: "thumbnail")
    let full = loader.load(
      ImageSource("full-1"), pipeline: pipeline(ProbeStage(name: "full", gate: fullGate)), target: cell, tag: "full")
    #expect(loader.source(for: cell) == ImageSource("full-1"))
    thumbGate.open()
    _ = try await thumb.value
    fullGate.open()
    _ = try await full.value
    #expect(ledger.terminals == ["thumb-1:finished", "full-1:finished"])
    #expect(loader.source(for: cell) == nil)

    // The full image finishes first (it was quick, as a cached one is): the thumbnail is cancelled.
    let slowThumb = Gate()
    let thumb2 = loader.load(
      ImageSource("thumb-2"), pipeline: pipeline(ProbeStage(name: "thumb", gate: slowThumb)), target: cell, tag: "thumbnail")
    await slowThumb.entered()
    let full2 = loader.load(ImageSource("full-2"), pipeline: pipeline(ProbeStage(name: "full")), target: cell, tag: "full")
    _ = try await full2.value
    let thumbResult = await thumb2.result
    #expect(thumb2.status == .cancelled)
    #expect((try? thumbResult.get()) == nil)
    #expect(Set(ledger.terminals.suffix(2)) == ["full-2:finished", "thumb-2:cancelled"])
  }

  @Test("cancel by source, by target and tag, by target, and everything")
  func cancelSelections() async throws {
    let loader = loader(cpu: 8)
    let gate = Gate()
    func held(_ source: String, _ name: String, target: LoadTarget?, tag: String?) -> PipelineOperation<ImageSource> {
      loader.load(ImageSource(source), pipeline: pipeline(ProbeStage(name: name, gate: gate)), target: target, tag: tag)
    }
    let a = held("s1", "a", target: "t1", tag: "thumb")
    let b = held("s2", "b", target: "t1", tag: "full")
    let c = held("s3", "c", target: "t2", tag: "thumb")
    let d = held("s1", "d", target: nil, tag: nil)
    let e = held("s4", "e", target: "t3", tag: nil)
    await eventually { loader.scheduler.cpu.running == 5 }

    loader.cancel(target: "t1", tag: "full")
    _ = await b.result
    #expect([a, b, c, d, e].map(\.status) == [.running, .cancelled, .running, .running, .running])
    loader.cancel(source: ImageSource("s1"))
    _ = await a.result
    _ = await d.result
    #expect([a, c, d, e].map(\.status) == [.cancelled, .running, .cancelled, .running])
    loader.cancel(target: "t2")
    _ = await c.result
    #expect(c.status == .cancelled && e.status == .running)
    loader.cancelAll()
    _ = await e.result
    #expect(e.status == .cancelled && loader.activeCount == 0)
  }

  @Test("a stage over its time limit fails the operation with timedOut naming the stage")
  func stageTimeout() async throws {
    var configuration = ImageLoader.Configuration()
    configuration.stageTimeouts = ["probe": .milliseconds(50)]
    let loader = ImageLoader(configuration: configuration)
    let stuck = loader.load(ImageSource("stuck"), pipeline: pipeline(ProbeStage(name: "stuck", gate: Gate())))
    let error = await #expect(throws: PipelineError.self) { try await stuck.value }
    #expect(error?.code == .timedOut)
    #expect(error?.message.contains("stage \"probe\"") == true)
  }

  @Test("limits are never exceeded under 1,000 mixed loads")
  func limitsUnderLoad() async throws {
    let loader = loader(cpu: 2, network: 3, disk: 2)
    let network = ProbeStage(name: "net", uses: .network, yields: { $0.description.count % 7 })
    let cpu = ProbeStage(name: "cpu", uses: .cpu, yields: { $0.description.count % 5 })
    let disk = ProbeStage(name: "disk", uses: .disk, yields: { $0.description.count % 3 })
    let light = ProbeStage(name: "light", uses: .light)
    let pipelines = [pipeline(network, cpu, disk), pipeline(network, cpu, light), pipeline(disk, cpu), pipeline(network, light)]
    var generator = SystemRandomNumberGenerator()
    let operations = (0..<1_000).map { index in
      loader.load(
        ImageSource("s\(Int.random(in: 0..<300, using: &generator))"), pipeline: pipelines[index % pipelines.count],
        priority: LoadPriority.allCases.randomElement(using: &generator) ?? .normal)
    }
    for operation in operations { _ = try await operation.value }
    #expect(network.meter.peak <= 3 && cpu.meter.peak <= 2 && disk.meter.peak <= 2)
    #expect(network.meter.peak >= 1 && cpu.meter.peak >= 1 && disk.meter.peak >= 1)
    #expect(loader.scheduler.network.peak <= 3 && loader.scheduler.cpu.peak <= 2 && loader.scheduler.disk.peak <= 2)
    #expect(cpu.meter.runs < 1_000)  // duplicates shared their runs
    #expect(loader.activeCount == 0 && loader.scheduler.coalescer?.inFlight == 0)
  }

  @Test("1,000 random cancellations racing completions: one terminal event each, nothing left behind")
  func cancellationRace() async throws {
    let ledger = EventLedger()
    let loader = loader(cpu: 2, observers: [ledger])
    let first = ProbeStage(name: "first", uses: .network, yields: { $0.description.count % 4 })
    let second = ProbeStage(name: "second", yields: { $0.description.count % 6 })
    let work = pipeline(first, second)
    var weakOperations: [WeakBox] = []
    var ids: [OperationID] = []
    do {
      var operations: [PipelineOperation<ImageSource>] = []
      for index in 0..<1_000 {
        let operation = loader.load(ImageSource("r\(index % 97)"), pipeline: work, target: LoadTarget("t\(index % 13)"))
        operations.append(operation)
        if Bool.random() {
          let delay = Int.random(in: 0..<8)
          Task {
            for _ in 0..<delay { await Task.yield() }
            operation.cancel()
          }
        }
      }
      for operation in operations { _ = await operation.result }
      weakOperations = operations.map { WeakBox($0) }
      ids = operations.map(\.id)
    }
    for id in ids {
      let terminals = ledger.events(of: id).filter(\.isTerminal)
      #expect(terminals.count == 1)
    }
    await eventually { loader.scheduler.coalescer?.inFlight == 0 }
    #expect(loader.activeCount == 0)
    #expect(loader.scheduler.cpu.running == 0 && loader.scheduler.cpu.waiting == 0)
    #expect(loader.scheduler.network.running == 0 && loader.scheduler.network.waiting == 0)
    #expect(first.meter.inside == 0 && second.meter.inside == 0)
    await eventually { weakOperations.allSatisfy { $0.object == nil } }
  }
}

final class WeakBox: @unchecked Sendable {
  weak var object: AnyObject?
  init(_ object: AnyObject) { self.object = object }
}
