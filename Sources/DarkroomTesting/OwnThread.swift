import Foundation

/// Runs `body` on a thread of its own and returns its result: for a test's long synchronous work
/// (thousands of file writes, libvips computations, byte-by-byte comparisons of whole images).
///
/// Swift Testing runs tests in parallel on the cooperative pool, which has one thread per core.
/// A test that keeps one of them busy for seconds stalls every awaiting test beside it, and on a
/// two-core machine two such tests stall them all, until tests with time limits fail without
/// anything being wrong. Work moved here leaves the pool to the awaiting tests.
///
/// ```swift
/// @Test func everyByteFlipped() async throws {
///   try await onOwnThread { try flipEveryByte(of: path) }
/// }
/// ```
package func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    let thread = Thread { continuation.resume(with: Result { try body() }) }
    thread.stackSize = 4 << 20
    thread.start()
  }
}
