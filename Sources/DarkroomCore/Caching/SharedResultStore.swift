import Foundation

/// A result cache that many server instances share (the level behind each instance's memory and
/// disk), and the claim that makes one render per key in the whole cluster.
///
/// An instance that misses its own levels asks the shared store; on a miss it tries to claim the
/// key's render (``withRenderClaim(forKey:_:)``). The instance that gets the claim renders, and the
/// claim ends by storing the result (or by saying it was not shared, or how the render failed);
/// the others wait (``waitForResult(forKey:timeout:)``), are woken when the claim ends, and read
/// what was stored. A claim holds no connection while its render runs, and lapses by itself if
/// its instance dies. A store that cannot be reached is only a missing level: the instance
/// renders on its own.
///
/// `DarkroomPostgres`' `PostgresResultStore` implements it on PostgreSQL.
///
/// ```swift
/// if let hit = try await store.result(forKey: key) { return hit }
/// let claimed = try await store.withRenderClaim(forKey: key) { try await render() }   // stored when claimed
/// if !claimed, await store.waitForResult(forKey: key, timeout: .seconds(30)) == .stored {
///   return try await store.result(forKey: key)
/// }
/// ```
public protocol SharedResultStore: Sendable {
  /// The fresh result stored under `key`, checked against its checksum and format; `nil` when
  /// there is none, or what is stored does not add up.
  func result(forKey key: String) async throws(PipelineError) -> SharedResult?

  /// Stores `result` under `key` (replacing what was there).
  func store(_ result: SharedResult, forKey key: String) async throws(PipelineError)

  /// Claims `key`'s render in the cluster and runs `render` (true), or returns false at once,
  /// without running it, when another instance holds the claim. The claim ends with what
  /// `render` did: its result stored, `nil` (an answer that is not to be shared), or its error
  /// (rethrown); waiters are woken with that outcome. A database error is `queueUnavailable`.
  func withRenderClaim(forKey key: String, _ render: @Sendable () async throws -> SharedResult?) async throws -> Bool

  /// Waits until the claim on `key` ends somewhere in the cluster, and says how; `nil` when
  /// `timeout` passed first.
  func waitForResult(forKey key: String, timeout: Duration) async -> SharedRenderOutcome?

  /// Whether a live claim on `key` is held somewhere in the cluster now. A waiter asks while it
  /// looks for the result: a claim that ended before the waiting began was never heard, and with
  /// neither a claim nor a result there is nothing to wait for. A store that cannot tell says
  /// true (the default): its waiters wait for the end or their limit.
  func isClaimed(forKey key: String) async throws(PipelineError) -> Bool

  /// Whether the store hears now when a claim ends elsewhere. A waiter that registered before it
  /// did is woken, to look for the result again, when it starts. A server shows it as the
  /// `darkroom_shared_cache_listening` gauge.
  var isListening: Bool { get }
}

extension SharedResultStore {
  /// A store that needs no listening (one process, say) always hears.
  public var isListening: Bool { true }
  /// A store that cannot tell whether a claim is live says it is.
  public func isClaimed(forKey key: String) async throws(PipelineError) -> Bool { true }
}

/// How a claimed render ended, as its waiters learn it.
///
/// ```swift
/// switch await store.waitForResult(forKey: key, timeout: .seconds(30)) {
/// case .stored: …            // read it with result(forKey:)
/// case .failed(let code, _): …  // the claimant's render failed with code
/// case .unshared, nil: …     // render here
/// }
/// ```
public enum SharedRenderOutcome: Sendable, Hashable {
  /// The result was stored.
  case stored
  /// The answer was not to be shared (private to its client, or too large).
  case unshared
  /// The render failed with this code (and, for `httpStatus`, the origin's status).
  case failed(PipelineError.Code, httpStatus: Int?)
}

/// An encoded image as a shared result cache keeps it.
///
/// ```swift
/// let result = SharedResult(bytes: jpeg, format: .jpeg, width: 300, height: 200, expiresAt: Date() + 3600)
/// ```
public struct SharedResult: Sendable, Hashable {
  public var bytes: [UInt8]
  public var format: ImageFormat
  public var width: Int
  public var height: Int
  /// Until when it may be served.
  public var expiresAt: Date

  public init(bytes: [UInt8], format: ImageFormat, width: Int, height: Int, expiresAt: Date) {
    self.bytes = bytes
    self.format = format
    self.width = width
    self.height = height
    self.expiresAt = expiresAt
  }
}
