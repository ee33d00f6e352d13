import DarkroomCore
import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// A `SharedResultStore` (from `DarkroomCore`) on PostgreSQL: `darkroom serve --shared-cache`.
///
/// Results live in `darkroom_cache`, keyed by the SHA-256 of the server's cache key, each with
/// its format, size, expiry and a SHA-256 of the key's hash and the bytes together; a result
/// read back is checked against all of them (and its bytes must be of its format), and an expired
/// one, or a row that does not decode, is a miss. Results larger than ``maxBytes`` are not shared.
///
/// A render claim is a row of `darkroom_cache_claims` (the key's hash, a random token, an expiry
/// of ``claimLength``): taken in one statement when no live claim is there, ended in one
/// statement that stores the result (or not), deletes the claim and sends
/// `pg_notify('darkroom_cache', 'KEY stored' | 'KEY unshared' | 'KEY failed CODE [STATUS]')`. No
/// connection is held while the instance renders, and the claim of an instance that died lapses
/// at its expiry. Every instance listens on the channel (``run()``) and wakes its waiters with
/// the outcome. Every call is bounded by ``operationTimeout``.
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
  /// How long a claim lasts when its instance never ends it (it died): the longest render and
  /// then some.
  public let claimLength: Duration
  /// How long any one call may take before the store counts as out of reach (short: lookups are
  /// on the request's path).
  public let operationTimeout: Duration
  /// The waiters of each key: a continuation once registered, or `nil` when the waiter was ended
  /// before it registered (it then resumes at once).
  private let waiters = Protected<[String: [UUID: CheckedContinuation<SharedRenderOutcome?, Never>?]]>([:])
  private let stores = Atomic<Int>(0)
  private let listening = Atomic<Bool>(false)

  static let channel = "darkroom_cache"

  /// Waiters registered now (for tests: none is left behind).
  var waiterCount: Int { waiters.withLock { $0.values.reduce(0) { $0 + $1.count } } }

  /// Whether ``run()`` listens for ended claims now. A waiter registered before it does is woken
  /// (to look again) when the listening starts.
  public var isListening: Bool { listening.load(ordering: .acquiring) }

  public init(
    client: PostgresClient, logger: Logger = Logger(label: "darkroom.shared-cache"), maxBytes: Int = 16 << 20,
    claimLength: Duration = .seconds(60), operationTimeout: Duration = .seconds(3)
  ) {
    self.client = client
    self.logger = logger
    self.maxBytes = min(max(maxBytes, 0), ResultStorage.maxStoredBytesLimit)
    self.claimLength = min(max(claimLength, .seconds(1)), .seconds(86_400))
    self.operationTimeout = min(max(operationTimeout, .milliseconds(100)), PostgresJobQueue.operationTimeout)
  }

  /// The table's key for a cache key: its hex SHA-256 (cache keys are long and hold any text).
  static func hash(_ key: String) -> String { RequestDigest.hex(key) }

  /// The checksum stored with a result: of the key's hash and the bytes together, so that a row
  /// copied under another key does not pass for that key's result.
  static func digest(_ hash: String, _ bytes: [UInt8]) -> String { RequestDigest.hex(of: Array(hash.utf8) + bytes) }

  public func result(forKey key: String) async throws(PipelineError) -> SharedResult? {
    let hash = Self.hash(key)
    let logger = logger
    typealias Row = (String, Int, Int, ByteBuffer, String, Int64, Date)
    enum Found: Sendable {
      case none
      case undecodable
      case row(Row)
    }
    let found: Found = try await database("read a shared result") {
      let rows = try await self.client.query(
        """
        SELECT format, width, height, bytes, sha256, size, expires_at FROM darkroom_cache
        WHERE key_sha256 = \(hash) AND expires_at > now()
        """, logger: logger)
      var found = Found.none
      for try await row in rows {
        // A row that does not decode (a NULL, a changed column) is a miss, not an outage.
        found = (try? row.decode(Row.self)).map(Found.row) ?? .undecodable
      }
      return found
    }
    guard case .row(let (formatName, width, height, buffer, digest, size, expiresAt)) = found else {
      if case .undecodable = found {
        logger.warning("a shared result could not be read; ignored", metadata: ["key": "\(hash)"])
      }
      return nil
    }
    // What the table holds is checked like a file from disk: a row that does not add up is a miss.
    let bytes = Array(buffer.readableBytesView)
    guard let format = ImageFormat(rawValue: formatName), ImageFormat.trustedDecodable.contains(format),
      ImageFormat.sniff(Array(bytes.prefix(64))) == format, (1...1_000_000).contains(width),
      (1...1_000_000).contains(height), Int64(bytes.count) == size, Self.digest(hash, bytes) == digest
    else {
      logger.warning("a shared result does not match its checksum or description; ignored", metadata: ["key": "\(hash)"])
      return nil
    }
    return SharedResult(bytes: bytes, format: format, width: width, height: height, expiresAt: expiresAt)
  }

  public func store(_ result: SharedResult, forKey key: String) async throws(PipelineError) {
    guard shares(result) else { return }
    let hash = Self.hash(key)
    let query = storing(result, hash: hash, claim: nil)
    let logger = logger
    try await database("store a shared result") { try await self.client.query(query, logger: logger) }
    await sweepNowAndThen()
  }

  /// Whether `result` is kept at all: small enough and not expired.
  private func shares(_ result: SharedResult) -> Bool { result.bytes.count <= maxBytes && result.expiresAt > Date() }

  /// Every 100th store (by whichever instance stores), up to 1,000 expired entries and the
  /// lapsed claims go, in a call of their own; a sweep that fails is tried again next time.
  private func sweepNowAndThen() async {
    guard stores.wrappingAdd(1, ordering: .relaxed).oldValue % 100 == 0 else { return }
    let logger = logger
    do throws(PipelineError) {
      try await database("sweep expired shared results") {
        try await self.client.query(
          """
          DELETE FROM darkroom_cache WHERE key_sha256 IN
            (SELECT key_sha256 FROM darkroom_cache WHERE expires_at < now() LIMIT 1000)
          """, logger: logger)
        try await self.client.query(
          "DELETE FROM darkroom_cache_claims WHERE \(unescaped: Self.claimOver("darkroom_cache_claims"))", logger: logger)
      }
    } catch {
      logger.warning("the shared cache could not be swept", metadata: ["error": "\(error.message)"])
    }
  }

  /// When a claim (a row of `table`) is over: expired, or further away than any claim can be (a
  /// claim lasts at most a day: a later expiry is not one a store wrote).
  static func claimOver(_ table: String) -> String {
    "(\(table).expires_at < clock_timestamp() OR \(table).expires_at > clock_timestamp() + interval '1 day 1 hour')"
  }

  /// One statement storing `result` under `hash`; with `claim`, it also ends that claim and
  /// tells the waiters the result is stored (delivered when the statement commits).
  private func storing(_ result: SharedResult, hash: String, claim token: UUID?) -> PostgresQuery {
    let digest = Self.digest(hash, result.bytes)
    let bytes = ByteBuffer(bytes: result.bytes)
    let size = Int64(result.bytes.count)
    let payload = hash + " stored"
    return """
      WITH stored AS (
        INSERT INTO darkroom_cache (key_sha256, format, width, height, bytes, sha256, size, expires_at)
        VALUES (\(hash), \(result.format.rawValue), \(result.width), \(result.height), \(bytes), \(digest), \(size),
          \(result.expiresAt))
        ON CONFLICT (key_sha256) DO UPDATE SET format = excluded.format, width = excluded.width,
          height = excluded.height, bytes = excluded.bytes, sha256 = excluded.sha256, size = excluded.size,
          expires_at = excluded.expires_at, stored_at = now()
      ), released AS (
        DELETE FROM darkroom_cache_claims WHERE key_sha256 = \(hash) AND token = \(token)
      )
      SELECT pg_notify(\(Self.channel), \(payload)) WHERE \(token)::uuid IS NOT NULL
      """
  }

  public func withRenderClaim(forKey key: String, _ render: @Sendable () async throws -> SharedResult?) async throws -> Bool {
    let hash = Self.hash(key)
    let token = UUID()
    let seconds = Double(claimLength.components.seconds)
    let logger = logger
    let claimed = try await database("claim a render") {
      var claimed = false
      for try await _ in try await self.client.query(
        """
        INSERT INTO darkroom_cache_claims (key_sha256, token, expires_at)
        VALUES (\(hash), \(token), clock_timestamp() + make_interval(secs => \(seconds)))
        ON CONFLICT (key_sha256) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at
          WHERE \(unescaped: Self.claimOver("darkroom_cache_claims"))
        RETURNING token
        """, logger: logger)
      {
        claimed = true
      }
      return claimed
    }
    guard claimed else { return false }
    let result: SharedResult?
    do {
      result = try await render()
    } catch {
      let failure = error as? PipelineError
      let code = failure?.code ?? (error is CancellationError ? .cancelled : .stageFailed)
      let status = failure?.httpStatus.map { " \($0)" } ?? ""
      // In a task of its own: a render cancelled by its client must still end its claim, or
      // the other instances would wait for it until it lapses.
      await Task { try? await self.end(hash, token: token, outcome: "failed \(code.rawValue)\(status)") }.value
      throw error
    }
    if let result, shares(result) {
      let query = storing(result, hash: hash, claim: token)
      try await Task {
        try await self.database("store a shared result") { try await self.client.query(query, logger: logger) }
        await self.sweepNowAndThen()
      }.value
    } else {
      try await Task { try await self.end(hash, token: token, outcome: "unshared") }.value
    }
    return true
  }

  public func isClaimed(forKey key: String) async throws(PipelineError) -> Bool {
    let hash = Self.hash(key)
    let logger = logger
    return try await database("look for a render claim") {
      var held = false
      for try await _ in try await self.client.query(
        """
        SELECT 1 FROM darkroom_cache_claims
        WHERE key_sha256 = \(hash) AND NOT \(unescaped: Self.claimOver("darkroom_cache_claims"))
        """, logger: logger)
      {
        held = true
      }
      return held
    }
  }

  /// Ends a claim without a result, telling the waiters how it ended.
  private func end(_ hash: String, token: UUID, outcome: String) async throws(PipelineError) {
    let payload = hash + " " + outcome
    let logger = logger
    try await database("end a render claim") {
      try await self.client.query(
        """
        WITH released AS (DELETE FROM darkroom_cache_claims WHERE key_sha256 = \(hash) AND token = \(token))
        SELECT pg_notify(\(Self.channel), \(payload))
        """, logger: logger)
    }
  }

  public func waitForResult(forKey key: String, timeout: Duration) async -> SharedRenderOutcome? {
    let hash = Self.hash(key)
    let id = UUID()
    return await withTaskGroup(of: SharedRenderOutcome??.self) { group in
      group.addTask {
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<SharedRenderOutcome?, Never>) in
          let endedAlready = self.waiters.withLock { waiters -> Bool in
            if let slot = waiters[hash]?[id], slot == nil {
              waiters[hash]?[id] = nil as CheckedContinuation<SharedRenderOutcome?, Never>??
              if waiters[hash]?.isEmpty == true { waiters[hash] = nil }
              return true
            }
            waiters[hash, default: [:]][id] = continuation
            return false
          }
          if endedAlready { continuation.resume(returning: nil) }
        }
        return .some(outcome)
      }
      group.addTask {
        try? await Task.sleep(for: timeout)
        return nil
      }
      let first = await group.next() ?? nil
      // Whichever came first, the other ends: a timed-out waiter is resumed.
      if first == nil { self.wake(hash, with: nil, only: id) }
      group.cancelAll()
      await group.waitForAll()
      // Both have ended: nothing of this waiter stays behind (an end marker that a release
      // made unneeded).
      self.waiters.withLock { waiters in
        waiters[hash]?[id] = nil as CheckedContinuation<SharedRenderOutcome?, Never>??
        if waiters[hash]?.isEmpty == true { waiters[hash] = nil }
      }
      return first ?? nil
    }
  }

  /// Resumes the waiters of `hash` with `outcome`; with `id`, only that one, which is marked
  /// ended when it has not registered yet (so that it resumes as it registers).
  private func wake(_ hash: String, with outcome: SharedRenderOutcome?, only id: UUID? = nil) {
    let woken: [CheckedContinuation<SharedRenderOutcome?, Never>] = waiters.withLock { waiters in
      var forKey = waiters[hash] ?? [:]
      let taken: [CheckedContinuation<SharedRenderOutcome?, Never>]
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
    for continuation in woken { continuation.resume(returning: outcome) }
  }

  /// A notification's payload, `HASH stored`, `HASH unshared` or `HASH failed CODE [STATUS]`, read as it
  /// comes from the database: anything else wakes no one.
  static func parse(_ payload: String) -> (hash: String, outcome: SharedRenderOutcome)? {
    let parts = payload.split(separator: " ", omittingEmptySubsequences: false)
    guard parts.count >= 2, parts[0].utf8.count == 64 else { return nil }
    switch (parts[1], parts.count) {
    case ("stored", 2): return (String(parts[0]), .stored)
    case ("unshared", 2): return (String(parts[0]), .unshared)
    case ("failed", 3), ("failed", 4):
      let code = parts[2]
      guard (1...64).contains(code.utf8.count), code.allSatisfy({ $0.isASCII && $0.isLetter }) else { return nil }
      var status: Int?
      if parts.count == 4 {
        guard parts[3].utf8.count == 3, let number = Int(parts[3]), (100...599).contains(number) else { return nil }
        status = number
      }
      return (String(parts[0]), .failed(PipelineError.Code(String(code)), httpStatus: status))
    default: return nil
    }
  }

  /// Listens for ended claims until cancelled (or the service group shuts down), reconnecting
  /// with backoff when the database goes away; every waiter is woken (to look again) when the
  /// listening restarts, since a notification may have been missed meanwhile.
  public func run() async throws {
    var backoff: Duration = .milliseconds(100)
    while !Task.isCancelled {
      do {
        try await client.withConnection { connection in
          try await connection.listen(on: Self.channel) { notifications in
            backoff = .milliseconds(100)
            self.wakeEveryone()
            self.listening.store(true, ordering: .releasing)
            self.logger.info("the shared cache listens for claims that end in the cluster")
            defer { self.listening.store(false, ordering: .releasing) }
            for try await notification in notifications.cancelOnGracefulShutdown() {
              if let (hash, outcome) = Self.parse(notification.payload) { self.wake(hash, with: outcome) }
            }
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

  /// Wakes every waiter with no outcome: each looks for the result, and renders without it.
  private func wakeEveryone() {
    let hashes = waiters.withLock { Array($0.keys) }
    for hash in hashes { wake(hash, with: nil) }
  }

  /// Runs `body` within ``operationTimeout``, as a `PipelineError` (`queueUnavailable` when the
  /// database did not answer in time or failed).
  private func database<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws(PipelineError)
    -> T
  {
    try await PostgresJobQueue.bounded(what, by: operationTimeout, of: "the shared cache's database", body)
  }

}
