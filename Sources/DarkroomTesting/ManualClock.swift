import DarkroomCore
import Foundation

/// A wall clock tests move by hand, for stores' `now:` parameters: lifetimes are tested without
/// waiting.
///
/// ```swift
/// let clock = ManualClock()
/// let store = MemoryStore(costLimit: 1 << 20, now: { clock.now })
/// clock.advance(61)
/// ```
public final class ManualClock: Sendable {
  private let current: Protected<Date>

  public init(start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = Protected(start) }

  /// The current time.
  public var now: Date { current.value }

  /// Moves the clock forward.
  public func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
