import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes

/// Answers result-cache hits on the connection's event loop, before Hummingbird's request task.
///
/// A hit needs no URL reading and no task: the hit index and the memory level answer it at once
/// (``ImageServer/memoryAnswer(to:started:)``). Handing it to Hummingbird costs two thread hops
/// (the event loop to Swift's cooperative pool and back) and the router, which is most of a hit's
/// time. Any other request (a miss, `/healthz`, a query string, another method) goes on to
/// Hummingbird unchanged.
///
/// Responses stay in request order: while a request that went on to Hummingbird has not had its
/// response's end written, pipelined requests after it go on as well. A client that sends
/// without reading cannot make answers pile up in memory: once the connection's outbound buffer
/// is over its high-water mark (the channel is not writable), requests go on to Hummingbird,
/// whose request stream stops reading from the socket until the client reads. The handler sits after
/// Hummingbird's connection-state handler, so idle time-outs, graceful shutdown and
/// `Connection: close` see its answers like any other. An answer to a request that asks to close
/// the connection closes its sending side once the answer is out.
final class MemoryHitHandler: ChannelDuplexHandler, RemovableChannelHandler {
  typealias InboundIn = HTTPRequestPart
  typealias InboundOut = HTTPRequestPart
  typealias OutboundIn = HTTPResponsePart
  typealias OutboundOut = HTTPResponsePart

  private let server: ImageServer
  private let serverName: String?
  /// Requests handed on whose response has not ended.
  private var handedOn = 0
  /// The rest of a request answered here (its body and end) is dropped.
  private var dropping = false
  /// An answer asked the connection to close: its sending side is closed.
  private var outputClosed = false
  private var date = HTTPDateText()

  init(server: ImageServer, serverName: String?) {
    self.server = server
    self.serverName = serverName
  }

  func channelRead(context: ChannelHandlerContext, data: NIOAny) {
    // After an answer that closed the connection nothing more is read into requests.
    if outputClosed { return }
    switch unwrapInboundIn(data) {
    case .head(let head):
      dropping = false
      if handedOn == 0, context.channel.isWritable, let answer = answer(head) {
        dropping = true
        server.eventLoopAnswers.add(1, ordering: .relaxed)
        write(answer, closing: Self.asksToClose(head), context: context)
        return
      }
      handedOn += 1
    case .body, .end:
      if dropping { return }
    }
    context.fireChannelRead(data)
  }

  /// Whether the request's `Connection` header holds the `close` option.
  static func asksToClose(_ head: HTTPRequest) -> Bool {
    head.headerFields[values: .connection].contains { value in
      value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() == "close" }
    }
  }

  func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
    if case .end = unwrapOutboundIn(data) { handedOn = max(0, handedOn - 1) }
    context.write(data, promise: promise)
  }

  /// The memory answer to `head`, when it is an image request answered before.
  private func answer(_ head: HTTPRequest) -> ImageResponse? {
    guard head.method == .get || head.method == .head, let path = head.path, path.utf8.first == UInt8(ascii: "/"),
      !path.utf8.contains(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
    else { return nil }
    return server.memoryAnswer(to: ImageRequest(path: path, method: head.method, fields: head.headerFields))
  }

  private func write(_ answer: ImageResponse, closing: Bool, context: ChannelHandlerContext) {
    var fields = answer.fields
    let body = answer.body.map { bytes in bytes.withUnsafeBytes { context.channel.allocator.buffer(bytes: $0) } }
    if let body { fields[.contentLength] = String(body.readableBytes) }
    fields[.date] = date.now()
    if let serverName { fields[.server] = serverName }
    if closing { fields[.connection] = "close" }
    context.write(wrapOutboundOut(.head(HTTPResponse(status: .init(code: answer.status), headerFields: fields))), promise: nil)
    if let body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    if closing {
      // Only the sending side, once what is written has gone out: a full close with a request
      // body still unread would make the kernel reset the connection and drop the answer. The
      // connection ends when the client closes its side, or at the idle timeout.
      outputClosed = true
      context.close(mode: .output, promise: nil)
    }
  }

}

/// The `Date` header's text (RFC 9110's IMF-fixdate), formatted at most once a second.
struct HTTPDateText {
  private var second = -1
  private var text = ""

  mutating func now() -> String {
    var clock = time(nil)
    guard clock != second else { return text }
    var parts = tm()
    guard gmtime_r(&clock, &parts) != nil, (0...6).contains(parts.tm_wday), (0...11).contains(parts.tm_mon) else {
      return text
    }
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    text =
      "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(Int(parts.tm_year) + 1900) "
      + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    second = clock
    return text
  }
}

/// Hummingbird's HTTP/1.1 channel with a ``MemoryHitHandler`` after its connection-state handler.
struct ImageServerChannel: ServerChildChannel {
  typealias Value = HTTP1Channel.Value
  let http1: HTTP1Channel
  let server: ImageServer
  let serverName: String?

  func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
    let server = self.server
    let serverName = self.serverName
    return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
      let operations = channel.pipeline.syncOperations
      let state = try operations.handler(type: HTTPConnectionStateHandler.self)
      try operations.addHandler(MemoryHitHandler(server: server, serverName: serverName), position: .after(state))
      return value
    }
  }

  func handle(value: Value, logger: Logger) async {
    await http1.handle(value: value, logger: logger)
  }
}
