import DarkroomCore
import DarkroomPostgresTestServer
import DarkroomTesting
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
      // Waiters registered before the store listens are woken when it starts.
      await eventually { store.isListening }
      return try await body(store)
    }
  }

  /// A stored result's bytes: a JPEG's first bytes (a row's bytes must be of its format), then `fill`.
  private func image(_ fill: UInt8, count: Int = 100, expiresIn: TimeInterval = 3_600) -> SharedResult {
    SharedResult(
      bytes: [0xFF, 0xD8, 0xFF, 0xE0] + Array(repeating: fill, count: count - 4), format: .jpeg, width: 30, height: 20,
      expiresAt: Date() + expiresIn)
  }

  @Test("a stored result is read back; expired, too large, changed, copied from another key or undecodable, it is a miss")
  func storeAndRead() async throws {
    try await withStore { store in
      #expect(try await store.result(forKey: "k") == nil)
      try await store.store(image(1), forKey: "k")
      #expect(try await store.result(forKey: "k") == image(1).withExpiry(of: try await store.result(forKey: "k")))
      try await store.store(image(2), forKey: "k")  // replaced
      #expect(try await store.result(forKey: "k")?.bytes.last == 2)
      try await store.store(image(3, count: 5_000), forKey: "big")  // over maxBytes: not shared
      #expect(try await store.result(forKey: "big") == nil)
      try await store.store(image(4, expiresIn: -1), forKey: "old")
      #expect(try await store.result(forKey: "old") == nil)
      // Rows changed behind the store's back are misses, never wrong images.
      let hash = PostgresResultStore.hash("k")
      try await store.store(image(5), forKey: "other")
      let other = PostgresResultStore.hash("other")
      for tamper: PostgresQuery in [
        "UPDATE darkroom_cache SET bytes = overlay(bytes placing '\\x09'::bytea from 5) WHERE key_sha256 = \(hash)",
        "UPDATE darkroom_cache SET format = 'svg' WHERE key_sha256 = \(hash)",
        "UPDATE darkroom_cache SET format = 'png' WHERE key_sha256 = \(hash)",
        "UPDATE darkroom_cache SET width = 0 WHERE key_sha256 = \(hash)",
        "UPDATE darkroom_cache SET size = 99 WHERE key_sha256 = \(hash)",
        // Another key's row, whole: its checksum covers its own key.
        """
        UPDATE darkroom_cache c SET bytes = o.bytes, sha256 = o.sha256, size = o.size
        FROM darkroom_cache o WHERE c.key_sha256 = \(hash) AND o.key_sha256 = \(other)
        """,
      ] {
        try await store.store(image(2), forKey: "k")
        try await store.client.query(tamper)
        #expect(try await store.result(forKey: "k") == nil)
      }
      // A row that does not decode is a miss, not a database out of reach.
      try await store.client.query("ALTER TABLE darkroom_cache ALTER width DROP NOT NULL")
      try await store.store(image(2), forKey: "k")
      try await store.client.query("UPDATE darkroom_cache SET width = NULL WHERE key_sha256 = \(hash)")
      #expect(try await store.result(forKey: "k") == nil)
      try await store.store(image(6), forKey: "k")  // and it is replaced by the next store
      #expect(try await store.result(forKey: "k")?.bytes.last == 6)
    }
  }

  @Test("one claim per key in the cluster: a second claimant is refused, and its waiter learns how the render ended")
  func claims() async throws {
    try await withStore { store in
      let entered = AsyncStream<Void>.makeStream()
      let proceed = AsyncStream<Void>.makeStream()
      async let first = store.withRenderClaim(forKey: "k") {
        entered.continuation.yield()
        for await _ in proceed.stream { break }
        return self.image(7)
      }
      for await _ in entered.stream { break }
      // Held: another claim of the same key is refused without running its body.
      let ran = Protected(false)
      let second = try await store.withRenderClaim(forKey: "k") {
        ran.withLock { $0 = true }
        return nil
      }
      #expect(second == false)
      #expect(!ran.value)
      #expect(try await store.isClaimed(forKey: "k"))
      #expect(try await store.isClaimed(forKey: "never") == false)
      // No connection is held while the claimant renders: another key is claimed and stored.
      #expect(try await store.withRenderClaim(forKey: "other") { self.image(8) })
      #expect(try await store.result(forKey: "other")?.bytes.last == 8)
      async let woken = store.waitForResult(forKey: "k", timeout: .seconds(60))
      await eventually { store.waiterCount == 1 }
      proceed.continuation.yield()
      #expect(try await first)
      #expect(await woken == .stored)  // by the claim's end, not the timeout
      #expect(try await store.isClaimed(forKey: "k") == false)
      #expect(try await store.result(forKey: "k")?.bytes.last == 7)
      // A render that fails ends the claim, and its waiters learn the failure's code.
      async let failed = store.waitForResult(forKey: "k2", timeout: .seconds(60))
      await eventually { store.waiterCount == 1 }
      await #expect(throws: PipelineError.self) {
        try await store.withRenderClaim(forKey: "k2") {
          throw PipelineError(.notFound, "no such image")
        }
      }
      #expect(await failed == .failed(.notFound, httpStatus: nil))
      // An answer not to be shared ends the claim without a result.
      async let unshared = store.waitForResult(forKey: "k2", timeout: .seconds(60))
      await eventually { store.waiterCount == 1 }
      #expect(try await store.withRenderClaim(forKey: "k2") { nil })
      #expect(await unshared == .unshared)
      #expect(try await store.result(forKey: "k2") == nil)
      #expect(await store.waitForResult(forKey: "nobody", timeout: .milliseconds(10)) == nil)
      #expect(store.waiterCount == 0)
    }
  }

  @Test("a claim whose instance died lapses at its expiry and is taken again; a hostile notification wakes no one")
  func lapsedClaims() async throws {
    try await withStore { store in
      let hash = PostgresResultStore.hash("k")
      try await store.client.query(
        "INSERT INTO darkroom_cache_claims VALUES (\(hash), gen_random_uuid(), now() + interval '1 hour')")
      #expect(try await store.withRenderClaim(forKey: "k") { self.image(1) } == false)
      #expect(try await store.isClaimed(forKey: "k"))
      try await store.client.query("UPDATE darkroom_cache_claims SET expires_at = now() - interval '1 second'")
      #expect(try await store.isClaimed(forKey: "k") == false)  // lapsed: held by no one
      #expect(try await store.withRenderClaim(forKey: "k") { self.image(1) })
      #expect(try await store.result(forKey: "k") != nil)
      for payload in ["\(hash)", "\(hash) stored extra", "\(hash) failed", "\(hash) failed no\u{0}pe", "x stored", ""] {
        #expect(PostgresResultStore.parse(payload) == nil, "\(payload)")
      }
      #expect(PostgresResultStore.parse("\(hash) failed timedOut")?.outcome == .failed(.timedOut, httpStatus: nil))
      #expect(PostgresResultStore.parse("\(hash) failed httpStatus 404")?.outcome == .failed(.httpStatus, httpStatus: 404))
      #expect(PostgresResultStore.parse("\(hash) failed httpStatus 4040") == nil)
    }
  }
}

@Suite("the PostgreSQL shared result store, when things go wrong", .postgresServer, .timeLimit(.minutes(3)))
struct PostgresResultStoreFailureTests {
  @Test("a render cancelled by its client still ends its claim: its waiters learn it at once, and the key is free")
  func cancelledRender() async throws {
    let location = try await PostgresTestServer.suite.newDatabase()
    try await PostgresJobQueue.withQueue(at: location) { _ in }
    let client = PostgresClient(configuration: location.configuration, backgroundLogger: Logger(label: "test"))
    let store = PostgresResultStore(client: client)
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      group.addTask { try await store.run() }
      defer { group.cancelAll() }
      await eventually { store.isListening }
      let started = AsyncStream<Void>.makeStream()
      let claimant = Task {
        try await store.withRenderClaim(forKey: "c") {
          started.continuation.yield()
          try await Task.sleep(for: .seconds(600))
          return nil
        }
      }
      for await _ in started.stream { break }
      async let outcome = store.waitForResult(forKey: "c", timeout: .seconds(60))
      await eventually { store.waiterCount == 1 }
      claimant.cancel()
      #expect(await outcome == .failed(.cancelled, httpStatus: nil))
      let free = try await store.withRenderClaim(forKey: "c") { nil }
      #expect(free)
    }
  }

  @Test("a call held by a lock another session keeps ends at its time limit, as queueUnavailable")
  func lockedTable() async throws {
    let location = try await PostgresTestServer.suite.newDatabase()
    try await PostgresJobQueue.withQueue(at: location) { _ in }
    let client = PostgresClient(configuration: location.configuration, backgroundLogger: Logger(label: "test"))
    let store = PostgresResultStore(client: client, operationTimeout: .milliseconds(300))
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask { await client.run() }
      defer { group.cancelAll() }
      let locker = try await PostgresConnection.connect(
        configuration: .init(
          unixSocketPath: try PostgresTestServer.suite.sockets + "/.s.PGSQL.5432", username: "darkroom", password: nil,
          database: location.database), id: 9, logger: Logger(label: "test"))
      try await locker.query("BEGIN", logger: Logger(label: "test"))
      try await locker.query("LOCK TABLE darkroom_cache IN ACCESS EXCLUSIVE MODE", logger: Logger(label: "test"))
      // The lock is held until after the call: the call must end by itself.
      let error = await #expect(throws: PipelineError.self) { _ = try await store.result(forKey: "k") }
      #expect(error?.code == .queueUnavailable)
      try await locker.query("ROLLBACK", logger: Logger(label: "test"))
      try await locker.close()
      #expect(try await store.result(forKey: "k") == nil)
    }
  }
}

extension SharedResult {
  /// This result with `other`'s expiry (the database keeps it to the microsecond).
  fileprivate func withExpiry(of other: SharedResult?) -> SharedResult {
    var copy = self
    copy.expiresAt = other?.expiresAt ?? expiresAt
    return copy
  }
}
