import Foundation

/// A value guarded by an `NSLock`. Used instead of `Synchronization.Mutex` where ThreadSanitizer
/// must see the synchronisation (it does not see through `Mutex`, see Concurrency.md).
final class Protected<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Value  // guarded by `lock`

  init(_ value: Value) { self.value = value }

  func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}
