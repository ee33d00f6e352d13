import DarkroomCore
import DarkroomPostgresTestServer
import Foundation
import Logging
import PostgresNIO
import Testing

@testable import DarkroomPostgres

/// The servers' shared result cache on a real PostgreSQL server.
@Suite("the PostgreSQL shared result store", .postgresServer)
struct PostgresResultStoreTests {
  /// A store on a new database, listening, with its tables made.
  private func withStore<T: Sendable>(_ body: @Sendable (PostgresResultStore) async throws -> T) async throws -> T {
    let location = try await PostgresTestServer.suite.newDatabase()
    try await PostgresJobQueue.withQueue(at: location) { _ in }
    let client = PostgresClient(configuration: location.configuration, backgroundLogger: Logger(label: "test"))
    let store = PostgresResultStore(client: client, maxBytes: 4_000)
    return try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      group.addTask { try await store.run() }
      defer { group.cancelAll() }
      return try await body(store)
    }
  }

  private func image(_ fill: UInt8, count: Int = 100, expiresIn: TimeInterval = 3_600) -> SharedResult {
    SharedResult(
      bytes: Array(repeating: fill, count: count), format: .jpeg, width: 30, height: 20, expiresAt: Date() + expiresIn)
  }

  @Test("a stored result is read back; expired, too large, or changed in the table it is a miss")
  func storeAndRead() async throws {
    try await withStore { store in
      #expect(try await store.result(forKey: "k") == nil)
      try await store.store(image(1), forKey: "k")
      #expect(try await store.result(forKey: "k")?.bytes == Array(repeating: 1, count: 100))
      try await store.store(image(2), forKey: "k")  // replaced
      #expect(try await store.result(forKey: "k")?.bytes.first == 2)
      try await store.store(image(3, count: 5_000), forKey: "big")  // over maxBytes: not shared
      #expect(try await store.result(forKey: "big") == nil)
      try await store.store(image(4, expiresIn: -1), forKey: "old")
      #expect(try await store.result(forKey: "old") == nil)
      // Rows changed behind the store's back are misses, never wrong images.
      let hash = PostgresResultStore.hash("k")
      for tamper: PostgresQuery in [
        "UPDATE darkroom_cache SET bytes = overlay(bytes placing '\\x09'::bytea from 5) WHERE key_sha256 = \(hash)",
        "UPDATE darkroom_cache SET format = 'svg' WHERE key_sha256 = \(hash)",
        "UPDATE darkroom_cache SET width = 0 WHERE key_sha256 = \(hash)",
        "UPDATE darkroom_cache SET size = 99 WHERE key_sha256 = \(hash)",
      ] {
        try await store.store(image(2), forKey: "k")
        try await store.client.query(tamper)
        #expect(try await store.result(forKey: "k") == nil)
      }
    }
  }

  @Test("one claim per key in the cluster: a second claimant is refused, and its waiter is woken by the release")
  func claims() async throws {
    try await withStore { store in
      let entered = AsyncStream<Void>.makeStream()
      let proceed = AsyncStream<Void>.makeStream()
      async let first = store.withRenderClaim(forKey: "k") {
        entered.continuation.yield()
        for await _ in proceed.stream { break }
        try await store.store(self.image(7), forKey: "k")
      }
      for await _ in entered.stream { break }
      // Held: another claim of the same key is refused without running its body.
      let ran = Protected(false)
      let second = try await store.withRenderClaim(forKey: "k") { ran.withLock { $0 = true } }
      #expect(second == false)
      #expect(!ran.value)
      // Another key is free.
      let other = try await store.withRenderClaim(forKey: "other") {}
      #expect(other)
      async let woken = store.waitForResult(forKey: "k", timeout: .seconds(60))
      proceed.continuation.yield()
      #expect(try await first)
      #expect(await woken)  // by the release's notification, not the timeout
      #expect(try await store.result(forKey: "k")?.bytes.first == 7)
      // A render that fails releases the claim without a result.
      struct RenderFailed: Error {}
      await #expect(throws: RenderFailed.self) { try await store.withRenderClaim(forKey: "k2") { throw RenderFailed() } }
      let again = try await store.withRenderClaim(forKey: "k2") {}
      #expect(again)
      #expect(await store.waitForResult(forKey: "nobody", timeout: .milliseconds(10)) == false)
      #expect(store.waiterCount == 0)
    }
  }
}
