import Darkroom
import Hummingbird
import NIOCore

/// Tells an ``ImageServer`` when a client can send no more on its connection (it hung up), so
/// that the renders it waits for are cancelled, unless other requests share them.
///
/// Hummingbird's own way (`consumeWithCancellationOnInboundClose`) reads ahead on the connection
/// and closes it after the response, which turns keep-alive off. This watch reads nothing: a
/// channel handler on each connection (``makeHandler()``) reports the end of its input, and the
/// requests that run in an ``ImageServerContext`` are cancelled then.
///
/// ```swift
/// let router = Router(context: ImageServerContext.self)
/// server.addRoutes(to: router)
/// let app = Application(router: router, server: server.serverBuilder)   // puts makeHandler() on each connection
/// ```
public final class ConnectionWatch: Sendable {
  private struct Entry {
    var closed = false
    var waiters: [UInt64: @Sendable () -> Void] = [:]
  }
  private struct State {
    var entries: [ObjectIdentifier: Entry] = [:]
    var next: UInt64 = 0
  }
  private let state = Protected(State())

  public init() {}

  /// The handler to put on every connection (Hummingbird's `additionalChannelHandlers`).
  public func makeHandler() -> any RemovableChannelHandler { Handler(watch: self) }

  /// Connections with a request waiting or an input that has ended (for tests and diagnostics).
  public var trackedConnections: Int { state.withLock { $0.entries.count } }

  /// Runs `body` in a task of its own that is cancelled when `channel`'s input ends (or when
  /// the calling task is cancelled). A channel that is already gone (the client reset it before
  /// its request got here) cancels it at once.
  func run<T: Sendable>(on channel: any Channel, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let connection = ObjectIdentifier(channel)
    let task = Task { try await body() }
    let token: UInt64? = state.withLock { state in
      if state.entries[connection]?.closed == true { return nil }
      state.next += 1
      state.entries[connection, default: Entry()].waiters[state.next] = { task.cancel() }
      return state.next
    }
    // Checked after registering: a channel that went inactive before has had its entry
    // forgotten (`ended`), and one that goes inactive now finds the waiter and cancels it.
    if token == nil || !channel.isActive { task.cancel() }
    defer {
      if let token {
        state.withLock { state in
          state.entries[connection]?.waiters[token] = nil
          if let entry = state.entries[connection], entry.waiters.isEmpty, !entry.closed { state.entries[connection] = nil }
        }
      }
    }
    return try await withTaskCancellationHandler {
      try await task.value
    } onCancel: {
      task.cancel()
    }
  }

  /// The connection's input ended: its requests are cancelled, and later ones at once.
  fileprivate func inputEnded(_ connection: ObjectIdentifier) {
    let waiters = state.withLock { state -> [@Sendable () -> Void] in
      var entry = state.entries[connection] ?? Entry()
      let cancels = Array(entry.waiters.values)
      entry.closed = true
      entry.waiters = [:]
      state.entries[connection] = entry
      return cancels
    }
    for cancel in waiters { cancel() }
  }

  /// The connection is gone: it is forgotten.
  fileprivate func ended(_ connection: ObjectIdentifier) {
    inputEnded(connection)
    state.withLock { $0.entries[connection] = nil }
  }

  private final class Handler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let watch: ConnectionWatch

    init(watch: ConnectionWatch) { self.watch = watch }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
      if case .inputClosed? = event as? ChannelEvent { watch.inputEnded(ObjectIdentifier(context.channel)) }
      context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
      watch.ended(ObjectIdentifier(context.channel))
      context.fireChannelInactive()
    }
  }
}

/// The request context of an ``ImageServer``'s router: Hummingbird's basic context and the
/// connection, so that a client that hangs up cancels its render (see ``ConnectionWatch``).
///
/// ```swift
/// let router = Router(context: ImageServerContext.self)
/// ```
public struct ImageServerContext: RequestContext {
  public var coreContext: CoreRequestContextStorage
  /// The connection the request came on.
  let channel: (any Channel)?

  public init(source: ApplicationRequestContextSource) {
    coreContext = .init(source: source)
    channel = source.channel
  }
}
