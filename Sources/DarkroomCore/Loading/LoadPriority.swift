import Foundation

/// How urgent a load is. Higher priorities take a free slot of a `ResourceClass` first; within a
/// priority, first come, first served.
///
/// ```swift
/// let loader = ImageLoader()
/// let hero = loader.load(ImageSource("hero.jpg"), pipeline: thumbnail, priority: .high)
/// loader.preload(ImageSource("next.jpg"), pipeline: thumbnail)   // .low by default
/// ```
public enum LoadPriority: Int, Sendable, Comparable, CaseIterable, Codable {
  case low, normal, high

  public static func < (lhs: LoadPriority, rhs: LoadPriority) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The priority of a piece of queued work, changeable while it waits: raising it moves the work
/// ahead of everything of lower priority at once (shared work takes the highest priority of its
/// waiters this way).
///
/// ```swift
/// let ticket = PriorityTicket(.low)
/// async let image = cpu.run(ticket) { try decode(bytes) }
/// ticket.priority = .high   // the user scrolled to it
/// ```
package final class PriorityTicket: Sendable {
  private let state: Protected<(priority: LoadPriority, observers: [LocalToken: @Sendable (LoadPriority) -> Void])>
  /// When the work was asked for: within a priority, queued work goes in this order (first come,
  /// first served), whatever order its tasks reach the queue in.
  public let order: UInt64

  private static let clock = Protected<UInt64>(0)

  /// A ticket at `priority`, stamped now (or with `order`, to queue as early as another ticket).
  public init(_ priority: LoadPriority = .normal, order: UInt64? = nil) {
    state = Protected((priority, [:]))
    self.order =
      order
      ?? PriorityTicket.clock.withLock {
        $0 += 1
        return $0
      }
  }

  /// The current priority; setting it reorders queued work holding this ticket.
  public var priority: LoadPriority {
    get { state.withLock { $0.priority } }
    set {
      let toNotify = state.withLock { state -> [@Sendable (LoadPriority) -> Void] in
        guard state.priority != newValue else { return [] }
        state.priority = newValue
        return Array(state.observers.values)
      }
      for observer in toNotify { observer(newValue) }
    }
  }

  /// Calls `observer` on every change until the returned token is passed to ``stopObserving(_:)``.
  func observe(_ observer: @escaping @Sendable (LoadPriority) -> Void) -> LocalToken {
    let token = LocalToken()
    state.withLock { $0.observers[token] = observer }
    return token
  }

  func stopObserving(_ token: LocalToken) { _ = state.withLock { $0.observers.removeValue(forKey: token) } }
}
