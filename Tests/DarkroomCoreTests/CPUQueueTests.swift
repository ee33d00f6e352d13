import DarkroomCore
import DarkroomTesting
import Dispatch
import Foundation
import Testing

/// A CPU stage whose body blocks a thread of the CPU pool until the test lets it go, counting how
/// many bodies run on the pool at once.
private struct PoolStage: Stage {
  static let kind = "pool-probe"
  let meter: ConcurrencyMeter
  let release: DispatchSemaphore

  var identifier: String { "pool-probe" }

  func resource(for input: ImageSource) -> StageResource { .cpu }

  func process(_ input: ImageSource, context: StageContext) async throws -> ImageSource {
    let (meter, release) = (meter, release)
    try await context.pool.run {
      meter.enter()
      defer { meter.leave() }
      release.wait()
    }
    return input
  }
}

@Suite("CPU queue", .timeLimit(.minutes(3)))
struct CPUQueueTests {
  @Test("cpuQueued lets one more CPU call in than cpuLimit, to wait in the pool's queue; the pool still runs cpuLimit at a time")
  func queuedCallWaitsInThePool() async throws {
    var configuration = ImageLoader.Configuration()
    configuration.cpuLimit = 1
    configuration.cpuQueued = 1
    configuration.coalescing = false
    configuration.timeout = nil
    let loader = ImageLoader(configuration: configuration)
    #expect(loader.scheduler.cpu.limit == 2)
    let meter = ConcurrencyMeter()
    let release = DispatchSemaphore(value: 0)
    let pipeline = Pipeline<ImageSource, ImageSource>(name: "queued", PoolStage(meter: meter, release: release))
    let operations = ["a", "b", "c"].map { loader.load(ImageSource($0), pipeline: pipeline) }
    // One body blocks the pool's only thread, one call holds the second slot and waits in the
    // pool's queue, and the third waits at the class for a slot.
    await eventually { meter.inside == 1 && loader.scheduler.cpu.running == 2 && loader.scheduler.cpu.waiting == 1 }
    #expect(meter.inside == 1)
    #expect(loader.scheduler.cpu.running == 2)
    #expect(loader.scheduler.cpu.waiting == 1)
    for _ in operations { release.signal() }
    for operation in operations { _ = try await operation.value }
    #expect(meter.runs == 3)
    #expect(meter.peak == 1)
    #expect(loader.scheduler.cpu.peak == 2)
  }

  @Test("without cpuQueued the class admits cpuLimit calls, as before")
  func defaultAdmitsTheLimit() {
    var configuration = ImageLoader.Configuration()
    configuration.cpuLimit = 3
    #expect(configuration.cpuQueued == 0)
    #expect(ImageLoader(configuration: configuration).scheduler.cpu.limit == 3)
  }
}
