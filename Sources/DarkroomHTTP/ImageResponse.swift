import Darkroom
import NIOCore

/// What the server answers, before it is written in any framework's types: a status, headers
/// and a body (empty for HEAD and 304).
///
/// ```swift
/// let answer = await server.respond(to: ImageRequest(path: "/unsafe/300x200/a.jpg", accept: "image/webp"))
/// print(answer.status, answer.header("Content-Type") ?? "")   // 200 image/webp
/// ```
public struct ImageResponse: Sendable {
  public var status: Int
  /// Headers in order; names as written.
  public var headers: [(name: String, value: String)]
  /// The body; `nil` for HEAD, 304 and errors with a text body (``text``).
  public var body: ImageBytes?
  /// A text body (errors, health).
  public var text: String?

  public init(status: Int, headers: [(name: String, value: String)] = [], body: ImageBytes? = nil, text: String? = nil) {
    self.status = status
    self.headers = headers
    self.body = body
    self.text = text
  }

  /// The first value of header `name` (case-insensitive).
  public func header(_ name: String) -> String? {
    headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
  }

  /// The body's length in bytes.
  public var bodyLength: Int { body?.count ?? text?.utf8.count ?? 0 }
}

/// One image request, as the server reads it: the raw path (still percent-encoded: signatures
/// cover it as sent), the method and the headers that matter.
///
/// ```swift
/// let request = ImageRequest(path: "/unsafe/fit-in/300x300/a.jpg", accept: "image/avif,image/webp")
/// ```
public struct ImageRequest: Sendable {
  public var path: String
  public var isHead: Bool
  public var accept: String?
  public var ifNoneMatch: String?
  /// The client's `X-Request-Id`, when it sent a usable one; else the server makes one.
  public var requestID: String?
  /// The connection it came on, when the server can tell that the client hung up (a render is
  /// cancelled then; see ``ConnectionWatch``).
  var connection: (any Channel)?

  public init(path: String, isHead: Bool = false, accept: String? = nil, ifNoneMatch: String? = nil, requestID: String? = nil) {
    self.path = path
    self.isHead = isHead
    self.accept = accept
    self.ifNoneMatch = ifNoneMatch
    self.requestID = requestID
  }
}
