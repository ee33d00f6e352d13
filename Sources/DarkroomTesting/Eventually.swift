/// Waits, yielding, until `condition` holds (for work queued in another task to arrive), or until
/// the test is cancelled (its time limit passed).
///
/// A condition that never holds then fails the test's next expectation instead of spinning on the
/// task pool's threads, starving every other test of the run. It polls a state the code under test
/// exposes; it never sleeps.
///
/// ```swift
/// let operations = (0..<100).map { _ in loader.load(source, pipeline: thumbnail) }
/// await eventually { loader.scheduler.coalescer.map { $0.joined >= 99 } ?? true }
/// transport.gate.open()   // all 100 share the one transfer
/// ```
package func eventually(_ condition: () -> Bool) async {
  while !condition() && !Task.isCancelled { await Task.yield() }
}
