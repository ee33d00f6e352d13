import Darkroom
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import ServiceLifecycle

extension ImageServer: Service {
  /// Watches the presets until shutdown, then stops reporting ready and closes the result cache.
  /// Run it in the application's service group (``addRoutes(to:)`` does not start it).
  public func run() async throws {
    if let presets {
      await cancelWhenGracefulShutdown { await presets.watch() }
    } else {
      try? await gracefulShutdown()
    }
    beginDraining()
    _ = try? await BlockingPool.shared.run { self.cache?.close() }
  }
}

extension ImageServer {
  /// The HTTP/1.1 server for ``addRoutes(to:)``: ``connections``' handler on every connection
  /// (so that a client that hangs up cancels its render) and the configuration's idle timeout
  /// (so that a connection that sends nothing, or half a request's head, is closed).
  ///
  /// Requests answered before from the result cache's memory are answered on the connection's
  /// event loop, before Hummingbird's router (no task, no thread hop); everything else goes to
  /// the router. Such answers carry a `Date` header, and a `Server` header when ``serverBuilder(serverName:)``
  /// is given the name the application's configuration uses.
  public var serverBuilder: HTTPServerBuilder { serverBuilder(serverName: nil) }

  /// ``serverBuilder``, whose answers from memory carry `Server: serverName` like the
  /// application's own (Hummingbird's `ApplicationConfiguration.serverName`).
  ///
  /// ```swift
  /// let app = Application(
  ///   router: router, server: server.serverBuilder(serverName: "darkroom"),
  ///   configuration: .init(address: .hostname("127.0.0.1", port: 8080), serverName: "darkroom"))
  /// ```
  public func serverBuilder(serverName: String?) -> HTTPServerBuilder {
    let configuration = HTTP1Channel.Configuration(
      additionalChannelHandlers: [self.connections.makeHandler()],
      idleTimeout: .milliseconds(Int64((self.configuration.idleTimeout * 1000).rounded())))
    return HTTPServerBuilder { responder in
      ImageServerChannel(
        http1: HTTP1Channel(responder: responder, configuration: configuration), server: self, serverName: serverName)
    }
  }

  /// Mounts the server on `router`: `GET`/`HEAD` for every image path, `/healthz` (alive),
  /// `/readyz` (started and not draining) and `/metrics` (Prometheus text).
  ///
  /// With ``ImageServerContext`` as the router's context and ``connections``' handler on every
  /// connection, a client that hangs up cancels its render, unless other requests share it;
  /// keep-alive stays on.
  public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
    for method in [HTTPRequest.Method.get, .head] {
      router.on("healthz", method: method) { _, _ in Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "ok\n"))) }
      router.on("readyz", method: method) { _, _ in
        self.isReady
          ? Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "ready\n")))
          : Response(status: .serviceUnavailable, body: .init(byteBuffer: ByteBuffer(string: "draining\n")))
      }
      router.on("metrics", method: method) { _, _ in
        Response(
          status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
          body: .init(byteBuffer: ByteBuffer(string: self.metrics.text())))
      }
    }
    router.get("**") { request, context in await self.handle(request, connection: Self.connection(of: context)) }
    router.head("**") { request, context in await self.handle(request, connection: Self.connection(of: context)) }
  }

  private static func connection(of context: some RequestContext) -> (any Channel)? {
    (context as? ImageServerContext)?.channel
  }

  private func handle(_ request: Request, connection: (any Channel)?) async -> Response {
    var imageRequest = ImageRequest(path: request.uri.path, method: request.method, fields: request.headers)
    imageRequest.connection = connection
    let answer = await respond(to: imageRequest)
    let body: ResponseBody
    if let bytes = answer.body {
      body = ResponseBody(byteBuffer: bytes.withUnsafeBytes { ByteBuffer(bytes: $0) })
    } else if let text = answer.text {
      body = ResponseBody(byteBuffer: ByteBuffer(string: text))
    } else {
      body = ResponseBody()
    }
    return Response(status: HTTPResponse.Status(code: answer.status), headers: answer.fields, body: body)
  }

  /// A client's request id, when it is short and plain (it is logged).
  static func usableRequestID(_ value: String?) -> String? {
    guard let value, !value.isEmpty, value.count <= 64,
      value.unicodeScalars.allSatisfy({
        $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0))
      })
    else { return nil }
    return value
  }
}

extension ImageRequest {
  /// The request as Hummingbird's router and ``MemoryHitHandler`` read it from HTTP: the path
  /// as sent, the method, and the headers that matter.
  init(path: String, method: HTTPRequest.Method, fields: HTTPFields) {
    self.init(
      path: path, isHead: method == .head, accept: fields[.accept], ifNoneMatch: fields[.ifNoneMatch],
      requestID: Self.requestIDField.flatMap { ImageServer.usableRequestID(fields[$0]) })
  }

  private static let requestIDField = HTTPField.Name("X-Request-Id")
}

extension ImageResponse {
  /// The headers as HTTP fields (a name HTTP does not allow is left out).
  var fields: HTTPFields {
    var fields = HTTPFields()
    for (name, value) in headers {
      if let field = HTTPField.Name(name) { fields[field] = value }
    }
    return fields
  }
}
