import Synchronization

/// A token unique within the process, for keying waiters and observers in a dictionary.
///
/// Cheaper than a `UUID`, which reads the system's random source every time (on Linux, Foundation
/// opens and reads `/dev/urandom` for each one): an operation registers several waiters.
///
/// ```swift
/// let waiter = LocalToken()
/// waiters[waiter] = continuation
/// ```
package struct LocalToken: Hashable, Sendable {
  private static let next = Atomic<UInt64>(0)
  private let value: UInt64

  /// A token no other in this process equals.
  package init() { value = Self.next.add(1, ordering: .relaxed).newValue }
}
