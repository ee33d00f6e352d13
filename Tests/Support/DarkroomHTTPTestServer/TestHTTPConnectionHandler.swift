import NIOCore
import NIOHTTP1

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// The bytes of ``TestResponse/generated(byteCount:withContentLength:)``, shared by all connections.
enum GeneratedPattern {
  /// Byte `i` of a generated body is `UInt8(i % period)`.
  static let period = 251
  /// The size of one write of a generated body.
  static let writeSize = 16 * 1024
  /// `period + writeSize` pattern bytes, so any write is one slice of it.
  static let buffer: ByteBuffer = ByteBuffer(
    bytes: (0..<(period + writeSize)).lazy.map { UInt8(truncatingIfNeeded: $0 % period) })
}

/// Answers the requests of one connection, one at a time (NIO's `HTTPServerPipelineHandler`, installed in
/// front of it, holds back pipelined requests until the previous response has ended).
///
/// Everything here runs on the connection's event loop. Timers and write callbacks check `epoch`, which is
/// bumped whenever a response ends or the connection goes away, so a stale callback never touches a later
/// response or a dead connection.
final class TestHTTPConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
  typealias InboundIn = HTTPServerRequestPart
  typealias OutboundOut = HTTPServerResponsePart

  /// A request whose head has arrived, waiting for its end to be answered.
  private struct Exchange {
    var head: HTTPRequestHead
    var recordedHeaders: [String: String]
    var response: TestResponse
    var index: Int

    var isHEAD: Bool { head.method == .HEAD }
    var supportsChunked: Bool { head.version.major > 1 || (head.version.major == 1 && head.version.minor >= 1) }
  }

  /// Progress of a ``TestResponse/generated(byteCount:withContentLength:)`` body.
  private struct Generator {
    var offset: Int
    var remaining: Int
    var keepAlive: Bool
  }

  private static let notFound = TestResponse.status(
    404, body: Array("Not Found".utf8), headers: [("Content-Type", "text/plain")])
  private static let unsizedWriteSize = 8 * 1024
  private static let resetDelay = TimeAmount.milliseconds(20)

  private let registry: RequestRegistry
  private let connection: Int
  /// The request being received: its head and body so far (recorded once complete).
  private var receiving: (head: HTTPRequestHead, headers: [String: String], body: [UInt8])?
  private var timer: Scheduled<Void>?
  private var generator: Generator?
  private var epoch = 0
  private var isClosed = false
  /// The registry's waiter of a held ``TestResponse/gathered(count:within:then:)`` request.
  private var waiter: (path: String, id: Int)?

  init(registry: RequestRegistry, connection: Int) {
    self.registry = registry
    self.connection = connection
  }

  // MARK: Inbound events

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    switch Self.unwrapInboundIn(data) {
    case .head(let head):
      var headers: [String: String] = [:]
      for (name, value) in head.headers {
        let key = name.lowercased()
        headers[key] = headers[key].map { "\($0), \(value)" } ?? value
      }
      receiving = (head, headers, [])
    case .body(let buffer):
      receiving?.body.append(contentsOf: buffer.readableBytesView)
    case .end:
      guard let (head, headers, body) = receiving else { return }
      receiving = nil
      let version = head.version.major == 2 ? "HTTP/2" : "HTTP/\(head.version.major).\(head.version.minor)"
      let request = RecordedRequest(
        method: head.method.rawValue, path: head.uri, headers: headers, connection: connection, body: body,
        httpVersion: version)
      let (route, index) = registry.record(request)
      let exchange = Exchange(head: head, recordedHeaders: headers, response: route ?? Self.notFound, index: index)
      respond(with: exchange.response, extraHeaders: [], to: exchange, context: context)
    }
  }

  func channelWritabilityChanged(context: ChannelHandlerContext) {
    if context.channel.isWritable, generator != nil {
      pumpGenerated(context: context)
    }
    context.fireChannelWritabilityChanged()
  }

  func channelInactive(context: ChannelHandlerContext) {
    tearDown()
    context.fireChannelInactive()
  }

  func handlerRemoved(context: ChannelHandlerContext) {
    tearDown()
  }

  func errorCaught(context: ChannelHandlerContext, error: any Error) {
    // Typically ECONNRESET or EPIPE from a client that went away: there is nobody left to answer.
    tearDown()
    context.close(promise: nil)
  }

  private func tearDown() {
    // A request held back that will never be answered must not count towards the next group.
    if let waiter { registry.leave(waiter.path, waiter: waiter.id) }
    waiter = nil
    isClosed = true
    epoch &+= 1
    timer?.cancel()
    timer = nil
    generator = nil
    receiving = nil
  }

  // MARK: Responding

  private func respond(
    with response: TestResponse, extraHeaders: [(String, String)], to exchange: Exchange,
    context: ChannelHandlerContext
  ) {
    guard !isClosed else { return }
    let plan = ResponsePlan.resolve(
      response, index: exchange.index, requestHeaders: exchange.recordedHeaders, extraHeaders: extraHeaders)
    // HTTP/2: every stream ends with its response; the connection stays.
    let wantsKeepAlive = exchange.head.version.major >= 2 || exchange.head.isKeepAlive

    switch plan {
    case .fixed(let code, let headers, let body):
      let status = HTTPResponseStatus(statusCode: code)
      let hasBody = status.mayHaveResponseBody
      writeHead(
        status: status, headers: headers, contentLength: hasBody ? body.count : nil, keepAlive: wantsKeepAlive,
        exchange: exchange, context: context)
      if hasBody, !exchange.isHEAD, !body.isEmpty {
        context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
      }
      finish(keepAlive: wantsKeepAlive, context: context)

    case .unsized(let headers, let body):
      let keepAlive = wantsKeepAlive && exchange.supportsChunked
      writeHead(
        status: .ok, headers: headers, contentLength: nil, keepAlive: keepAlive, exchange: exchange, context: context)
      if !exchange.isHEAD {
        var offset = 0
        while offset < body.count {
          let end = min(body.count, offset + Self.unsizedWriteSize)
          context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body[offset..<end])))), promise: nil)
          offset = end
        }
      }
      finish(keepAlive: keepAlive, context: context)

    case .gathered(let count, let within, let then, let extra):
      gather(count: count, within: within, then: then, extraHeaders: extra, exchange: exchange, context: context)

    case .delayed(let delay, let then, let extra):
      let currentEpoch = epoch
      timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) {
        guard self.epoch == currentEpoch else { return }
        self.timer = nil
        self.respond(with: then, extraHeaders: extra, to: exchange, context: context)
      }

    case .trickle(let headers, let body, let chunkSize, let interval):
      writeHead(
        status: .ok, headers: headers, contentLength: body.count, keepAlive: wantsKeepAlive, exchange: exchange,
        context: context)
      context.flush()
      if exchange.isHEAD {
        finish(keepAlive: wantsKeepAlive, context: context)
      } else {
        scheduleTrickle(
          body: body, offset: 0, chunkSize: chunkSize, interval: TimeAmount(interval), keepAlive: wantsKeepAlive,
          context: context)
      }

    case .truncated(let headers, let body, let declaredLength):
      // No `Connection: close`: the response looks complete until the connection just ends.
      var lastWrite = writeHead(
        status: .ok, headers: headers, contentLength: declaredLength, keepAlive: true, exchange: exchange,
        context: context)
      if !exchange.isHEAD, !body.isEmpty {
        lastWrite = context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))))
      }
      abort(after: lastWrite, context: context) { context.close(promise: nil) }

    case .reset(let headers, let body, let after):
      var lastWrite = writeHead(
        status: .ok, headers: headers, contentLength: body.count, keepAlive: true, exchange: exchange,
        context: context)
      if !exchange.isHEAD, after > 0 {
        lastWrite = context.write(Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body[..<after])))))
      }
      abort(after: lastWrite, context: context) {
        context.eventLoop.assumeIsolated().scheduleTask(in: Self.resetDelay) {
          Self.resetConnection(context: context)
        }
      }

    case .generated(let headers, let byteCount, let withContentLength):
      let keepAlive = wantsKeepAlive && (withContentLength || exchange.supportsChunked)
      writeHead(
        status: .ok, headers: headers, contentLength: withContentLength ? byteCount : nil, keepAlive: keepAlive,
        exchange: exchange, context: context)
      if exchange.isHEAD {
        finish(keepAlive: keepAlive, context: context)
      } else {
        generator = Generator(offset: 0, remaining: byteCount, keepAlive: keepAlive)
        pumpGenerated(context: context)
      }
    }
  }

  /// Holds the exchange until the registry releases it (enough requests held) or `within` passes,
  /// whichever is first; then answers with `then`.
  private func gather(
    count: Int, within: Duration, then: TestResponse, extraHeaders: [(String, String)], exchange: Exchange,
    context: ChannelHandlerContext
  ) {
    let currentEpoch = epoch
    let loop = context.eventLoop
    let bound = NIOLoopBound((self, context), eventLoop: loop)
    let proceed: @Sendable () -> Void = {
      loop.execute {
        let (handler, context) = bound.value
        guard handler.epoch == currentEpoch, !handler.isClosed else { return }
        handler.epoch &+= 1  // the other way out (release or timer) finds a stale epoch
        handler.waiter = nil
        handler.timer?.cancel()
        handler.timer = nil
        handler.respond(with: then, extraHeaders: extraHeaders, to: exchange, context: context)
      }
    }
    let path = exchange.head.uri
    let waiter = registry.gather(path, count: count, release: proceed)
    self.waiter = (path, waiter)
    let registry = self.registry
    timer = loop.assumeIsolated().scheduleTask(in: TimeAmount(within)) {
      registry.leave(path, waiter: waiter)
      proceed()
    }
  }

  /// Writes (without flushing) the response head. `contentLength` is added unless `headers` has one;
  /// `Connection` is set to match `keepAlive`.
  @discardableResult
  private func writeHead(
    status: HTTPResponseStatus, headers: [(String, String)], contentLength: Int?, keepAlive: Bool,
    exchange: Exchange, context: ChannelHandlerContext
  ) -> EventLoopFuture<Void> {
    var httpHeaders = HTTPHeaders(headers)
    if let contentLength, !httpHeaders.contains(name: "content-length") {
      httpHeaders.add(name: "Content-Length", value: String(contentLength))
    }
    if !keepAlive {
      httpHeaders.replaceOrAdd(name: "Connection", value: "close")
    } else if !exchange.supportsChunked, !httpHeaders.contains(name: "connection") {
      httpHeaders.add(name: "Connection", value: "keep-alive")
    }
    let head = HTTPResponseHead(version: exchange.head.version, status: status, headers: httpHeaders)
    return context.write(Self.wrapOutboundOut(.head(head)))
  }

  /// Ends the response and closes the connection afterwards unless `keepAlive`.
  private func finish(keepAlive: Bool, context: ChannelHandlerContext) {
    // The pipeline handler may hand us the next pipelined request while `.end` is being written, so the
    // state of this response must be gone before.
    epoch &+= 1
    generator = nil
    let written = context.writeAndFlush(Self.wrapOutboundOut(.end(nil)))
    if !keepAlive {
      written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }
  }

  /// Flushes what has been written of an unfinished response, then runs `close` once `lastWrite`, the last of
  /// those writes, has been handed to the kernel (or failed). No further request is read on this connection,
  /// as the response never ends.
  private func abort(
    after lastWrite: EventLoopFuture<Void>, context: ChannelHandlerContext, close: @escaping () -> Void
  ) {
    epoch &+= 1
    context.flush()
    lastWrite.assumeIsolated().whenComplete { _ in close() }
  }

  /// Closes the connection with `SO_LINGER {1, 0}`, which makes the kernel send a TCP RST.
  private static func resetConnection(context: ChannelHandlerContext) {
    guard context.channel.isActive else { return }
    guard let provider = context.channel as? any SocketOptionProvider else {
      context.close(promise: nil)
      return
    }
    provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
      context.close(promise: nil)
    }
  }

  private func scheduleTrickle(
    body: [UInt8], offset: Int, chunkSize: Int, interval: TimeAmount, keepAlive: Bool, context: ChannelHandlerContext
  ) {
    guard offset < body.count else {
      finish(keepAlive: keepAlive, context: context)
      return
    }
    let currentEpoch = epoch
    timer = context.eventLoop.assumeIsolated().scheduleTask(in: interval) {
      guard self.epoch == currentEpoch, !self.isClosed else { return }
      self.timer = nil
      let end = min(body.count, offset + chunkSize)
      context.writeAndFlush(
        Self.wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body[offset..<end])))), promise: nil)
      self.scheduleTrickle(
        body: body, offset: end, chunkSize: chunkSize, interval: interval, keepAlive: keepAlive, context: context)
    }
  }

  /// Writes generated body pieces while the channel is writable; resumes from `channelWritabilityChanged`.
  private func pumpGenerated(context: ChannelHandlerContext) {
    guard var state = generator, !isClosed else { return }
    while state.remaining > 0, context.channel.isWritable {
      let length = min(state.remaining, GeneratedPattern.writeSize)
      guard
        let piece = GeneratedPattern.buffer.getSlice(at: state.offset % GeneratedPattern.period, length: length)
      else { break }
      context.write(Self.wrapOutboundOut(.body(.byteBuffer(piece))), promise: nil)
      state.offset += length
      state.remaining -= length
    }
    generator = state
    if state.remaining == 0 {
      finish(keepAlive: state.keepAlive, context: context)
    } else {
      context.flush()
    }
  }
}
