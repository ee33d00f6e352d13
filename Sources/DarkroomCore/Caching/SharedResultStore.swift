import Foundation

/// A result cache that many server instances share (the level behind each instance's memory and
/// disk), and the claim that makes one render per key in the whole cluster.
///
/// An instance that misses its own levels asks the shared store; on a miss it tries to claim the
/// key's render (``withRenderClaim(forKey:_:)``). The instance that holds the claim renders and
/// stores the result; the others wait (``waitForResult(forKey:timeout:)``), woken when the claim
/// is released, and read what was stored. A store that cannot be reached is only a missing
/// level: the instance renders on its own.
///
/// `DarkroomPostgres`' `PostgresResultStore` implements it on PostgreSQL.
///
/// ```swift
/// if let hit = try await store.result(forKey: key) { return hit }
/// let claimed = try await store.withRenderClaim(forKey: key) {
///   try await store.store(try await render(), forKey: key)
/// }
/// if !claimed { await store.waitForResult(forKey: key, timeout: .milliseconds(250)) }
/// ```
public protocol SharedResultStore: Sendable {
  /// The fresh result stored under `key`, checked against its checksum; `nil` when there is none.
  func result(forKey key: String) async throws(PipelineError) -> SharedResult?

  /// Stores `result` under `key` (replacing what was there).
  func store(_ result: SharedResult, forKey key: String) async throws(PipelineError)

  /// Runs `body` while holding the cluster-wide claim on `key`'s render, and returns true; or
  /// returns false at once, without running it, when another instance holds the claim. Waiters
  /// are woken when the claim is released.
  func withRenderClaim(forKey key: String, _ body: @Sendable () async throws -> Void) async throws -> Bool

  /// Waits until the claim on `key` is released somewhere in the cluster (true), or `timeout`
  /// passes (false).
  @discardableResult
  func waitForResult(forKey key: String, timeout: Duration) async -> Bool
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
