import Foundation

/// A value guarded by a lock: the package's one lock box. Every read and write of the value goes
/// through ``withLock(_:)``, which holds the lock for the closure and no longer.
///
/// The lock is an `NSLock` (a pthread mutex), not `Synchronization.Mutex`: ThreadSanitizer sees
/// through a pthread mutex, but not through `Mutex`'s futex, and reports races on values guarded
/// by one (see Concurrency.md). Keep the closures short and never suspend or call out to code
/// that may take the same lock. To let tasks wait until the value reaches some state, use
/// ``Waitable`` (or ``Latch`` for a one-shot signal) instead.
///
/// ```swift
/// let seen = Protected<[String]>([])
/// seen.withLock { $0.append("decode") }
/// let count = seen.withLock { $0.count }   // or seen.value.count
/// ```
package final class Protected<Value>: @unchecked Sendable {
  @usableFromInline let lock = NSLock()
  @usableFromInline var stored: Value  // guarded by `lock`

  package init(_ value: Value) { stored = value }

  /// Runs `body` with exclusive access to the value and returns what it returns (or throws what
  /// it throws).
  @inlinable
  package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&stored)
  }

  /// A copy of the value as it is now.
  @inlinable
  package var value: Value { withLock { $0 } }
}
