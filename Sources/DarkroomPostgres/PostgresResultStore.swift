import DarkroomCore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// A `SharedResultStore` (from `DarkroomCore`) on PostgreSQL: `darkroom serve --shared-cache`.
///
/// Results live in `darkroom_cache`, keyed by the SHA-256 of the server's cache key, each with
/// its format, size, SHA-256 and expiry; a result read back is checked against all of them, and
/// an expired one is a miss. Results larger than ``maxBytes`` are not shared.
///
/// The render claim is a transaction-level advisory lock (`pg_try_advisory_xact_lock` on 64 bits
/// of the key's SHA-256) held by a transaction that stays open while the instance renders: the
/// claim ends with the transaction, whatever happens to the instance (a crash, a lost
/// connection, a failed render), so no key is ever left claimed. A successful render ends with
/// `pg_notify('darkroom_cache', key)` in that transaction, delivered at commit: every instance
/// listens on that channel (``run()``) and wakes its waiters at once. A failed render notifies
/// no one; waiters look again after their timeout.
///
/// Run it as a service beside its `PostgresClient` (it listens while it runs):
///
/// ```swift
/// let store = PostgresResultStore(client: client)
/// let group = ServiceGroup(services: [client, store, server], logger: logger)
/// ```
public final class PostgresResultStore: SharedResultStore, Service {
  public let client: PostgresClient
  let logger: Logger
  /// The largest result shared (default 16 MiB).
  public let maxBytes: Int
  /// The waiters of each key: a continuation once registered, or `nil` when the waiter was ended
  /// before it registered (it then resumes at once).
  private let waiters = Protected<[String: [UUID: CheckedContinuation<Void, Never>?]]>([:])
  private let stores = Atomic<Int>(0)

  static let channel = "darkroom_cache"

  /// Waiters registered now (for tests: none is left behind).
  var waiterCount: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }

  public init(client: PostgresClient, logger: Logger = Logger(label: "darkroom.shared-cache"), maxBytes: Int = 16 << 20) {
    self.client = client
    self.logger = logger
    self.maxBytes = min(max(maxBytes, 0), ResultStorage.maxStoredBytesLimit)
  }

  /// The table's key for a cache key: its hex SHA-256 (cache keys are long and hold any text).
  static func hash(_ key: String) -> String { RequestDigest.hex(key) }

  /// The advisory lock of a key: the first 64 bits of its SHA-256.
  static func lockKey(_ hash: String) -> Int64 {
    Int64(bitPattern: UInt64(hash.prefix(16), radix: 16) ?? 0)
  }

  public func result(forKey key: String) async throws(PipelineError) -> SharedResult? {
    let hash = Self.hash(key)
    let logger = logger
    let row: (String, Int, Int, ByteBuffer, String, Int64, Date)? = try await database("read a shared result") {
      var found: (String, Int, Int, ByteBuffer, String, Int64, Date)?
      for try await row in try await self.client.query(
        """
        SELECT format, width, height, bytes, sha256, size, expires_at FROM darkroom_cache
        WHERE key_sha256 = \(hash) AND expires_at > now()
        """, logger: logger
      ).decode((String, Int, Int, ByteBuffer, String, Int64, Date).self) {
        found = row
      }
      return found
    }
    guard let (formatName, width, height, buffer, digest, size, expiresAt) = row else { return nil }
    // What the table holds is checked like a file from disk: a row that does not add up is a miss.
    let bytes = Array(buffer.readableBytesView)
    guard let format = ImageFormat(rawValue: formatName), ImageFormat.trustedDecodable.contains(format),
      (1...1_000_000).contains(width), (1...1_000_000).contains(height), Int64(bytes.count) == size,
      RequestDigest.hex(of: bytes) == digest
    else {
      logger.warning("a shared result does not match its checksum or description; ignored", metadata: ["key": "\(hash)"])
      return nil
    }
    return SharedResult(bytes: bytes, format: format, width: width, height: height, expiresAt: expiresAt)
  }

  public func store(_ result: SharedResult, forKey key: String) async throws(PipelineError) {
    guard result.bytes.count <= maxBytes, result.expiresAt > Date() else { return }
    let hash = Self.hash(key)
    let digest = RequestDigest.hex(of: result.bytes)
    let logger = logger
    // Now and then, expired entries are swept (by whichever instance stores).
    let sweep = stores.wrappingAdd(1, ordering: .relaxed).oldValue % 100 == 0
    try await database("store a shared result") {
      try await self.client.query(
        """
        INSERT INTO darkroom_cache (key_sha256, format, width, height, bytes, sha256, size, expires_at)
        VALUES (\(hash), \(result.format.rawValue), \(result.width), \(result.height), \(ByteBuffer(bytes: result.bytes)),
          \(digest), \(Int64(result.bytes.count)), \(result.expiresAt))
        ON CONFLICT (key_sha256) DO UPDATE SET format = excluded.format, width = excluded.width, height = excluded.height,
          bytes = excluded.bytes, sha256 = excluded.sha256, size = excluded.size, expires_at = excluded.expires_at,
          stored_at = now()
        """, logger: logger)
      if sweep { try await self.client.query("DELETE FROM darkroom_cache WHERE expires_at < now()", logger: logger) }
    }
  }

  /// What `body` threw, told apart from what the database did.
  private struct BodyFailure: Error {
    let error: any Error
  }

  /// The claim's errors: `body`'s own as they are, the database's as `queueUnavailable`.
  public func withRenderClaim(forKey key: String, _ body: @Sendable () async throws -> Void) async throws -> Bool {
    let hash = Self.hash(key)
    let lock = Self.lockKey(hash)
    let logger = logger
    do {
      return try await client.withTransaction(logger: logger) { connection in
        var claimed = false
        for try await got in try await connection.query("SELECT pg_try_advisory_xact_lock(\(lock))", logger: logger).decode(
          Bool.self)
        {
          claimed = got
        }
        guard claimed else { return false }
        do {
          try await body()
        } catch {
          throw BodyFailure(error: error)
        }
        // Delivered when the transaction commits, with the result stored.
        try await connection.query("SELECT pg_notify(\(Self.channel), \(hash))", logger: logger)
        return true
      }
    } catch let failure as BodyFailure {
      throw failure.error
    } catch let error as PostgresTransactionError {
      if let failure = error.closureError as? BodyFailure { throw failure.error }
      throw PostgresJobQueue.pipelineError(error, doing: "claim a render")
    } catch {
      throw PostgresJobQueue.pipelineError(error, doing: "claim a render")
    }
  }

  @discardableResult
  public func waitForResult(forKey key: String, timeout: Duration) async -> Bool {
    let hash = Self.hash(key)
    let id = UUID()
    return await withTaskGroup(of: Bool.self) { group in
      group.addTask {
        await withCheckedContinuation { continuation in
          let endedAlready = self.waiters.withLock { waiters -> Bool in
            if let slot = waiters[hash]?[id], slot == nil {
              waiters[hash]?[id] = nil as CheckedContinuation<Void, Never>??
              if waiters[hash]?.isEmpty == true { waiters[hash] = nil }
              return true
            }
            waiters[hash, default: [:]][id] = continuation
            return false
          }
          if endedAlready { continuation.resume() }
        }
        return true
      }
      group.addTask {
        try? await Task.sleep(for: timeout)
        return false
      }
      let woken = await group.next() ?? false
      // Whichever came first, the other ends: a timed-out waiter is resumed.
      if !woken { self.wake(hash, only: id) }
      group.cancelAll()
      await group.waitForAll()
      // Both have ended: nothing of this waiter stays behind (an end marker that a release
      // made unneeded).
      self.waiters.withLock { waiters in
        waiters[hash]?[id] = nil as CheckedContinuation<Void, Never>??
        if waiters[hash]?.isEmpty == true { waiters[hash] = nil }
      }
      return woken
    }
  }

  /// Resumes the waiters of `hash`; with `id`, only that one, which is marked ended when it has
  /// not registered yet (so that it resumes as it registers).
  private func wake(_ hash: String, only id: UUID? = nil) {
    let woken: [CheckedContinuation<Void, Never>] = waiters.withLock { waiters in
      var forKey = waiters[hash] ?? [:]
      let taken: [CheckedContinuation<Void, Never>]
      if let id {
        if let slot = forKey.removeValue(forKey: id) {
          taken = slot.map { [$0] } ?? []
        } else {
          forKey[id] = .some(nil)  // ended before it registered
          taken = []
        }
      } else {
        taken = forKey.values.compactMap { $0 }
        forKey = forKey.filter { $0.value == nil }
      }
      waiters[hash] = forKey.isEmpty ? nil : forKey
      return taken
    }
    for continuation in woken { continuation.resume() }
  }

  /// Listens for released claims until cancelled (or the service group shuts down), reconnecting
  /// with backoff when the database goes away; every waiter is woken when the listening restarts,
  /// since a notification may have been missed meanwhile.
  public func run() async throws {
    var backoff: Duration = .milliseconds(100)
    while !Task.isCancelled {
      do {
        try await client.withConnection { connection in
          try await connection.listen(on: Self.channel) { notifications in
            backoff = .milliseconds(100)
            self.wakeEveryone()
            for try await notification in notifications.cancelOnGracefulShutdown() { self.wake(notification.payload) }
          }
        }
      } catch {
        if Task.isCancelled || Task.isShuttingDownGracefully { return }
        logger.warning("the shared cache stopped listening; listening again", metadata: ["error": "\(error)"])
      }
      if Task.isShuttingDownGracefully { return }
      try? await Task.sleep(for: backoff)
      backoff = min(backoff * 2, .seconds(5))
      wakeEveryone()
    }
  }

  private func wakeEveryone() {
    let hashes = waiters.withLock { Array($0.keys) }
    for hash in hashes { wake(hash) }
  }

  /// Runs `body` within the queue's time limit, as a `PipelineError`.
  private func database<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws(PipelineError)
    -> T
  {
    try await PostgresJobQueue(client: client, logger: logger).database(what, body)
  }
}
