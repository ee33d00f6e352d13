/// How a ``TestHTTPServer`` answers a request for one path.
///
/// Every case describes the complete answer to a single request. Cases that wrap another response
/// (``slowHeaders(delay:then:)``, ``sequence(_:)``, ``headers(_:_:)``) can be nested freely.
///
/// Unless a case says otherwise, the response keeps the connection open when the client asked for
/// keep-alive (the HTTP/1.1 default), so a client can reuse it for its next request.
///
/// Header lists are sent in the order given. A header supplied by the caller replaces (case-insensitively)
/// a header of the same name that the server would otherwise add itself (for example `Content-Type`), and
/// a caller-supplied `Content-Length` is sent instead of the computed one.
public indirect enum TestResponse: Sendable {
  /// `200 OK` with `Content-Type: contentType`, `Content-Length` and `body`, plus any extra `headers`.
  case ok(body: [UInt8], contentType: String = "application/octet-stream", headers: [(String, String)] = [])

  /// Any status code, with `body` (and a matching `Content-Length`) and extra `headers`,
  /// for example `.status(503, headers: [("Retry-After", "1")])`.
  ///
  /// Statuses that must not carry a body (`204`, `304`) are sent without body and without
  /// `Content-Length`. Informational statuses (`1xx`) are not supported as final answers.
  case status(Int, body: [UInt8] = [], headers: [(String, String)] = [])

  /// A redirect (`302` by default) with `Location: to` and an empty body. `to` is sent verbatim, so it may
  /// be a path (`"/b.jpg"`, resolved by the client against the request URL) or an absolute URL
  /// (use ``TestHTTPServer/url(_:)`` to point at the same server).
  case redirect(to: String, status: Int = 302)

  /// Waits `delay` (on the event loop, without blocking a thread) before sending anything, then answers
  /// as `then` would. If the client disconnects during the wait the timer is cancelled.
  case slowHeaders(delay: Duration, then: TestResponse)

  /// Holds the request until `count` requests for this path are held at the same time (over any
  /// connections or HTTP/2 streams), then answers each as `then` would; a request still held after
  /// `within` is answered then. ``TestHTTPServer/peakGathered(_:)`` tells how many were held at once:
  /// a test of parallel transfers that needs no clock (six transfers in parallel release each
  /// other at once; six in sequence each wait out `within`).
  case gathered(count: Int, within: Duration, then: TestResponse)

  /// `200 OK` with the full `Content-Length`, whose body is sent slowly: the head is sent at once, then
  /// one piece of at most `chunkSize` bytes every `interval` (the first piece `interval` after the head),
  /// so the whole body takes about `ceil(body.count / chunkSize) × interval`.
  /// A client that disconnects meanwhile simply stops the transfer.
  case trickle(body: [UInt8], chunkSize: Int, interval: Duration, contentType: String = "application/octet-stream")

  /// `200 OK` announcing `Content-Length: declaredLength` but sending only `body`, then closing the
  /// connection normally (FIN). `declaredLength` should be greater than `body.count`; if it is not,
  /// only the first `declaredLength` bytes are sent (a complete response) and the connection is still closed.
  case truncated(body: [UInt8], declaredLength: Int)

  /// `200 OK` with `Content-Length: body.count` that sends only the first `after` bytes of `body`, then
  /// resets the connection: `SO_LINGER` is set to `{on, 0}` and the socket closed, so the peer gets a TCP RST
  /// (a client typically reports "connection reset by peer"). The reset happens about 20 ms after the
  /// partial body has been handed to the kernel, so those bytes normally reach the client first.
  case resetMidBody(body: [UInt8], after: Int)

  /// `200 OK` whose body is sent without `Content-Length`, using `Transfer-Encoding: chunked` (in pieces of
  /// at most 8 KiB, each one HTTP chunk). For an HTTP/1.0 request, where chunked coding does not exist, the
  /// body is delimited by closing the connection instead.
  case noContentLength(body: [UInt8], contentType: String = "application/octet-stream")

  /// `200 OK` streaming `byteCount` bytes of ``TestResponse/generatedBody(byteCount:)``'s pattern in 16 KiB
  /// writes, with or without `Content-Length` (without it: chunked coding, or close-delimited for HTTP/1.0).
  /// Writing pauses while the connection is not writable (backpressure), so large counts cost little memory,
  /// and stops as soon as the client goes away.
  case generated(byteCount: Int, withContentLength: Bool)

  /// `200 OK` with `Content-Encoding: gzip` whose body is `body` gzip-encoded (with
  /// ``TestResponse/gzipEncoded(_:)``: a valid gzip stream of stored, i.e. uncompressed, deflate blocks)
  /// and a `Content-Length` of the encoded size. The encoding is sent whatever the request's `Accept-Encoding`.
  case gzip(body: [UInt8], contentType: String)

  /// A cacheable resource: `200 OK` with `body`, `ETag` (quoted automatically unless `etag` already starts
  /// with `"` or `W/"`), `Last-Modified` and `Cache-Control: max-age=…` for the non-`nil` parameters.
  ///
  /// Answers `304 Not Modified` (no body, same validator and `Cache-Control` headers) when the request's
  /// `If-None-Match` lists the etag (weak comparison, `*` matches) or, only if the request has no
  /// `If-None-Match`, when its `If-Modified-Since` is exactly the `lastModified` string (RFC 9110 §13.2.2).
  case conditional(body: [UInt8], contentType: String, etag: String?, lastModified: String?, maxAge: Int?)

  /// The n-th request to this path (counting every request to the path since the server started, see
  /// ``TestHTTPServer/requestCount(_:)``) gets the n-th element; once exhausted, the last element repeats.
  /// An empty sequence answers `500`.
  case sequence([TestResponse])

  /// Another response with extra headers (e.g. `Expires`, `Cache-Control: no-store`). They replace
  /// same-named headers of the wrapped response (so `Cache-Control` here overrides the one of
  /// ``conditional(body:contentType:etag:lastModified:maxAge:)``) and are added otherwise.
  case headers(TestResponse, [(String, String)])

  /// The response chosen by the value of a request header (`name` lower-case): `choices[value]`,
  /// or `otherwise` when the header is absent or has another value (a per-user private image).
  case byRequestHeader(String, choices: [String: TestResponse], otherwise: TestResponse)
}

extension TestResponse {
  /// `200 OK` with a UTF-8 text body and `Content-Type: text/plain; charset=utf-8`.
  public static func text(_ text: String) -> TestResponse {
    .ok(body: Array(text.utf8), contentType: "text/plain; charset=utf-8")
  }

  /// The bytes ``generated(byteCount:withContentLength:)`` sends: byte `i` is `UInt8(i % 251)`.
  ///
  /// 251 is prime, so a body that lost, duplicated or reordered any piece no longer matches.
  public static func generatedBody(byteCount: Int) -> [UInt8] {
    (0..<max(0, byteCount)).map { UInt8(truncatingIfNeeded: $0 % GeneratedPattern.period) }
  }

  /// `data` as a gzip stream (RFC 1952) made of stored (uncompressed) deflate blocks, exactly as
  /// ``gzip(body:contentType:)`` sends it. Any gzip decoder (zlib, `gzip -d`) accepts it.
  public static func gzipEncoded(_ data: [UInt8]) -> [UInt8] {
    StoredGzip.encode(data)
  }
}

/// A request received by a ``TestHTTPServer``, as recorded in ``TestHTTPServer/requests``.
public struct RecordedRequest: Sendable, Equatable {
  /// The request method, e.g. `"GET"`.
  public var method: String
  /// The request target as sent, including any query string, e.g. `"/a.jpg?w=10"`.
  public var path: String
  /// The request headers keyed by lower-cased name; repeated headers are joined with `", "`.
  public var headers: [String: String]
  /// Which TCP connection carried the request: 1 for the first connection the server accepted, 2 for the
  /// second, and so on. Requests sharing a value were sent over one kept-alive connection.
  public var connection: Int
  /// The request body (a POST's payload); empty for most requests.
  public var body: [UInt8]
  /// The protocol the request came over: `"HTTP/1.1"`, `"HTTP/2"`.
  public var httpVersion: String

  /// Creates a recorded request.
  public init(
    method: String, path: String, headers: [String: String], connection: Int, body: [UInt8] = [],
    httpVersion: String = "HTTP/1.1"
  ) {
    self.httpVersion = httpVersion
    self.method = method
    self.path = path
    self.headers = headers
    self.connection = connection
    self.body = body
  }
}
