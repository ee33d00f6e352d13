/// A one-shot signal: closed until ``open()``, then open for good. Tasks waiting resume when it
/// opens; tasks that come later pass at once. A ``Waitable`` of a `Bool`.
///
/// ```swift
/// let ready = Latch()
/// Task { await ready.wait(); print("went through") }
/// ready.open()
/// await ready.wait()   // already open: returns at once
/// ```
package final class Latch: Sendable {
  private let state = Waitable(false)

  package init() {}

  /// Whether ``open()`` has been called.
  package var isOpen: Bool { state.value }

  /// Opens the latch: lets every waiter through, now and later. Opening it again does nothing.
  package func open() { state.withLock { $0 = true } }

  /// Returns once the latch is open. Cancelling the task does not end the wait.
  package func wait() async { await state.wait { $0 } }

  /// Returns once the latch is open; throws `CancellationError` as soon as the task is cancelled
  /// (also when it already is, open or not).
  package func waitUnlessCancelled() async throws(CancellationError) { try await state.waitUnlessCancelled { $0 } }
}
