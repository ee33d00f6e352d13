import DarkroomCore
import Foundation
import Testing

/// A sink that delivers only when the test opens its gate, one notification per permit.
private final class GatedSink: NotificationSink, Sendable {
  let name = "gated"
  private let permits = AsyncStream<Void>.makeStream()
  /// One element per delivery, for the test to await.
  let deliveries = AsyncStream<Int>.makeStream()
  private let state: Protected<(iterator: AsyncStream<Void>.Iterator?, delivered: Int)>

  init() { state = Protected((permits.stream.makeAsyncIterator(), 0)) }

  func open(_ count: Int) { for _ in 0..<count { permits.continuation.yield() } }
  var delivered: Int { state.value.delivered }

  func deliver(_ notification: LoadNotification) async throws {
    var current = state.withLock { $0.iterator.take() }
    _ = await current?.next()
    let count = state.withLock { state in
      state.iterator = current
      state.delivered += 1
      return state.delivered
    }
    deliveries.continuation.yield(count)
  }

  /// Returns once `count` notifications were delivered.
  func waitUntilDelivered(_ count: Int) async {
    for await delivered in deliveries.stream where delivered >= count { return }
  }
}

@Suite("Notifier backpressure", .timeLimit(.minutes(3)))
struct NotifierBackpressureTests {
  @Test("waitUntilPending holds a producer while a stalled sink has the limit queued, and lets it go as the sink drains")
  func boundedQueue() async throws {
    let sink = GatedSink()
    let notifier = Notifier(sinks: [sink])
    for index in 0..<10 { notifier.post(LoadNotification(name: "n\(index)", pipeline: "p")) }
    let released = Flag()
    let waiter = Task {
      await notifier.waitUntilPending(below: 5)
      released.set()
      return sink.delivered
    }
    // The producer is still held after the sink delivered 5 of 10 (5 pending is not below 5)...
    sink.open(5)
    await sink.waitUntilDelivered(5)
    #expect(!released.isSet)
    // ...and goes on once one more is delivered.
    sink.open(1)
    let deliveredWhenReleased = await waiter.value
    #expect(deliveredWhenReleased >= 6)
    sink.open(4)
    await notifier.close()
    #expect(sink.delivered == 10)
  }

  @Test("a waiting producer returns when its task is cancelled, with the sink still stalled")
  func cancellation() async {
    let sink = GatedSink()
    let notifier = Notifier(sinks: [sink])
    for index in 0..<3 { notifier.post(LoadNotification(name: "n\(index)", pipeline: "p")) }
    let waiter = Task { await notifier.waitUntilPending(below: 1) }
    waiter.cancel()
    await waiter.value
    #expect(sink.delivered == 0)
    sink.open(3)
    await notifier.close()
  }
}

private final class Flag: Sendable {
  private let value = Protected(false)
  func set() { value.withLock { $0 = true } }
  var isSet: Bool { value.value }
}
