import Darkroom
import DarkroomHTTP
import DarkroomHTTPTestServer
import Foundation
import Testing

/// A shared cache in which another instance holds every claim, and whose render of it fails
/// (the source is not found) at a moment this instance is looking for the result, as a
/// PostgreSQL notification would arrive: only the waiters registered at that moment hear it.
private final class ClaimedElsewhere: SharedResultStore {
  private struct State {
    var waiters: [Int: CheckedContinuation<SharedRenderOutcome?, Never>] = [:]
    var nextWaiter = 0
    var ended = false
    var lookups = 0
  }
  private let state = Protected(State())
  /// Whether the other instance's claim is still live when this one looks (false: it ended, or
  /// lapsed, before this instance began to wait, and its end was not heard).
  let claimLive: Bool

  init(claimLive: Bool = true) { self.claimLive = claimLive }

  var lookups: Int { state.value.lookups }
  var ended: Bool { state.value.ended }

  func result(forKey key: String) async throws(PipelineError) -> SharedResult? {
    let heard = state.withLock { state -> [CheckedContinuation<SharedRenderOutcome?, Never>] in
      state.lookups += 1
      // The other instance's render ends now, if someone is listening to hear it (before that,
      // it is still running).
      guard !state.ended, !state.waiters.isEmpty else { return [] }
      state.ended = true
      defer { state.waiters = [:] }
      return Array(state.waiters.values)
    }
    for waiter in heard { waiter.resume(returning: .failed(.httpStatus, httpStatus: 404)) }
    return nil
  }

  func store(_ result: SharedResult, forKey key: String) async throws(PipelineError) {}

  func withRenderClaim(forKey key: String, _ render: @Sendable () async throws -> SharedResult?) async throws -> Bool {
    false
  }

  func isClaimed(forKey key: String) async throws(PipelineError) -> Bool { claimLive }

  func waitForResult(forKey key: String, timeout: Duration) async -> SharedRenderOutcome? {
    let id = state.withLock { state in
      defer { state.nextWaiter += 1 }
      return state.nextWaiter
    }
    return await withTaskGroup(of: SharedRenderOutcome??.self) { group in
      group.addTask {
        .some(await withCheckedContinuation { continuation in self.state.withLock { $0.waiters[id] = continuation } })
      }
      group.addTask {
        try? await Task.sleep(for: timeout)
        return nil
      }
      let first = await group.next() ?? nil
      if first == nil {  // timed out or cancelled: resume the registered waiter, if it still is
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.resume(returning: nil)
      }
      group.cancelAll()
      await group.waitForAll()
      return first ?? nil
    }
  }
}

@Suite("darkroom serve waiting on another instance's claim", .timeLimit(.minutes(3)))
struct SharedClaimWaitTests {
  @Test("a claim that ends while the waiting request looks for the result is heard: the source's failure, without a fetch")
  func endWhileLookingIsHeard() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(width: 64, height: 64), contentType: "image/jpeg")
    ])
    let shared = ClaimedElsewhere()
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.url("/")), sharedCache: shared)
    let answer = try await running.get("/unsafe/fit-in/32x32/a.jpg")
    #expect(shared.ended)
    // The other instance's failure is this request's: no fetch here (the request did not wait out
    // the 30-second limit and render on its own).
    #expect(answer.status == 404)
    #expect(origin.requestCount("/a.jpg") == 0)
    try await running.stop()
    try await origin.shutdown()
  }

  @Test("a claim that ended before the request began to wait leaves nothing to wait for: the request renders at once")
  func endedBeforeWaitingRendersAtOnce() async throws {
    let origin = try await TestHTTPServer.start(routes: [
      "/a.jpg": .ok(body: try ServedFixtures.jpeg(width: 64, height: 64), contentType: "image/jpeg")
    ])
    let shared = ClaimedElsewhere(claimLive: false)
    let running = try await RunningServer.start(ServedFixtures.configuration(origin: origin.url("/")), sharedCache: shared)
    let answer = try await running.get("/unsafe/fit-in/32x32/a.jpg")
    #expect(answer.status == 200)
    #expect(origin.requestCount("/a.jpg") == 1)
    // Two looks: before the claim was tried, and the first look of the wait, which found neither
    // a claim nor a result. Without asking about the claim, the request looked every 250 ms until
    // its 30-second limit (about 120 looks) before rendering.
    #expect(shared.lookups == 2)
    try await running.stop()
    try await origin.shutdown()
  }
}
