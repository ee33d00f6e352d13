import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real HTTP/1.1 server on `127.0.0.1` for tests of HTTP clients: it serves fixed bytes, misbehaves on
/// demand (see ``TestResponse``) and records every request it receives. Started with ``TestTLSOptions``
/// it speaks HTTPS instead, HTTP/2 or HTTP/1.1 as ALPN decides (each HTTP/2 stream is answered like a
/// request of its own; ``RecordedRequest/httpVersion`` tells which).
///
/// It runs on its own single-threaded SwiftNIO event loop group, accepts any number of concurrent and
/// kept-alive connections (pipelined requests are answered in order) and never blocks a thread: every delay
/// is a timer on the event loop. Call ``shutdown()`` when done; a server that is released without it is shut
/// down in the background.
///
/// ```swift
/// let server = try await TestHTTPServer.start(routes: ["/a.jpg": .ok(body: jpeg, contentType: "image/jpeg")])
/// defer { Task { try await server.shutdown() } }
/// let data = try await fetch(server.url("/a.jpg"))
/// #expect(server.requestCount("/a.jpg") == 1)
/// ```
public final class TestHTTPServer: Sendable {
  /// The TCP port the server listens on (chosen by the operating system).
  public let port: Int

  private let registry: RequestRegistry
  private let group: MultiThreadedEventLoopGroup
  private let channel: any Channel
  private let isShutDown = NIOLockedValueBox(false)

  /// `"https"` for a server started with TLS, else `"http"`.
  public let scheme: String

  private init(port: Int, scheme: String, registry: RequestRegistry, group: MultiThreadedEventLoopGroup, channel: any Channel) {
    self.port = port
    self.scheme = scheme
    self.registry = registry
    self.group = group
    self.channel = channel
  }

  deinit {
    let alreadyShutDown = isShutDown.withLockedValue { $0 }
    if !alreadyShutDown {
      group.shutdownGracefully { _ in }
    }
  }

  /// Starts a server on `127.0.0.1` with a port chosen by the operating system.
  ///
  /// - Parameter routes: Maps a path without query (e.g. `"/a.jpg"`) to its behaviour. Requests are routed by
  ///   their path with any query string removed; unknown paths get `404 Not Found`.
  ///   With `tls`, the server speaks HTTPS (HTTP/2 or HTTP/1.1 as ALPN decides).
  /// - Returns: The running server.
  /// - Throws: If the socket cannot be bound, or the TLS identity is not valid PEM.
  public static func start(routes: [String: TestResponse] = [:], tls: TestTLSOptions? = nil) async throws -> TestHTTPServer {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let registry = RequestRegistry(routes: routes)
    do {
      let tlsContext = try tls?.makeContext()
      let channel = try await ServerBootstrap(group: group)
        .serverChannelOption(ChannelOptions.backlog, value: 128)
        .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
        .childChannelInitializer { channel in
          let connection = registry.registerConnection()
          channel.closeFuture.whenComplete { _ in registry.connectionClosed() }
          if let tlsContext {
            return channel.configureTestTLSPipeline(context: tlsContext, registry: registry, connection: connection)
          }
          return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
            try channel.pipeline.syncOperations.addHandler(
              TestHTTPConnectionHandler(registry: registry, connection: connection))
          }
        }
        .bind(host: "127.0.0.1", port: 0)
        .get()
      guard let port = channel.localAddress?.port else {
        try? await channel.close()
        throw TestHTTPServerError.noLocalPort
      }
      return TestHTTPServer(port: port, scheme: tls == nil ? "http" : "https", registry: registry, group: group, channel: channel)
    } catch {
      try? await group.shutdownGracefully()
      throw error
    }
  }

  /// The base URL of the server, `http://127.0.0.1:PORT` (`https://` with TLS), without trailing slash.
  public var baseURL: String { "\(scheme)://127.0.0.1:\(port)" }

  /// The absolute URL of `path` on this server, e.g. `url("/a.jpg")` is `"http://127.0.0.1:PORT/a.jpg"`.
  /// A missing leading `/` is added.
  public func url(_ path: String) -> String {
    path.hasPrefix("/") ? baseURL + path : baseURL + "/" + path
  }

  /// Adds the route for `path` (without query), or replaces its behaviour, while the server is running.
  /// Requests already being answered are not affected. Counters are kept.
  public func setRoute(_ path: String, _ response: TestResponse) {
    registry.setRoute(path, response)
  }

  /// Removes the route for `path`, so it answers `404 Not Found` again.
  public func removeRoute(_ path: String) {
    registry.removeRoute(path)
  }

  /// How many requests arrived for `path` (any query string, in the argument or in the requests, is ignored),
  /// whatever their outcome, including `404`s. A request counts as soon as its head has been received.
  public func requestCount(_ path: String) -> Int {
    registry.requestCount(path)
  }

  /// Every request received so far (method, path with query, lower-cased headers, connection), in order of
  /// arrival.
  public var requests: [RecordedRequest] { registry.requests }

  /// How many TCP connections the server has accepted so far; with keep-alive, fewer than requests.
  public var connectionCount: Int { registry.connectionCount }

  /// The most TCP connections that were open at the same time so far.
  public var peakOpenConnections: Int { registry.peakOpenConnections }

  /// The most requests for `path` that a ``TestResponse/gathered(count:within:then:)`` response held
  /// at the same time so far (requests that were in flight together).
  public func peakGathered(_ path: String) -> Int { registry.peakGathered(path) }

  /// Stops listening, closes every open connection and shuts down the server's event loop group.
  /// Calling it again does nothing.
  ///
  /// - Throws: If the event loop group fails to shut down.
  public func shutdown() async throws {
    let first = isShutDown.withLockedValue { isShutDown in
      defer { isShutDown = true }
      return !isShutDown
    }
    guard first else { return }
    // Closing can only fail if the channel is already closed, which is what we want anyway.
    try? await channel.close()
    // Shutting the group down closes the remaining connections and cancels pending timers.
    try await group.shutdownGracefully()
  }
}

/// Errors thrown by ``TestHTTPServer``.
public enum TestHTTPServerError: Error, Sendable {
  /// The bound socket reported no local port.
  case noLocalPort
}

/// The routes, counters and request log of one server, shared by all of its connections.
final class RequestRegistry: Sendable {
  private struct State {
    var routes: [String: TestResponse]
    var counts: [String: Int] = [:]
    var requests: [RecordedRequest] = []
    var connections = 0
    var openConnections = 0
    var peakOpenConnections = 0
    var gatherings: [String: Gathering] = [:]
    var lastWaiter = 0
  }

  /// The requests a ``TestResponse/gathered(count:within:then:)`` route holds back.
  struct Gathering {
    var waiting: [(id: Int, release: @Sendable () -> Void)] = []
    var peak = 0
  }

  private let state: NIOLockedValueBox<State>

  init(routes: [String: TestResponse]) {
    state = NIOLockedValueBox(State(routes: routes))
  }

  static func routingPath(_ target: String) -> String {
    let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    return String(path)
  }

  func setRoute(_ path: String, _ response: TestResponse) {
    let path = Self.routingPath(path)
    state.withLockedValue { $0.routes[path] = response }
  }

  func removeRoute(_ path: String) {
    let path = Self.routingPath(path)
    state.withLockedValue { _ = $0.routes.removeValue(forKey: path) }
  }

  func requestCount(_ path: String) -> Int {
    let path = Self.routingPath(path)
    return state.withLockedValue { $0.counts[path, default: 0] }
  }

  var requests: [RecordedRequest] { state.withLockedValue { $0.requests } }

  var connectionCount: Int { state.withLockedValue { $0.connections } }

  var peakOpenConnections: Int { state.withLockedValue { $0.peakOpenConnections } }

  func peakGathered(_ path: String) -> Int {
    let path = Self.routingPath(path)
    return state.withLockedValue { $0.gatherings[path]?.peak ?? 0 }
  }

  /// Assigns the next connection number (1-based) and counts the connection as open.
  func registerConnection() -> Int {
    state.withLockedValue { state in
      state.connections += 1
      state.openConnections += 1
      state.peakOpenConnections = max(state.peakOpenConnections, state.openConnections)
      return state.connections
    }
  }

  func connectionClosed() {
    state.withLockedValue { $0.openConnections -= 1 }
  }

  /// Holds a request for `path` until `count` are held: then every held request is released
  /// (`release` runs, on the caller's thread). Returns the waiter's id for ``leave(_:waiter:)``.
  func gather(_ path: String, count: Int, release: @escaping @Sendable () -> Void) -> Int {
    let path = Self.routingPath(path)
    let (id, released) = state.withLockedValue { state -> (Int, [@Sendable () -> Void]) in
      state.lastWaiter += 1
      var gathering = state.gatherings[path, default: Gathering()]
      gathering.waiting.append((state.lastWaiter, release))
      gathering.peak = max(gathering.peak, gathering.waiting.count)
      var released: [@Sendable () -> Void] = []
      if gathering.waiting.count >= count {
        released = gathering.waiting.map(\.release)
        gathering.waiting = []
      }
      state.gatherings[path] = gathering
      return (state.lastWaiter, released)
    }
    for release in released { release() }
    return id
  }

  /// Stops holding a request that gave up waiting (its time ran out, or its client went away).
  func leave(_ path: String, waiter: Int) {
    let path = Self.routingPath(path)
    state.withLockedValue { state in state.gatherings[path]?.waiting.removeAll { $0.id == waiter } }
  }

  /// Records a request and returns its route (if any) and its zero-based index among the requests for its path.
  func record(_ request: RecordedRequest) -> (response: TestResponse?, index: Int) {
    let path = Self.routingPath(request.path)
    return state.withLockedValue { state in
      let index = state.counts[path, default: 0]
      state.counts[path] = index + 1
      state.requests.append(request)
      return (state.routes[path], index)
    }
  }
}
